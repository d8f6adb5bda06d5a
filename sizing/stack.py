"""Read a Pulumi stack file (`stacks/Pulumi.<env>.yaml`) into a validated Stack.

Keys read from its `config:`: `aws:region`, `llmcap:workload`, `llmcap:hardware`,
`llmcap:deployment`, `llmcap:budget_usd_month`. Other namespaces are left to Pulumi.
Errors name the config key and field ("llmcap:workload.traffic.concurrent_users: ...").
"""

from __future__ import annotations

import copy
import difflib
import math
import re
import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ValidationError

from sizing.deployment import DeploymentOptions
from sizing.errors import SpecError
from sizing.spec import HardwareSpec, TraceSpec, WorkloadSpec
from sizing.traffic.reader import Trace, read_trace
from sizing.traffic.stats import trace_stats
from sizing.user_files import read_user_file

if TYPE_CHECKING:
    from collections.abc import Callable

NAMESPACE = "llmcap"
KNOWN_KEYS = ("workload", "hardware", "deployment", "budget_usd_month", "hf_token", "api_key")
SECRET_KEYS = ("api_key", "hf_token")
DEFAULT_REGION = "us-east-1"
# A stack file is a few KiB (Pulumi's own, with encrypted secrets, stays far below this); 20-60 MB
# files took more than 30 s to parse, so anything above this is refused before parsing.
STACK_MAX_BYTES = 1024 * 1024
# libyaml composes a 20,000-deep flow collection ([[[...]]]) in seconds; no stack nests beyond a few levels
MAX_FLOW_DEPTH = 64
_QUOTED_OR_COMMENT = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\n]|\'\')*\'|(?:^|\s)#[^\n]*')


def flow_depth(text: str) -> int:
    """The deepest nesting of YAML flow collections ([ ] and { }) outside quotes and comments."""
    marks = re.findall(r"[\[\]{}]", _QUOTED_OR_COMMENT.sub(" ", text))
    depth = peak = 0
    for m in marks:
        depth += 1 if m in "[{" else -1
        peak = max(peak, depth)
    return peak


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother = 2, 4, 4, 60, 60


def short_repr(value: Any) -> str:
    """repr() cut to a line: an error message never expands a YAML alias bomb or a 900 KB scalar."""
    try:
        return _REPR.repr(value)
    except RecursionError:  # a recursive alias
        return "<recursive value>"


class UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """yaml's safe loader (libyaml's parser when available: ~10x faster) that refuses a mapping with
    the same key twice (YAML 1.2 requires keys to be unique; PyYAML silently keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first is not None:
                raise DuplicateKeyError(key, first, key_node.start_mark.line + 1)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: Any, first_line: int, line: int) -> None:
        super().__init__(f"duplicate key {short_repr(key)}")
        self.key, self.first_line, self.line = key, first_line, line


@dataclass(frozen=True)
class Stack:
    """A validated stack: its name (`dev` for Pulumi.dev.yaml), specs and region."""

    name: str
    workload: WorkloadSpec
    hardware: HardwareSpec
    region: str
    deployment: DeploymentOptions
    budget_usd_month: float | None = None
    warnings: tuple[str, ...] = ()  # e.g. a plaintext secret; validate and plan print them
    trace: Trace | None = None  # llmcap:workload.trace, read (sizing.traffic.reader)


def stack_name(path: Path) -> str:
    n = path.name
    if n.startswith("Pulumi.") and n.endswith((".yaml", ".yml")):
        return n[len("Pulumi."):].rsplit(".", 1)[0]
    return path.stem


# What a person calls each input model, for pydantic's "instance of <class>" messages: a Python class
# name never reaches the user (sizing.spec, sizing.deployment; a model missing here reads "a mapping").
USER_TYPE_NAMES = {
    "TokenLength": "a token count, or a mapping {mean: N, p95: N}",
    "PercentileTargets": "a mapping of percentile targets in ms, e.g. {p95: 1000}",
}
_INSTANCE_OF = re.compile(r"(?:a valid dictionary or )?instance of ([A-Z][A-Za-z0-9_]*)")


def _user_words(msg: str) -> str:
    return _INSTANCE_OF.sub(lambda m: USER_TYPE_NAMES.get(m.group(1), "a mapping"), msg)


def _submodels(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions, lists and dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in getattr(annotation, "__args__", ()) for m in _submodels(a)]


def _known_keys(model: type[BaseModel] | None, path: list[str]) -> list[str]:
    """The keys the model accepts at `path` (the unknown key's parent), through nested models."""
    models = [model] if model else []
    for part in path:
        models = [m for cur in models if part in cur.model_fields
                  for m in _submodels(cur.model_fields[part].annotation)]
    return sorted({k for m in models for k in m.model_fields})


def format_validation_error(prefix: str, e: ValidationError, model: type[BaseModel] | None = None) -> list[str]:
    """One line per problem: `prefix.field.path: what is wrong (got X)`; an unknown key gets the closest
    key `model` accepts there ("did you mean concurrent_users?"); no Python class name is shown."""
    lines = []
    wheres: list[tuple[str, str, bool]] = []  # (where, line, the input was a list) in order
    for err in e.errors():
        # pydantic names a union branch in the location: 'literal[...]', 'list[literal[...]]'
        loc = ".".join(str(p) for p in err["loc"]
                       if not str(p).startswith(("function-", "literal[", "list[literal[")))
        # drop pydantic's union-branch markers such as 'int' or 'TokenLength'
        parts = [p for p in loc.split(".") if p and p not in ("int", "float", "str", "list[str]", "TokenLength",
                                                               "list[literal]", "constrained-int")]
        where = ".".join([prefix] + parts) if parts else prefix
        msg = _user_words(err["msg"].removeprefix("Value error, "))
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(parts[-1] if parts else "", _known_keys(model, parts[:-1]), n=1,
                                              cutoff=0.75)
            msg = f"unknown key; did you mean {close[0]}?" if close else "unknown key; remove it or check its spelling"
        inp = err.get("input")
        shown = "" if isinstance(inp, (dict, list)) or err["type"] in ("missing", "extra_forbidden") \
            else f" (got {short_repr(inp)})"
        wheres.append((where, f"{where}: {msg}{shown}", isinstance(inp, list)))
    # a one-or-list field fails both union branches: given one bad value, its "should be a valid list" line
    # is noise; given a list, the scalar branch's line is, beside the line naming the bad item (`where.N`)
    for where, line, was_list in wheres:
        if line.startswith(f"{where}: Input should be a valid list") and \
                any(w == where and other != line for w, other, _ in wheres):
            continue
        if was_list and any(w.startswith(f"{where}.") for w, _, _ in wheres):
            continue
        lines.append(line)
    return list(dict.fromkeys(lines))


def _validate(model: type[BaseModel], prefix: str, raw: Any, problems: list[str]) -> Any:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.append(f"{prefix}: must be a mapping of keys to values (got {type(raw).__name__})")
        return None
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        problems.extend(format_validation_error(prefix, e, model))
        return None


def parse_value(text: str) -> Any:
    """A --set value, read as YAML (numbers, lists, booleans); falls back to the raw string."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_overrides(config: dict[str, Any], sets: list[str]) -> dict[str, Any]:
    """Apply `--set a.b.c=VALUE` overrides to the llmcap section of a stack config."""
    out = copy.deepcopy(config)
    for item in sets:
        if "=" not in item:
            raise SpecError(f"--set {item!r}: expected KEY=VALUE, e.g. workload.traffic.concurrent_users=1000")
        key, value = item.split("=", 1)
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise SpecError(f"--set {item!r}: empty key")
        if parts[0] == "region":
            out["aws:region"] = parse_value(value)
            continue
        top = f"{NAMESPACE}:{parts[0]}"
        if len(parts) == 1:
            out[top] = parse_value(value)
            continue
        node = out.setdefault(top, {})
        if parts[:2] == ["workload", "trace"] and len(parts) == 3:
            _trace_key(node, parts[2], item)
        for p in parts[1:-1]:
            if not isinstance(node, dict):
                raise SpecError(f"--set {item!r}: {p} is not a mapping")
            node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise SpecError(f"--set {item!r}: parent is not a mapping")
        node[parts[-1]] = parse_value(value)
        if parts[:2] == ["workload", "slo"] and len(parts) == 3:
            _drop_other_spelling(node, parts[2])
    return out


def _trace_key(workload: Any, key: str, item: str) -> None:
    """`--set workload.trace.KEY=..`: KEY must be one of the trace mapping's (sizing.spec.TraceSpec); a trace
    given as a plain path is promoted to the mapping form `{path: ...}` first, as the spec reads it."""
    keys = list(TraceSpec.model_fields)
    if key not in keys:
        raise SpecError(f"--set {item!r}: {NAMESPACE}:workload.trace has no key {key!r}; its keys: {', '.join(keys)}")
    if isinstance(workload, dict) and isinstance(workload.get("trace"), str):
        workload["trace"] = {"path": workload["trace"]}


def _drop_other_spelling(slo: dict[str, Any], key: str) -> None:
    """A --set of one spelling of a p95 target overrides the file's other spelling (`ttft_p95_ms` and
    `ttft: {p95: ..}` are one target, sizing.spec.Slo), so that the two cannot disagree."""
    for m in ("ttft", "itl"):
        legacy = f"{m}_p95_ms"
        if key == m:
            slo.pop(legacy, None)
        elif key == legacy and isinstance(slo.get(m), dict):
            slo[m] = {q: v for q, v in slo[m].items() if q != "p95"} or None


def read_config(path: Path) -> dict[str, Any]:
    """The `config:` mapping of a stack file, or a SpecError naming what is wrong."""
    text = read_user_file(path, "stack file", max_bytes=STACK_MAX_BYTES)
    if flow_depth(text) > MAX_FLOW_DEPTH:
        raise SpecError(f"{path}: input is nested too deeply (more than {MAX_FLOW_DEPTH} levels of [ ] or {{ }})")
    try:
        doc = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except DuplicateKeyError as e:
        raise SpecError(f"{path}: duplicate key {short_repr(e.key)} at line {e.line} (first at line {e.first_line}); "
                        "YAML keeps only the last one, so remove one of them") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpecError(f"{path}: not valid YAML{where}; check indentation and quoting") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise SpecError(f"{path}: a stack file is a mapping with a `config:` key")
    config = doc.get("config", {})
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise SpecError(f"{path}: `config:` must be a mapping")
    return config


def _with_trace(raw: Any, base_dir: Path | None, problems: list[str],
                trace_at: Callable[[str], Path] | None = None) -> tuple[Any, Trace | None]:
    """Read `llmcap:workload.trace` (relative to the stack file) and fill the workload's missing
    prompt_tokens, output_tokens (mean and p95) and traffic (the trace's mean rate) from it. `trace_at`:
    where the trace path as written is read from (a file the git adapter copied out of a commit, so `llmcap
    diff` plans each side from its own ref's trace); None: from disk, relative to `base_dir`."""
    t = raw.get("trace") if isinstance(raw, dict) else None
    if t is None:
        return raw, None
    spec = t if isinstance(t, dict) else {"path": t}
    try:
        ts = TraceSpec.model_validate(spec)
    except ValidationError as e:
        problems.extend(format_validation_error(f"{NAMESPACE}:workload.trace", e))
        return raw, None
    try:
        if trace_at is not None:
            path = trace_at(ts.path)
        else:
            path = Path(ts.path)
            if not path.is_absolute() and base_dir is not None:
                path = base_dir / path
        trace = read_trace(path, ts.format, ts.time_scale, ts.prefix_reuse, ts.prefix_block_tokens)
    except SpecError as e:
        problems.append(f"{NAMESPACE}:workload.trace: {e}")
        return raw, None
    st = trace_stats(trace)
    if raw.get("traffic") is not None and not raw.get("classes"):
        # the fleet is replayed at the trace's own arrivals; a stated traffic beside it sized the per-replica
        # figures for another load (3,910 users beside a 2 req/s trace: an overloaded, infinite TTFT; issue 27 fuzz)
        problems.append(f"{NAMESPACE}:workload.traffic: given beside workload.trace, whose own arrivals "
                        f"({st.mean_requests_per_s:.3g} req/s on average) the fleet is planned from; remove traffic, "
                        "or scale the trace with workload.trace.time_scale")
        return raw, None
    out = dict(raw)
    for key, d in (("prompt_tokens", st.prompt_tokens), ("output_tokens", st.output_tokens)):
        out.setdefault(key, {"mean": max(1, round(d["mean"])), "p95": max(1, round(d["mean"]), round(d["p95"]))})
    out.setdefault("traffic", {"peak_requests_per_s": st.mean_requests_per_s})
    return out, trace


def trace_path_of(config: dict[str, Any]) -> str | None:
    """The trace path a stack config names (`llmcap:workload.trace`, a path or `{path: ...}`), unvalidated."""
    w = config.get(f"{NAMESPACE}:workload")
    t = w.get("trace") if isinstance(w, dict) else None
    p = t.get("path") if isinstance(t, dict) else t
    return p if isinstance(p, str) and p else None


def stack_from_config(name: str, config: dict[str, Any], source: str = "stack", base_dir: Path | None = None,
                      trace_at: Callable[[str], Path] | None = None) -> Stack:
    """Validate a stack `config:` mapping (all problems at once). `base_dir`: where a relative trace path
    starts (the stack file's folder; default the working directory); `trace_at`: reads the trace path
    instead (_with_trace)."""
    problems: list[str] = []
    for key in config:
        k = str(key)
        if k.startswith(NAMESPACE + ":") and k.split(":", 1)[1] not in KNOWN_KEYS:
            near = difflib.get_close_matches(k.split(":", 1)[1], KNOWN_KEYS, n=1)
            hint = f"; did you mean {NAMESPACE}:{near[0]}?" if near else f"; known: {', '.join(KNOWN_KEYS)}"
            problems.append(f"{k}: unknown key{hint}")
    trace = None
    if f"{NAMESPACE}:workload" not in config:
        problems.append(f"{NAMESPACE}:workload: missing; the stack needs a workload (model, tokens, traffic, slo)")
        workload = None
    else:
        before = len(problems)
        raw, trace = _with_trace(config[f"{NAMESPACE}:workload"], base_dir, problems, trace_at)
        # a trace that cannot be read is the one problem (its lengths and rate would be missing too)
        workload = (_validate(WorkloadSpec, f"{NAMESPACE}:workload", raw, problems)
                    if len(problems) == before else None)
    hardware = _validate(HardwareSpec, f"{NAMESPACE}:hardware", config.get(f"{NAMESPACE}:hardware"), problems)
    deployment = _validate(DeploymentOptions, f"{NAMESPACE}:deployment",
                           config.get(f"{NAMESPACE}:deployment"), problems)
    region = config.get("aws:region", DEFAULT_REGION)
    if not isinstance(region, str) or not region:
        problems.append(f"aws:region: must be a region name such as us-east-1 (got {short_repr(region)})")
    budget = config.get(f"{NAMESPACE}:budget_usd_month")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                               or not _finite(budget) or budget <= 0):
        problems.append(f"{NAMESPACE}:budget_usd_month: must be a positive number of USD (got {short_repr(budget)})")
    if problems:
        raise SpecError(f"{source}: {len(problems)} problem(s)", problems)
    assert workload is not None and hardware is not None and deployment is not None  # for mypy: checked above
    return Stack(name=name, workload=workload, hardware=hardware, region=str(region),
                 deployment=deployment, budget_usd_month=float(budget) if budget is not None else None,
                 warnings=tuple(plaintext_secret_warnings(config)), trace=trace)


def _finite(x: float) -> bool:
    """math.isfinite that does not overflow on a YAML integer such as 10**400 (it is not finite here)."""
    try:
        return math.isfinite(float(x))
    except OverflowError:
        return False


def plaintext_secret_warnings(config: dict[str, Any]) -> list[str]:
    """One line per llmcap secret stored in plain text. `pulumi config set --secret` stores a secret
    as a mapping `{secure: <ciphertext>}` ("All encrypted values are stored as ciphertext in
    configuration and state files", https://www.pulumi.com/learn/building-with-pulumi/secrets/);
    anything else under these keys is readable by whoever reads the file or the repository."""
    out = []
    for k in SECRET_KEYS:
        v = config.get(f"{NAMESPACE}:{k}")
        if v is None or (isinstance(v, dict) and set(v) == {"secure"}):
            continue
        out.append(f"{NAMESPACE}:{k} is stored in plain text in the stack file; remove it and run "
                   f"`pulumi config set --secret {NAMESPACE}:{k} VALUE` (Pulumi then stores it encrypted)")
    return out


def load_stack(path: str | Path, sets: list[str] | None = None) -> Stack:
    """Read and validate `stacks/Pulumi.<env>.yaml`, with optional `--set` overrides."""
    p = Path(path)
    config = read_config(p)
    if sets:
        config = apply_overrides(config, sets)
    return stack_from_config(stack_name(p), config, str(p), p.parent)


def config_from_text(text: str, source: str) -> dict[str, Any]:
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        raise SpecError(f"{source}: not valid YAML") from None
    doc = doc or {}
    if not isinstance(doc, dict):
        raise SpecError(f"{source}: a stack file is a mapping with a `config:` key")
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise SpecError(f"{source}: `config:` must be a mapping")
    return config
