"""Typed loaders and lookups over the catalog data files (sizing/data/*.csv).

Every row keeps its `source` and `as_of`. Lookups accept names case-insensitively and
suggest near misses ("did you mean H100-SXM?"). A catalog directory given by the user
(`--catalog DIR`, `$LLMCAP_CATALOG_DIR`, or the user cache written by
`llmcap catalog refresh`) overrides the bundled files it contains; the rest stay bundled.

Every table in sizing/data is read here and nowhere else, each file checked against
sizing/data/schema.yaml on load (sizing.catalog.schema: a bad row is one CatalogDataError line naming
the file, the row and the column).
"""

from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from sizing.catalog.calibration import CALIBRATION_FILE, Calibration, load_calibration
from sizing.catalog.paths import BUNDLED_DIR, USER_CACHE_DIR
from sizing.catalog.records import (
    ALL_REGIONS,
    ApiModel,
    ApiPrice,
    AwsGpuName,
    CheckpointFacts,
    CpuInstance,
    DaemonSetRequest,
    EngineDefaults,
    Gpu,
    Instance,
    Interconnect,
    ModelArch,
    NetworkCards,
    PlatformPrice,
    PlatformSetting,
    PrecisionFormat,
    Price,
    QuotaFamily,
    SystemPod,
    daemonset_from_row,
    flag,
    model_from_row,
    opt_float,
    opt_int,
    platform_setting_from_row,
    system_pod_from_row,
)
from sizing.catalog.schema import read_table
from sizing.errors import CatalogDataError, CatalogLookupError

# engines.csv memory_fraction_covers (records.EngineDefaults): what an engine's memory fraction flag bounds
MEMORY_FRACTION_SCOPES = ("all", "weights-kv", "free")


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def suggestions(name: str, choices: list[str], n: int = 3) -> list[str]:
    """The choices nearest to `name`, most similar first: those containing it (ignoring case and
    punctuation) ahead of the rest, then by difflib similarity of the normalised names."""
    key, tail = _norm(name), _norm(name.rsplit("/", 1)[-1])
    if not key:
        return []
    scored = []
    for c in dict.fromkeys(choices):
        nc, ctail = _norm(c), _norm(c.rsplit("/", 1)[-1])
        ratio = max(difflib.SequenceMatcher(None, key, nc).ratio(), difflib.SequenceMatcher(None, tail, ctail).ratio())
        contains = key in nc or nc in key or bool(tail) and tail in ctail
        if contains or ratio >= 0.6:
            scored.append((not contains, -ratio, len(c), c))
    return [c for *_k, c in sorted(scored)[:n]]


def _suggest(name: str, choices: list[str]) -> str:
    close = suggestions(name, choices)
    if close:
        return " (did you mean " + " or ".join(close) + "?)"
    return ""


