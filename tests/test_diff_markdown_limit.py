"""The PR comment fits GitHub's 65,536-character limit and says when it left something out."""

from __future__ import annotations

from sizing.analysis.diff import build_diff, side_from_plan, stack_diff
from sizing.report.diff_views import GITHUB_COMMENT_LIMIT, render_markdown
from tests.diff_support import l4_plan


def _many(n: int) -> str:
    before, after = l4_plan(100), l4_plan(200)
    stacks = [stack_diff(f"s{i:04d}", f"stacks/Pulumi.s{i:04d}.yaml", side_from_plan(before, "base"),
                         side_from_plan(after, "head")) for i in range(n)]
    return render_markdown(build_diff("base", "head", stacks))


def test_small_diff_is_not_truncated() -> None:
    md = _many(3)
    assert "Truncated" not in md and md.count("<details>") == 3


def test_large_diff_truncates_details_first_and_says_so() -> None:
    md = _many(60)
    assert len(md) <= GITHUB_COMMENT_LIMIT
    assert "Truncated to fit GitHub's 65,536-character comment limit: 0 summary row(s)" in md
    assert 0 < md.count("<details>") < 60 and md.count("<details>") == md.count("</details>")
    assert md.count("| `s0") == 60  # every stack keeps its summary row


def test_huge_diff_drops_summary_rows_too() -> None:
    md = _many(800)
    assert len(md) <= GITHUB_COMMENT_LIMIT
    assert "<details>" not in md and "summary row(s) and 800 stack detail(s) left out" in md
    assert md.rstrip().endswith("</sub>")  # the footer is kept
