"""TensorRT-LLM's KV pool: kv_cache_free_gpu_mem_fraction of the memory free once the engine is loaded."""
from __future__ import annotations

import pytest

from sizing.catalog.lookup import load_catalog
from sizing.perf.memory import memory_fit
from sizing.perf.replica import ReplicaConfig

CAT = load_catalog()


def test_trtllm_kv_pool_is_a_fraction_of_the_memory_left_after_the_engine() -> None:
    """kvCacheManager.cpp: freePrimaryMemBytes = finalFreeMem * freeMemFraction (free after the engine loads),
    where vLLM's --gpu-memory-utilization bounds everything: a 70B model in 16 bits on 2xH100 keeps
    0.9 x (80 - weights - overhead) GiB of KV per GPU, not 0.9 x 80 - weights - overhead."""
    model = CAT.model("llama-3.1-70b-instruct")
    trt = memory_fit(CAT, ReplicaConfig(model=model, gpu="H100-SXM", precision="bf16", tp=2,
                                        engine="tensorrt-llm"), 2176)
    vllm = memory_fit(CAT, ReplicaConfig(model=model, gpu="H100-SXM", precision="bf16", tp=2, engine="vllm"), 2176)
    free = trt.gpu_memory_gib_per_gpu - trt.weights_gib_per_gpu - trt.overhead_gib_per_gpu
    assert trt.kv_cache_gib_per_gpu == pytest.approx(0.9 * free)
    assert trt.kv_cache_gib_per_gpu > 1.5 * vllm.kv_cache_gib_per_gpu
