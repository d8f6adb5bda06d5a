"""Deployability rules of issue 28: capacity and the fabric a pool needs.

`multi-node-without-efa`: a pool whose replica spans several nodes runs NCCL between them (vLLM's
pipeline parallel over the network); without EFA, NCCL falls back to TCP sockets ("NET/Socket"), far
below the fabric the P-family price includes, so the program refuses it instead of deploying it slow.
EFA comes from the catalog's `efa` column (sizing/data/instances.csv, DescribeInstanceTypes
EfaSupported) and the network cards in infra/data/efa_network_cards.csv (infra/aws/efa.py).

`reservation-type-mismatch`: a pool on a reservation must be the reservation's instance type (the
planner places it so; a hand-edited saved plan could break it).
"""

from __future__ import annotations

from collections.abc import Iterator

from infra.aws.efa import efa_cards, instance_has_efa
from infra.fit.check import FitContext, FitProblem, fit_rule

SRC_EFA = ("https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html; NCCL without an EFA (libfabric) "
           "network plugin uses its socket transport (aws-ofi-nccl README)")


@fit_rule("multi-node-without-efa")
def multi_node_without_efa(fit: FitContext) -> Iterator[FitProblem]:
    for p in fit.plan.pools:
        if p.nodes_per_replica <= 1:
            continue
        if not instance_has_efa(fit.catalog, p.instance_type):
            why = f"{p.instance_type} has no EFA (sizing/data/instances.csv efa)"
        elif p.instance_type not in efa_cards():
            why = f"{p.instance_type} has no row in infra/data/efa_network_cards.csv (scripts/build_bundled_catalog.py)"
        else:
            continue
        yield FitProblem("multi-node-without-efa", p.name,
                         f"each replica spans {p.nodes_per_replica} nodes but {why}: NCCL would fall back to TCP "
                         "sockets between nodes; allow an instance type with EFA (llmcap:hardware.instance_types) "
                         "or a precision whose replica fits one node", SRC_EFA)


@fit_rule("reservation-type-mismatch")
def reservation_type_mismatch(fit: FitContext) -> Iterator[FitProblem]:
    held = {c.id: c for c in fit.plan.hardware.capacity}
    for p in fit.plan.pools:
        if not p.capacity_reservation_id:
            continue
        res = held.get(p.capacity_reservation_id)
        if res is None or res.instance_type != p.instance_type or p.instances_max > res.count:
            have = f"{res.count} × {res.instance_type}" if res else "no such entry in llmcap:hardware.capacity"
            yield FitProblem("reservation-type-mismatch", p.name,
                             f"runs up to {p.instances_max} × {p.instance_type} on {p.capacity_reservation_id} "
                             f"({have}); re-plan with `llmcap plan STACK --write`", "llmcap plan (issue 28)")
