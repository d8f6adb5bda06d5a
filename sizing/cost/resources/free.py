"""Resource types with no charge of their own (their cost, if any, shows on another resource).
Anything not here and not priced by a pricing module shows as "not priced"."""

from __future__ import annotations

FREE_PREFIXES = ("pulumi:", "kubernetes:", "random:", "tls:", "llmcap:")  # not billed by AWS directly
FREE_TYPES = frozenset({
    "aws:autoscaling/tag:Tag",  # a tag on an Auto Scaling group
    "aws:ec2/tag:Tag",  # a tag on an EC2 resource (Karpenter's discovery tags on subnets and a security group)
    "aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:ec2/routeTable:RouteTable", "aws:ec2/route:Route",
    "aws:ec2/routeTableAssociation:RouteTableAssociation", "aws:ec2/internetGateway:InternetGateway",
    "aws:ec2/securityGroup:SecurityGroup", "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
    "aws:ec2/placementGroup:PlacementGroup",  # "no additional charge for creating a placement group" (EC2 user guide)
    "aws:ec2/vpcEndpoint:VpcEndpoint",  # gateway endpoints (S3) are free; interface endpoints are not used
    "aws:iam/role:Role", "aws:iam/rolePolicy:RolePolicy", "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
    "aws:iam/policy:Policy", "aws:iam/openIdConnectProvider:OpenIdConnectProvider",
    "aws:eks/addon:Addon", "aws:eks/accessEntry:AccessEntry",
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation",
    "aws:eks/podIdentityAssociation:PodIdentityAssociation",
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls",
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
    "aws:s3/bucketVersioning:BucketVersioning", "aws:s3/bucketVersioningV2:BucketVersioningV2",
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
    "aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2",
    "aws:s3/bucketPolicy:BucketPolicy", "aws:kms/alias:Alias",
    "aws:acm/certificate:Certificate",  # an imported certificate (infra/data/tls.yaml acm_imported)
    # Karpenter's interruption queue: EventBridge rules on the default bus that match AWS service events and
    # their targets ("State change events published by AWS services are free", aws.amazon.com/eventbridge/
    # pricing); the SQS queue and its policy bill per request ($0.40 per million after the first million a
    # month free, aws.amazon.com/sqs/pricing): a few interruption messages per node-day, usage-based and ~$0
    "aws:cloudwatch/eventRule:EventRule", "aws:cloudwatch/eventTarget:EventTarget",
    "aws:sqs/queue:Queue", "aws:sqs/queuePolicy:QueuePolicy",
})


def is_free(resource_type: str) -> bool:
    return resource_type in FREE_TYPES or resource_type.startswith(FREE_PREFIXES)
