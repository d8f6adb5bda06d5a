#!/usr/bin/env bash
# Install checkov into its own venv (.venv-scan, outside the project's venv: installed there it would
# downgrade boto3). .ci/run calls this before the test suite; the checkov test never installs it.
#   bash scripts/install_checkov.sh          # CHECKOV_VERSION (3.3.30), SCAN_VENV (.venv-scan)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CHECKOV_VERSION="${CHECKOV_VERSION:-3.3.30}"
SCAN_VENV="${SCAN_VENV:-$ROOT/.venv-scan}"
if ! "$SCAN_VENV/bin/checkov" --version 2>/dev/null | grep -qx "$CHECKOV_VERSION"; then
  python3 -m venv "$SCAN_VENV"
  "$SCAN_VENV/bin/pip" install --quiet --disable-pip-version-check "checkov==$CHECKOV_VERSION"
fi
