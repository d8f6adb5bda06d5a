"""The deployability check (issue 14): interface, rules, and where it runs."""

from __future__ import annotations

import subprocess
import sys


def test_fit_module_imports_without_pulumi() -> None:
    code = ("import sys, infra.fit as f; f.load_rules(); "
            "bad = [m for m in sys.modules if m == 'pulumi' or m.startswith('pulumi.')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_rule_registry_rejects_duplicate_ids() -> None:
    import pytest

    from infra.fit import RULES, fit_rule

    @fit_rule("test-only-rule")
    def one(ctx):  # type: ignore[no-untyped-def]
        return []

    try:
        with pytest.raises(ValueError):
            @fit_rule("test-only-rule")
            def two(ctx):  # type: ignore[no-untyped-def]
                return []
    finally:
        RULES.pop("test-only-rule", None)
