"""Karpenter's interruption queue (issue 28), as Karpenter's own v1.14 getting-started CloudFormation template
builds it (infra/data/karpenter_interruption.json, vendored with its source): an SQS queue named for the cluster,
SSE-SQS encrypted, keeping a message 300 s; a queue policy letting EventBridge (and SQS) send to it and refusing
plain HTTP; EventBridge rules for AWS Health events, Spot interruption warnings, rebalance recommendations,
instance state changes and Capacity Reservation interruption warnings, each targeting the queue; and the
controller's statement to read it. With the queue named in `settings.interruptionQueue`, Karpenter cordons and
drains a node ahead of its interruption ("Interruption handling is disabled if not specified", charts/karpenter/
values.yaml). Pure builders: no pulumi import.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent.parent / "data" / "karpenter_interruption.json"
QUEUE_ARN = "${KarpenterInterruptionQueue.Arn}"


@functools.cache
def _doc() -> dict[str, Any]:
    doc = json.loads(DATA.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{DATA}: expected a JSON object")
    return doc


def _fill(value: Any, queue_arn: str) -> Any:
    text = json.dumps(value).replace(QUEUE_ARN, queue_arn)
    if "${" in text:
        raise ValueError(f"{DATA.name}: a substitution is left unfilled: {text[text.index('${'):][:40]}")
    return json.loads(text)


def queue_settings() -> dict[str, Any]:
    """The queue's properties (CloudFormation names): MessageRetentionPeriod (s), SqsManagedSseEnabled."""
    q = _doc()["queue"]
    return {"MessageRetentionPeriod": int(q["MessageRetentionPeriod"]),
            "SqsManagedSseEnabled": bool(q["SqsManagedSseEnabled"])}


def queue_policy(queue_arn: str) -> dict[str, Any]:
    """KarpenterInterruptionQueuePolicy's document for the queue `queue_arn`."""
    p = _doc()["queue_policy"]
    return {"Version": "2012-10-17", "Id": p["Id"], "Statement": _fill(p["Statement"], queue_arn)}


def event_patterns() -> dict[str, dict[str, list[str]]]:
    """Rule name -> its EventBridge event pattern (source, detail-type)."""
    return {k: dict(v) for k, v in _doc()["rules"].items()}


def controller_statement(queue_arn: str) -> dict[str, Any]:
    """The InterruptionPolicy statement the controller role gets for the queue `queue_arn`."""
    return dict(_fill(_doc()["controller_statement"], queue_arn))
