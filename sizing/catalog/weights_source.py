"""Where a deployment's weights come from (stack key `llmcap:workload.weights_source`).

A model named by a local config.json (or a directory holding one) can be planned, since the
architecture is all a plan needs, but it cannot be deployed from that file: the copy job and
vLLM need the weights. `render` and `pulumi up` therefore require `weights_source` (a Hugging
Face id or an s3:// URI) for a local model, and refuse with one line otherwise.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sizing.errors import SpecError

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import ModelArch


def is_local(model: ModelArch) -> bool:
    """The architecture was read from a config.json on this machine (no weights with it)."""
    return model.source.startswith("config file ")


def workload_model(cat: Catalog, model_name: str, weights_source: str | None) -> ModelArch:
    """The workload's architecture; a local one served from `weights_source` takes that name, so
    the plan, the copy job and vLLM's --model all say where the weights are."""
    m = cat.model(model_name)
    if weights_source and is_local(m):
        m = dataclasses.replace(m, hf_id=weights_source,
                                short_name=m.short_name if weights_source.startswith("s3://")
                                else weights_source.split("/")[-1].lower())
    return m


def require_weights_source(cat: Catalog, model_name: str, weights_source: str | None) -> None:
    """For render / pulumi up: a local model needs `weights_source`; one line saying so."""
    m = cat.model(model_name)
    if weights_source and weights_source.startswith("s3://"):
        # the copy job downloads from the hub; reading a user's bucket needs its own IAM grant
        raise SpecError(f"llmcap:workload.weights_source: {weights_source}: deploying from an S3 URI is not "
                        "supported yet (the copy job has no read grant on other buckets); use a Hugging Face id")
    if is_local(m) and not weights_source:
        raise SpecError(f"llmcap:workload.weights_source: {model_name} is a local config.json, which holds no "
                        "weights; set weights_source to the Hugging Face id or s3:// URI of its checkpoint to "
                        "render or deploy (plan works without it)")
