"""A generator of stack files (valid, near-valid and hostile) and an in-process runner for them,
shared by tests/test_fuzz_cli.py (>= 10,000 files in CI) and bench/fuzz_stacks.py (larger runs).

Each case is run through the plan (or validate) command function itself, the body `llmcap plan`
runs after argument parsing, with stdout/stderr captured and a 30 s alarm: a hang is reported, not
waited for. Typer's CliRunner rebuilds the whole command tree per call (~40 ms here), which would
make 10,000 cases cost minutes; `run_cli_sample` runs a sample through it, and `run_subprocess`
runs a sample as real processes and reads each one's peak RSS from os.wait4.

Valid stacks restrict the hardware to one to three instance types or GPUs, so a plan costs ~15 ms;
the search over every GPU (~0.4 s a plan) is covered by the planner tests."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import re
import resource
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HANG_S = 30.0
RSS_LIMIT_KIB = 1024 * 1024  # 1 GiB
MODELS = ["meta-llama/Meta-Llama-3-8B-Instruct", "llama-3.1-8b-instruct", "qwen2.5-7b-instruct",
          "mistral-7b-instruct-v0.3", "llama-3.1-70b-instruct", "qwen3-30b-a3b", "gemma-2-9b-it", "phi-4"]
INSTANCE_SETS = [["g6e.xlarge"], ["g6.12xlarge"], ["g5.xlarge", "g6.xlarge"], ["p4d.24xlarge"], ["g6e.12xlarge"],
                 ["p5.48xlarge"], ["g6e.xlarge", "g6e.2xlarge", "g6.12xlarge"], ["g4dn.xlarge"]]
GPU_SETS = [["L4"], ["L40S"], ["A10G"], ["H100-SXM"], ["A100-80GB"]]
WEIRD = [0, -1, 2**63, 10**400, 1e308, float("nan"), float("inf"), -float("inf"), "12", "", True, None, [], {},
         "1e400", "NaN", "😀", "a\x00b", "../../etc/passwd", "x" * 5000, [1, 2], {"secure": 5}]


class Hang(BaseException):
    """Raised by the alarm: the case ran past HANG_S (BaseException: no guard catches it)."""


# --- generator ------------------------------------------------------------------------------
def valid_config(rnd: random.Random) -> dict[str, Any]:
    w: dict[str, Any] = {
        "model": rnd.choice(MODELS),
        "prompt_tokens": rnd.choice([rnd.randint(1, 8192), {"mean": rnd.randint(16, 4000), "p95": 6000}]),
        "output_tokens": rnd.randint(1, 2048),
        "traffic": rnd.choice([{"concurrent_users": rnd.randint(1, 5000)},
                               {"peak_requests_per_s": round(rnd.uniform(0.05, 200), 3)}]),
        "slo": {"ttft_p95_ms": rnd.choice([200, 500, 1000, 3000, 20000]),
                "itl_p95_ms": rnd.choice([10, 25, 40, 60, 150, 400])},
    }
    if rnd.random() < 0.5:
        w["precision"] = rnd.choice(["fp16", "bf16", "fp8", "int4-awq", ["fp8", "int4-awq"], ["bf16", "fp8"]])
    if rnd.random() < 0.2:
        w["prefix_cache_hit_rate"] = round(rnd.random() * 0.9, 2)
    hw: dict[str, Any] = ({"instance_types": rnd.choice(INSTANCE_SETS)} if rnd.random() < 0.7
                          else {"gpus": rnd.choice(GPU_SETS)})
    if rnd.random() < 0.5:
        hw["strategy"] = rnd.choice(["auto", "scale-up", "scale-out", "mixed"])
    if rnd.random() < 0.5:
        hw["purchase"] = rnd.choice(["on-demand", "spot", "mixed"])
    if rnd.random() < 0.5:
        hw["redundancy"] = rnd.randint(0, 3)
    if rnd.random() < 0.08:
        w.update(_classes(rnd, "concurrent_users" in w["traffic"]))
        hw["search_budget_s"] = w.pop("search_budget_s")
        for key in [k for k, v in w.items() if v is None]:  # derived from the classes
            w.pop(key)
    cfg: dict[str, Any] = {"aws:region": "us-east-1", "llmcap:workload": w, "llmcap:hardware": hw}
    if rnd.random() < 0.1:
        cfg["llmcap:budget_usd_month"] = rnd.choice([100, 10_000, 1e6])
    return cfg


def _classes(rnd: random.Random, closed: bool) -> dict[str, Any]:
    """`classes` (2-3 request classes: shares of the stack's traffic, or a class's own rate, or a batch job,
    each with its own lengths and targets, TTFT-only among them) and, half the time, no top-level
    lengths or targets (then derived from the classes)."""
    n = rnd.randint(2, 3)
    shares = [rnd.randint(1, 9) for _ in range(n)]
    out: list[dict[str, Any]] = []
    for k in range(n):
        c: dict[str, Any] = {"name": f"c{k}", "prompt_tokens": rnd.choice([64, 1024, rnd.randint(1, 30000)]),
                             "output_tokens": rnd.randint(1, 1024),
                             "slo": rnd.choice([{"ttft": {"p95": rnd.choice([300, 2000, 20000])}},
                                                {"ttft": {"p95": 1000}, "itl": {"p95": rnd.choice([25, 60])}},
                                                {"e2e": {"p99": 60000}}])}
        c["share"] = round(shares[k] / sum(shares), 6)
        out.append(c)
    fix = round(1.0 - sum(c["share"] for c in out[:-1]), 6)  # the shares add up to exactly 1
    out[-1]["share"] = fix
    if not closed and rnd.random() < 0.3:  # every class its own rate instead
        for c in out:
            c.pop("share")
            c["traffic"] = {"peak_requests_per_s": round(rnd.uniform(0.05, 20), 3)}
    elif rnd.random() < 0.2:  # plus a batch job
        out.append({"name": "batch", "prompt_tokens": 2000, "output_tokens": 300,
                    "batch": {"requests": rnd.randint(1, 100_000), "deadline_hours": rnd.choice([1, 8, 24])}})
    extra: dict[str, Any] = {"classes": out}
    # a replayed fleet search is seconds per plan: the fuzz checks that a cut plan is sound too, not the search
    extra["search_budget_s"] = 3
    if rnd.random() < 0.5:
        extra.update({"prompt_tokens": None, "output_tokens": None, "slo": None})
    return extra


def _paths(d: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(d, dict):
        for k, v in d.items():
            out += _paths(v, prefix + (k,))
    return out


def _dump(cfg: Any) -> str:
    return yaml.dump({"config": cfg}, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), allow_unicode=True,
                     sort_keys=False)


def near_valid(rnd: random.Random) -> str:
    """A valid stack with one mistake a person makes (or a hostile value in one place)."""
    cfg = valid_config(rnd)
    kind = rnd.randrange(12)
    paths = _paths(cfg)
    path = rnd.choice(paths)
    if kind <= 3:  # a weird value somewhere
        node = cfg
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = rnd.choice(WEIRD)
    elif kind == 4:  # a typo in a key
        node = cfg
        for k in path[:-1]:
            node = node[k]
        v = node.pop(path[-1])
        node[str(path[-1])[:-1] + rnd.choice("sx_")] = v
    elif kind == 5:  # a key removed
        node = cfg
        for k in path[:-1]:
            node = node[k]
        node.pop(path[-1])
    elif kind == 6:
        cfg["aws:region"] = rnd.choice(["mars-north-1", "US-EAST-1", "", "eu-west-1", "us-west-2", 5])
    elif kind == 7:
        cfg["llmcap:" + rnd.choice(["api_key", "hf_token"])] = rnd.choice(["hunter2", {"secure": "AAAB" * 8}, 5])
    elif kind == 8:
        cfg["llmcap:" + rnd.choice(["workloads", "hardwre", "x", "deployment"])] = rnd.choice(WEIRD)
    text = _dump(cfg)
    if kind == 9:  # a key repeated (YAML keeps the last one silently unless refused)
        lines = text.splitlines()
        i = rnd.randrange(1, len(lines))
        text = "\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]) + "\n"
    elif kind == 10:  # tabs, or broken indentation
        text = text.replace("  ", "\t", 1) if rnd.random() < 0.5 else text.replace("\n  ", "\n ", 1)
    elif kind == 11:  # cut short
        text = text[: rnd.randrange(len(text))]
    return text


def _bomb(depth: int, width: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, depth):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def hostile(rnd: random.Random) -> str | bytes:
    k = rnd.randrange(16)
    where = rnd.choice(["llmcap:workload", "llmcap:hardware", "llmcap:deployment", "aws:region", "other:x",
                        "llmcap:budget_usd_month"])
    if k == 0:  # billion laughs, its top alias placed somewhere the tool reads
        return _bomb(9, 10) + f"config:\n  {where}: *a8\n"
    if k == 1:
        return _bomb(9, 10) + f"config:\n  llmcap:workload:\n    model: m\n    {rnd.choice(['slo', 'traffic'])}: *a8\n"
    if k == 2:  # deep nesting
        n = rnd.choice([65, 200, 2000, 20000])
        return f"config:\n  {where}: " + "[" * n + "]" * n + "\n"
    if k == 3:
        n = rnd.choice([500, 5000])
        return "config:\n  llmcap:workload: " + "{a: " * n + "1" + "}" * n + "\n"
    if k == 4:  # a recursive alias
        return f"x: &r [*r]\nconfig:\n  {where}: &s {{k: *s}}\n"
    if k == 5:  # binary junk
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 4000)))
    if k == 6:  # invalid UTF-8 in an otherwise fine file
        return _dump(valid_config(rnd)).encode() + b"\n# \xff\xfe\xc0\x80\n"
    if k == 7:  # NUL bytes and control characters
        return _dump(valid_config(rnd)).replace("model", "mo\x00del", 1)
    if k == 8:  # a huge scalar below the size limit
        return f"config:\n  llmcap:workload:\n    model: {'m' * (900_000 if rnd.random() < 0.05 else 10_000)}\n"
    if k == 9:  # over the size limit (a huge file now and then; sparse files would not test the read)
        return _dump(valid_config(rnd)) + "#" + "x" * (1024 * 1024 + rnd.randrange(1000)) + "\n" \
            if rnd.random() < 0.1 else "config:\n" + "#" * 1_048_577 + "\n"
    if k == 10:  # python tags a non-safe loader would execute
        return "config: !!python/object/apply:os.system ['echo pwned']\n"
    if k == 11:  # not a mapping
        return rnd.choice(["- a\n- b\n", "42\n", "config: [1, 2]\n", "config: hello\n", "~\n", "", "# only\n",
                           "---\n---\n", "config:\n  llmcap:workload: [1]\n"])
    if k == 12:  # many keys
        n = 30000 if rnd.random() < 0.01 else 300
        return "config:\n" + "".join(f"  k{i}: {i}\n" for i in range(n))
    if k == 13:  # huge numbers and odd YAML scalars
        odd = rnd.choice(["1e999", "0x7fffffffffffffffffff", ".inf", "-.nan", "1_000_000_000_000_000", "0o777"])
        return (f"config:\n  llmcap:workload:\n    model: llama-3.1-8b-instruct\n    prompt_tokens: {odd}\n"
                "    output_tokens: 10\n    traffic: {concurrent_users: 10}\n"
                "    slo: {ttft_p95_ms: 1, itl_p95_ms: 1}\n")  # below one engine step: refused
    if k == 14:  # many documents
        return "config: {}\n---\n" * (5000 if rnd.random() < 0.1 else 2)
    return "config:\n  llmcap:workload: &w\n    model: x\n  llmcap:hardware:\n    <<: *w\n    <<: *w\n"


CI_MIX = (0.05, 0.45)  # valid, near-valid shares (the rest hostile): a plan costs ~40 ms, a refusal ~0.5 ms
BENCH_MIX = (0.20, 0.50)


CONFIG_PLACEHOLDER = "@CONFIG_JSON@"  # run_cases writes a hostile config.json there and puts its path here
CONFIG_SHARE = 0.05  # of all cases: a valid stack whose model is a path to a hostile config.json


def hostile_config(rnd: random.Random) -> bytes:
    """A config.json a user (or an attacker) could point `model:` at: a real architecture with odd values,
    wrong types, deep nesting, huge numbers, NUL bytes, not UTF-8, not JSON, or far too large."""
    base: dict[str, Any] = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                            "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192,
                            "torch_dtype": "bfloat16"}
    k = rnd.randrange(8)
    if k == 0:
        return json.dumps(base).encode()
    if k == 1:
        base[rnd.choice(sorted(base))] = rnd.choice(WEIRD)
        return json.dumps(base, allow_nan=True).encode()
    if k == 2:
        return ("[" * 100_000 + "]" * 100_000).encode()
    if k == 3:
        return json.dumps({**base, "hidden_size": 10**30, "num_hidden_layers": 10**12}).encode()
    if k == 4:
        return json.dumps(base).encode().replace(b"llama", b"ll\\u0000ama")  # JSON's escaped NUL
    if k == 5:
        return json.dumps(base).encode("utf-8").replace(b"bfloat16", "bflé16".encode("latin-1"))  # not UTF-8
    if k == 6:
        return b"{" + b'"a": 1,' * rnd.choice([10, 700_000]) + b'"b": 2}'
    return rnd.choice([b"", b"null", b"[]", b"not json", b"\x00" * 64, b'{"architectures": 5}'])


TRACE_PLACEHOLDER = "LLMCAP_FUZZ_TRACE_VALUE"  # run_cases puts a hostile `workload.trace` value here (JSON)
TRACE_SHARE = 0.05  # of all cases: a valid stack whose workload.trace is hostile (a path or a mapping)
TRACE_HEADER = "arrival_s,prompt_tokens,output_tokens\n"
SPARSE_BYTES = 300 * 1024 * 1024  # above the reader's 256 MiB limit (sizing.traffic.reader.MAX_TRACE_BYTES)


def _good_rows(rnd: random.Random, n: int) -> str:
    t = 0.0
    rows = []
    for _ in range(n):
        t += rnd.expovariate(2.0)
        rows.append(f"{t:.3f},{rnd.randint(16, 2000)},{rnd.randint(1, 400)}\n")
    return "".join(rows)


def hostile_trace(rnd: random.Random, d: Path) -> Any:
    """A `workload.trace` value a user (or an attacker) could write, with whatever it names made under `d`:
    paths with NUL or control characters, missing files, directories, devices and FIFOs, binary junk,
    unsorted or negative rows, huge sparse files, the wrong format, Latin-1, and {path, format, time_scale,
    prefix_reuse, ...} mappings with bad values; now and then a good small trace, so traces get planned."""
    f = d / "trace.csv"
    for old in (f, d / "trace.jsonl"):  # the previous case's file may be a directory or a FIFO
        if old.is_dir() and not old.is_symlink():
            old.rmdir()
        elif old.exists() or old.is_symlink():
            old.unlink()
    k = rnd.randrange(20)
    if k == 0:
        return str(d / "no-such-trace.csv")
    if k == 1:
        f.mkdir()
        return str(f)
    if k == 2:
        return rnd.choice([str(f) + "\x00.csv", "tr\x00ace.csv", "\x00"])
    if k == 3:
        return rnd.choice(["\x1b[31mtrace.csv", "trace\r\n.csv", "tra\tce\x7f.csv", "\u202etrace.csv", "../" * 40])
    if k == 4:
        return rnd.choice(["/dev/zero", "/dev/null", "/proc/self/mem", "/", "", " ", "x" * 1001, "~/trace.csv"])
    if k == 5:
        os.mkfifo(f)
        return str(f)
    if k == 6:
        f.write_bytes(bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 5000))))
    elif k == 7:  # binary junk after a good header
        f.write_bytes(TRACE_HEADER.encode() + bytes(rnd.randrange(256) for _ in range(2000)))
    elif k == 8:  # unsorted arrivals
        f.write_text(TRACE_HEADER + "5,100,10\n1,100,10\n3,50,5\n")
    elif k == 9:  # negative or absurd rows
        f.write_text(TRACE_HEADER + rnd.choice(["-1,100,10\n", "0,-5,10\n", "0,100,-1\n", "nan,1,1\n",
                                                "inf,1,1\n", "0,1e400,1\n", "0,99999999999,1\n", "0,1.5,1\n",
                                                "0,,\n", "0,1,1,1,1,1\n", "0\n", "1e13,1,1\n"]))
    elif k == 10:  # huge and sparse: over the size limit, or under it and all NUL bytes
        with open(f, "wb") as fh:
            fh.truncate(SPARSE_BYTES if rnd.random() < 0.5 else 64 * 1024 * 1024)
    elif k == 11:  # a row far longer than any row
        f.write_bytes(TRACE_HEADER.encode() + b"1," + b"9" * (2 * 1024 * 1024) + b",1\n")
    elif k == 12:  # the wrong format named
        f.write_text(TRACE_HEADER + _good_rows(rnd, 20))
        return {"path": str(f), "format": rnd.choice(["azure2023", "mooncake", "jsonl"])}
    elif k == 13:  # JSON lines with odd values
        f = d / "trace.jsonl"
        f.write_text(rnd.choice(['{"arrival_s": 0, "prompt_tokens": "many", "output_tokens": 1}\n',
                                 '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": "x"}\n',
                                 '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1e400]}\n',
                                 '{"arrival_s": NaN, "prompt_tokens": 1, "output_tokens": 1}\n',
                                 '[1, 2, 3]\n', '{"a": ' * 5000 + '1' + '}' * 5000 + '\n',
                                 '{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1, "class": {"x": 1}}\n']))
    elif k == 14:  # Latin-1, not UTF-8
        f.write_bytes(TRACE_HEADER.encode() + "0,1,1,caf\xe9\n".encode("latin-1"))
    elif k == 15:  # empty, or a header only
        f.write_text(rnd.choice(["", TRACE_HEADER, "\n\n\n", "arrival_s\n"]))
    elif k == 16:  # a mapping with bad values around a good file
        f.write_text(TRACE_HEADER + _good_rows(rnd, 30))
        key, bad = rnd.choice([("time_scale", 0), ("time_scale", -1), ("time_scale", float("nan")),
                               ("time_scale", 1e9), ("time_scale", "fast"), ("format", "parquet"),
                               ("prefix_reuse", "maybe"), ("prefix_reuse", 5), ("prefix_block_tokens", 0),
                               ("prefix_block_tokens", 10**12), ("routing", "random"), ("path", 5), ("path", None),
                               ("path", []), ("pathh", "x"), ("time_scale", 1e-300)])
        out: dict[str, Any] = {"path": str(f), key: bad}
        return out
    elif k == 17:  # not a path or a mapping
        return rnd.choice([5, True, [str(f)], {"path": {"nested": 1}}, 1e400, None])
    else:  # a good small trace (planned now and then), as a path or a mapping
        f.write_text(TRACE_HEADER + _good_rows(rnd, rnd.randint(5, 200)))
        if rnd.random() < 0.5:
            return {"path": str(f), "time_scale": rnd.choice([0.5, 1, 2]), "prefix_reuse": rnd.random() < 0.5}
    return str(f)


def trace_case(content: str, value: Any) -> str:
    """The stack text with the placeholder replaced by `value` as JSON (valid YAML flow; NUL and control
    characters escaped the way a user would write them in a double-quoted string)."""
    return content.replace(TRACE_PLACEHOLDER, json.dumps(value, allow_nan=True))


def cases(seed: int, n: int, mix: tuple[float, float] = CI_MIX) -> Iterator[tuple[str, str | bytes]]:
    """`n` cases (kind, file content); `mix` = the valid and near-valid shares, then CONFIG_SHARE of stacks
    naming a hostile config.json (CONFIG_PLACEHOLDER) and TRACE_SHARE with a hostile workload.trace
    (TRACE_PLACEHOLDER), the rest hostile."""
    rnd = random.Random(seed)
    for _ in range(n):
        r = rnd.random()
        if r < mix[0]:
            yield "valid", _dump(valid_config(rnd))
        elif r < mix[0] + mix[1]:
            yield "near-valid", near_valid(rnd)
        elif r < mix[0] + mix[1] + CONFIG_SHARE:
            cfg = valid_config(rnd)
            cfg["llmcap:workload"]["model"] = CONFIG_PLACEHOLDER
            cfg["llmcap:workload"]["weights_source"] = "org/model"
            yield "hostile-config", _dump(cfg)
        elif r < mix[0] + mix[1] + CONFIG_SHARE + TRACE_SHARE:
            cfg = valid_config(rnd)
            w = cfg["llmcap:workload"]
            w["trace"] = TRACE_PLACEHOLDER
            for key in ("traffic", "prompt_tokens", "output_tokens"):  # the trace gives them
                if rnd.random() < 0.7:
                    w.pop(key, None)
            yield "hostile-trace", _dump(cfg)
        else:
            yield "hostile", hostile(rnd)


# --- runner ---------------------------------------------------------------------------------
@dataclass
class Tally:
    cases: Counter[str] = field(default_factory=Counter)
    exits: Counter[tuple[str, int]] = field(default_factory=Counter)
    seconds_by: Counter[str] = field(default_factory=Counter)
    tracebacks: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    bad_errors: list[str] = field(default_factory=list)  # exit 2/3 without an `error:` line, or a wrong code
    invariant_failures: list[str] = field(default_factory=list)
    slowest_s: float = 0.0
    slowest: str = ""
    seconds: float = 0.0
    peak_rss_kib: int = 0  # this process's high-water mark (it includes whatever ran before the fuzz)
    rss_growth_kib: int = 0  # how far the fuzz itself raised that mark
    subprocess_runs: int = 0
    subprocess_peak_rss_kib: int = 0
    subprocess_over_limit: list[str] = field(default_factory=list)
    cli_runs: int = 0
    validated_ok: int = 0
    planned: int = 0
    rendered: int = 0  # planned cases rendered (docker compose target, in process)
    diffed: int = 0  # planned cases diffed against the previous plan (JSON and PR comment, in process)


def _on_alarm(signum: int, frame: Any) -> None:
    raise Hang()


def check_invariants(plan: dict[str, Any]) -> None:
    """What every printed plan must satisfy: finite positive cost, predicted SLO met, memory fits."""
    slo = plan["workload"]["slo"]
    assert plan["totals"]["usd_per_hour"] > 0 and math.isfinite(plan["totals"]["usd_per_month"])
    # request classes or a trace: each class is judged on its own targets (a replay's per-class results; a plan
    # whose search was cut before the replay is the analytic fleet, its figures per class in each pool)
    replayed = plan.get("fleet") is not None or bool(plan["workload"].get("classes"))
    for c in plan.get("classes") or []:
        if plan.get("fleet") is not None and c["kind"] == "interactive":
            assert c["slo_met"], f"class {c['name']} misses its targets in the plan's own replay"
    for p in plan["pools"]:
        r = p["per_replica"]
        # null in the JSON: a NaN or infinite figure (pydantic writes both as null); a saved plan must read back
        assert all(v is not None for k, v in r.items() if k.endswith("_ms")), {k for k, v in r.items() if v is None}
        for m in ("ttft", "itl"):  # the fuzz sets p95 targets only
            if not replayed and slo[m] and slo[m]["p95"] is not None:
                # null in the JSON: a NaN or infinite prediction (pydantic writes both as null)
                assert r[f"{m}_p95_ms"] is not None, f"{m} p95 at the planned load is not a number"
                assert r[f"{m}_p95_ms"] <= slo[m]["p95"] + 1e-6
        assert r["kv_cache_gib_per_gpu"] > 0 and r["max_concurrent_sequences"] >= 1
        assert p["instances_desired"] >= 1 and p["replicas"] >= 1


def _explained(code: int, out: str, err: str) -> bool:
    """A refusal says why: `error:` lines on stderr, or (infeasible plan, --format json) a JSON object
    with `feasible: false` and its problems on stdout."""
    if any(ln.startswith("error:") for ln in err.splitlines()):
        return True
    if code == 3:
        try:
            doc = json.loads(out)
        except ValueError:
            return False
        return isinstance(doc, dict) and doc.get("feasible") is False and bool(doc.get("problems"))
    return False


def _render(path: Path) -> None:
    """`llmcap render --target compose --fresh` (the renderer that needs no Pulumi engine: ~50 ms, where the
    eks target under Pulumi's mocks takes seconds a stack; tests/test_golden_outputs.py renders that one)."""
    from sizing.cli.render_cmd import render

    render(stack_file=path, out=path.parent / "render", sets=[], catalog=None, target="compose", fresh=True)


def _diff(before: str, after: str) -> None:
    """`llmcap diff`'s pure core and both renderers on two plans' JSON (the previous plan and this one)."""
    from sizing.analysis.diff import diff_plans
    from sizing.plan import Plan
    from sizing.report.diff_views import render_json, render_markdown

    d = diff_plans(Plan.model_validate_json(before), Plan.model_validate_json(after))
    json.loads(render_json(d))
    if not render_markdown(d).startswith("<!-- llmcap-cost-diff -->"):
        raise AssertionError("the PR comment lost its marker")


def run_one(path: Path, command: str, plans: tuple[str, str] = ("", "")) -> tuple[int, str, str, str]:
    """(exit code, stdout, stderr, traceback text or "") of one command function, in process; `diff` diffs
    the two plans' JSON in `plans` (before, after)."""
    from sizing.cli.common import Format
    from sizing.cli.plan_cmd import plan
    from sizing.cli.validate_cmd import validate

    out, err = io.StringIO(), io.StringIO()
    code, tb = 0, ""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if command == "plan":
                plan(stack_file=path, sets=[], strategy=None, fmt=Format.json, out=None, catalog=None,
                     preflight=False, write=False, search_budget=None)
            elif command == "render":
                _render(path)
            elif command == "diff":
                _diff(*plans)
            else:
                validate(stack_file=path, catalog=None)
        except SystemExit as e:
            code = int(e.code or 0)
        except Hang:
            raise
        except Exception as e:
            exit_code = getattr(e, "exit_code", None)  # typer.Exit
            if type(e).__name__ == "Exit" and isinstance(exit_code, int):
                code = exit_code
            else:
                import traceback

                code, tb = 1, traceback.format_exc()
    return code, out.getvalue(), err.getvalue(), tb


def run_cases(tmp: Path, seed: int, n: int, progress: Callable[[int], None] | None = None,
              mix: tuple[float, float] = CI_MIX, plan_every: int = 6) -> Tally:
    from sizing.catalog.lookup import load_catalog

    load_catalog()  # warm the catalog once, as a long-lived process would
    t = Tally()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    old = signal.signal(signal.SIGALRM, _on_alarm)
    t0 = time.monotonic()
    f = tmp / "Pulumi.fuzz.yaml"
    previous_plan = ""
    try:
        current_plan = ""
        for i, (kind, content) in enumerate(cases(seed, n, mix)):
            if kind == "hostile-config":
                cfg = tmp / "config.json"
                cfg.write_bytes(hostile_config(random.Random(seed * 7919 + i)))
                content = str(content).replace(CONFIG_PLACEHOLDER, str(cfg))
            elif kind == "hostile-trace":
                content = trace_case(str(content), hostile_trace(random.Random(seed * 7919 + i), tmp))
            if isinstance(content, bytes):
                f.write_bytes(content)
            else:
                f.write_text(content, encoding="utf-8", errors="surrogateescape")
            t.cases[kind] += 1
            # every file through validate (the whole input path plan takes too); one in `plan_every`
            # of those that validate is then planned as well (a plan costs ~100x a refusal), and every
            # plan is rendered (compose) and diffed against the previous one
            for command in ("validate", "plan", "render", "diff"):
                if command == "diff" and not previous_plan:
                    break
                start = time.monotonic()
                signal.setitimer(signal.ITIMER_REAL, HANG_S)
                try:
                    code, out, err, tb = run_one(f, command, (previous_plan, current_plan))
                except Hang:
                    t.hangs.append(f"case {i} ({kind}, {command})")
                    break
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                took = time.monotonic() - start
                t.seconds_by[f"{kind} {command}"] += took
                if took > t.slowest_s:
                    t.slowest_s, t.slowest = took, f"case {i} ({kind}, {command})"
                t.exits[(f"{kind} {command}", code)] += 1
                if tb or "Traceback" in out + err:
                    t.tracebacks.append(f"case {i} ({kind}, {command}): {(tb or err).strip().splitlines()[-1][:200]}")
                elif code not in ((0, 2) if command in ("validate", "render") else (0, 2, 3) if command == "plan"
                                  else (0,)) or (code and not _explained(code, out, err)):
                    t.bad_errors.append(f"case {i} ({kind}, {command}): exit {code}: {err[:200]!r}")
                elif code == 0 and command == "plan":
                    try:
                        check_invariants(json.loads(out))
                    except (AssertionError, ValueError, KeyError) as e:
                        t.invariant_failures.append(f"case {i}: {e!r}"[:300])
                if command == "plan":
                    t.planned += 1
                    if code != 0:
                        break
                    current_plan = out
                elif command == "render":
                    # a refused render (exit 2, e.g. no image lock and no allow_unpinned_images) is an answer too;
                    # the plan is still diffed against the previous one
                    t.rendered += 1
                elif command == "diff":
                    t.diffed += 1
                elif code != 0:
                    break
                else:
                    t.validated_ok += 1
                    if (t.validated_ok - 1) % plan_every:
                        break
            previous_plan, current_plan = current_plan or previous_plan, ""
            if progress and i % 1000 == 0:
                progress(i)
    finally:
        signal.signal(signal.SIGALRM, old)
    t.seconds = time.monotonic() - t0
    t.peak_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t.rss_growth_kib = t.peak_rss_kib - rss_before
    return t


def run_cli_sample(tmp: Path, seed: int, n: int, t: Tally) -> None:
    """The same generator through typer's CliRunner (argument parsing included)."""
    from typer.testing import CliRunner

    from sizing.cli import app

    runner = CliRunner()
    f = tmp / "Pulumi.cli.yaml"
    for i, (kind, content) in enumerate(cases(seed, n)):
        if kind == "hostile-trace":
            content = trace_case(str(content), hostile_trace(random.Random(seed * 7919 + i), tmp))
        f.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogateescape"))
        r = runner.invoke(app, ["plan", str(f), "--format", "json"])
        t.cli_runs += 1
        if (r.exception is not None and not isinstance(r.exception, SystemExit)) or "Traceback" in r.output:
            t.tracebacks.append(f"cli case {i} ({kind}): {r.exception!r}"[:300])
        elif r.exit_code not in (0, 2, 3):
            t.bad_errors.append(f"cli case {i} ({kind}): exit {r.exit_code}")


def subprocess_sample(seed: int, n: int) -> list[tuple[str, str | bytes]]:
    """The heaviest-looking cases of a run (largest files first, then one of each kind)."""
    all_cases = list(cases(seed, max(n * 50, 400)))
    by_size = sorted(all_cases, key=lambda c: -len(c[1]))
    picked = by_size[: n // 2]
    for kind in ("valid", "near-valid", "hostile"):
        picked += [c for c in all_cases if c[0] == kind][: max(1, (n - len(picked)) // 3)]
    return picked[:n]


# forks the real command, waits for it and reports its own peak RSS (KiB) as the last stderr line
_LAUNCHER = ("import os, sys\n"
             "pid = os.fork()\n"
             "if pid == 0:\n"
             "    os.execv(sys.argv[1], sys.argv[1:])\n"
             "_, st, ru = os.wait4(pid, 0)\n"
             "sys.stderr.write('\\nLLMCAP_CHILD_MAXRSS_KIB=%d\\n' % ru.ru_maxrss)\n"
             "sys.exit(os.waitstatus_to_exitcode(st))\n")


def run_subprocess(tmp: Path, sample: list[tuple[str, str | bytes]], t: Tally) -> None:
    """Each case as `llmcap plan`; its peak RSS from os.wait4, killed at HANG_S."""
    for i, (kind, content) in enumerate(sample):
        f = tmp / f"Pulumi.sub{i}.yaml"
        if kind == "hostile-trace":
            content = trace_case(str(content), hostile_trace(random.Random(i), tmp))
        f.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogateescape"))
        # through a small launcher: on Linux a child's ru_maxrss starts at its parent's RSS at fork (and
        # survives exec), so a direct child of a 1 GiB pytest process reports 1 GiB whatever it does
        p = subprocess.Popen([sys.executable, "-c", _LAUNCHER, sys.executable, "-c",
                              "from sizing.cli import main; main()", "plan", str(f),
                              "--format", "json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env={**os.environ, "COLUMNS": "120"}, start_new_session=True)
        start = time.monotonic()
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > HANG_S:
                os.killpg(p.pid, signal.SIGKILL)  # the launcher and the plan it runs
                _, status, ru = os.wait4(p.pid, 0)
                t.hangs.append(f"subprocess {i} ({kind})")
                break
            time.sleep(0.02)
        p.returncode = os.waitstatus_to_exitcode(status)
        err = p.stderr.read().decode("utf-8", "replace") if p.stderr else ""
        if p.stderr:
            p.stderr.close()
        t.subprocess_runs += 1
        m = re.search(r"LLMCAP_CHILD_MAXRSS_KIB=(\d+)", err)
        rss = int(m.group(1)) if m else ru.ru_maxrss  # killed: the launcher's own mark, an upper bound
        err = re.sub(r"\nLLMCAP_CHILD_MAXRSS_KIB=\d+\n", "", err)
        t.subprocess_peak_rss_kib = max(t.subprocess_peak_rss_kib, rss)
        if rss > RSS_LIMIT_KIB:
            t.subprocess_over_limit.append(f"subprocess {i} ({kind}): {rss / 1024:.0f} MiB")
        if "Traceback" in err:
            t.tracebacks.append(f"subprocess {i} ({kind}): {err.strip().splitlines()[-1][:200]}")


@contextlib.contextmanager
def scratch_dir(fallback: Path) -> Iterator[Path]:
    """A RAM-backed directory when there is one (/dev/shm): rewriting a file on a loaded disk costs
    ~5 ms (the ext4 truncate-and-rewrite flush), which would be most of a 10,000-file run."""
    import shutil
    import tempfile

    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        d = Path(tempfile.mkdtemp(prefix="llmcap-fuzz-", dir=shm))
        try:
            yield d
        finally:
            shutil.rmtree(d, ignore_errors=True)
    else:
        fallback.mkdir(parents=True, exist_ok=True)
        yield fallback


def report(t: Tally) -> str:
    n = sum(t.cases.values())
    rows = [
        ("stack files", f"{n:,} ({', '.join(f'{k} {v:,}' for k, v in sorted(t.cases.items()))})"),
        ("validated OK / planned / rendered / diffed",
         f"{t.validated_ok:,} / {t.planned:,} / {t.rendered:,} / {t.diffed:,}"),
        ("exit codes", ", ".join(f"{k}:{c}={v:,}" for (k, c), v in sorted(t.exits.items()))),
        ("tracebacks", str(len(t.tracebacks))),
        (f"hangs over {HANG_S:g} s", str(len(t.hangs))),
        ("errors without one `error:` line", str(len(t.bad_errors))),
        ("plans breaking an invariant", str(len(t.invariant_failures))),
        ("seconds by kind", ", ".join(f"{k} {v:.1f}" for k, v in sorted(t.seconds_by.items()))),
        ("slowest case", f"{t.slowest_s:.2f} s ({t.slowest})"),
        ("in-process wall time", f"{t.seconds:.1f} s ({1000 * t.seconds / max(n, 1):.1f} ms per file)"),
        ("peak RSS of this process", f"{t.peak_rss_kib / 1024:.0f} MiB (every in-process run is below it); "
                                     f"raised by the fuzz: {t.rss_growth_kib / 1024:.0f} MiB"),
        ("CliRunner sample", f"{t.cli_runs} runs"),
        ("subprocess sample", f"{t.subprocess_runs} runs, peak RSS {t.subprocess_peak_rss_kib / 1024:.0f} MiB, "
                              f"{len(t.subprocess_over_limit)} over 1 GiB"),
    ]
    w = max(len(a) for a, _ in rows)
    lines = [f"{'fuzz figure':{w}}  value", f"{'-' * w}  {'-' * 50}"] + [f"{a:{w}}  {b}" for a, b in rows]
    for name, items in (("traceback", t.tracebacks), ("hang", t.hangs), ("bad error", t.bad_errors),
                        ("invariant", t.invariant_failures), ("over 1 GiB", t.subprocess_over_limit)):
        lines += [f"  {name}: {x}" for x in items[:5]]
    return "\n".join(lines)
