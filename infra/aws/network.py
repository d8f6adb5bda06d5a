"""Network: a VPC with private subnets (nodes, control-plane ENIs) and public subnets (NAT,
internet-facing load balancers) in AZ IDs that offer every planned instance type; NAT gateways,
route tables and an S3 gateway endpoint so weight downloads skip the NAT. Or a VPC you bring."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.config.az_choice import MAX_SUBNET_AZS, choose_az_ids, cluster_az_ids  # noqa: F401 (re-exported)
from infra.config.names import COMPONENT_PREFIX

# subnet tags the AWS load-balancer integrations use to place internal / internet-facing LBs
ELB_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"


def carve_cidrs(vpc_cidr: str, n: int) -> tuple[list[str], list[str]]:
    """Private subnets of 1/8 of the VPC each (pods take VPC addresses), public /24-sized ones
    from the last eighth. Needs n <= 7."""
    net = ipaddress.IPv4Network(vpc_cidr)  # DeploymentOptions admits IPv4 only
    eighths = list(net.subnets(prefixlen_diff=3))
    private = [str(s) for s in eighths[:n]]
    public = [str(s) for s in list(eighths[-1].subnets(new_prefix=min(net.prefixlen + 8, 28)))[:n]]
    return private, public


@dataclass
class NetworkArgs:
    name: str
    region: str
    vpc_cidr: str
    az_ids: list[str]  # used when llmcap creates the VPC
    nat_gateways: int | None  # None: one per AZ (platform.csv nat_gateways); an integer caps it
    tags: dict[str, str] = field(default_factory=dict)
    # bring your own
    vpc_id: str | None = None
    private_subnet_ids: list[str] | None = None
    public_subnet_ids: list[str] | None = None


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list[str]]
    private_subnet_ids_by_az: dict[str, pulumi.Output[str]]  # empty for a VPC you bring
    # private subnets outside EKS-disallowed AZ IDs (infra/config/az_choice.py)
    cluster_subnet_ids: pulumi.Output[list[str]]
    public_subnet_ids: pulumi.Output[list[str]]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{COMPONENT_PREFIX}Network", name, None, opts)
        self.private_subnet_ids_by_az = {}
        if args.vpc_id:
            self.vpc_id = pulumi.Output.from_input(args.vpc_id)
            self.private_subnet_ids = pulumi.Output.from_input(list(args.private_subnet_ids or []))
            self.public_subnet_ids = pulumi.Output.from_input(list(args.public_subnet_ids or []))
            self.cluster_subnet_ids = self.private_subnet_ids  # their AZs are the user's to choose
        else:
            self._create(name, args)
        self.register_outputs({"vpcId": self.vpc_id, "privateSubnetIds": self.private_subnet_ids,
                               "publicSubnetIds": self.public_subnet_ids})

    def _create(self, name: str, args: NetworkArgs) -> None:
        child = pulumi.ResourceOptions(parent=self)
        tags = args.tags
        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=args.vpc_cidr, enable_dns_hostnames=True,
                          enable_dns_support=True, tags={**tags, "Name": f"{name}-vpc"}, opts=child)
        # the default security group allows all traffic between its members; empty it so nothing
        # that lands in it by accident is reachable
        aws.ec2.DefaultSecurityGroup(f"{name}-default-sg", vpc_id=vpc.id, ingress=[], egress=[],
                                     tags={**tags, "Name": f"{name}-default-locked"}, opts=child)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags, opts=child)
        private_cidrs, public_cidrs = carve_cidrs(args.vpc_cidr, len(args.az_ids))

        public_rt = aws.ec2.RouteTable(f"{name}-public-rt", vpc_id=vpc.id, tags=tags, opts=child)
        aws.ec2.Route(f"{name}-public-default", route_table_id=public_rt.id, destination_cidr_block="0.0.0.0/0",
                      gateway_id=igw.id, opts=child)
        public: list[aws.ec2.Subnet] = []
        private: list[aws.ec2.Subnet] = []
        for i, (az, cidr) in enumerate(zip(args.az_ids, public_cidrs, strict=True)):
            s = aws.ec2.Subnet(f"{name}-public-{az}", vpc_id=vpc.id, cidr_block=cidr, availability_zone_id=az,
                               map_public_ip_on_launch=False,
                               tags={**tags, "Name": f"{name}-public-{az}", ELB_TAG: "1"}, opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-public-{i}", subnet_id=s.id, route_table_id=public_rt.id,
                                          opts=child)
            public.append(s)

        nats = []
        # one NAT gateway per AZ, each AZ's private subnets routed through their own (platform.csv)
        count = len(public) if args.nat_gateways is None else min(args.nat_gateways, len(public))
        for i in range(count):
            eip = aws.ec2.Eip(f"{name}-nat-eip-{i}", domain="vpc", tags=tags, opts=child)
            nats.append(aws.ec2.NatGateway(f"{name}-nat-{i}", allocation_id=eip.id, subnet_id=public[i].id,
                                           tags=tags, opts=pulumi.ResourceOptions(parent=self, depends_on=[igw])))

        private_rts = []
        for i, (az, cidr) in enumerate(zip(args.az_ids, private_cidrs, strict=True)):
            s = aws.ec2.Subnet(f"{name}-private-{az}", vpc_id=vpc.id, cidr_block=cidr, availability_zone_id=az,
                               tags={**tags, "Name": f"{name}-private-{az}", INTERNAL_ELB_TAG: "1"}, opts=child)
            rt = aws.ec2.RouteTable(f"{name}-private-rt-{az}", vpc_id=vpc.id, tags=tags, opts=child)
            aws.ec2.Route(f"{name}-private-default-{az}", route_table_id=rt.id, destination_cidr_block="0.0.0.0/0",
                          nat_gateway_id=nats[i % len(nats)].id, opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-private-{i}", subnet_id=s.id, route_table_id=rt.id, opts=child)
            private.append(s)
            private_rts.append(rt)
            self.private_subnet_ids_by_az[az] = s.id

        aws.ec2.VpcEndpoint(f"{name}-s3", vpc_id=vpc.id, service_name=f"com.amazonaws.{args.region}.s3",
                            vpc_endpoint_type="Gateway", route_table_ids=[rt.id for rt in private_rts],
                            tags=tags, opts=child)
        self.vpc_id = vpc.id
        self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private])
        allowed = set(cluster_az_ids(args.region, list(args.az_ids)))
        self.cluster_subnet_ids = pulumi.Output.all(*[s.id for az, s in zip(args.az_ids, private, strict=True)
                                                      if az in allowed])
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public])
