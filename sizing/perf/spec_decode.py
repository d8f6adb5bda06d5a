"""Speculative decoding as the engines run it: which draft, how many drafted tokens per step, and how
many tokens a step yields on average (the mean acceptance length).

Scope: the engine-level facts the step model needs (sizing.perf.step: the verify and draft work of one
step); no timing lives here. Counts only (tokens per sequence per step); no units beyond that.

How the engines run it (read in their code):
- vLLM V1 schedules a running request's drafted tokens with its next token against the step's token
  budget: `num_new_tokens = request.num_tokens_with_spec + request.num_output_placeholders -
  request.num_computed_tokens` (vllm/v1/core/sched/scheduler.py), so the target model verifies k + 1
  tokens per decoding sequence each step (`uniform_decode_query_len = 1 + num_spec_tokens`,
  gpu_model_runner.py). The proposer (vllm/v1/spec_decode/eagle.py, used for EAGLE, EAGLE-3 and MTP)
  runs the draft once over every token the target just ran, then `for token_index in
  range(self.num_speculative_tokens - 1)` once more per sequence: k draft passes in all, each a draft
  model of one decoder layer (EAGLE's head; the checkpoint's MTP layer) plus the LM head on the
  sampled positions.
- SGLang's EAGLE worker (--speculative-algorithm EAGLE / NEXTN with --speculative-num-steps s,
  --speculative-eagle-topk 1, --speculative-num-draft-tokens s + 1) drafts s steps of one token
  each and verifies s + 1 tokens; after verifying it extends the draft over the accepted tokens
  (forward_draft_extend_after_decode): s + 1 draft passes.
- Each step yields 1 + (accepted drafted tokens) per sequence; its mean is the acceptance length,
  1 + the sum of vLLM's per-position acceptance rates (sizing/data/spec_decode_acceptance.csv gives
  them per model family and method, with their sources; a measured mean acceptance length replaces
  them when a source prints one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.errors import PerfModelError

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import ModelArch

METHODS = ("mtp", "eagle", "eagle3")
# SGLang caps the running batch under EAGLE-style speculative decoding (NEXTN is EAGLE with the model's own
# MTP layer) unless --max-running-requests is given: sglang 0.5.3 and 0.5.6.post2 srt/server_args.py
# _handle_speculative_decoding: 'if self.max_running_requests is None: self.max_running_requests = 48'
# ("Max running requests is reset to 48 for speculative decoding", 0.5.6.post2)
SGLANG_SPEC_MAX_RUNNING_REQUESTS = 48


@dataclass(frozen=True)
class SpecDecode:
    """One replica's speculative decoding: `method` (mtp | eagle | eagle3), `num_tokens` drafted per
    sequence per step (vLLM num_speculative_tokens; SGLang speculative_num_steps with topk 1), the
    engine that runs it (its draft-pass count), and a measured mean acceptance length (tokens per
    step per sequence, 1..num_tokens + 1) where the source prints one (None: the data file's)."""

    method: str
    num_tokens: int
    acceptance_length: float | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise PerfModelError(f"speculative decoding method {self.method!r} is not modelled; use one of "
                                 f"{', '.join(METHODS)}")
        if not 1 <= self.num_tokens <= 16:
            raise PerfModelError(f"speculative num_tokens {self.num_tokens} is outside 1..16; set the drafted "
                                 "tokens per step (vLLM num_speculative_tokens)")
        if self.acceptance_length is not None and not 1.0 <= self.acceptance_length <= self.num_tokens + 1:
            raise PerfModelError(f"speculative acceptance_length {self.acceptance_length} must lie in "
                                 f"1..{self.num_tokens + 1} (1 + drafted tokens)")


def model_family(model: ModelArch) -> str:
    """The acceptance table's family of a model: its config's model_type without the text / MoE suffixes."""
    t = model.model_type or ""
    if t.startswith("deepseek_v3"):
        return "deepseek_v3"
    if t.startswith("qwen3_5"):
        return "qwen3_5"
    return t


def acceptance_length(catalog: Catalog, model: ModelArch, spec: SpecDecode) -> float:
    """Mean tokens a step yields per decoding sequence: the measured figure, else 1 + the sum of the
    per-position acceptance rates of the first num_tokens positions in spec_decode_acceptance.csv."""
    if spec.acceptance_length is not None:
        return spec.acceptance_length
    family = model_family(model)
    rates = {int(r["position"]): float(r["acceptance"]) for r in catalog.rows("spec_decode_acceptance.csv")
             if r["model_family"] == family and r["method"] == spec.method}
    missing = [i for i in range(1, spec.num_tokens + 1) if i not in rates]
    if missing:
        raise PerfModelError(f"spec_decode_acceptance.csv has no acceptance rate for {family} {spec.method} at "
                             f"draft position(s) {missing}; add sourced rows or give the measured acceptance_length")
    return 1.0 + sum(rates[i] for i in range(1, spec.num_tokens + 1))


def spec_max_running(engine: str, spec: SpecDecode | None) -> int | None:
    """The running-batch limit an engine sets by itself under speculative decoding (None: its usual default)."""
    return SGLANG_SPEC_MAX_RUNNING_REQUESTS if spec is not None and engine == "sglang" else None


def draft_passes(engine: str, spec: SpecDecode) -> int:
    """Draft-model passes per step beyond the first (the pass over every token the target ran): vLLM
    k - 1 (eagle.py's loop), SGLang k (its s draft steps after the extend over the accepted tokens)."""
    return spec.num_tokens if engine == "sglang" else spec.num_tokens - 1
