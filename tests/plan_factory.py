"""Hand-built Plans for tests of consumers (infra, diff, compare) that must not depend on the
planner's numbers. Tests of the planner itself use sizing.planning.planner."""

from __future__ import annotations

from typing import Any

from sizing.plan import PerReplica, Plan, PlatformPlan, Pool, SystemNodePlan, Totals, VllmSettings


def make_pool(name: str = "g6-12xlarge", instance_type: str = "g6.12xlarge", gpu: str = "L4",
              gpus_per_instance: int = 4, tp: int = 1, pp: int = 1, replicas: int = 5,
              replicas_per_instance: int = 4, instances_min: int = 2, instances_desired: int = 2,
              instances_max: int = 3, precision: str = "fp8", purchase: str = "on-demand",
              usd_per_instance_hour: float = 4.6016, nodes_per_replica: int = 1,
              model: str = "meta-llama/Meta-Llama-3-8B-Instruct", local_nvme_gb: int = 3760) -> Pool:
    # requests and root volume as the planner sizes them (a node's allocatable; sizing/planning/allocatable.py,
    # sizing/planning/node_storage.py), so the deployability check passes a hand-built pool unless a test breaks it
    from sizing.catalog.lookup import load_catalog
    from sizing.planning.allocatable import per_replica_requests
    from sizing.planning.node_storage import root_volume_gib

    cat = load_catalog()
    inst = cat.instances.get(instance_type)
    cpu, mem = per_replica_requests(cat, inst, replicas_per_instance if nodes_per_replica == 1 else 1) if inst \
        else (11700, 48384)
    return Pool(
        name=name, instance_type=instance_type, gpu=gpu, gpus_per_instance=gpus_per_instance,
        tensor_parallel=tp, pipeline_parallel=pp, nodes_per_replica=nodes_per_replica, replicas=replicas,
        replicas_for_demand=max(replicas - 1, 1), redundancy_replicas=1,
        replicas_per_instance=replicas_per_instance, instances_min=instances_min,
        instances_desired=instances_desired, instances_max=instances_max,
        replicas_max=(instances_max * replicas_per_instance if nodes_per_replica == 1
                      else instances_max // nodes_per_replica),
        precision=precision, purchase=purchase, usd_per_instance_hour=usd_per_instance_hour,
        usd_per_hour=usd_per_instance_hour * instances_desired, local_nvme_gb=local_nvme_gb,
        cpu_millicores_per_replica=cpu, memory_mib_per_replica=mem,
        root_volume_gib=root_volume_gib(0.0, local_nvme_gb, True),
        vllm=VllmSettings(model=model, served_model_name=model.split("/")[-1].lower(), tensor_parallel_size=tp,
                          pipeline_parallel_size=pp, max_model_len=1536, max_num_seqs=64,
                          max_num_batched_tokens=8192, gpu_memory_utilization=0.9,
                          quantization="fp8_per_tensor" if precision == "fp8" else None),
        per_replica=PerReplica(weights_gib_per_gpu=7.5, kv_cache_gib_per_gpu=10.0, max_concurrent_sequences=60,
                               goodput_output_tokens_per_s=900.0, goodput_requests_per_s=1.5,
                               planned_concurrency=25.0, planned_output_tokens_per_s=700.0, ttft_p95_ms=400.0,
                               itl_p95_ms=22.0, ttft_ms=250.0, itl_ms=20.0, bound="memory-bandwidth",
                               weights_load_s=40.0),
    )


def make_plan(pools: list[Pool] | None = None, stack: str = "dev", region: str = "us-east-1",
              **overrides: Any) -> Plan:
    pools = pools or [make_pool()]
    usd_h = sum(p.usd_per_hour for p in pools)
    fields: dict[str, Any] = dict(
        stack=stack, region=region, model=pools[0].vllm.model, strategy="auto", purchase="on-demand",
        hardware={"strategy": "auto"},
        platform=PlatformPlan(system_nodes=SystemNodePlan(instance_type="m7i.large", desired=2, min_size=2, max_size=3,
                                                          root_volume_gib=40, cpu_m_requested=1500,
                                                          memory_mib_requested=3000), nat_gateways=2),
        demand={"output_tokens_per_s": 3000.0}, pools=pools,
        totals=Totals(gpus=sum(p.instances_desired * p.gpus_per_instance for p in pools),
                      instances=sum(p.instances_desired for p in pools), usd_per_hour=usd_h,
                      usd_per_month=usd_h * 730, usd_per_month_min=usd_h * 730, usd_per_month_max=usd_h * 730 * 1.5,
                      platform_usd_per_month=200.0, all_in_usd_per_month=usd_h * 730 + 200.0,
                      usd_per_million_output_tokens=0.5, usd_per_million_output_tokens_at_capacity=0.4,
                      all_in_usd_per_million_output_tokens=0.55, utilization=0.8,
                      demand_output_tokens_per_s=3000.0, capacity_output_tokens_per_s=3600.0),
    )
    # a valid WorkloadSpec; a test's `workload=` overrides some of its keys (Plan.workload is typed)
    fields["workload"] = {"model": pools[0].vllm.model, "prompt_tokens": 1024, "output_tokens": 256,
                          "traffic": {"concurrent_users": 100}, **overrides.pop("workload", {})}
    fields.update(overrides)
    return Plan(**fields)
