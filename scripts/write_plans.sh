#!/usr/bin/env bash
# Regenerate the saved plans (stacks/Pulumi.<env>.plan.json) that `pulumi up` and `llmcap render`
# deploy, from the bundled catalog and calibration only (no `llmcap catalog refresh` cache, no
# calibration overlay), so every machine writes the same files. Then review `git diff stacks/`.
#   bash scripts/write_plans.sh                      # every stacks/Pulumi.*.yaml
#   bash scripts/write_plans.sh stacks/Pulumi.dev.yaml
# A stack that cannot be planned stops the script with its reason (exit 2 or 3).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset LLMCAP_CATALOG_DIR
# no refresh cache, no checkpoint-metadata cache (both under XDG_CACHE_HOME), no overlay, no hub lookups
export XDG_CACHE_HOME="$tmp/cache" LLMCAP_CALIBRATION_OVERLAY="$tmp/no-overlay.json" HF_HUB_OFFLINE=1
if [ "$#" -gt 0 ]; then files=("$@"); else files=(stacks/Pulumi.*.yaml); fi
for f in "${files[@]}"; do
  python -c 'from sizing.cli import main; main()' plan "$f" --write --format json > /dev/null
done
