"""Unknown ids ask the hub (issue 27, item 6): a real Hugging Face id that looks like a catalog name
(mistralai/Mistral-Nemo-Instruct-2407 is close to mistralai/Mistral-7B-Instruct-v0.3) was refused as
"unknown model" without asking the hub, and a hub mirror on a port other than 443 was refused. Now the hub
huggingface_hub is configured with is asked first, at its own port, and "unknown model" says what was tried."""

from __future__ import annotations

import socket
from typing import Any

import pytest

import sizing.catalog.hf_config as hf_config
from sizing.catalog.lookup import load_catalog
from sizing.errors import CatalogLookupError

CAT = load_catalog()


def test_an_id_close_to_a_catalog_name_is_asked_of_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    nemo = CAT.model("llama-3.1-8b-instruct")  # stands in for what the hub's config.json describes

    def from_hub(repo_id: str, known: list[str]) -> Any:
        asked.append(repo_id)
        return nemo

    monkeypatch.setattr(hf_config, "model_from_hub", from_hub)
    assert CAT.model("mistralai/Mistral-Nemo-Instruct-2407") is nemo
    assert asked == ["mistralai/Mistral-Nemo-Instruct-2407"]


def test_unknown_model_says_what_was_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CatalogLookupError) as e:
        CAT.model("mistralai/Mistral-Nemo-Instruct-2407")
    line = e.value.problems[0]
    assert "did you mean mistralai/Mistral-7B-Instruct-v0.3" in line
    assert "could not be fetched from https://huggingface.co/mistralai/Mistral-Nemo-Instruct-2407" in line
    assert "HF_HUB_OFFLINE is set" in line


@pytest.mark.parametrize(("endpoint", "where"), [("http://mirror.internal:8080", ("mirror.internal", 8080)),
                                                 ("https://hub.example.org", ("hub.example.org", 443)),
                                                 ("http://hub.example.org/", ("hub.example.org", 80))])
def test_the_hub_is_reached_at_its_own_port(monkeypatch: pytest.MonkeyPatch, endpoint: str,
                                             where: tuple[str, int]) -> None:
    tried: list[tuple[str, int]] = []

    def connect(addr: tuple[str, int], timeout: float) -> Any:
        tried.append(addr)
        raise OSError("refused in the test")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setattr(socket, "create_connection", connect)
    with pytest.raises(CatalogLookupError, match=f"could not be fetched from {endpoint.rstrip('/')}/org/model"):
        hf_config.model_from_hub("org/model", known=[])
    assert tried == [where]
