"""Karpenter as the GPU node provisioner (llmcap:deployment.provisioner: karpenter): `nodes` builds its
EC2NodeClass and NodePools and the controller's values and IAM policy (pure); `controller` creates the Helm release,
its Pod Identity role, the node role and access entry, and the objects (Pulumi). It talks to AWS and to the
cluster, so it sits above aws/ and kubernetes/ and below fit/ (tests/test_layering.py)."""
