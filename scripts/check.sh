#!/usr/bin/env bash
# The whole test suite: lint, types on sizing/ and infra/, and every test. Run from the repository root
# inside the project's virtualenv (see README "Quick start").
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check sizing infra tests bench scripts policy
mypy sizing infra
python -m pytest -q -p no:cacheprovider -m "slow or not slow" "$@"
