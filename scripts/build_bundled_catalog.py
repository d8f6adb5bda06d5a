"""Build the bundled catalog in sizing/data/ from the project's reference material.

The only writer of sizing/data/{gpus,instances,prices,offerings,models,api_prices,platform_prices}.csv
and infra/data/efa_network_cards.csv.
Inputs: ../shared/reference/*.csv (on-demand prices: us-east-1 from aws_gpu_instances.csv, every
other region from aws_gpu_on_demand_by_region.csv, checked to agree on us-east-1; each row keeps its `source` and
`as_of`) and moto's per-AZ-ID instance type offerings (public AWS data moto ships; used for which AZs offer a type).

Run: python scripts/build_bundled_catalog.py [--reference DIR]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "sizing" / "data"
INFRA_DATA = ROOT / "infra" / "data"
GPU_NAME_FIXES = {"H100": "H100-SXM"}  # the p5 reference rows say "H100"; p5 carries the SXM part


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _write(name: str, fields: list[str], rows: list[dict[str, object]]) -> None:
    with (DATA / name).open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in fields})
    print(f"wrote {name}: {len(rows)} rows")


def build_gpus(ref: Path) -> None:
    rows = _read(ref / "gpus.csv")
    fields = [
        "gpu", "architecture", "memory_gib", "memory_bandwidth_gbs", "bf16_dense_tflops",
        "fp16_dense_tflops", "fp8_dense_tflops", "fp4_dense_tflops", "int8_dense_tops",
        "fp8_supported", "bf16_supported", "nvlink_bandwidth_gbs", "tdp_w", "halved_from_sparse",
        "source", "as_of", "notes",
    ]
    _write("gpus.csv", fields, rows)


def _interconnect(raw: str) -> str:
    return "nvlink" if raw.lower().startswith("nvlink") else "pcie"


def regional_on_demand(ref: Path, rows: list[dict[str, str]]) -> list[dict[str, object]]:
    """On-demand rows for every region but us-east-1 from aws_gpu_on_demand_by_region.csv (same source
    as the us-east-1 column of aws_gpu_instances.csv), for the instance types the catalog lists. Its
    us-east-1 rows must agree with that column row for row, else the two files are out of step."""
    by_region = _read(ref / "aws_gpu_on_demand_by_region.csv")
    ours = {r["instance_type"]: r for r in rows}
    east = {r["instance_type"]: r["on_demand_usd_per_hour"] for r in by_region if r["region"] == "us-east-1"}
    for t, r in ours.items():
        if east.get(t, "") != r["on_demand_usd_hr_us_east_1"]:
            raise SystemExit(f"aws_gpu_on_demand_by_region.csv: us-east-1 {t} is {east.get(t)!r}, "
                             f"aws_gpu_instances.csv says {r['on_demand_usd_hr_us_east_1']!r}")
    out: list[dict[str, object]] = [
        {"instance_type": r["instance_type"], "region": r["region"], "purchase": "on-demand",
         "usd_per_hour": r["on_demand_usd_per_hour"], "source": r["source"], "as_of": r["as_of"]}
        for r in by_region if r["instance_type"] in ours and r["region"] != "us-east-1"]
    out.sort(key=lambda r: (str(r["region"]), list(ours).index(str(r["instance_type"]))))
    return out


CAPACITY_BLOCK_ITEM = re.compile(r"^EC2 Capacity Block (?P<type>[a-z0-9-]+\.[a-z0-9]+)")


def capacity_block_rates(ref: Path, types: set[str]) -> list[dict[str, object]]:
    """Capacity Block USD per instance-hour from storage_and_misc.csv's "EC2 Capacity Block <type>" rows,
    with the row's date and notes (the one bundled rate is marked STALE there: blocks are re-priced often;
    `llmcap catalog refresh` reads DescribeCapacityBlockOfferings)."""
    out: list[dict[str, object]] = []
    for r in _read(ref / "storage_and_misc.csv"):
        m = CAPACITY_BLOCK_ITEM.match(r["item"])
        if m and m["type"] in types:
            out.append({"instance_type": m["type"], "region": r["region"], "purchase": "capacity-block",
                        "usd_per_hour": r["usd"], "source": r["source"], "as_of": r["as_of"]})
    return out


def build_instances_and_prices(ref: Path) -> list[str]:
    rows = _read(ref / "aws_gpu_instances.csv")
    inst, prices = [], []
    for r in rows:
        gpu = GPU_NAME_FIXES.get(r["gpu"], r["gpu"])
        inst.append({
            "instance_type": r["instance_type"], "family": r["family"], "gpu": gpu,
            "gpu_count": r["gpu_count"], "gpu_memory_gib_each": r["gpu_memory_gib_each"],
            "vcpus": r["vcpus"], "memory_gib": r["memory_gib"], "local_nvme_gb": r["local_nvme_gb"],
            "network_gbps": r["network_gbps"], "efa": r["efa"],
            "gpu_interconnect": _interconnect(r["gpu_interconnect"]),
            "gpu_interconnect_raw": r["gpu_interconnect"], "usage_classes": r["usage_classes"],
            "source": r["source"], "as_of": r["as_of"], "notes": r["notes"],
        })
        if r["on_demand_usd_hr_us_east_1"]:
            prices.append({
                "instance_type": r["instance_type"], "region": "us-east-1", "purchase": "on-demand",
                "usd_per_hour": r["on_demand_usd_hr_us_east_1"], "source": r["price_source"],
                "as_of": r["on_demand_as_of"],
            })
        if r["ri_1yr_std_noupfront_usd_hr_us_east_1"]:
            # vantage's yrTerm1Standard.noUpfront (reference README: "aws_gpu_instances.csv")
            prices.append({
                "instance_type": r["instance_type"], "region": "us-east-1", "purchase": "reserved-1yr",
                "usd_per_hour": r["ri_1yr_std_noupfront_usd_hr_us_east_1"],
                "source": r["price_source"] + " (1-year standard reserved, no upfront)",
                "as_of": r["on_demand_as_of"],
            })
        if r["skypilot_spot_min_usd_hr_us_east_1"]:
            prices.append({
                "instance_type": r["instance_type"], "region": "us-east-1", "purchase": "spot",
                "usd_per_hour": r["skypilot_spot_min_usd_hr_us_east_1"],
                "source": r["skypilot_source"] + " (minimum over regular us-east-1 AZs; one sample)",
                "as_of": "undated single sample (read 2026-11-29)",
            })
    _write("instances.csv", [
        "instance_type", "family", "gpu", "gpu_count", "gpu_memory_gib_each", "vcpus", "memory_gib",
        "local_nvme_gb", "network_gbps", "efa", "gpu_interconnect", "gpu_interconnect_raw",
        "usage_classes", "source", "as_of", "notes"], inst)
    prices += capacity_block_rates(ref, {r["instance_type"] for r in rows})
    prices += regional_on_demand(ref, rows)
    _write("prices.csv", ["instance_type", "region", "purchase", "usd_per_hour", "source", "as_of"], prices)
    return [r["instance_type"] for r in rows]


# The date of each moto release whose offering files the bundled catalog copies: offerings.csv's `as_of` is the
# date of the data, a fact of the release, never the day the build ran (date.today() there made every rebuild
# rewrite all 2,074 rows). moto 5.2.5: the PyPI wheel moto-5.2.5-py3-none-any.whl, whose zip entries
# (moto/ec2/resources/instance_type_offerings/..., moto-5.2.5.dist-info/METADATA) are dated 2026-10-27 22:45;
# read with `pip download moto==5.2.5 --no-deps` on 2026-12-03.
MOTO_RELEASE_DATES = {"5.2.5": "2026-10-27"}


def moto_data_date(version: str) -> str:
    """The release date (YYYY-MM-DD) of moto `version`'s offering data; an unknown release stops the build
    in one line naming the fix."""
    if version not in MOTO_RELEASE_DATES:
        raise SystemExit(f"moto {version} is installed but MOTO_RELEASE_DATES in scripts/build_bundled_catalog.py "
                         f"knows only {', '.join(sorted(MOTO_RELEASE_DATES))}: install one of those "
                         "(pip install moto==VERSION) or add this release with its PyPI date")
    return MOTO_RELEASE_DATES[version]


def build_offerings(types: list[str]) -> None:
    import moto  # dev dependency; only this offline script reads its data

    as_of = moto_data_date(moto.__version__)

    base = Path(moto.__file__).parent / "ec2" / "resources" / "instance_type_offerings" / "availability-zone-id"
    wanted = set(types)
    rows = []
    for f in sorted(base.glob("*.json.gz")):
        region = f.name.removesuffix(".json.gz")
        with gzip.open(f) as fh:
            offers = json.load(fh)
        src = f"moto {moto.__version__} ec2/resources/instance_type_offerings/availability-zone-id/{f.name}"
        for o in offers:
            if o["InstanceType"] in wanted:
                rows.append({
                    "instance_type": o["InstanceType"], "region": region, "availability_zone_id": o["Location"],
                    "source": src,
                    "as_of": as_of,
                })
    rows.sort(key=lambda r: (r["instance_type"], r["region"], r["availability_zone_id"]))
    _write("offerings.csv", ["instance_type", "region", "availability_zone_id", "source", "as_of"], rows)


def build_efa_network_cards(types: list[str]) -> None:
    """infra/data/efa_network_cards.csv: per EFA instance type, its network cards (one EFA interface
    each, `MaximumNetworkCards`, and `EfaInfo.MaximumEfaInterfaces`) from moto's copy of
    DescribeInstanceTypes; infra/aws/efa.py renders the launch template's interfaces from it."""
    import moto  # dev dependency; only this offline script reads its data

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path) as fh:
        info = json.load(fh)
    rows = []
    for t in types:
        net = info.get(t, {}).get("NetworkInfo", {})
        if net.get("EfaSupported"):
            rows.append({"instance_type": t, "network_cards": net.get("MaximumNetworkCards", 1),
                         "max_efa_interfaces": net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 1),
                         "source": f"moto {moto.__version__} ec2/resources/instance_types.json.gz "
                                   "(DescribeInstanceTypes NetworkInfo.MaximumNetworkCards, "
                                   "EfaInfo.MaximumEfaInterfaces)",
                         "as_of": f"moto {moto.__version__} (PyPI 2026-10)"})
    out = INFRA_DATA / "efa_network_cards.csv"
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["instance_type", "network_cards", "max_efa_interfaces", "source", "as_of"],
                           lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"wrote infra/data/efa_network_cards.csv: {len(rows)} rows")


