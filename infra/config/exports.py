"""Stack output keys: shared constants so `pulumi stack output`, the render and the tests agree."""

from __future__ import annotations

ENDPOINT = "endpoint"
ENDPOINT_CA_CERTIFICATE = "endpointCaCertificate"  # PEM of the CA that signed the created endpoint certificate
CLUSTER_NAME = "clusterName"
KUBECONFIG = "kubeconfig"
VPC_ID = "vpcId"
WEIGHTS_BUCKET = "weightsBucket"
WEIGHTS_PREFIX = "weightsPrefix"
GPUS = "gpus"
INSTANCE_TYPES = "instanceTypes"
USD_PER_HOUR = "usdPerHour"
USD_PER_MONTH = "usdPerMonth"
ALL_IN_USD_PER_MONTH = "allInUsdPerMonth"
USD_PER_MILLION_OUTPUT_TOKENS = "usdPerMillionOutputTokens"
API_COMPARISON = "apiComparison"
PLAN = "plan"
