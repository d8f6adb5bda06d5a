"""Single-server target: `llmcap render STACK_FILE --target compose --out DIR` writes
DIR/docker-compose.yml for one GPU server: the official vLLM OpenAI image at the pinned tag with
all GPUs, `ipc: host`, the same plan-derived flags as the EKS pods (infra/kubernetes/vllm_args.py), the API
key from an env file, and Prometheus scraping vLLM. Pure Python: no pulumi import.

Hardened: `docker compose up` refuses to start without a non-empty `VLLM_API_KEY` (`${VAR:?}`
fails on unset and empty alike; vLLM serves unauthenticated when its key is empty), the API port
is published on 127.0.0.1 unless `LLMCAP_BIND_ADDRESS` in .env says otherwise, and vLLM runs as
UID/GID 10001 with no-new-privileges; a one-shot `volume-init` service hands the cache volume to that
user first (Docker creates a new named volume owned by root).

One server holds `replicas_per_instance` of the plan's replicas; they run as vLLM data-parallel
ranks behind the one API server, so the box serves what one planned instance serves.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from infra.config import settings
from infra.kubernetes import sglang_args
from infra.kubernetes.engines import SGLANG, engine_of
from infra.kubernetes.k8s_common import RUN_AS_UID
from infra.kubernetes.serving import startup_budget_s
from infra.kubernetes.vllm_args import ModelSource, check_args, serve_args

if TYPE_CHECKING:
    from infra.config.image_lock import ImagePins
    from sizing.plan import Plan, Pool

ENV_FILE = ".env"
PORT = settings.policy().vllm_port  # the port vLLM serves on, as on EKS
BIND_ADDRESS_VAR = "LLMCAP_BIND_ADDRESS"
RUN_AS = f"{RUN_AS_UID}:{RUN_AS_UID}"  # the UID/GID the EKS pods use too
DATA_DIR = "/data"  # the one writable volume: Hugging Face cache and HOME (vLLM/torch caches)
API_KEY_REQUIRED = ("${VLLM_API_KEY:?set VLLM_API_KEY in .env to a random key (openssl rand -hex 32); "
                    "an empty key turns vLLM's auth off}")
# SGLang reads its key only from --api-key, and serves unauthenticated when it is empty (sglang 0.5.23
# entrypoints/http_server.py: the key middleware is added only `if get_serving().api_key ...`)
SGLANG_API_KEY_REQUIRED = ("${SGLANG_API_KEY:?set SGLANG_API_KEY in .env to a random key (openssl rand -hex 32); "
                           "an empty key turns SGLang's auth off}")
# the key reaches SGLang's argv from the container's environment, not from the compose file (`$$` is a
# literal `$` to Compose's interpolation; the shell expands it at start)
SGLANG_ENTRYPOINT = ["/bin/sh", "-c",
                     f'exec {" ".join(sglang_args.COMMAND)} "$$@" --api-key "$${sglang_args.API_KEY_ENV}"', "sglang"]
_REQUIRED_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\?([^}]*)\}")


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


def sglang_command(pool: Pool) -> list[str]:
    """SGLang's flags; the plan's replicas on one server are its data-parallel ranks (`--dp`, the unique
    prefix of --dp-size in 0.5.23's parser) behind one API server."""
    args = sglang_args.serve_args(pool, ModelSource(path=pool.vllm.model), PORT, api_key=None)
    if pool.replicas_per_instance > 1:
        args += ["--dp", str(pool.replicas_per_instance)]
        sglang_args.check_args(args)
    return args


def vllm_command(pool: Pool) -> list[str]:
    args = serve_args(pool, ModelSource(path=pool.vllm.model), PORT)
    if pool.replicas_per_instance > 1:
        extra = ["--data-parallel-size", str(pool.replicas_per_instance)]
        check_args(extra)
        args += extra
    return args


COMPOSE_IMAGES = ("vllm", "sglang", "prometheus")  # the images the compose target may run (its pools' engine)


def build(plan: Plan, pins: ImagePins) -> ComposeFiles:
    """The compose files; `pins`: the image digests from the image lock (infra/config/image_lock.py)."""
    pool = single_server_pool(plan)
    start_period_s = startup_budget_s(pool)
    hc, obs = settings.policy().compose_healthcheck, settings.policy().observability
    engine = engine_of(pool)
    sglang = engine is SGLANG
    vllm = {
        "image": pins.image(engine.image_key).ref,
        "entrypoint": SGLANG_ENTRYPOINT if sglang else ["vllm", "serve"],
        "command": sglang_command(pool) if sglang else vllm_command(pool),
        "ipc": "host",  # PyTorch shares tensors between processes through /dev/shm
        "env_file": [ENV_FILE],  # HF_TOKEN for gated models
        "user": RUN_AS,
        "security_opt": ["no-new-privileges:true"],
        # `:?` stops `docker compose up` while the key is unset OR empty: vLLM 0.33.0 drops an empty
        # key and serves every route unauthenticated (vllm/entrypoints/serve/middleware/register.py:
        # `if tokens := [key for key in (args.api_key or [envs.VLLM_API_KEY]) if key]:`)
        "environment": {engine.api_key_env: SGLANG_API_KEY_REQUIRED if sglang else API_KEY_REQUIRED,
                        **dict(engine.telemetry_env),
                        "HOME": f"{DATA_DIR}/home", "HF_HOME": f"{DATA_DIR}/huggingface",
                        # torch's cache paths call getpass.getuser(); UID 10001 has no passwd entry
                        "USER": "vllm"},
        "ports": [f"${{{BIND_ADDRESS_VAR}:-127.0.0.1}}:{PORT}:{PORT}"],
        "volumes": [f"hf-cache:{DATA_DIR}"],
        "depends_on": {"volume-init": {"condition": "service_completed_successfully"}},
        "deploy": {"resources": {"reservations": {"devices": [
            {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]}}},
        "healthcheck": {
            "test": ["CMD", "python3", "-c",
                     f"import urllib.request; urllib.request.urlopen('http://localhost:{PORT}/health', "
                     f"timeout={hc.http_timeout_s})"],
            "interval": f"{hc.interval_s}s", "timeout": f"{hc.timeout_s}s", "retries": hc.retries,
            # the plan's weight-load time (downloads from the hub on first start take longer)
            "start_period": f"{start_period_s}s",
        },
        "restart": "unless-stopped",
    }
    prometheus = {
        "image": pins.image("prometheus").ref,
        "command": ["--config.file=/etc/prometheus/prometheus.yml", f"--storage.tsdb.retention.time={obs.retention}"],
        "volumes": ["./prometheus.yml:/etc/prometheus/prometheus.yml:ro", "prometheus-data:/prometheus"],
        "ports": ["127.0.0.1:9090:9090"],  # metrics stay on the host unless you publish them
        "depends_on": [engine.name],
        "restart": "unless-stopped",
    }
    volume_init = {
        "image": pins.image(engine.image_key).ref,
        "user": "0:0",
        "entrypoint": [],
        "command": ["chown", "-R", RUN_AS, DATA_DIR],
        "volumes": [f"hf-cache:{DATA_DIR}"],
        "restart": "no",
    }
    compose = {"services": {"volume-init": volume_init, engine.name: vllm, "prometheus": prometheus},
               "volumes": {"hf-cache": {}, "prometheus-data": {}}}
    scrape = {"global": {"scrape_interval": obs.scrape_interval},
              "scrape_configs": [{"job_name": engine.name, "metrics_path": "/metrics",
                                  "static_configs": [{"targets": [f"{engine.name}:{PORT}"],
                                                      "labels": {"pool": pool.name}}]}]}
    key, who = engine.api_key_env, "SGLang" if sglang else "vLLM"
    env = (f"# Copy to .env and fill in. `docker compose up` refuses to start while {key} is empty\n"
           f"# ({who} would serve without auth). Generate one: openssl rand -hex 32\n"
           f"{key}=\n"
           f"# The address the API port is published on; 0.0.0.0 exposes it to the network.\n"
           f"# {BIND_ADDRESS_VAR}=127.0.0.1\n"
           "# A Hugging Face token with access to the model (gated models such as Llama need one).\n"
           "HF_TOKEN=\n")
    instances = math.ceil(pool.replicas / max(pool.replicas_per_instance, 1))
    header = (f"# llmcap {plan.stack}: {pool.vllm.model} on one {pool.instance_type}-class server "
              f"({pool.gpus_per_instance} × {pool.gpu}).\n"
              f"# This server runs {pool.replicas_per_instance} of the plan's {pool.replicas} replicas; the "
              f"plan's demand needs {instances} such servers.\n"
              f"# Before `docker compose up -d`: cp .env.example .env and set {key} (and HF_TOKEN).\n")
    return ComposeFiles(compose=compose, prometheus=scrape, env_example=env, header=header)


def interpolation_errors(doc: object, env: Mapping[str, str]) -> list[str]:
    """The errors Compose raises for `${VAR:?message}` references in `doc` given `env` (unset or empty
    both fail, per the Compose spec's interpolation section). One message per failing reference."""
    errors: list[str] = []
    if isinstance(doc, str):
        for m in _REQUIRED_VAR.finditer(doc):
            if not env.get(m.group(1)):
                errors.append(f"required variable {m.group(1)} is missing a value: {m.group(2)}")
    elif isinstance(doc, Mapping):
        for v in doc.values():
            errors += interpolation_errors(v, env)
    elif isinstance(doc, list):
        for v in doc:
            errors += interpolation_errors(v, env)
    return errors


def write_compose(plan: Plan, out_dir: Path, pins: ImagePins) -> list[Path]:
    files = build(plan, pins)
    out_dir.mkdir(parents=True, exist_ok=True)
    compose_path = out_dir / "docker-compose.yml"
    compose_path.write_text(files.header + yaml.safe_dump(files.compose, sort_keys=False, width=120),
                            encoding="utf-8")
    prom_path = out_dir / "prometheus.yml"
    prom_path.write_text(yaml.safe_dump(files.prometheus, sort_keys=False), encoding="utf-8")
    env_path = out_dir / ".env.example"
    env_path.write_text(files.env_example, encoding="utf-8")
    return [compose_path, prom_path, env_path]
