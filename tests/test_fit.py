"""The deployability check (issue 14): interface, rules, and where it runs."""

from __future__ import annotations

import subprocess
import sys


def test_fit_module_imports_without_pulumi() -> None:
    code = ("import sys, infra.fit.check as f; f.load_rules(); "
            "bad = [m for m in sys.modules if m == 'pulumi' or m.startswith('pulumi.')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_rule_registry_rejects_duplicate_ids() -> None:
    import pytest

    from infra.fit.check import RULES, fit_rule

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


def test_program_raises_before_any_resource_when_a_rule_fails(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Under Pulumi's mocks: a failing rule stops build_program before anything is registered."""
    import pytest

    import infra.render
    from infra.fit.check import RULES, FitProblem, NotDeployable, fit_rule
    from infra.program import Secrets, build_program
    from infra.render import run_mocked
    from sizing.planning.planner import plan_stack
    from sizing.stack import load_stack
    from tests.pulumi_harness import ROOT, catalog
    from tests.pulumi_harness import pins as h_pins

    stack = load_stack(ROOT / "stacks" / "Pulumi.dev.yaml")
    plan = plan_stack(stack, catalog())
    secrets = Secrets(api_key="k", hf_token="hf_" + "t" * 34)  # dev serves a gated checkpoint: both are set

    @fit_rule("test-always-fails")
    def always(ctx):  # type: ignore[no-untyped-def]
        yield FitProblem("test-always-fails", ctx.plan.pools[0].name, "always fails; remove the test rule", "test")

    engines: list[infra.render.RecordingMocks] = []

    class Recording(infra.render.RecordingMocks):
        def __init__(self, region: str) -> None:
            super().__init__(region)
            engines.append(self)

    monkeypatch.setattr(infra.render, "RecordingMocks", Recording)
    try:
        with pytest.raises(NotDeployable) as exc:
            run_mocked(stack, lambda: build_program(stack, plan, catalog(), secrets, h_pins()))
    finally:
        RULES.pop("test-always-fails", None)
    assert "[test-always-fails]" in exc.value.problems[-1]
    assert len(engines) == 1 and engines[0].resources == []
    # and the same program with the rule gone registers resources (the check above can fail)
    run_mocked(stack, lambda: build_program(stack, plan, catalog(), secrets, h_pins()))
    assert engines[1].resources


def _main_module():  # type: ignore[no-untyped-def]
    """infra/__main__.py without its trailing `main()` call (Pulumi runs the file as the program)."""
    import types
    from pathlib import Path

    src = (Path(__file__).resolve().parents[1] / "infra" / "__main__.py").read_text(encoding="utf-8")
    assert src.rstrip().endswith("main()")
    mod = types.ModuleType("llmcap_program_under_test")
    mod.__dict__["__file__"] = str(Path(__file__).resolve().parents[1] / "infra" / "__main__.py")
    exec(compile(src.rstrip()[: -len("main()")], "infra/__main__.py", "exec"), mod.__dict__)
    return mod


def test_pulumi_program_refuses_an_empty_api_key(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pulumi.config as cfg
    import pytest

    from sizing.errors import LlmcapError

    mod = _main_module()
    for value in ("", "   "):
        monkeypatch.setattr(cfg, "get_config", lambda k, v=value: v if k == "llmcap:api_key" else None)
        with pytest.raises(LlmcapError) as e:
            mod.read_config()
        assert "llmcap:api_key: empty" in e.value.problems[0]
    monkeypatch.setattr(cfg, "get_config", lambda k: "s3cret" if k == "llmcap:api_key" else None)
    _, secrets = mod.read_config()
    assert secrets.api_key is not None
