"""Architecture readers: a Hugging Face config.json -> a sized `ModelArch`, one module per family.

`read_config(config, name, source)` picks the reader by `model_type` (a multimodal config is
read through its `text_config`); an unknown `model_type` is refused with one line naming it,
never sized as a dense model. See README.md in this folder for adding a family.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from sizing.architectures import deepseek, dense, gemma, gpt_oss, moe, phi3
from sizing.architectures.base import ArchitectureError
from sizing.catalog import ModelArch

Reader = Callable[[dict[str, Any], str, str], ModelArch]

READERS: dict[str, Reader] = {}
for _mod in (dense, phi3, gemma, moe, deepseek, gpt_oss):
    for _mt in _mod.MODEL_TYPES:
        READERS[_mt] = _mod.read

# multimodal wrappers whose language model is in `text_config`
TEXT_CONFIG_TYPES = {"gemma3": "gemma3_text", "llama4": "llama4_text"}

__all__ = ["READERS", "ArchitectureError", "read_config", "known_model_types"]


def known_model_types() -> list[str]:
    return sorted(READERS)


def read_config(c: Any, name: str, source: str, label: str | None = None) -> ModelArch:
    """The architecture a parsed config.json describes, as model `name`; ArchitectureError (one
    line, naming the config as `label`, default `name`) otherwise."""
    arch = _read(c, label or name, source)
    if label and label != name:
        arch = dataclasses.replace(arch, hf_id=name, short_name=name.rstrip("/").split("/")[-1].lower())
    return arch


def _read(c: Any, name: str, source: str) -> ModelArch:
    if not isinstance(c, dict):
        raise ArchitectureError(f"model config {name}: must be a JSON object (got {type(c).__name__})")
    mt = c.get("model_type")
    if not isinstance(mt, str) or not mt:
        raise ArchitectureError(f"model config {name}: model_type: missing; a config.json names its architecture "
                                f"family ({', '.join(known_model_types())})")
    if mt in TEXT_CONFIG_TYPES:
        text = c.get("text_config")
        if not isinstance(text, dict):
            raise ArchitectureError(f"model config {name}: text_config: missing (a {mt} config keeps its language "
                                    "model there)")
        inner = {"torch_dtype": c.get("torch_dtype"), **text}
        inner["model_type"] = TEXT_CONFIG_TYPES[mt]
        if "tie_word_embeddings" in c and "tie_word_embeddings" not in text:
            inner["tie_word_embeddings"] = c["tie_word_embeddings"]
        c, mt = inner, inner["model_type"]
    reader = READERS.get(mt)
    if reader is None:
        raise ArchitectureError(f"model config {name}: model_type: {mt[:60]!r} is not an architecture llmcap can "
                                f"size; known: {', '.join(known_model_types())}")
    return reader(c, name, source)
