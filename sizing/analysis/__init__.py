"""Analyses over plans: `compare` (scale-up vs scale-out, sweeps and crossovers) and `diff` (cost
diff of two plans). They read typed Plans and never import git, AWS or the CLI.
"""
