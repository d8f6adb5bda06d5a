"""llmcap sizing: pure-Python capacity planning for serving open LLMs with vLLM on AWS.

Owns the workload spec, the catalogs, the memory and performance models, the planner,
costs and the Plan. Must not import pulumi or boto3 (only `sizing.adapters.aws` may import boto3,
and only the commands that need it import `sizing.adapters.aws`).
"""

__version__ = "0.1.0"
