"""The ONE mapping from a plan pool's engine settings to `python -m sglang.launch_server` arguments, shared
by the EKS Deployments/LeaderWorkerSets and the compose file, for pools whose engine is SGLang
(`pool.engine == "sglang"`). Every emitted command line is parsed by a parser rebuilt from the pinned
release's own argparse definitions (infra/data/sglang_flags.yaml, written by scripts/build_sglang_flags.py
from the sglang wheel); a flag, value or type it rejects raises SglangArgsError instead of a pod that
crash-loops. Plan values named differently by SGLang are translated by infra/data/sglang_values.yaml.

No pulumi import: infra/compose.py uses this module without the Pulumi SDK.
"""

from __future__ import annotations

import argparse
from functools import cache
from typing import TYPE_CHECKING, Any, NoReturn

from infra.config import settings
from infra.kubernetes.engines import SGLANG_API_KEY_ENV, SGLANG_COMMAND

if TYPE_CHECKING:
    from infra.kubernetes.vllm_args import ModelSource, MultiNode
    from sizing.plan import Pool, VllmSettings

COMMAND = list(SGLANG_COMMAND)
API_KEY_ENV = SGLANG_API_KEY_ENV
# Kubernetes expands $(VAR) from the Secret-backed env at container start, so the key never appears in the
# pod spec or events (it does appear in the process's argv inside the container)
API_KEY_ARG = f"$({API_KEY_ENV})"


class SglangArgsError(ValueError):
    """A flag or value that the pinned SGLang release does not accept."""


def _values() -> dict[str, Any]:
    return settings.sglang_values()


def engine_flags(v: VllmSettings) -> list[str]:
    """Plan fields → SGLang flags: one line per plan field."""
    kv = _values()["kv_cache_dtype"]
    if v.kv_cache_dtype not in kv:
        raise SglangArgsError(f"--kv-cache-dtype: no SGLang value for the plan's {v.kv_cache_dtype!r} "
                              "(infra/data/sglang_values.yaml)")
    if v.served_model_aliases:  # SGLang's --served-model-name is one string (dest served_model_name)
        raise SglangArgsError(f"--served-model-name: SGLang serves one name, not also "
                              f"{', '.join(v.served_model_aliases)} (a dedicated class layout's default pool "
                              "answers the plain name on vLLM only)")
    out = [
        "--served-model-name", v.served_model_name,
        "--tp", str(v.tensor_parallel_size),  # --tp-size; --tp is its unique prefix in 0.5.23's parser
        "--context-length", str(v.max_model_len),
        "--max-running-requests", str(v.max_num_seqs),
        "--chunked-prefill-size", str(v.max_num_batched_tokens),
        "--mem-fraction-static", f"{v.gpu_memory_utilization:g}",
        "--kv-cache-dtype", kv[v.kv_cache_dtype],
        "--dtype", v.dtype,
        "--schedule-policy", v.schedule_policy or _values()["schedule_policy"]["default"],
        "--enable-metrics",  # Prometheus /metrics: sglang:num_queue_reqs drives KEDA (infra/kubernetes/autoscaling.py)
    ]
    if v.pipeline_parallel_size > 1:
        out += ["--pp-size", str(v.pipeline_parallel_size)]
    if not v.enable_prefix_caching:
        out.append("--disable-radix-cache")
    if v.quantization:
        out += ["--quantization", _values().get("quantization", {}).get(v.quantization, v.quantization)]
    return out


def serve_args(pool: Pool, source: ModelSource, port: int, multi_node: MultiNode | None = None,
               api_key: str | None = API_KEY_ARG) -> list[str]:
    """Arguments after `python -m sglang.launch_server`. `multi_node`: SGLang's own multi-node mode, every
    node running the same command with its rank; rank 0 serves HTTP (`headless` is not a SGLang flag).
    `api_key` None: the caller appends `--api-key` itself (the compose file's shell entrypoint)."""
    args = ["--model-path", source.path, "--host", "0.0.0.0", "--port", str(port),
            *(["--api-key", api_key] if api_key is not None else []), *engine_flags(pool.vllm)]
    if source.load_format:
        args += ["--load-format", source.load_format]
    if multi_node is not None:
        args += ["--nnodes", str(multi_node.nnodes), "--node-rank", multi_node.node_rank,
                 "--dist-init-addr", f"{multi_node.master_addr}:{_values()['dist_init_port']}"]
    check_args(args)
    return args


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting (ambiguous prefixes call error())."""

    def error(self, message: str) -> NoReturn:
        raise SglangArgsError(message)


@cache
def parser() -> argparse.ArgumentParser:
    """The pinned release's option table as an argparse parser (options only, as launch_server's has)."""
    allow = settings.sglang_flags()
    p = _Parser(prog="sglang serve", allow_abbrev=bool(allow["allow_abbrev"]), add_help=False,
                                exit_on_error=False)
    seen: set[str] = set()
    by_dest: dict[str, list[str]] = {}
    entries: dict[str, dict[str, Any]] = {}
    for opt, e in allow["flags"].items():
        by_dest.setdefault(e["dest"], []).append(opt)
        entries[e["dest"]] = e
    for dest, opts in by_dest.items():
        if dest in seen:
            continue
        seen.add(dest)
        e = entries[dest]
        kw: dict[str, Any] = {"dest": dest}
        if e.get("nargs") == 0:
            kw["action"] = "store_true"
        else:
            if "nargs" in e:
                kw["nargs"] = e["nargs"]
            if "type" in e:
                kw["type"] = {"int": int, "float": float}[e["type"]]
            if "choices" in e:
                kw["choices"] = e["choices"]
        p.add_argument(*opts, **kw)
    return p


def check_args(args: list[str]) -> None:
    """Raise SglangArgsError unless the pinned release's parser accepts `args` whole. Placeholders that
    Kubernetes expands at start ($(VAR)) stand for values of the flag's type."""
    version = settings.sglang_flags()["sglang_version"]
    concrete = ["0" if a.startswith("$(") and _int_flag(args, i) else a for i, a in enumerate(args)]
    try:
        _, extra = parser().parse_known_args(concrete)
    except (argparse.ArgumentError, SglangArgsError) as e:
        raise SglangArgsError(f"SGLang {version} rejects the command line: {e} (infra/data/sglang_flags.yaml)") from e
    if extra:
        raise SglangArgsError(f"{' '.join(extra)}: not accepted by `sglang.launch_server` in SGLang {version} "
                              "(infra/data/sglang_flags.yaml)")


def _int_flag(args: list[str], i: int) -> bool:
    """Whether args[i] is the value of an int-typed flag (e.g. --node-rank $(LWS_WORKER_INDEX))."""
    if i == 0 or not args[i - 1].startswith("--"):
        return False
    e = settings.sglang_flags()["flags"].get(args[i - 1])
    return bool(e and e.get("type") == "int")