def copy_as_is(ref: Path, src: str, dst: str) -> None:
    rows = _read(ref / src)
    _write(dst, list(rows[0].keys()), rows)


PLATFORM_EXTRA = ROOT / "scripts" / "data" / "platform_prices_extra.csv"


def build_platform_prices(ref: Path) -> None:
    """platform_prices.csv: the reference's us-east-1 unit prices (storage_and_misc.csv) with llmcap's curated
    additions (scripts/data/platform_prices_extra.csv, each row with its source): a row for region `*` (a price
    AWS charges alike in every commercial region) replaces the reference's row of that item; other rows
    (another region's price, an item the reference lacks) are added."""
    rows = _read(ref / "storage_and_misc.csv")
    extra = _read(PLATFORM_EXTRA)
    everywhere = {r["item"] for r in extra if r["region"] == "*"}
    out = [r for r in rows if r["item"] not in everywhere]
    for r in extra:
        i = next((n for n, o in enumerate(rows) if o["item"] == r["item"]), None)
        out.insert(min(i, len(out)) if r["region"] == "*" and i is not None else len(out), r)
    _write("platform_prices.csv", list(rows[0].keys()), out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    # the project's shared material beside the checkout (../shared), or beside its worktrees folder (../../shared)
    default = next((d / "shared" / "reference" for d in (ROOT.parent, ROOT.parent.parent)
                    if (d / "shared" / "reference").is_dir()), ROOT.parent / "shared" / "reference")
    ap.add_argument("--reference", type=Path, default=default)
    args = ap.parse_args(argv)
    if not (args.reference / "aws_gpu_instances.csv").is_file():
        raise SystemExit(f"--reference {args.reference}: no aws_gpu_instances.csv there; pass the folder that holds "
                         "the project's reference CSVs (../shared/reference)")
    DATA.mkdir(parents=True, exist_ok=True)
    build_gpus(args.reference)
    types = build_instances_and_prices(args.reference)
    build_offerings(types)
    build_efa_network_cards(types)
    copy_as_is(args.reference, "models.csv", "models.csv")
    copy_as_is(args.reference, "api_prices.csv", "api_prices.csv")
    build_platform_prices(args.reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
