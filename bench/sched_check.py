"""The simulator's scheduler checked step by step against vLLM's own V1 `Scheduler` (issue 31, item 4).

Both are fed the same requests (ids, prompt and output tokens, the step each arrives before, a shared
prefix) under the same limits (max_num_seqs, max_num_batched_tokens, block size, usable KV blocks,
chunked prefill, prefix caching). Each step, vLLM's `Scheduler.schedule()` runs with the model runner
replaced: the harness hands back a `ModelRunnerOutput` with one sampled token for every request whose
computed tokens reached its prompt plus outputs (as blis-vllm / inference-sim check their model against
vLLM's classes). Our side is sizing/perf/batch_scheduler.py, the code sizing/perf/sim.py runs. Compared
each step: the tokens scheduled per request, the order of the running queue, the requests preempted, and
the prefix-cache hit (tokens) of each request admitted.

Needs the pinned vLLM (`pip install -e ".[vllm-check]"`; the CPU is enough, VLLM_TARGET_DEVICE=cpu is
set here). Run by hand: `python bench/sched_check.py` prints, per scenario, the steps compared and the
first divergence; tests/test_sched_vs_vllm.py asserts agreement (skipped where vLLM is not importable).
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sizing.perf.batch_scheduler import KvBlocks, KvPool, finish_step, release, schedule_step  # noqa: E402

VLLM_PIN = "0.33.0"  # infra/data/versions.yaml (vllm)
MAX_STEPS = 20_000


@dataclass(frozen=True)
class Req:
    """One request: `prompt` tokens of which the first `prefix` are the scenario's shared prefix,
    `output` tokens generated (ignore_eos), handed to both schedulers before step `arrival_step`."""

    rid: str
    prompt: int
    output: int
    arrival_step: int
    prefix: int = 0


@dataclass(frozen=True)
class Scenario:
    """Requests and engine limits; `num_blocks` = KV blocks usable by requests (vLLM's pool has one more,
    its null block: vllm/v1/core/block_pool.py "self.null_block = self.free_block_queue.popleft()")."""

    name: str
    requests: tuple[Req, ...]
    max_num_seqs: int
    max_num_batched_tokens: int
    num_blocks: int
    block_size: int = 16
    prefix_caching: bool = True


@dataclass
class Decision:
    """One step of one scheduler: tokens per scheduled request, the running queue after scheduling
    (admission order), requests preempted (sorted), prefix-cache hit tokens of each admitted request."""

    scheduled: dict[str, int]
    running: list[str]
    preempted: list[str]
    hits: dict[str, int]

    def key(self) -> tuple[Any, ...]:
        return (sorted(self.scheduled.items()), self.running, self.preempted, sorted(self.hits.items()))


@dataclass
class Agreement:
    """A scenario's comparison: steps compared, steps that agreed before the first divergence (all, if
    none), that divergence (step, ours, vLLM's), and both sides' preemption and prefix-hit totals."""

    name: str
    steps: int
    agreed: int
    divergence: tuple[int, Decision, Decision] | None
    totals: dict[str, dict[str, int]] = field(default_factory=dict)


class OursDriver:
    """sizing/perf/batch_scheduler.py as sim.py runs it: the shared prefix's whole blocks are resident once
    (reserved from the pool up front); `num_blocks` excludes vLLM's null block, as sim.py does."""

    def __init__(self, scn: Scenario, lag: bool = False) -> None:
        reqs = scn.requests
        self.lag = lag  # async scheduling: a finished request keeps its slot through the next schedule
        self.pending = np.zeros(0, dtype=np.int64)
        blk = scn.block_size
        self.ids = [r.rid for r in reqs]
        self.P = np.array([r.prompt for r in reqs], dtype=np.int64)
        self.OUT = np.array([r.output for r in reqs], dtype=np.int64)
        prefix = np.array([r.prefix for r in reqs], dtype=np.int64) if scn.prefix_caching else 0 * self.P
        self.H = np.minimum((prefix // blk) * blk, ((self.P - 1) // blk) * blk)
        n = len(reqs)
        self.C = np.zeros(n, dtype=np.int64)
        self.G = np.zeros(n, dtype=np.int64)
        self.B = np.zeros(n, dtype=np.int64)
        self.running = np.zeros(0, dtype=np.int64)
        self.waiting: deque[int] = deque()
        self.pool = KvPool(scn.num_blocks - (int(self.H.max()) // blk if n else 0), caching=scn.prefix_caching)
        self.kv = KvBlocks(blk)
        self.scn = scn
        self.index = {r: i for i, r in enumerate(self.ids)}

    def add(self, rid: str) -> None:
        self.waiting.append(self.index[rid])

    def step(self) -> Decision:
        plan = schedule_step(self.P, self.G, self.C, self.B, self.H, self.running, self.waiting, self.pool,
                             self.scn.max_num_batched_tokens, self.scn.max_num_seqs, self.kv,
                             self.OUT if self.lag else None)
        hits = {self.ids[r]: int(self.C[r]) for r in plan.admitted}
        d = Decision({self.ids[r]: int(t) for r, t in zip(plan.running, plan.sched, strict=True) if t > 0},
                     [self.ids[r] for r in plan.running], sorted(self.ids[r] for r in plan.preempted), hits)
        keep = ~np.isin(plan.running, self.pending)
        running = release(self.pending, keep, plan.running, plan.preempted, self.waiting, self.C, self.H, self.B,
                          self.pool, self.kv.blk)
        _, fin = finish_step(self.P, self.G, self.C, self.OUT, running, plan.sched[keep])
        self.pending = fin
        if not self.lag:  # sync: freed now; async: after the next step's schedule, when the engine processes it
            self.running = release(fin, ~np.isin(running, fin), running, [], self.waiting, self.C, self.H, self.B,
                                   self.pool, self.kv.blk)
            self.pending = fin[:0]
        else:
            self.running = running
        return d

    def busy(self) -> bool:
        return bool(self.running.size or self.waiting or self.pending.size)


def vllm_importable() -> str | None:
    """None if vLLM's V1 scheduler imports here at the pinned version, else why not (one line)."""
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    try:
        import vllm
        from vllm.v1.core.sched.scheduler import Scheduler  # noqa: F401
    except Exception as e:  # any import failure means: not here
        return f"vllm's V1 scheduler does not import: {type(e).__name__}: {e}"[:300]
    if vllm.__version__ != VLLM_PIN:
        return f"vllm {vllm.__version__} is installed; the check is for the pinned {VLLM_PIN}"
    return None


_MODEL_DIR: list[str] = []


def _tiny_model_dir() -> str:
    """A config.json of a 2-layer Llama: ModelConfig reads it from disk (no hub, no weights, no tokenizer);
    the scheduler uses only its max_model_len."""
    if not _MODEL_DIR:
        d = tempfile.mkdtemp(prefix="sched_check_")
        cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
               "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
               "num_hidden_layers": 2, "vocab_size": 32000, "max_position_embeddings": 1 << 17,
               "torch_dtype": "float16"}
        Path(d, "config.json").write_text(json.dumps(cfg))
        _MODEL_DIR.append(d)
    return _MODEL_DIR[0]


class VllmDriver:
    """vLLM's own V1 Scheduler (synchronous: one schedule(), then that step's output) on the CPU."""

    ASYNC = False

    def __init__(self, scn: Scenario) -> None:
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        import logging

        import torch
        from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
        from vllm.sampling_params import SamplingParams
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.core.sched.async_scheduler import AsyncScheduler
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
        from vllm.v1.outputs import ModelRunnerOutput
        from vllm.v1.request import Request
        from vllm.v1.structured_output import StructuredOutputManager

        logging.getLogger("vllm").setLevel(logging.ERROR)
        max_len = 1 << 17
        mc = ModelConfig(model=_tiny_model_dir(), skip_tokenizer_init=True, max_model_len=max_len,
                         dtype="float16", seed=0)
        sc = SchedulerConfig(max_num_seqs=scn.max_num_seqs, max_num_batched_tokens=scn.max_num_batched_tokens,
                             max_model_len=max_len, enable_chunked_prefill=True, is_encoder_decoder=False)
        cc = CacheConfig(block_size=scn.block_size, enable_prefix_caching=scn.prefix_caching)
        vc = VllmConfig(scheduler_config=sc, model_config=mc, cache_config=cc)
        s = vc.scheduler_config  # the CPU platform may adjust a config: the check needs the deployed limits
        got = (s.max_num_seqs, s.max_num_batched_tokens, s.long_prefill_token_threshold,
               vc.cache_config.block_size, vc.cache_config.enable_prefix_caching)
        want = (scn.max_num_seqs, scn.max_num_batched_tokens, 0, scn.block_size, scn.prefix_caching)
        if got != want:
            raise RuntimeError(f"vLLM's config came out {got}, not {want}")
        spec = FullAttentionSpec(block_size=scn.block_size, num_kv_heads=2, head_size=32, dtype=torch.float16)
        vc.cache_config.num_gpu_blocks = scn.num_blocks + 1  # as the engine sets it after profiling memory
        kcc = KVCacheConfig(num_blocks=scn.num_blocks + 1, kv_cache_tensors=[],
                            kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)])
        cls = AsyncScheduler if self.ASYNC else Scheduler
        self.sched = cls(vllm_config=vc, kv_cache_config=kcc,
                               structured_output_manager=StructuredOutputManager(vc),
                               block_size=scn.block_size, log_stats=False)
        hasher: Callable[[Any], Any] | None = None
        if scn.prefix_caching:
            fn = get_hash_fn_by_name(vc.cache_config.prefix_caching_hash_algo)
            init_none_hash(fn)
            hasher = get_request_block_hasher(scn.block_size, fn)
        self._hasher = hasher
        self._Request, self._SamplingParams, self._MRO = Request, SamplingParams, ModelRunnerOutput
        self.reqs = {r.rid: (i, r) for i, r in enumerate(scn.requests)}

    def add(self, rid: str) -> None:
        i, r = self.reqs[rid]
        shared = list(range(1, r.prefix + 1))  # the scenario's shared prefix: the same tokens in every request
        own = [100_000 + 1_000_000 * (i + 1) + k for k in range(r.prompt - r.prefix)]  # unique to this request
        req = self._Request(rid, shared + own, self._SamplingParams(max_tokens=r.output, ignore_eos=True),
                            None, arrival_time=float(i), block_hasher=self._hasher)
        self.sched.add_request(req)

    def step(self) -> Decision:
        s = self.sched
        waiting_before = {r.request_id for r in s.waiting} | {r.request_id for r in s.kv_holding_waiting}
        out = s.schedule()
        n = out.num_scheduled_tokens
        reqs = s.requests
        hits = {rid: reqs[rid].num_computed_tokens - t for rid, t in n.items() if rid in waiting_before}
        d = Decision({rid: int(t) for rid, t in n.items()}, [r.request_id for r in s.running],
                     sorted(out.preempted_req_ids or ()), hits)
        ids = list(n)
        sampled = [[7] if reqs[rid].num_computed_tokens >= reqs[rid].num_tokens else [] for rid in ids]
        s.update_from_output(out, self._MRO(req_ids=ids, req_id_to_index={r: k for k, r in enumerate(ids)},
                                            sampled_token_ids=sampled))
        return d

    def busy(self) -> bool:
        return bool(self.sched.get_num_unfinished_requests())


class AsyncVllmDriver(VllmDriver):
    """vLLM's AsyncScheduler as the engine runs it on a GPU, where async scheduling is the default
    (vllm/config/vllm.py: "Enable async scheduling unless there is an incompatible option"): EngineCore
    .step_with_batch_queue with a queue of 2 schedules step N+1 before it processes step N's output (a request
    that samples in a step holds an output placeholder until then)."""

    ASYNC = True

    def __init__(self, scn: Scenario) -> None:
        super().__init__(scn)
        self.queue: deque[tuple[Any, Any]] = deque()

    def step(self) -> Decision:
        s = self.sched
        d = Decision({}, [r.request_id for r in s.running], [], {})
        if s.has_requests():
            waiting_before = {r.request_id for r in s.waiting} | {r.request_id for r in s.kv_holding_waiting}
            out = s.schedule()
            n = out.num_scheduled_tokens
            reqs = s.requests
            hits = {rid: reqs[rid].num_computed_tokens - t for rid, t in n.items() if rid in waiting_before}
            d = Decision({rid: int(t) for rid, t in n.items()}, [r.request_id for r in s.running],
                         sorted(out.preempted_req_ids or ()), hits)
            ids = list(n)
            sampled = [[] if reqs[rid].is_prefill_chunk else [7] for rid in ids]
            self.queue.appendleft((out, self._MRO(req_ids=ids, req_id_to_index={r: k for k, r in enumerate(ids)},
                                                  sampled_token_ids=sampled)))
            if len(self.queue) < 2 and (out.total_num_scheduled_tokens > 0 or s.has_requests()):
                return d
        if self.queue:
            out, mro = self.queue.pop()
            s.update_from_output(out, mro)
        return d

    def busy(self) -> bool:
        return bool(self.sched.get_num_unfinished_requests() or self.queue)


def compare(scn: Scenario, engine: type[VllmDriver] | None = None) -> Agreement:
    """Run both schedulers over the scenario until both are idle; agreement up to the first divergence
    (both keep running after it, for the totals). `engine`: VllmDriver (default) or AsyncVllmDriver."""
    engine = engine or VllmDriver
    ours, theirs = OursDriver(scn, lag=engine.ASYNC), engine(scn)
    by_step: dict[int, list[str]] = {}
    for r in scn.requests:
        by_step.setdefault(r.arrival_step, []).append(r.rid)
    last_arrival = max(by_step) if by_step else 0
    div: tuple[int, Decision, Decision] | None = None
    tot = {"ours": {"preemptions": 0, "hit_tokens": 0}, "vllm": {"preemptions": 0, "hit_tokens": 0}}
    step = agreed = 0
    while step < MAX_STEPS and (step <= last_arrival or ours.busy() or theirs.busy()):
        for rid in by_step.get(step, []):
            ours.add(rid)
            theirs.add(rid)
        a, b = ours.step(), theirs.step()
        for side, d in (("ours", a), ("vllm", b)):
            tot[side]["preemptions"] += len(d.preempted)
            tot[side]["hit_tokens"] += sum(d.hits.values())
        if div is None:
            if a.key() == b.key():
                agreed += 1
            else:
                div = (step, a, b)
        step += 1
    return Agreement(scn.name, step, agreed, div, tot)


def scenarios(seed: int = 0) -> list[Scenario]:
    """The scenarios of issue 31 item 4: a burst far above max_num_seqs, Poisson arrivals, long prompts
    that need chunking, KV pressure that forces preemption, shared prefixes. Deterministic for a seed."""
    rng = np.random.default_rng(seed)

    def lognormal(n: int, mean: float, sigma: float, lo: int, hi: int) -> np.ndarray:
        mu = math.log(mean) - sigma * sigma / 2
        return np.clip(np.rint(rng.lognormal(mu, sigma, n)), lo, hi).astype(int)

    out: list[Scenario] = []
    n = 96  # burst: 96 prompts at step 0, 8 sequences at most
    p, o = lognormal(n, 300, 0.5, 8, 2000), lognormal(n, 60, 0.8, 1, 400)
    out.append(Scenario("burst", tuple(Req(f"b{i}", int(p[i]), int(o[i]), 0) for i in range(n)),
                        max_num_seqs=8, max_num_batched_tokens=512, num_blocks=4000))
    n = 120  # Poisson arrivals, 0.35 per step on average
    steps = np.cumsum(rng.exponential(1 / 0.35, n)).astype(int)
    p, o = lognormal(n, 200, 0.6, 4, 1500), lognormal(n, 40, 0.7, 1, 300)
    out.append(Scenario("poisson", tuple(Req(f"p{i}", int(p[i]), int(o[i]), int(steps[i])) for i in range(n)),
                        max_num_seqs=16, max_num_batched_tokens=1024, num_blocks=3000))
    n = 24  # long prompts, chunked by a 512-token budget
    p, o = rng.integers(2000, 6000, n), rng.integers(4, 80, n)
    steps = np.sort(rng.integers(0, 60, n))
    out.append(Scenario("long_prompts", tuple(Req(f"l{i}", int(p[i]), int(o[i]), int(steps[i])) for i in range(n)),
                        max_num_seqs=8, max_num_batched_tokens=512, num_blocks=6000))
    n = 40  # KV pressure: 40 requests that would hold ~3x the blocks there are
    p, o = rng.integers(100, 400, n), rng.integers(100, 400, n)
    out.append(Scenario("kv_pressure", tuple(Req(f"k{i}", int(p[i]), int(o[i]), int(i // 4)) for i in range(n)),
                        max_num_seqs=16, max_num_batched_tokens=1024, num_blocks=300))
    n = 60  # shared prefix of 640 tokens (40 blocks) before each request's own part
    own, o = rng.integers(20, 300, n), rng.integers(5, 80, n)
    steps = np.cumsum(rng.exponential(1 / 0.5, n)).astype(int)
    out.append(Scenario("shared_prefix",
                        tuple(Req(f"s{i}", 640 + int(own[i]), int(o[i]), int(steps[i]), prefix=640) for i in range(n)),
                        max_num_seqs=16, max_num_batched_tokens=1024, num_blocks=3000))
    return out


def _fmt(d: Decision) -> str:
    return (f"scheduled={d.scheduled} running={d.running} preempted={d.preempted} hits={d.hits}")


def main() -> int:
    """Print each scenario's agreement; exit 1 on a divergence, 2 where vLLM cannot be imported."""
    why = vllm_importable()
    if why:
        print(f"sched_check: skipped: {why}")
        return 2
    bad = 0
    engine: type[VllmDriver] = AsyncVllmDriver if "--async" in sys.argv else VllmDriver
    print(f"vLLM {VLLM_PIN} {engine.__name__} (--async: the AsyncScheduler a GPU engine runs by default)")
    print(f"{'scenario':14} {'steps':>6} {'agreed':>7}  preemptions ours/vllm  hit tokens ours/vllm  first divergence")
    for scn in scenarios():
        a = compare(scn, engine)
        t = a.totals
        first = "none" if a.divergence is None else f"step {a.divergence[0]}"
        print(f"{a.name:14} {a.steps:6d} {a.agreed:7d}  {t['ours']['preemptions']:>9d}/{t['vllm']['preemptions']:<9d}"
              f"  {t['ours']['hit_tokens']:>9d}/{t['vllm']['hit_tokens']:<9d}  {first}")
        if a.divergence is not None:
            bad += 1
            _, x, y = a.divergence
            print(f"    ours: {_fmt(x)}\n    vllm: {_fmt(y)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
