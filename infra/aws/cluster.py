"""EKS: the control plane (pinned version, API access entries, KMS secrets encryption, private
endpoint with public access only from configured CIDRs), the core add-ons with the pod identity
agent, the node IAM role, a small CPU system node group, and a Kubernetes provider for the
cluster (kubeconfig with `aws eks get-token`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.aws.iam import partition, pod_identity_trust_policy, role_with_managed_policies, service_trust_policy
from infra.aws.nodegroups import node_launch_template
from infra.config.names import (
    COMPONENT_PREFIX,
    LOAD_BALANCER_CONTROLLER_NAMESPACE,
    LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT,
    ROLE_LABEL,
)

if TYPE_CHECKING:
    from infra.config.platform import Platform
    from sizing.plan import SystemNodePlan

# least privilege: the control plane needs only the cluster policy; nodes only join and pull images;
# the VPC CNI gets its ENI permissions through pod identity instead of the node role
CLUSTER_POLICIES = ["AmazonEKSClusterPolicy"]
NODE_POLICIES = ["AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly"]
CNI_POLICIES = ["AmazonEKS_CNI_Policy"]
CLUSTER_ADMIN_ACCESS_POLICY = "AmazonEKSClusterAdminPolicy"
# daemonset add-ons go in before nodes (nodes need the CNI to become Ready); coredns is a
# Deployment and goes in after the system nodes so the add-on can become ACTIVE
ADDONS_BEFORE_NODES = ("eks-pod-identity-agent", "vpc-cni", "kube-proxy")
ADDONS_AFTER_NODES = ("coredns",)
VPC_CNI_SERVICE_ACCOUNT = "aws-node"  # the vpc-cni add-on's DaemonSet, in kube-system
# the EBS CSI driver (Prometheus's gp3 volume): "The Amazon EKS add-on name is aws-ebs-csi-driver ... The
# permissions in the AmazonEBSCSIDriverPolicy AWS managed policy are required", for the controller's service
# account ebs-csi-controller-sa in kube-system (EKS user guide, add-ons-aws-ebs-csi-driver.html)
EBS_CSI_ADDON = "aws-ebs-csi-driver"
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
EBS_CSI_POLICIES = ["service-role/AmazonEBSCSIDriverPolicy"]
LBC_POLICY_FILE = Path(__file__).parent.parent / "data" / "aws_load_balancer_controller_policy.json"


def load_balancer_controller_policy() -> str:
    """The upstream IAM policy of the AWS Load Balancer Controller (data file with its source)."""
    return json.dumps(json.loads(LBC_POLICY_FILE.read_text(encoding="utf-8"))["policy"])


@dataclass
class EksClusterArgs:
    region: str
    platform: Platform
    private_subnet_ids: pulumi.Input[list[str]]
    system_nodes: SystemNodePlan  # plan.platform.system_nodes (sized by sizing/planning/system_nodes.py)
    public_access_cidrs: list[str] = field(default_factory=list)
    admin_principal_arns: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)


def kubeconfig_json(cluster_name: str, endpoint: str, ca_data: str, region: str) -> str:
    """A kubeconfig that authenticates with `aws eks get-token` (no long-lived credentials)."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": cluster_name,
        "clusters": [{"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "users": [{"name": cluster_name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"],
            "interactiveMode": "Never"}}}],
    })


