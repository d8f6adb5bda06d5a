"""Single-server target: `llmcap render STACK_FILE --target compose --out DIR` writes
DIR/docker-compose.yml for one GPU server: the official vLLM OpenAI image at the pinned tag with
all GPUs, `ipc: host`, the same plan-derived flags as the EKS pods (infra/vllm_args.py), the API
key from an env file, and Prometheus scraping vLLM. Pure Python: no pulumi import.

One server holds `replicas_per_instance` of the plan's replicas; they run as vLLM data-parallel
ranks behind the one API server, so the box serves what one planned instance serves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infra import settings
from infra.serving import startup_budget_s
from infra.vllm_args import ModelSource, check_args, serve_args
from sizing.plan import Plan, Pool

ENV_FILE = ".env"
PORT = 8000
API_KEY_REQUIRED = "${VLLM_API_KEY:?set VLLM_API_KEY in .env, e.g. openssl rand -hex 32; an empty key turns auth off}"


class ComposeTargetError(ValueError):
    """The plan cannot run on one server."""


@dataclass(frozen=True)
class ComposeFiles:
    compose: dict[str, Any]
    prometheus: dict[str, Any]
    env_example: str
    header: str


def single_server_pool(plan: Plan) -> Pool:
    pool = plan.pools[0]
    if pool.nodes_per_replica > 1:
        raise ComposeTargetError(
            f"pool {pool.name}: one replica spans {pool.nodes_per_replica} nodes; the compose target runs one "
            f"server. Use the EKS target, or choose GPUs with more memory per node (llmcap:hardware.gpus).")
    return pool


def vllm_command(pool: Pool) -> list[str]:
    args = serve_args(pool, ModelSource(path=pool.vllm.model), PORT)
    if pool.replicas_per_instance > 1:
        extra = ["--data-parallel-size", str(pool.replicas_per_instance)]
        check_args(extra)
        args += extra
    return args


def build(plan: Plan) -> ComposeFiles:
    pool = single_server_pool(plan)
    start_period_s = startup_budget_s(pool)
    vllm = {
        "image": settings.image("vllm").ref,
        "entrypoint": ["vllm", "serve"],
        "command": vllm_command(pool),
        "ipc": "host",  # PyTorch shares tensors between processes through /dev/shm
        "env_file": [ENV_FILE],  # VLLM_API_KEY (required) and HF_TOKEN for gated models
        # `:?` stops `docker compose up` while the key is unset OR empty: vLLM 0.33.0 drops an empty
        # key and serves every route unauthenticated (vllm/entrypoints/serve/middleware/register.py:
        # `if tokens := [key for key in (args.api_key or [envs.VLLM_API_KEY]) if key]:`)
        "environment": {"VLLM_API_KEY": API_KEY_REQUIRED, "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"},
        "ports": [f"{PORT}:{PORT}"],
        "volumes": ["hf-cache:/root/.cache/huggingface"],
        "deploy": {"resources": {"reservations": {"devices": [
            {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]}}},
        "healthcheck": {
            "test": ["CMD", "python3", "-c",
                     f"import urllib.request; urllib.request.urlopen('http://localhost:{PORT}/health', timeout=5)"],
            "interval": "15s", "timeout": "10s", "retries": 4,
            # the plan's weight-load time (downloads from the hub on first start take longer)
            "start_period": f"{start_period_s}s",
        },
        "restart": "unless-stopped",
    }
    prometheus = {
        "image": settings.image("prometheus").ref,
        "command": ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.retention.time=15d"],
        "volumes": ["./prometheus.yml:/etc/prometheus/prometheus.yml:ro", "prometheus-data:/prometheus"],
        "ports": ["127.0.0.1:9090:9090"],  # metrics stay on the host unless you publish them
        "depends_on": ["vllm"],
        "restart": "unless-stopped",
    }
    compose = {"services": {"vllm": vllm, "prometheus": prometheus},
               "volumes": {"hf-cache": {}, "prometheus-data": {}}}
    scrape = {"global": {"scrape_interval": "15s"},
              "scrape_configs": [{"job_name": "vllm", "metrics_path": "/metrics",
                                  "static_configs": [{"targets": [f"vllm:{PORT}"],
                                                      "labels": {"pool": pool.name}}]}]}
    env = ("# Copy to .env and fill in. The endpoint refuses requests without this key, and\n"
           "# `docker compose up` refuses to start while it is empty (vLLM turns auth off for an empty key).\n"
           "# Generate one with: openssl rand -hex 32\n"
           "VLLM_API_KEY=\n"
           "# A Hugging Face token with access to the model (gated models such as Llama need one).\n"
           "HF_TOKEN=\n")
    instances = math.ceil(pool.replicas / max(pool.replicas_per_instance, 1))
    header = (f"# llmcap {plan.stack}: {pool.vllm.model} on one {pool.instance_type}-class server "
              f"({pool.gpus_per_instance} × {pool.gpu}).\n"
              f"# This server runs {pool.replicas_per_instance} of the plan's {pool.replicas} replicas; the "
              f"plan's demand needs {instances} such servers.\n"
              f"# Before `docker compose up -d`: cp .env.example .env and set VLLM_API_KEY (and HF_TOKEN).\n")
    return ComposeFiles(compose=compose, prometheus=scrape, env_example=env, header=header)


def write_compose(plan: Plan, out_dir: Path) -> list[Path]:
    files = build(plan)
    out_dir.mkdir(parents=True, exist_ok=True)
    compose_path = out_dir / "docker-compose.yml"
    compose_path.write_text(files.header + yaml.safe_dump(files.compose, sort_keys=False, width=120),
                            encoding="utf-8")
    prom_path = out_dir / "prometheus.yml"
    prom_path.write_text(yaml.safe_dump(files.prometheus, sort_keys=False), encoding="utf-8")
    env_path = out_dir / ".env.example"
    env_path.write_text(files.env_example, encoding="utf-8")
    return [compose_path, prom_path, env_path]
