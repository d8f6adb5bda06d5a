"""Catalog data: provenance on every row, names as agreed, lookups that suggest."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sizing.catalog.lookup import load_catalog
from sizing.catalog.paths import BUNDLED_DIR
from sizing.errors import CatalogLookupError

CSVS = sorted(BUNDLED_DIR.glob("*.csv"))


@pytest.mark.parametrize("path", CSVS, ids=lambda p: p.name)
def test_every_row_has_source_and_as_of(path: Path) -> None:
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows, f"{path.name} is empty"
    for i, r in enumerate(rows):
        assert (r.get("source") or "").strip(), f"{path.name} row {i + 2} has no source"
        assert (r.get("as_of") or "").strip(), f"{path.name} row {i + 2} has no as_of"


def test_gpu_names() -> None:
    cat = load_catalog()
    assert cat.instance("p5.48xlarge").gpu == "H100-SXM"
    assert cat.instance("p4d.24xlarge").gpu == "A100-40GB"
    assert cat.instance("p4de.24xlarge").gpu == "A100-80GB"
    for inst in cat.instances.values():
        assert inst.gpu_interconnect in ("nvlink", "pcie")
        assert (inst.gpu_interconnect == "nvlink") == (inst.family.startswith("p") and inst.gpu_count > 1), \
            inst.instance_type


def test_model_lookup_forms() -> None:
    cat = load_catalog()
    a = cat.model("meta-llama/Llama-3.1-70B-Instruct")
    assert cat.model("LLAMA-3.1-70B-INSTRUCT") is a
    assert cat.model("Llama-3.1-70B-Instruct") is a
    with pytest.raises(CatalogLookupError) as e:
        cat.model("llama-3.1-70b-instrct")
    assert "did you mean" in str(e.value)


def test_catalog_covers_the_required_models() -> None:
    cat = load_catalog()
    need = ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b-instruct", "llama-3-70b-instruct",
            "llama-3.1-8b-instruct", "llama-3.1-70b-instruct", "llama-3.1-405b-instruct", "llama-3.2-1b-instruct",
            "llama-3.2-3b-instruct", "llama-3.3-70b-instruct", "mistral-7b-instruct-v0.3", "mixtral-8x7b-instruct",
            "mixtral-8x22b-instruct", "qwen2.5-0.5b-instruct", "qwen2.5-72b-instruct", "qwen3-8b", "qwen3-14b",
            "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b", "gemma-2-9b-it", "gemma-2-27b-it", "deepseek-v3",
            "gpt-oss-20b", "gpt-oss-120b", "phi-4"]
    for n in need:
        cat.model(n)


def test_model_from_config_json(tmp_path: Path) -> None:
    import json

    cfg = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "vocab_size": 128256, "intermediate_size": 14336, "max_position_embeddings": 8192,
           "model_type": "llama", "_name_or_path": "my/model"}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    m = load_catalog().model(str(f))
    assert m.num_kv_heads == 8 and m.head_dim == 128
    assert 7.5 < m.params_total_b < 8.5  # Llama-3-8B shapes count to 8.03e9


def test_offline_hub_miss_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CatalogLookupError) as e:
        load_catalog().model("nobody/no-such-model-xyz")
    assert "llmcap models" in str(e.value)


def test_user_catalog_dir_overrides_per_file(tmp_path: Path) -> None:
    src = (BUNDLED_DIR / "prices.csv").read_text().replace("g6.xlarge,us-east-1,on-demand,0.8048",
                                                             "g6.xlarge,us-east-1,on-demand,0.5")
    (tmp_path / "prices.csv").write_text(src)
    cat = load_catalog(tmp_path)
    p = cat.price("g6.xlarge", "us-east-1", "on-demand")
    assert p is not None and p.usd_per_hour == 0.5
    assert cat.instances["g6.xlarge"].gpu == "L4"  # not overridden: bundled
    assert cat.overridden == ["prices.csv"]
