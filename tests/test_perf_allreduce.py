"""TensorRT-LLM's all-reduce strategy per message size and TP width (sizing.perf.allreduce), in the step."""
from __future__ import annotations

import pytest

from sizing.catalog.calibration import load_calibration
from sizing.catalog.lookup import load_catalog
from sizing.perf.step import build_step_model

CAT = load_catalog()
HIDDEN_BYTES = 8192 * 2  # llama-3.1-70b, 16-bit activations


def _sm(engine: str, tp: int, interconnect: str = "nvlink"):  # type: ignore[no-untyped-def]
    return build_step_model(CAT, load_calibration(), CAT.model("llama-3.1-70b-instruct"), "H100-SXM", "fp8", tp, 1,
                            "auto", engine, interconnect)


@pytest.mark.parametrize(("tp", "tokens", "hops"), [
    (8, 16, 2.0),    # 256 KB < 500 KB: ONESHOT, one barrier
    (8, 256, 4.0),   # 4.2 MB: TWOSHOT, two barriers
    (4, 32, 2.0),    # 524 KB < 1 MB at TP4: ONESHOT
    (4, 128, 4.0),   # 2.1 MB at TP4: TWOSHOT
])
def test_trtllm_custom_all_reduce_latency_is_its_barriers_not_ring_hops(tp: int, tokens: int, hops: float) -> None:
    """allreducePlugin.cpp selectImplementation: below the workspace a TP4/TP8 all-reduce runs one- or two-shot
    (one or two barriers), never NCCL's 2(tp-1)-hop ring."""
    trt, ring = _sm("tensorrt-llm", tp), _sm("vllm", tp)
    assert trt.custom_allreduce and not ring.custom_allreduce
    m = tokens * HIDDEN_BYTES
    lat = trt.hop_latency_s
    if hops == 2.0:  # one-shot: every GPU reads the whole message from each peer
        expect = hops * lat + (tp - 1) * m / trt.link_bytes_per_s
    else:  # two-shot: a ring's bytes
        expect = hops * lat + 2.0 * (tp - 1) / tp * m / trt.link_bytes_per_s
    assert trt.allreduce_s(tokens) == pytest.approx(expect)
    assert ring.allreduce_s(tokens) == pytest.approx(2.0 * (tp - 1) * lat + 2.0 * (tp - 1) / tp * m
                                                     / ring.link_bytes_per_s)


def test_trtllm_all_reduce_beyond_its_workspace_is_nccl() -> None:
    """getMaxRequiredWorkspaceSize: 8 MB beyond TP2 (16 MB at TP2); larger messages fall back to NCCL's ring."""
    trt, ring = _sm("tensorrt-llm", 8), _sm("vllm", 8)
    tokens = 8e6 / HIDDEN_BYTES + 1
    assert trt.allreduce_s(tokens) == pytest.approx(ring.allreduce_s(tokens))
    assert trt.allreduce_s(tokens - 2) < ring.allreduce_s(tokens - 2)


def test_trtllm_tp2_one_shot_costs_a_tp2_ring_and_pcie_stays_a_ring() -> None:
    """A TP2 one-shot (one barrier, the peer's whole message) moves what a TP2 ring does; without NVLink
    the plugin's peer-to-peer kernels are not priced."""
    assert _sm("tensorrt-llm", 2).allreduce_s(64) == pytest.approx(_sm("vllm", 2).allreduce_s(64))
    assert not _sm("tensorrt-llm", 4, "pcie").custom_allreduce


def test_a_tp8_trtllm_decode_step_spends_less_on_all_reduce_than_a_ring() -> None:
    trt, ring = _sm("tensorrt-llm", 8), _sm("vllm", 8)
    assert trt.parts(64, 1024.0)[2] < 0.5 * ring.parts(64, 1024.0)[2]


def test_trtllm_kv_pool_is_a_fraction_of_the_memory_left_after_the_engine() -> None:
    """kvCacheManager.cpp: freePrimaryMemBytes = finalFreeMem * freeMemFraction (free after the engine loads),
    where vLLM's --gpu-memory-utilization bounds everything: Llama-2-70B FP16 on 2xH100 keeps
    0.9 x (80 - weights - overhead) GiB of KV per GPU, not 0.9 x 80 - weights - overhead."""
    from sizing.perf.memory import memory_fit
    from sizing.perf.replica import ReplicaConfig
    model = CAT.model("llama-2-70b") if "llama-2-70b" in {m.short_name for m in CAT.models.values()} \
        else CAT.model("llama-3.1-70b-instruct")
    trt = memory_fit(CAT, ReplicaConfig(model=model, gpu="H100-SXM", precision="bf16", tp=2,
                                        engine="tensorrt-llm"), 2176)
    vllm = memory_fit(CAT, ReplicaConfig(model=model, gpu="H100-SXM", precision="bf16", tp=2, engine="vllm"), 2176)
    free = trt.gpu_memory_gib_per_gpu - trt.weights_gib_per_gpu - trt.overhead_gib_per_gpu
    assert trt.kv_cache_gib_per_gpu == pytest.approx(0.9 * free)
    assert trt.kv_cache_gib_per_gpu > 1.5 * vllm.kv_cache_gib_per_gpu
