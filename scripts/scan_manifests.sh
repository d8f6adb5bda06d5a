#!/usr/bin/env bash
# Security scan of the rendered Kubernetes manifests with checkov (kubernetes framework).
# checkov lives in its own venv (.venv-scan): installed into the main venv it would downgrade boto3.
# Renders the dev and llama405b stacks (single-node and multi-node serving), applies the documented
# skips of policy/checkov-skips.yaml and fails on any other failed check.
#   scripts/scan_manifests.sh [--no-skips]   # --no-skips: the raw findings, for docs/security.md
# Env: CHECKOV_VERSION (3.3.30), SCAN_VENV (.venv-scan), PYTHON (python of the main venv), STACKS.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
CHECKOV_VERSION="${CHECKOV_VERSION:-3.3.30}"
SCAN_VENV="${SCAN_VENV:-$ROOT/.venv-scan}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
STACKS="${STACKS:-dev llama405b}"
SKIPS=1
[ "${1:-}" = "--no-skips" ] && SKIPS=0

CHECKOV_VERSION="$CHECKOV_VERSION" SCAN_VENV="$SCAN_VENV" bash "$ROOT/scripts/install_checkov.sh"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
RENDERED=()
for s in $STACKS; do
  "$PYTHON" -c 'from sizing.cli import main; main()' render "stacks/Pulumi.$s.yaml" --out "$WORK/render/$s" >/dev/null
  RENDERED+=("$WORK/render/$s")
done

ARGS=(--framework kubernetes --compact --quiet)
if [ "$SKIPS" = 1 ]; then
  GLOBAL="$("$PYTHON" scripts/checkov_prepare.py policy/checkov-skips.yaml "$WORK/scan" "${RENDERED[@]}")"
  [ -n "$GLOBAL" ] && ARGS+=(--skip-check "$GLOBAL")
else
  "$PYTHON" scripts/checkov_prepare.py /dev/null "$WORK/scan" "${RENDERED[@]}" >/dev/null
fi
# no calls to the Prisma Cloud API for guideline links (offline runs stay quiet)
export BC_SKIP_MAPPING=TRUE
"$SCAN_VENV/bin/checkov" -d "$WORK/scan" "${ARGS[@]}"
