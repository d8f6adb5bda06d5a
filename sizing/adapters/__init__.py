"""Adapters to the outside world, the only modules that talk to it: `aws` (boto3: clients, catalog
refresh, preflight) and `git` (files at a ref, by subprocess). Nothing below this layer imports them.
"""