@dataclass
class Catalog:
    """All catalog tables, read from `directory` with bundled fallbacks per file."""

    directory: Path | None = None
    overridden: list[str] = field(default_factory=list)

    def _path(self, name: str) -> Path:
        if self.directory is not None and (self.directory / name).is_file():
            if name not in self.overridden:
                self.overridden.append(name)
            return self.directory / name
        return BUNDLED_DIR / name

    def rows(self, name: str) -> list[dict[str, str]]:
        """The rows of table `name` (the override's file, else the bundled one), checked against its
        schema (sizing/data/schema.yaml)."""
        return read_table(self._path(name), name)

    @cached_property
    def _calibration_file(self) -> str | None:
        p = self._path(CALIBRATION_FILE.name)
        return None if p == CALIBRATION_FILE else str(p)

    @property
    def calibration(self) -> Calibration:
        """The performance model's fitted constants: the override directory's `perf_calibration.json`
        when it has one, else the bundled fit (or the fit in progress while bench/calibrate.py runs)."""
        return load_calibration(self._calibration_file)

    # --- tables -------------------------------------------------------------------------
    @cached_property
    def gpus(self) -> dict[str, Gpu]:
        out = {}
        for r in self.rows("gpus.csv"):
            out[r["gpu"]] = Gpu(
                name=r["gpu"], architecture=r["architecture"], memory_gib=float(r["memory_gib"]),
                memory_bandwidth_gbs=float(r["memory_bandwidth_gbs"]),
                bf16_dense_tflops=opt_float(r["bf16_dense_tflops"]),
                fp16_dense_tflops=opt_float(r["fp16_dense_tflops"]),
                fp8_dense_tflops=opt_float(r["fp8_dense_tflops"]), fp4_dense_tflops=opt_float(r["fp4_dense_tflops"]),
                int8_dense_tops=opt_float(r["int8_dense_tops"]), fp8_supported=flag(r["fp8_supported"]),
                bf16_supported=flag(r["bf16_supported"]), nvlink_bandwidth_gbs=opt_float(r["nvlink_bandwidth_gbs"]),
                tdp_w=opt_float(r["tdp_w"]), source=r["source"], as_of=r["as_of"])
        return out

    @cached_property
    def instances(self) -> dict[str, Instance]:
        out = {}
        for r in self.rows("instances.csv"):
            out[r["instance_type"]] = Instance(
                instance_type=r["instance_type"], family=r["family"], gpu=r["gpu"],
                gpu_count=float(r["gpu_count"]), gpu_memory_gib_each=float(r["gpu_memory_gib_each"]),
                vcpus=int(r["vcpus"]), memory_gib=float(r["memory_gib"]),
                local_nvme_gb=opt_int(r["local_nvme_gb"]) or 0, network_gbps=opt_float(r["network_gbps"]),
                efa=flag(r["efa"]), gpu_interconnect=r["gpu_interconnect"], source=r["source"], as_of=r["as_of"])
        return out

    @cached_property
    def prices(self) -> dict[tuple[str, str, str], Price]:
        """(instance_type, region, purchase) -> Price."""
        out = {}
        for r in self.rows("prices.csv"):
            p = Price(r["instance_type"], r["region"], r["purchase"], float(r["usd_per_hour"]), r["source"], r["as_of"])
            out[(p.instance_type, p.region, p.purchase)] = p
        return out

    @cached_property
    def offerings(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """(instance_type, region) -> availability-zone IDs that offer it (e.g. use1-az1)."""
        acc: dict[tuple[str, str], list[str]] = {}
        for r in self.rows("offerings.csv"):
            acc.setdefault((r["instance_type"], r["region"]), []).append(r["availability_zone_id"])
        return {k: tuple(sorted(v)) for k, v in acc.items()}

    @cached_property
    def models(self) -> dict[str, ModelArch]:
        from sizing.catalog.architectures import complete

        return {r["hf_id"]: complete(model_from_row(r)) for r in self.rows("models.csv")}

    @cached_property
    def api_prices(self) -> list[ApiPrice]:
        out = []
        for r in self.rows("api_prices.csv"):
            i, o = opt_float(r["input_usd_per_mtok"]), opt_float(r["output_usd_per_mtok"])
            if i is None or o is None:
                continue  # a known gap, kept in the data file as an empty row
            out.append(ApiPrice(r["model"], r["provider"], r["provider_model_id"], i, o, r["source"], r["as_of"],
                                r["genai_prices_provider_id"].strip(), opt_float(r.get("cache_read_usd_per_mtok", ""))))
        return out

    @cached_property
    def api_models(self) -> tuple[ApiModel, ...]:
        return tuple(ApiModel(r["api_model"], float(r["params_active_b"]), float(r["params_total_b"]),
                              tuple(x for x in r["exact_hf_ids"].split(";") if x)) for r in self.rows("api_models.csv"))

    @cached_property
    def platform_prices(self) -> dict[tuple[str, str], PlatformPrice]:
        """(item, region) -> a platform unit price. Region `*` is a price AWS charges alike in every commercial
        region (the row's source says so); a region's own row wins over it."""
        return {(r["item"], r["region"]): PlatformPrice(r["item"], r["unit"], float(r["usd"]), r["region"],
                                                        r["source"], r["as_of"])
                for r in self.rows("platform_prices.csv")}

    def platform_price(self, item: str, region: str) -> PlatformPrice | None:
        """The price of platform `item` in `region`: the region's row, else the every-region (`*`) row, else None."""
        return self.platform_prices.get((item, region)) or self.platform_prices.get((item, ALL_REGIONS))

    @cached_property
    def precisions(self) -> dict[str, PrecisionFormat]:
        return {r["precision"]: PrecisionFormat(
            name=r["precision"], weight_bits=int(r["weight_bits"]), group_size=opt_int(r["group_size"]) or 0,
            scale_bits=opt_int(r["scale_bits"]) or 0, quantizes_embeddings=flag(r["quantizes_embeddings"]),
            activation_dtype_native=r["activation_dtype_native"],
            native_activation_archs=tuple(a for a in r["native_activation_archs"].split(";") if a),
            supported_archs=tuple(a for a in r["supported_archs"].split(";") if a),
            fallback_on_other_archs=r["fallback_on_other_archs"],
            needs_prequantized_checkpoint=flag(r["needs_prequantized_checkpoint"]),
            vllm_quantization=r["vllm_quantization"],
            source=r["source"], as_of=r["as_of"]) for r in self.rows("precisions.csv")}

    @cached_property
    def engines(self) -> dict[str, EngineDefaults]:
        for r in self.rows("engines.csv"):
            if r["memory_fraction_covers"] not in MEMORY_FRACTION_SCOPES:
                raise CatalogDataError(f"{self._path('engines.csv')} row {r['engine']!r}: memory_fraction_covers "
                                       f"{r['memory_fraction_covers']!r} is not one of "
                                       f"{', '.join(MEMORY_FRACTION_SCOPES)}")
        return {r["engine"]: EngineDefaults(
            engine=r["engine"], default_max_num_seqs=int(r["default_max_num_seqs"]),
            default_max_num_batched_tokens=int(r["default_max_num_batched_tokens"]),
            default_gpu_memory_utilization=float(r["default_gpu_memory_utilization"]),
            cuda_context_gib_per_gpu=float(r["cuda_context_gib_per_gpu"]),
            cuda_graphs_gib_per_gpu=float(r["cuda_graphs_gib_per_gpu"]),
            awq_unfused_dequantize_min_tokens=(int(float(r["awq_unfused_dequantize_min_tokens"]))
                                               if r["awq_unfused_dequantize_min_tokens"] else None),
            fp8_moe_experts_at_16_bit_rate=flag(r["fp8_moe_experts_at_16_bit_rate"]),
            profile_sampler_bytes_per_logit=(float(r["profile_sampler_bytes_per_logit"])
                                             if r["profile_sampler_bytes_per_logit"] else None),
            memory_fraction_covers=r["memory_fraction_covers"],
            kv_reserved_to_completion=flag(r["kv_reserved_to_completion"]),
            source=r["source"], as_of=r["as_of"]) for r in self.rows("engines.csv")}

    def engine_kernels_per_layer(self, engine: str, version: tuple[int, int] | None, model: ModelArch) -> int:
        """Kernels per decoder layer per step that `engine` at `version` (major, minor) launches for this
        model's layer kind, where engine_kernels.csv counts them (its source: the engine's own code); 0
        elsewhere (no version, a later version, another layer kind: the kernel count is then not a term)."""
        if version is None or not (model.is_mla and model.is_moe):
            return 0
        for r in self.rows("engine_kernels.csv"):
            below = tuple(int(x) for x in r["version_below"].split("."))
            if r["engine"] == engine and r["layer"] == "deepseek_mla_moe" and version < below:
                return int(r["kernels_per_layer"])
        return 0

    def engine_prefill_budget(self, engine: str, version: tuple[int, int] | None, model: ModelArch,
                              chunked_prefill_flag: bool) -> int | None:
        """Prompt tokens per step (max_num_batched_tokens) that `engine` at `version` (major, minor)
        picks by itself for this model's attention kind, with chunked prefill at its default
        (`chunked_prefill_flag` False) or asked for (True), where engine_prefill_budget.csv reads it in
        the engine's code; None elsewhere (the engine's usual default applies). `max_model_len` there is
        max(max_position_embeddings, 2048) tokens."""
        r = self._prefill_row(engine, version, model, chunked_prefill_flag)
        if r is None or not r["max_num_batched_tokens"]:
            return None
        v = r["max_num_batched_tokens"]
        return max(model.max_position_embeddings, 2048) if v == "max_model_len" else int(v)

    def engine_prefill_only_steps(self, engine: str, version: tuple[int, int] | None, model: ModelArch,
                                  mixing_flag: bool) -> bool:
        """Whether `engine` at `version` runs prompts in prefill-only steps and decodes only when none wait
        (engine_prefill_budget.csv, read in its scheduler), with its mixing flag (vLLM
        --enable-chunked-prefill, SGLang --enable-mixed-chunk) passed or not; False where the table
        has no row (the engine mixes decodes into its prefill steps)."""
        r = self._prefill_row(engine, version, model, mixing_flag)
        return r is not None and r["prefill_only_steps"] == "yes"

    def _prefill_row(self, engine: str, version: tuple[int, int] | None, model: ModelArch,
                     flag: bool) -> dict[str, str] | None:
        if version is None:
            return None
        want = "flag" if flag else "default"
        for r in self.rows("engine_prefill_budget.csv"):
            below = tuple(int(x) for x in r["version_below"].split("."))
            kind_ok = r["attention"] == "any" or (r["attention"] == "mla" and model.is_mla)
            if r["engine"] == engine and kind_ok and r["flag"] == want and version < below:
                return r
        return None

    def cuda_graph_max_batch(self, engine: str, version: tuple[int, int] | None, gpu_memory_gib: float,
                             tp: int) -> float:
        """The largest decode batch (sequences) `engine` at `version` (major, minor; None: its newest
        listed) runs in a captured CUDA graph by default on a GPU of `gpu_memory_gib` at this TP width,
        where engine_cuda_graphs.csv reads it in the engine's code; a larger batch decodes eagerly.
        Unlisted engines or versions: unbounded (inf)."""
        rows = [r for r in self.rows("engine_cuda_graphs.csv") if r["engine"] == engine
                and (version is None or version >= tuple(int(x) for x in r["version_from"].split(".")))]
        for bound in sorted({float(r["gpu_memory_below_gib"]) for r in rows}):
            if gpu_memory_gib < bound:
                fit = [r for r in rows if float(r["gpu_memory_below_gib"]) == bound and int(r["tp_from"]) <= tp]
                if fit:
                    return float(max(fit, key=lambda r: int(r["tp_from"]))["max_batch"])
        return math.inf

    def engine_state_pool(self, engine: str, version: tuple[int, int] | None) -> tuple[float, int] | None:
        """(state_memory_ratio, states_per_running_request) of `engine` at `version` (None: its newest
        listed) for a hybrid model's states, where engine_state_pool.csv reads them in the engine's code;
        None where it pools states and KV together."""
        for r in self.rows("engine_state_pool.csv"):
            if r["engine"] == engine and (version is None or version >= tuple(
                    int(x) for x in r["version_from"].split("."))):
                return float(r["state_memory_ratio"]), int(r["states_per_running_request"])
        return None

    # --- the platform under the GPUs ------------------------------------------------------
    @cached_property
    def platform(self) -> dict[str, PlatformSetting]:
        """platform.csv: the platform's defaults and rules by item."""
        return {r["item"]: platform_setting_from_row(r) for r in self.rows("platform.csv")}

    def setting(self, item: str) -> str:
        """A platform.csv value as text; a CatalogDataError naming the file when the row is missing."""
        row = self.platform.get(item)
        if row is None:
            raise CatalogDataError(f"{self._path('platform.csv')}: no row {item!r}; add it (the bundled "
                                   "platform.csv has it) or remove the file so the bundled one is read")
        return row.value

    def number(self, item: str) -> float:
        """A platform.csv value as a number (its unit is in the row)."""
        v = self.setting(item)
        try:
            return float(v)
        except ValueError:
            raise CatalogDataError(f"{self._path('platform.csv')} row {item!r}: value {v!r} is not a number") \
                from None

    @cached_property
    def cpu_instances(self) -> dict[tuple[str, str, str], CpuInstance]:
        """(instance_type, region, purchase) -> a CPU instance type for the system nodes."""
        out = {}
        for r in self.rows("cpu_instance_prices.csv"):
            c = CpuInstance(r["instance_type"], r["region"], r["purchase"], float(r["usd_per_hour"]), int(r["vcpus"]),
                            float(r["memory_gib"]), r["source"], r["as_of"])
            out[(c.instance_type, c.region, c.purchase)] = c
        return out

    def cpu_instance(self, instance_type: str, region: str | None = None,
                     purchase: str = "on-demand") -> CpuInstance | None:
        """The CPU instance row for `region` (any region's row when None: vCPUs and memory are the same)."""
        for (t, r, p), c in self.cpu_instances.items():
            if t == instance_type and p == purchase and region in (None, r):
                return c
        return None

    @cached_property
    def system_pods(self) -> dict[str, SystemPod]:
        return {r["component"]: system_pod_from_row(r) for r in self.rows("system_pods.csv")}

    @cached_property
    def allocatable_terms(self) -> dict[str, float]:
        """node_allocatable.csv: the terms of the kubelet allocatable model, by item (units in the file)."""
        return {r["item"]: float(r["value"]) for r in self.rows("node_allocatable.csv")}

    def allocatable_term(self, item: str) -> float:
        t = self.allocatable_terms
        if item not in t:
            raise CatalogDataError(f"{self._path('node_allocatable.csv')}: no row {item!r}; add it (the bundled "
                                   "node_allocatable.csv has it) or remove the file so the bundled one is read")
        return t[item]

    @cached_property
    def node_daemonsets(self) -> tuple[DaemonSetRequest, ...]:
        """Every row of node_daemonsets.csv (`on_gpu_nodes` says which run on GPU nodes)."""
        return tuple(daemonset_from_row(r) for r in self.rows("node_daemonsets.csv"))

    @cached_property
    def interconnects(self) -> dict[str, Interconnect]:
        """GPU name -> its PCIe link (interconnects.csv)."""
        return {r["gpu"]: Interconnect(r["gpu"], float(r["pcie_bandwidth_gbs_per_direction"]), r["source"],
                                       r["as_of"]) for r in self.rows("interconnects.csv")}

    @cached_property
    def network_cards(self) -> dict[str, NetworkCards]:
        """instance type -> its network cards and the primary card's bandwidth (network_cards.csv)."""
        return {r["instance_type"]: NetworkCards(r["instance_type"], int(r["network_cards"]),
                                                 float(r["primary_card_gbps"]), r["source"], r["as_of"])
                for r in self.rows("network_cards.csv")}

    def engine_has_aws_ofi_nccl(self, engine: str) -> bool:
        """The engine's pinned image carries aws-ofi-nccl (nccl_net_plugins.csv `yes`; no, unknown or no row: no)."""
        return any(r["engine"] == engine and r["aws_ofi_nccl"] == "yes" for r in self.rows("nccl_net_plugins.csv"))

    @cached_property
    def checkpoints(self) -> dict[str, CheckpointFacts]:
        """hf_id -> its pinned revision and safetensors bytes (checkpoints.csv)."""
        gated = {"yes": True, "no": False}
        return {r["hf_id"]: CheckpointFacts(r["hf_id"], r["revision"].strip() or None,
                                            opt_int(r["safetensors_bytes"]), r["source"],
                                            gated.get(r["gated"].strip().lower()))
                for r in self.rows("checkpoints.csv")}

    @cached_property
    def quota_families(self) -> list[QuotaFamily]:
        return [QuotaFamily(r["family_prefix"], r["purchase"], r["quota_name"])
                for r in self.rows("quota_families.csv")]

    @cached_property
    def aws_gpu_names(self) -> list[AwsGpuName]:
        return [AwsGpuName(r["aws_gpu_name"], opt_int(r["min_gpu_memory_mib"]) or 0, opt_int(r["max_gpu_memory_mib"]),
                           r["gpu"]) for r in self.rows("aws_gpu_names.csv")]

    def precision(self, name: str) -> PrecisionFormat:
        if name in self.precisions:
            return self.precisions[name]
        raise CatalogLookupError(f"unknown precision {name!r}{_suggest(name, list(self.precisions))}; "
                                 f"known: {', '.join(self.precisions)}")

    def engine(self, name: str) -> EngineDefaults:
        if name in self.engines:
            return self.engines[name]
        raise CatalogLookupError(f"unknown engine {name!r}; known: {', '.join(self.engines)}")

    def gpu_usable_memory_gib(self, gpu: str) -> float:
        """Memory per GPU that the driver exposes (GiB): AWS's per-instance figure where the GPU
        is sold on AWS (e.g. 22.35 GiB for a 24 GB L4), else the datasheet GB converted to GiB."""
        g = self.gpu(gpu)
        aws = [i.gpu_memory_gib_each for i in self.instances.values() if i.gpu == g.name and i.gpu_count >= 1]
        return min(aws) if aws else g.memory_gib * 1e9 / 2**30

    @cached_property
    def regions(self) -> list[str]:
        return sorted({region for (_, region) in self.offerings})

    # --- lookups ------------------------------------------------------------------------
    def gpu(self, name: str) -> Gpu:
        by_lower = {k.lower(): v for k, v in self.gpus.items()}
        if name.lower() in by_lower:
            return by_lower[name.lower()]
        raise CatalogLookupError(f"unknown GPU {name!r}{_suggest(name, list(self.gpus))}; "
                                 f"known: {', '.join(self.gpus)}")

    def instance(self, name: str) -> Instance:
        if name in self.instances:
            return self.instances[name]
        raise CatalogLookupError(f"unknown instance type {name!r}{_suggest(name, list(self.instances))}")

    def model(self, name: str) -> ModelArch:
        """By HF id or short name (case-insensitive), or a path to a config.json."""
        key = name.strip().lower()
        for m in self.models.values():
            if key in (m.hf_id.lower(), m.short_name.lower(), m.hf_id.split("/")[-1].lower()):
                return m
        local = Path(name)
        if name.endswith(".json") or os.path.sep in name and (local.exists() or local.is_symlink()) \
                or local.is_dir():
            from sizing.catalog.hf_config import model_from_config_file

            return model_from_config_file(local)  # a directory means its config.json
        names = [m.hf_id if "/" in name else m.short_name for m in self.models.values()]
        hint = _suggest(name, names)
        if "/" in name:  # a Hugging Face id: the hub answers before "unknown model", however close a catalog name
            from sizing.catalog.hf_config import model_from_hub

            try:
                return model_from_hub(name, known=sorted(m.short_name for m in self.models.values()))
            except CatalogLookupError as e:
                if not hint:
                    raise
                raise CatalogLookupError(f"unknown model {name!r}{hint}; {e.problems[0]}") from None
        raise CatalogLookupError(
            f"unknown model {name!r}{hint}; use a catalog name (llmcap models), a Hugging Face id, "
            "or a path to a config.json")

    def price(self, instance_type: str, region: str, purchase: str) -> Price | None:
        return self.prices.get((instance_type, region, purchase))

    def offered_azs(self, instance_type: str, region: str) -> tuple[str, ...]:
        return self.offerings.get((instance_type, region), ())

    def regions_offering(self, instance_type: str) -> list[str]:
        return sorted(r for (t, r) in self.offerings if t == instance_type)

    @cached_property
    def priced_regions(self) -> list[str]:
        return sorted({region for (_, region, _) in self.prices})

    def check_region(self, region: str) -> None:
        known = sorted(set(self.regions) | set(self.priced_regions))
        if region not in known:
            raise CatalogLookupError(f"unknown region {region!r}{_suggest(region, known)}")

    def region_gap(self, region: str, purchase: str) -> str | None:
        """One line when the catalog has no AZ offerings or no `purchase` prices for `region`, else None."""
        where = f"the catalog in {self.directory}" if self.directory else "the bundled catalog"
        fix = (f"run `llmcap catalog refresh --region {region}` (AWS credentials) and plan again, "
               "or pass --catalog DIR")
        if region not in self.regions:
            return f"no AZ offerings for {region} in {where} (it knows {len(self.regions)} regions); {fix}"
        kinds = ("on-demand", "spot") if purchase == "mixed" else (purchase,)
        if not any(r == region and p in kinds for (_, r, p) in self.prices):
            return f"no {'/'.join(kinds)} prices for {region} in {where}; {fix}"
        return None

    def as_of_lines(self, region: str | None = None) -> list[str]:
        """One assumption line per table: where its numbers come from and their dates. With `region`,
        the price line names that region's on-demand price source and date."""
        def dates(vals: list[str]) -> str:
            s = sorted({v for v in vals if v})
            return s[0] if len(s) == 1 else f"{s[0]} .. {s[-1]}" if s else "undated"
        od = [p for p in self.prices.values() if p.purchase == "on-demand" and region in (None, p.region)]
        price_line = f"instance prices: {dates([p.as_of for p in od])}"
        if region is not None:
            sources = "; ".join(sorted({p.source for p in od})) or "none"
            price_line = f"instance prices ({region}, on-demand): {sources}, as of {dates([p.as_of for p in od])}"
        return [
            f"GPU specs: datasheets, as of {dates([g.as_of[:10] for g in self.gpus.values()])}",
            f"instance specs: {dates([i.as_of for i in self.instances.values()])}",
            price_line,
            f"hosted-API prices: {dates([a.as_of for a in self.api_prices])}",
        ]


_DEFAULT: dict[str, Catalog] = {}


def load_catalog(directory: str | Path | None = None) -> Catalog:
    """The catalog for `directory`, else $LLMCAP_CATALOG_DIR, else the user cache, else bundled."""
    if directory is None:
        env = os.environ.get("LLMCAP_CATALOG_DIR")
        if env:
            directory = env
        elif USER_CACHE_DIR.is_dir():
            directory = USER_CACHE_DIR
    key = str(directory or "")
    if key not in _DEFAULT:
        d = Path(directory) if directory else None
        if d is not None and not d.is_dir():
            raise CatalogLookupError(f"catalog directory {str(d)!r} does not exist")
        # resolved once: a refreshed cache is a symlink to its generation, and one Catalog reads one generation
        _DEFAULT[key] = Catalog(d.resolve() if d is not None else None)
    return _DEFAULT[key]
