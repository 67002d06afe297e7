"""The committed claims state their scope (issue 46).

Every committed report.md that states a verdict ("higher", "lower", "equivalent"), and the README's
current answer, states before it the initialisations, the learning rate and how that rate was
chosen (ict.report.scope's convention). The exploration study's texts keep the corrections of
its re-analysis: random_sequence's KL beside every "twice as far", the loss-normaliser
explanation withdrawn, and "kept entropy" never without what was lost.
"""

import re
from pathlib import Path

import pytest

from ict.report.scope import first_verdict, scope_problems

ROOT = Path(__file__).resolve().parents[2]
REPORTS = sorted((ROOT / "docs" / "reports").rglob("report.md"))
EXPLORE = ROOT / "docs" / "reports" / "toy-cot-explore"
EXPLORE_TEXTS = [
    ROOT / "README.md",
    ROOT / "docs" / "reports" / "README.md",
    EXPLORE / "report.md",
    EXPLORE / "secondary.md",
    EXPLORE / "COMMAND.md",
    EXPLORE / "companion" / "COMMAND.md",
    EXPLORE / "companion" / "companion.md",
]


def current_answer() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## The current answer")
    return text[start : text.index("\n## ", start + 5)]


def units(path: Path) -> list[str]:
    """The paragraphs and list items of a Markdown file (a list item ends at the next item)."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
        out += [u for u in re.split(r"\n(?=\s*[-*] |\s*\d+\. )", block) if u.strip()]
    return out


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_a_committed_report_states_its_scope_before_any_verdict(report):
    assert scope_problems(report.read_text(encoding="utf-8")) == []


def test_the_readme_current_answer_states_its_scope_before_its_verdict():
    answer = current_answer()
    assert first_verdict(answer) is not None  # it states one: the check below is not vacuous
    assert scope_problems(answer) == []


def test_the_check_fails_the_committed_report_without_its_scope():
    md = (EXPLORE / "report.md").read_text(encoding="utf-8")
    bare = "\n".join(line for line in md.split("\n") if not line.startswith("**Scope - "))
    (problem,) = scope_problems(bare)
    assert "but no scope" in problem
    answer = "\n".join(
        line for line in current_answer().split("\n") if not line.startswith("- **Scope - ")
    )
    assert scope_problems(answer) and "but no scope" in scope_problems(answer)[0]


@pytest.mark.parametrize("path", EXPLORE_TEXTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_exploration_study_claims_keep_their_corrections(path):
    for unit in units(path):
        flat = " ".join(unit.split())
        if re.search(r"twice as far|twice GRPO's", flat):  # ICT's drift: the control beside it
            assert "0.031" in flat, f"'twice as far' without random_sequence's KL: {flat[:200]}"
        if re.search(r"normalis\w+ over the selected", flat):
            assert "withdrawn" in flat, f"the normaliser explanation, not withdrawn: {flat[:200]}"
        if re.search(r"\bk(?:ept|eeps) (?:more of |its |more )*entropy", flat):
            assert "pass@" in flat, f"'kept entropy' without what was lost: {flat[:200]}"
