"""Load-test an OpenAI-compatible endpoint against its plan (`llmcap bench`, `verify`, `calibrate`).

Owns: request shaping from the workload spec (workload.py), the asyncio HTTP load generator
(client.py), metric definitions that follow vLLM's `vllm bench serve` (metrics.py), the results
file (results.py) and the pass/fail criteria against a Plan (verify.py).
Must not import pulumi or boto3. httpx is imported only by client.py, and only when a run starts.
"""
