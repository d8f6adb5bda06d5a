"""Issue 14 defect 3: EKS cluster subnets never in the AZ IDs the EKS user guide disallows
(use1-az3, usw1-az2, cac1-az3); GPU node groups may still use subnets there (EKS puts no AZ rule on
node subnets)."""

from __future__ import annotations

from tests import pulumi_harness as h


def _subnet_az_by_id(result: h.RenderResult) -> dict[str, str]:
    return {r.id: r.inputs["availabilityZoneId"] for r in result.of_type(h.SUBNET) if r.id}


def test_llama405b_cluster_has_no_subnet_in_use1_az3() -> None:
    result = h.bundled("llama405b")
    azs = _subnet_az_by_id(result)
    clusters = result.of_type(h.CLUSTER)
    assert len(clusters) == 1
    cluster_azs = sorted(azs[s] for s in clusters[0].inputs["vpcConfig"]["subnetIds"])
    assert "use1-az3" not in cluster_azs, cluster_azs
    assert len(set(cluster_azs)) >= 2, cluster_azs


def test_every_bundled_cluster_avoids_disallowed_az_ids() -> None:
    from infra.config.az_choice import eks_disallowed_az_ids

    for name in h.BUNDLED_STACKS:
        result = h.bundled(name)
        azs = _subnet_az_by_id(result)
        bad = eks_disallowed_az_ids(result.plan.region)
        for c in result.of_type(h.CLUSTER):
            used = {azs[s] for s in c.inputs["vpcConfig"]["subnetIds"]}
            assert not used & bad, f"{name}: cluster subnets in {sorted(used & bad)}"
