"""Package layering: sizing/ stays free of cloud SDKs; the CLI's plan path stays light;
no vendor number (spec, price) is typed into code."""

from __future__ import annotations

import ast
import csv
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZING = ROOT / "sizing"
FORBIDDEN = ("pulumi", "pulumi_aws", "pulumi_kubernetes", "boto3", "botocore")
ADAPTERS = {SIZING / "aws.py"}  # the only boto3 adapter


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_sizing_imports_no_cloud_sdk() -> None:
    bad = []
    for py in SIZING.rglob("*.py"):
        if py in ADAPTERS:
            continue
        hit = _imports(py) & set(FORBIDDEN)
        # commands may import infra/pulumi lazily inside functions, never at module level
        top = {n.names[0].name.split(".")[0] if isinstance(n, ast.Import) else (n.module or "").split(".")[0]
               for n in ast.parse(py.read_text()).body if isinstance(n, (ast.Import, ast.ImportFrom))}
        if py.parent.name == "commands" or py.name == "cli.py":
            hit = top & set(FORBIDDEN + ("infra",))
        if hit:
            bad.append(f"{py.relative_to(ROOT)}: {sorted(hit)}")
    assert not bad, "sizing/ imports a cloud SDK: " + "; ".join(bad)


def test_plan_path_imports_stay_light() -> None:
    code = ("import sys, sizing.cli, sizing.planner, sizing.plan_builder, sizing.report.plan_views; "
            "print(','.join(m for m in ('pulumi','pulumi_aws','pulumi_kubernetes','boto3','matplotlib','httpx')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "", f"heavy modules on the plan path: {out.stdout}"


def _distinctive(v: float) -> bool:
    """Numbers that could be anything (0.1, 8, 130, 600) are not evidence; 0.8048, 989.5 or 2039 are."""
    if v != int(v):
        digits = f"{v:.10g}".replace("0.", "").lstrip("0").replace(".", "")
        return len(digits) >= 3
    return v >= 200 and v % 50 != 0


def _vendor_numbers() -> set[float]:
    vals: set[float] = set()
    data = SIZING / "data"
    cols = {"gpus.csv": ("memory_bandwidth_gbs", "bf16_dense_tflops", "fp8_dense_tflops", "int8_dense_tops",
                         "nvlink_bandwidth_gbs"),
            "prices.csv": ("usd_per_hour",), "api_prices.csv": ("input_usd_per_mtok", "output_usd_per_mtok"),
            "platform_prices.csv": ("usd",)}
    for name, fields in cols.items():
        with (data / name).open(newline="") as f:
            for r in csv.DictReader(f):
                for c in fields:
                    try:
                        v = float(r[c])
                    except (ValueError, KeyError):
                        continue
                    if _distinctive(v):
                        vals.add(v)
    return vals


def test_no_vendor_number_in_code() -> None:
    vendor = _vendor_numbers()
    assert len(vendor) > 50
    bad = []
    for base in (SIZING, ROOT / "infra"):
        for py in base.rglob("*.py"):
            for node in ast.walk(ast.parse(py.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                        and not isinstance(node.value, bool) and float(node.value) in vendor:
                    bad.append(f"{py.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert not bad, "vendor numbers typed into code: " + "; ".join(bad)
