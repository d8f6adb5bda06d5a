"""The search: demand from the spec, candidates per instance, batching-flag tuning, mixes and
purchase options, the planner and the plan builder, node allocatable and system nodes, the saved plan.
"""
