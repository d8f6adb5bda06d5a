"""Fitted constants of the performance model (`perf_calibration.json`).

Owns: the constants' priors and bounds (PARAMS) and reading `perf_calibration.json` (written only by
`bench/calibrate.py`: each constant with its prior, bounds, fitted value, unit and the rows that pin
it, plus the fit date, the source files and the held-out error). The perf modules get it as
`Catalog.calibration`, so a `--catalog DIR` holding its own `perf_calibration.json` changes the
model. Must not import pulumi, boto3, numpy, the perf modules or the planner.

Units: efficiencies are dimensionless fractions of a datasheet peak; overheads in ms per engine
step, µs per running sequence per step, ms per request; all-reduce latency in µs per ring hop;
bandwidths in GB/s (1e9 bytes/s).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sizing.catalog.paths import BUNDLED_DIR
from sizing.errors import PerfModelError

if TYPE_CHECKING:
    pass

CALIBRATION_FILE = BUNDLED_DIR / "perf_calibration.json"

ENGINES = ("tensorrt-llm", "vllm", "sglang", "tgi")


@dataclass(frozen=True)
class ParamSpec:
    """One fitted constant: its prior (the value with no data), hard bounds, and the prior's spread
    (sigma of log(value / prior) in the fit's penalty)."""

    prior: float
    lo: float
    hi: float
    unit: str
    meaning: str
    sigma: float = 0.5
    fixed: str = ""  # why the constant stays at its prior instead of being fitted ("" = fitted)


# The constants of the model. Priors are physical round numbers (achievable HBM bandwidth of a
# streaming kernel ~85 % of datasheet, dense-GEMM MFU ~60 %, a few µs per NVLink hop), not fits.
PARAMS: dict[str, ParamSpec] = {
    "hbm_bandwidth_efficiency": ParamSpec(0.85, 0.70, 0.93, "fraction of datasheet bandwidth",
                                          "achievable HBM bandwidth (A100, H100, H200, B200)", 0.1),
    "gddr_bandwidth_efficiency": ParamSpec(0.85, 0.70, 0.93, "fraction of datasheet bandwidth",
                                           "achievable GDDR6 bandwidth (T4, A10G, L4, L40S)", 0.1),
    "gemm_mfu": ParamSpec(0.60, 0.35, 0.85, "fraction of dense tensor peak",
                          "16-bit dense GEMM efficiency of the reference engine (TensorRT-LLM)", 0.3),
    "attention_efficiency": ParamSpec(0.7, 0.2, 1.0, "multiplier on 16-bit gemm_mfu x engine factor",
                                      "attention's QK/AV products (FlashAttention-style kernels: softmax, masking "
                                      "and short head dims keep them below a dense GEMM's MFU)", 0.4),
    "fp8_w8a8_efficiency": ParamSpec(0.80, 0.50, 1.00, "multiplier on gemm_mfu at the FP8 peak",
                                     "FP8 W8A8 GEMMs (Ada/Hopper/Blackwell) reach less of their 2x peak", 0.3),
    "marlin_w4a16_efficiency": ParamSpec(0.70, 0.30, 1.00, "multiplier on gemm_mfu",
                                         "Marlin W4A16 (AWQ/GPTQ) dequantizing GEMMs", 0.4),
    "fp_weight_only_efficiency": ParamSpec(0.70, 0.30, 1.00, "multiplier on gemm_mfu",
                                           "FP8-Marlin on Ampere and MXFP4/NVFP4 weight-only (Marlin/Triton) "
                                           "off Blackwell", 0.4),
    "moe_expert_efficiency": ParamSpec(0.60, 0.25, 1.00, "multiplier on expert-GEMM efficiency",
                                       "grouped expert GEMMs with routing imbalance (hottest expert sets the time)",
                                       0.4),
    "expert_shard_width_half": ParamSpec(256.0, 32.0, 256.0, "intermediate columns per GPU",
                                         "an expert GEMM whose per-GPU shard of the expert's intermediate dimension is "
                                         "w wide runs at w / (w + this) of the wide-GEMM efficiency (tiles of 64-256 "
                                         "columns: a narrow shard, e.g. Qwen3-235B's 1,536 over TP8 = 192, wastes most "
                                         "of each tile's fixed cost); at most one widest tile: vLLM's tuned fused-MoE "
                                         "configs (model_executor/layers/fused_moe/configs/*.json, 0.7.3) use "
                                         "BLOCK_SIZE_N 16-256: a shard padded to whole tiles runs at >= w / (w + 256)",
                                         0.7),
    "engine_efficiency.vllm": ParamSpec(0.90, 0.50, 1.00, "multiplier on compute efficiency",
                                        "vLLM kernels relative to TensorRT-LLM", 0.3),
    "engine_efficiency.sglang": ParamSpec(0.90, 0.50, 1.00, "multiplier on compute efficiency",
                                          "SGLang kernels relative to TensorRT-LLM", 0.3),
    "engine_efficiency.tgi": ParamSpec(0.70, 0.30, 1.00, "multiplier on compute efficiency",
                                       "TGI 1.x kernels relative to TensorRT-LLM", 0.4),
    "step_overhead_ms.tensorrt-llm": ParamSpec(1.0, 0.2, 5.0, "ms per engine step",
                                               "CPU/scheduler/sampling time per step not hidden by the GPU",
                                               fixed="no source's predictions move by 0.5 % when it moves 10 % "
                                                     "(main's fit of 2026-12-01: 1.13, prior 1)"),
    "step_overhead_ms.vllm": ParamSpec(2.0, 0.2, 10.0, "ms per engine step",
                                       "CPU/scheduler/sampling time per step (hidden under GPU work with "
                                       "--async-scheduling)"),
    "step_overhead_ms.sglang": ParamSpec(2.0, 0.2, 10.0, "ms per engine step", "as for vLLM",
                                         fixed="one source (sgl060) moves by 1 % when it moves 10 % (main's "
                                               "fit of 2026-12-01: 1.85, prior 2)"),
    "step_overhead_ms.tgi": ParamSpec(5.0, 0.5, 30.0, "ms per engine step", "as for vLLM"),
    "step_overhead_per_seq_us": ParamSpec(20.0, 1.0, 200.0, "µs per running sequence per step",
                                          "per-sequence scheduling, detokenization and sampling in a Python "
                                          "engine (vLLM, SGLang, TGI's router and Python server)"),
    "step_overhead_per_seq_us.tensorrt-llm": ParamSpec(2.0, 0.1, 50.0, "µs per running sequence per step",
                                                       "TensorRT-LLM's batch manager: the same per-sequence work in "
                                                       "its C++ executor",
                                                       fixed="no source's predictions move by 0.5 % when it moves "
                                                             "10 % (fitted 2.09 on 2026-12-01, prior 2)"),
    "request_overhead_ms": ParamSpec(20.0, 2.0, 100.0, "ms per request, in TTFT",
                                     "HTTP, tokenization, admission and the first step's launch"),
    "frontend_ms_per_request": ParamSpec(3.0, 0.2, 20.0, "ms per request, serialized",
                                         "API-server time per request (HTTP parsing, tokenization, hand-off) that one "
                                         "server process spends in turn: paces a burst's admission"),
    "nvlink_hop_latency_us": ParamSpec(3.0, 1.0, 5.0, "µs per ring hop",
                                       "all-reduce latency over NVLink: 2(tp-1) hops per call; at most 5: NCCL's "
                                       "src/graph/tuning.cc hwLat for an NVLink ring is 0.6 (LL) / 1.9 (LL128) / 3.4 "
                                       "(Simple) µs per hop, beside a per-call baseLat of 6.6-14 µs (under 1 µs a hop "
                                       "over a TP8 ring's 14 hops)"),
    "pcie_latency_ratio": ParamSpec(3.0, 1.0, 30.0, "PCIe hop latency / NVLink hop latency (>= 1)",
                                    "PCIe all-reduce hops are never faster than NVLink ones",
                                    fixed="one source (hfsm) moves by < 1 % when it moves 10 % (main's fit of "
                                          "2026-12-01: 2.76, prior 3)"),
    "pcie_bandwidth_efficiency": ParamSpec(0.5, 0.2, 0.9, "fraction of per-direction PCIe bandwidth",
                                           "achieved all-reduce bus bandwidth over PCIe (through host bridges)",
                                           fixed="one source (trt013) moves by 0.6 % when it moves 10 % (main's "
                                                 "fit of 2026-12-01: 0.476, prior 0.5)"),
    "eager_launch_us_per_layer": ParamSpec(60.0, 10.0, 400.0, "µs per layer per step",
                                           "kernel launches when CUDA graphs are off (--enforce-eager)",
                                           fixed="only hfsm's eager TGI rows move it, one-for-one with "
                                                 "step_overhead_ms.tgi (both are per-step CPU time); fitting it "
                                                 "with that one held instead gave 14.8 / 18.0 / 24.4 % held out "
                                                 "(2026-12-01, prior 60)"),
    "graph_kernel_us": ParamSpec(5.0, 1.0, 10.0, "µs per kernel per step",
                                 "GPU time of one small kernel of a decode step (its launch gap inside a CUDA graph "
                                 "plus its shortest run), charged per kernel where sizing/data/engine_kernels.csv "
                                 "counts an engine version's kernels per layer (prior ASSUMED: a few µs)"),
    "roofline_sharpness": ParamSpec(1.0, 1.0, 12.0, "a in (mem^a + compute^a)^(1/a)",
                                    "how well memory traffic and math overlap inside a step",
                                    fixed="every fit ended on the lower bound 1 (prior 3): within one step the "
                                          "weight/KV streaming and the math add up rather than overlap, so the "
                                          "sum (a = 1) is the model"),
    "fitted_compute_tflops.A10G": ParamSpec(70.0, 30.0, 125.0, "TFLOPS dense 16-bit per GPU",
                                            "A10G has no NVIDIA datasheet figure (A10: 125); effective peak"),
}
FITTED = tuple(n for n, p in PARAMS.items() if not p.fixed)  # the constants bench/calibrate.py fits
# Fixed (not fitted) physical constants: a prior only.
NVLINK_BANDWIDTH_EFFICIENCY = 0.8  # NCCL all-reduce bus bandwidth ≈ 80 % of NVLink per direction


@dataclass(frozen=True)
class Calibration:
    """Fitted constants (name -> value, see PARAMS) plus the fit's record."""

    values: dict[str, float]
    fitted_compute_tflops: dict[str, float] = field(default_factory=dict)
    fitted_on: str = ""
    source_file: str = ""
    fit_error: dict[str, Any] = field(default_factory=dict)
    goodput_range: tuple[float, float] = (1.0, 1.0)  # (p10, p90) of measured/predicted, held out
    rows: int = 0  # published measurements fitted on

    def v(self, name: str) -> float:
        spec = PARAMS[name]
        return spec.prior if spec.fixed else self.values.get(name, spec.prior)

    def bandwidth_fraction(self, hbm: bool) -> float:
        return self.v("hbm_bandwidth_efficiency" if hbm else "gddr_bandwidth_efficiency")

    def engine_eff(self, engine: str) -> float:
        if engine == "tensorrt-llm":
            return 1.0
        if engine not in ENGINES:
            raise PerfModelError(f"no fitted efficiency for engine {engine!r}; known: {', '.join(sorted(ENGINES))}")
        return self.v(f"engine_efficiency.{engine}")

    def overhead_s(self, engine: str) -> float:
        return self.v(f"step_overhead_ms.{engine if engine in ENGINES else 'vllm'}") / 1000.0

    def overhead_per_seq_s(self, engine: str) -> float:
        if engine == "tensorrt-llm":
            return self.v("step_overhead_per_seq_us.tensorrt-llm") / 1e6
        return self.v("step_overhead_per_seq_us") / 1e6

    def hop_latency_s(self, interconnect: str) -> float:
        nv = self.v("nvlink_hop_latency_us") / 1e6
        return nv if interconnect == "nvlink" else nv * self.v("pcie_latency_ratio")

    def link_efficiency(self, interconnect: str) -> float:
        return NVLINK_BANDWIDTH_EFFICIENCY if interconnect == "nvlink" else self.v("pcie_bandwidth_efficiency")

    def summary(self) -> str:
        """One assumption line for a Plan: where the constants come from and how good they are."""
        err = self.fit_error.get("held_out", {})
        parts = ", ".join(f"{k} {v:.0%}" for k, v in err.items() if isinstance(v, float))
        return (f"performance model fitted {self.fitted_on} on {self.source_file}"
                + (f" (held-out median abs. error {parts})" if parts else ""))


def calibration_from_dict(d: dict[str, Any]) -> Calibration:
    p = d.get("parameters", {})
    values = {k: float(v["value"] if isinstance(v, dict) else v) for k, v in p.items()}
    tflops = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("fitted_compute_tflops.")}
    gr = d.get("goodput_range", {})
    return Calibration(values=values, fitted_compute_tflops=tflops, fitted_on=d.get("fitted_on", ""),
                       source_file=d.get("source_file", ""), fit_error=d.get("fit_error", {}),
                       goodput_range=(float(gr.get("p10", 1.0)), float(gr.get("p90", 1.0))),
                       rows=int(d.get("rows", 0)))


def prior_calibration() -> Calibration:
    """Every constant at its prior (what the model says with no measurements)."""
    return calibration_from_dict({"parameters": {k: s.prior for k, s in PARAMS.items()}})


_OVERRIDE: list[Calibration] = []


def override_calibration(cal: Calibration | None) -> None:
    """Use `cal` instead of the data file (bench/calibrate.py while fitting); None restores it.
    Callers must also clear sizing.perf.load's cache (sizing.perf.load.clear_caches)."""
    _OVERRIDE[:] = [cal] if cal is not None else []


def load_calibration(path: str | None = None) -> Calibration:
    """The fitted constants: an override while fitting, else the data file (cached json read)."""
    if _OVERRIDE and path is None:
        return _OVERRIDE[0]
    return _load_file(path)


@lru_cache(maxsize=4)
def _load_file(path: str | None) -> Calibration:
    p = Path(path) if path else CALIBRATION_FILE
    if not p.is_file():
        raise PerfModelError(f"performance calibration {str(p)!r} is missing; run `python bench/calibrate.py`")
    from sizing.catalog.schema import load_json

    return calibration_from_dict(load_json(p, CALIBRATION_FILE.name))