class EksCluster(pulumi.ComponentResource):
    cluster: aws.eks.Cluster
    name: pulumi.Output[str]
    node_role: aws.iam.Role
    system_node_group: aws.eks.NodeGroup
    addons: list[aws.eks.Addon]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    load_balancer_controller_role: aws.iam.Role
    load_balancer_controller_pod_identity: aws.eks.PodIdentityAssociation

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{COMPONENT_PREFIX}EksCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        p = args.platform
        tags = args.tags

        key = aws.kms.Key(f"{name}-secrets", description=f"{name}: EKS secrets envelope encryption",
                          enable_key_rotation=True, deletion_window_in_days=p.kms_deletion_window_days,
                          tags=tags, opts=child)
        aws.kms.Alias(f"{name}-secrets", name=f"alias/{name}-eks-secrets", target_key_id=key.key_id, opts=child)

        cluster_role = role_with_managed_policies(
            f"{name}-cluster", service_trust_policy("eks.amazonaws.com", ("sts:AssumeRole", "sts:TagSession")),
            CLUSTER_POLICIES, tags, self, "EKS control plane")
        # EKS writes control-plane logs to /aws/eks/<cluster>/cluster and would create it without a
        # retention ("By default, log data is stored in CloudWatch Logs indefinitely"); create it first
        cluster_name = f"{name}-eks"
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-control-plane-logs", name=f"/aws/eks/{cluster_name}/cluster",
            retention_in_days=p.control_plane_log_retention_days, tags=tags, opts=child)
        public = bool(args.public_access_cidrs)
        vpc_config = aws.eks.ClusterVpcConfigArgs(
            subnet_ids=args.private_subnet_ids, endpoint_private_access=True, endpoint_public_access=public,
            public_access_cidrs=list(args.public_access_cidrs) if public else None)
        self.cluster = aws.eks.Cluster(
            cluster_name,
            name=cluster_name,  # fixed, so the log group above is the one EKS writes to
            version=p.kubernetes_version,
            role_arn=cluster_role.arn,
            vpc_config=vpc_config,
            # pinned so the router's NetworkPolicy can name the API server's ClusterIP (infra/kubernetes/netpol.py)
            kubernetes_network_config=aws.eks.ClusterKubernetesNetworkConfigArgs(
                service_ipv4_cidr=p.service_ipv4_cidr),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API", bootstrap_cluster_creator_admin_permissions=True),
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=key.arn), resources=["secrets"]),
            enabled_cluster_log_types=list(p.cluster_log_types),
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=p.upgrade_support_type),
            bootstrap_self_managed_addons=False,  # the add-ons below are managed explicitly
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[log_group]))
        self.name = self.cluster.name

        for i, arn in enumerate(args.admin_principal_arns):
            entry = aws.eks.AccessEntry(f"{name}-admin-{i}", cluster_name=self.name, principal_arn=arn,
                                        type="STANDARD", tags=tags, opts=child)
            aws.eks.AccessPolicyAssociation(
                f"{name}-admin-{i}", cluster_name=self.name, principal_arn=arn,
                policy_arn=partition().apply(
                    lambda pt: f"arn:{pt}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_ACCESS_POLICY}"),
                access_scope={"type": "cluster"}, opts=pulumi.ResourceOptions(parent=self, depends_on=[entry]))

        self.addons = self._addons_before_nodes(name, tags)
        self.node_role = role_with_managed_policies(
            f"{name}-node", service_trust_policy("ec2.amazonaws.com"), NODE_POLICIES, tags, self, "EKS nodes")
        sysn = args.system_nodes
        lt = node_launch_template(f"{name}-system-lt", platform=p, root_gib=sysn.root_volume_gib,
                                  user_data=None, tags=tags, parent=self)
        self.system_node_group = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=self.name, node_role_arn=self.node_role.arn, subnet_ids=args.private_subnet_ids,
            ami_type=p.ami_type_system, instance_types=[sysn.instance_type], capacity_type="ON_DEMAND",
            # the Cluster Autoscaler discovers the group by the tags EKS puts on its Auto Scaling group and
            # grows it up to max when system pods do not fit
            scaling_config={"min_size": sysn.min_size, "desired_size": sysn.desired, "max_size": sysn.max_size},
            update_config={"max_unavailable": p.node_update_max_unavailable},
            labels={ROLE_LABEL: "system"},
            launch_template={"id": lt.id, "version": lt.latest_version.apply(str)},
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(self.addons),
                                        ignore_changes=["scalingConfig.desiredSize"]))
        for addon in ADDONS_AFTER_NODES:
            self.addons.append(aws.eks.Addon(
                f"{name}-{addon}", cluster_name=self.name, addon_name=addon,
                resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="PRESERVE", tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_node_group])))

        ebs_role = role_with_managed_policies(f"{name}-ebs-csi", pod_identity_trust_policy(
            self.cluster.arn, "kube-system", EBS_CSI_SERVICE_ACCOUNT), EBS_CSI_POLICIES, tags, self,
            "EBS CSI driver (Prometheus's volume) through EKS Pod Identity")
        self.addons.append(aws.eks.Addon(
            f"{name}-{EBS_CSI_ADDON}", cluster_name=self.name, addon_name=EBS_CSI_ADDON,
            pod_identity_associations=[{"role_arn": ebs_role.arn, "service_account": EBS_CSI_SERVICE_ACCOUNT}],
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="PRESERVE", tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_node_group])))

        self.load_balancer_controller_role = self._load_balancer_controller(name, tags)
        self.kubeconfig = pulumi.Output.all(self.cluster.name, self.cluster.endpoint,
                                            self.cluster.certificate_authority.data).apply(
            lambda a: kubeconfig_json(a[0], a[1], a[2], args.region))
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, opts=child)
        self.register_outputs({"clusterName": self.name, "endpoint": self.cluster.endpoint,
                               "nodeRoleArn": self.node_role.arn, "kubeconfig": self.kubeconfig})

    def _load_balancer_controller(self, name: str, tags: dict[str, str]) -> aws.iam.Role:
        role = aws.iam.Role(f"{name}-lb-controller", assume_role_policy=pod_identity_trust_policy(
                                self.cluster.arn, LOAD_BALANCER_CONTROLLER_NAMESPACE,
                                LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT),
                            description="AWS Load Balancer Controller through EKS Pod Identity", tags=tags,
                            opts=pulumi.ResourceOptions(parent=self))
        aws.iam.RolePolicy(f"{name}-lb-controller", role=role.id, policy=load_balancer_controller_policy(),
                           opts=pulumi.ResourceOptions(parent=role))
        self.load_balancer_controller_pod_identity = aws.eks.PodIdentityAssociation(
            f"{name}-lb-controller", cluster_name=self.name, namespace=LOAD_BALANCER_CONTROLLER_NAMESPACE,
            service_account=LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT, role_arn=role.arn, tags=tags,
            opts=pulumi.ResourceOptions(parent=self))
        return role

    def _addons_before_nodes(self, name: str, tags: dict[str, str]) -> list[aws.eks.Addon]:
        cni_role = role_with_managed_policies(f"{name}-vpc-cni", pod_identity_trust_policy(
            self.cluster.arn, "kube-system", VPC_CNI_SERVICE_ACCOUNT), CNI_POLICIES,
                                              tags, self, "VPC CNI (aws-node) through EKS Pod Identity")
        agent = aws.eks.Addon(f"{name}-eks-pod-identity-agent", cluster_name=self.name,
                              addon_name="eks-pod-identity-agent", resolve_conflicts_on_create="OVERWRITE",
                              resolve_conflicts_on_update="PRESERVE", tags=tags,
                              opts=pulumi.ResourceOptions(parent=self))
        cni = aws.eks.Addon(f"{name}-vpc-cni", cluster_name=self.name, addon_name="vpc-cni",
                            # the VPC CNI's network policy agent enforces the NetworkPolicies
                            # (infra/kubernetes/netpol.py);
                            # off by default (EKS user guide, cni-network-policy-configure.html)
                            configuration_values=json.dumps({"enableNetworkPolicy": "true"}),
                            pod_identity_associations=[{"role_arn": cni_role.arn,
                                                        "service_account": VPC_CNI_SERVICE_ACCOUNT}],
                            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="PRESERVE",
                            tags=tags, opts=pulumi.ResourceOptions(parent=self, depends_on=[agent]))
        proxy = aws.eks.Addon(f"{name}-kube-proxy", cluster_name=self.name, addon_name="kube-proxy",
                              resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="PRESERVE",
                              tags=tags, opts=pulumi.ResourceOptions(parent=self))
        return [agent, cni, proxy]
