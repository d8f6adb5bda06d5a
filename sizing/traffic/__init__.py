"""Request traces: reading them (sizing.traffic.reader) and what they say (sizing.traffic.stats).

Base layer: imports only sizing.errors and numpy, so the stack reader can resolve a trace stack's
lengths and rates before validation. The replay of a trace over replicas lives in
sizing.perf.replay (it needs the step-level simulation); the fleet search in sizing.planning.fleet.
"""
