"""llmcap's policy pack: `pulumi preview --policy-pack policy` (from the repository root).
The rules live in llmcap_policy/ (rules.py: plain functions; pack.py: the pulumi_policy policies).
The engine runs this file as `__main__`; constructing the PolicyPack starts the analyzer's gRPC
server and serves until the engine stops it, so importing this module only builds the policies."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from llmcap_policy.pack import PACK_NAME, policies  # noqa: E402
from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

POLICIES = policies()

if __name__ == "__main__":
    PolicyPack(PACK_NAME, POLICIES, enforcement_level=EnforcementLevel.MANDATORY,
               description="llmcap: GPU taints, private encrypted buckets, IMDSv2, TLS and API key on the "
                           "endpoint; advisory GPU budget")
