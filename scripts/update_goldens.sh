#!/usr/bin/env bash
# Rewrite every golden file under tests/golden/ from the current output, then show what changed.
# Run from anywhere inside the project's virtualenv; review `git diff tests/golden docs` before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
# every test module that takes the update_golden fixture: the README walk-through (docs/walkthrough.md) and the
# reference-scenario blocks of README.md and docs/reference-scenario.md (tests/test_reference_tables.py) among them
mapfile -t files < <(grep -l "update_golden" tests/test_*.py | sort)
LLMCAP_UPDATE_GOLDEN=1 python -m pytest -q -p no:cacheprovider -m "slow or not slow" "${files[@]}" "$@"
git status --short tests/golden docs || true
