"""KV admission as each engine runs it: TensorRT-LLM's default capacity scheduler (GUARANTEED_NO_EVICT)
admits a request only when the free KV blocks cover every running request's blocks to completion
(prompt + max new tokens: cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp GuaranteedNoEvictScheduler
sums `getRemainingBlocksToCompletion` over the requests in progress; kvCacheManager.cpp counts
`mPromptLen + mMaxNewTokens`), so a running slot holds a whole sequence's KV; vLLM and SGLang allocate
blocks as tokens arrive, so a slot holds prompt + output/2 on average. trt013's offline rows (TensorRT-LLM
0.13 perf-overview, trtllm-bench prints 'Scheduling Policy: Guaranteed No Evict') with short prompts and
long outputs were predicted 1.2-1.5x too fast held out where the KV cache bounds the batch."""

from __future__ import annotations

from sizing.catalog.lookup import load_catalog
from sizing.perf.load import WorkloadShape, _build_ctx
from sizing.perf.memory import GIB, kv_cache_bytes_per_sequence
from sizing.perf.replica import ReplicaConfig

CAT = load_catalog()


def _cfg(engine: str) -> ReplicaConfig:
    return ReplicaConfig(model=CAT.model("llama-3.3-70b-instruct"), gpu="H100-SXM", precision="fp8", tp=4,
                         engine=engine, kv_cache_dtype="fp8", max_num_seqs=4096, max_num_batched_tokens=8192)


def test_engines_name_their_kv_admission() -> None:
    assert CAT.engine("tensorrt-llm").kv_reserved_to_completion
    assert not CAT.engine("vllm").kv_reserved_to_completion
    assert not CAT.engine("sglang").kv_reserved_to_completion


def test_tensorrt_llm_reserves_a_whole_sequence_of_kv_per_running_request() -> None:
    shape = WorkloadShape(128.0, 4096.0)
    c = _build_ctx(CAT, _cfg("tensorrt-llm"), shape)
    per_seq = kv_cache_bytes_per_sequence(_cfg("tensorrt-llm").model, 128 + 4096, 1.0)
    assert c.max_running_reason == "kv-capacity"
    assert c.max_running == int(c.fit.kv_cache_gib_available * GIB / per_seq)


def test_on_demand_engines_hold_half_the_output_on_average() -> None:
    shape = WorkloadShape(128.0, 4096.0)
    c = _build_ctx(CAT, _cfg("vllm"), shape)
    per_seq = kv_cache_bytes_per_sequence(_cfg("vllm").model, 128 + 2048, 1.0)
    assert c.max_running_reason == "kv-capacity"
    assert c.max_running == int(c.fit.kv_cache_gib_available * GIB / per_seq)
