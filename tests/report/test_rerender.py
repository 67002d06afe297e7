"""`ict compare --rerender`: verdicts rebuilt from report.json equal a live report's."""

import json
import shutil
from pathlib import Path

import pytest

from ict.errors import DataError
from ict.evidence.endpoints import declare
from ict.report.comparison import build_report
from ict.report.rerender import parse_markdown, rerender, rerender_figures

from .helpers import write_run

REPORTS = Path(__file__).resolve().parents[2] / "docs" / "reports"
COMMITTED = sorted(p.parent for p in REPORTS.rglob("report.json"))
ENDPOINTS = declare(["ict-grpo@pass@4", "ict-random_sequence@pass@1"], source="the test")


def section(md: str, start: str, end: str) -> str:
    return md[md.index(start) : md.index(end)]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("live")
    correct = {
        ("grpo", 0): [4] * 10 + [0] * 10, ("grpo", 1): [4] * 12 + [0] * 8,
        ("grpo", 2): [3] * 11 + [0] * 9,
        ("ict", 0): [4] * 14 + [1] * 6, ("ict", 1): [4] * 13 + [0] * 7,
        ("ict", 2): [2] * 16 + [0] * 4,
        ("random_sequence", 0): [4] * 12 + [0] * 8, ("random_sequence", 1): [4] * 10 + [0] * 10,
        ("random_sequence", 2): [4] * 13 + [1] * 7,
    }  # fmt: skip
    runs = [write_run(tmp / "runs", m, s, correct=c) for (m, s), c in correct.items()]
    build_report(runs, tmp / "report", title="live", endpoints=ENDPOINTS)
    return tmp / "report"


def test_rerender_rebuilds_the_live_verdicts_and_tables(live, tmp_path):
    copy = tmp_path / "report"
    shutil.copytree(live, copy)
    md = rerender(copy, ENDPOINTS)
    before = json.loads((live / "report.json").read_text())
    after = json.loads((copy / "report.json").read_text())
    assert after["verdicts"] == before["verdicts"]
    assert after["rerendered"]["command"].startswith("ict compare --rerender")
    live_md, new_md = (live / "report.md").read_text(), md.read_text()
    # the final results (primary table and every key's table) are the live report's, unchanged
    assert section(new_md, "## Final results", "## Entropy health") == section(
        live_md, "## Final results", "## Entropy health"
    )
    # the exploration's differences at each k carry the same verdicts
    k = "Difference to **grpo** at each k"
    table = section(new_md, k, "### pass@1, pass@n")
    assert table == section(live_md, k, "### pass@1, pass@n")
    assert "**Re-rendered**" in new_md
    assert (
        new_md.index("## Declared endpoints") < new_md.index("## Answer") < new_md.index("## Final")
    )
    assert section(new_md, "## Answer", "## Exploration") == section(
        live_md, "## Answer", "## Exploration"
    )  # the same question and figure as the live report's
    # a second re-render changes nothing
    rerender(copy, ENDPOINTS)
    assert md.read_text() == new_md
    assert json.loads((copy / "report.json").read_text())["verdicts"] == after["verdicts"]
    assert (copy / "report.html").read_text().count("data:image/png;base64,") >= 8


@pytest.mark.parametrize("report", COMMITTED, ids=lambda p: str(p.relative_to(REPORTS)))
def test_committed_reports_round_trip_and_carry_seed_level_verdicts(report):
    md = (report / "report.md").read_text()
    assert parse_markdown(md, report).markdown(report) == md
    raw = json.loads((report / "report.json").read_text())
    assert "no significant difference" not in md
    # the answer first: the declared question and the forest plot, before any table
    assert md.index("## Declared endpoints") < md.index("## Answer") < md.index("|")
    assert (report / "plots" / "answer_forest.png").exists()
    assert raw["verdicts"]["comparisons"]
    for c in raw["verdicts"]["comparisons"]:
        assert c["verdict"] in ("higher", "lower", "equivalent", "inconclusive")
    command = (report / "COMMAND.md").read_text()
    if "rerendered" in raw:  # made before the seed-level verdicts: re-rendered, and says how
        assert f"ict compare --rerender docs/reports/{report.relative_to(REPORTS)}" in command
    elif raw["endpoints"]["primary"]:  # a live report: endpoints declared before the runs
        assert "**Re-rendered**" not in md
        assert "ict compare --preset" in command or "python scripts/" in command  # what made it
        # its protocol: in the folder, or the study's one above it (a stage's report)
        assert (report / "PROTOCOL.md").exists() or (report.parent / "PROTOCOL.md").exists()
    else:  # a live exploratory report (a study's declared companion): no claim, and it says so
        assert "**Re-rendered**" not in md and "exploratory" in command.split("\n\n")[1]
        assert all(c["exploratory"] for c in raw["verdicts"]["comparisons"])


def test_rerender_figures_redraws_the_answer_and_changes_no_number(live, tmp_path):
    copy = tmp_path / "report"
    shutil.copytree(live, copy)
    for name in ("answer_forest.png", "answer_declared.png"):
        (copy / "plots" / name).unlink()
    md, raw = (copy / "report.md").read_bytes(), (copy / "report.json").read_bytes()
    written = rerender_figures(copy)
    assert [p.name for p in written] == ["answer_forest.png", "answer_declared.png"]
    assert (copy / "report.md").read_bytes() == md and (copy / "report.json").read_bytes() == raw
    html = (copy / "report.html").read_text()
    assert html.count("data:image/png;base64,") == md.decode().count("![")
    # stored verdicts that the stored values do not give: refused, nothing redrawn
    tampered = json.loads(raw)
    tampered["verdicts"]["comparisons"][0]["verdict"] = "something else"
    (copy / "report.json").write_text(json.dumps(tampered))
    with pytest.raises(DataError, match="differ from the stored ones"):
        rerender_figures(copy)


@pytest.mark.parametrize("report", COMMITTED, ids=lambda p: str(p.relative_to(REPORTS)))
def test_committed_reports_have_the_declared_answer_figure(report):
    raw = json.loads((report / "report.json").read_text())
    if raw.get("endpoints", {}).get("primary"):
        assert (report / "plots" / "answer_declared.png").exists()
