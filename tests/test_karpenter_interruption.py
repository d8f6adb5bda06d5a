"""Issue 28: Karpenter's interruption queue, as Karpenter's own v1.14 getting-started CloudFormation template
builds it (infra/data/karpenter_interruption.json): an SSE-encrypted SQS queue whose policy lets EventBridge send
to it (and refuses plain HTTP), EventBridge rules for Spot interruption, rebalance, instance state-change, AWS
Health scheduled changes and Capacity Reservation interruptions targeting it, the controller's
`settings.interruptionQueue` and the controller's permission to read it. Only with provisioner karpenter."""

from __future__ import annotations

import json

import pytest

from infra.karpenter import interruption
from tests import pulumi_harness as h

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
QUEUE = "aws:sqs/queue:Queue"
QUEUE_POLICY = "aws:sqs/queuePolicy:QueuePolicy"
RULE = "aws:cloudwatch/eventRule:EventRule"
TARGET = "aws:cloudwatch/eventTarget:EventTarget"


def test_queue_rules_and_controller_setting() -> None:
    res = h.bundled("llama70b-karpenter")
    (q,) = res.of_type(QUEUE)
    # KarpenterInterruptionQueue: QueueName ${ClusterName}, MessageRetentionPeriod 300, SqsManagedSseEnabled true
    assert q.inputs["messageRetentionSeconds"] == 300 and q.inputs["sqsManagedSseEnabled"] is True
    cluster = h.one(res, h.CLUSTER, f"{h.gpu_node_group_name(res, 'eks')}")
    assert q.inputs["name"] == cluster.outputs["name"]
    (qp,) = res.of_type(QUEUE_POLICY)
    doc = h.policy(qp.inputs["policy"])
    allow, deny = doc["Statement"]
    assert allow["Principal"]["Service"] == ["events.amazonaws.com", "sqs.amazonaws.com"]
    assert (allow["Action"], allow["Resource"]) == ("sqs:SendMessage", q.outputs["arn"])
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": False}}
    patterns = {json.dumps(json.loads(r.inputs["eventPattern"]), sort_keys=True) for r in res.of_type(RULE)}
    want = {("aws.ec2", "EC2 Spot Instance Interruption Warning"), ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
            ("aws.ec2", "EC2 Instance State-change Notification"), ("aws.health", "AWS Health Event"),
            ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning")}
    assert patterns == {json.dumps({"detail-type": [d], "source": [s]}, sort_keys=True) for s, d in want}
    targets = res.of_type(TARGET)
    assert len(targets) == 5 and all(t.inputs["arn"] == q.outputs["arn"] for t in targets)
    assert {t.name for t in targets} == {r.name for r in res.of_type(RULE)}  # one target per rule
    (rel,) = [r for r in res.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "karpenter"]
    assert rel.inputs["values"]["settings"]["interruptionQueue"] == q.outputs["name"]
    role_policy = h.policy(h.one(res, "aws:iam/rolePolicy:RolePolicy",
                                 f"{h.gpu_node_group_name(res, 'karpenter')}").inputs["policy"])
    (stmt,) = [s for s in role_policy["Statement"] if s.get("Sid") == "AllowInterruptionQueueActions"]
    assert stmt["Resource"] == q.outputs["arn"]
    assert stmt["Action"] == ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"]


def test_managed_node_group_stacks_get_no_queue() -> None:
    res = h.bundled("llama70b-block")
    assert not res.of_type(QUEUE) and not res.of_type(RULE)


def test_placeholders_are_all_filled() -> None:
    arn = "arn:aws:sqs:us-east-1:123456789012:c"
    text = json.dumps([interruption.queue_policy(arn), interruption.controller_statement(arn)])
    assert "${" not in text and arn in text
    assert set(interruption.event_patterns()) == {"ScheduledChangeRule", "SpotInterruptionRule", "RebalanceRule",
                                                  "InstanceStateChangeRule", "CapacityReservationInterruptionRule"}
