"""The comparison report's Answer section opens with the answer (each declared comparison's
verdict and number, one line each), the verdict rule after it; every table fits a 1200 px window
(split when wider than the page's text column, long words broken by the HTML)."""

from __future__ import annotations

import pytest

from ict.evidence.endpoints import declare
from ict.report.comparison import build_report
from ict.report.document import LONG_WORD, TABLE_PX, Document, min_width_px, split_columns
from ict.report.rerender import parse_markdown

from .helpers import write_run

CORRECT = {
    ("grpo", 0): [4] * 10 + [0] * 10, ("grpo", 1): [4] * 12 + [0] * 8, ("grpo", 2): [4] * 11 + [0] * 9,
    ("ict", 0): [4] * 14 + [0] * 6, ("ict", 1): [4] * 13 + [0] * 7, ("ict", 2): [4] * 16 + [0] * 4,
    ("random_sequence", 0): [4] * 12 + [0] * 8, ("random_sequence", 1): [4] * 10 + [0] * 10,
    ("random_sequence", 2): [4] * 13 + [0] * 7,
}  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("answer")
    runs = [write_run(root / "runs", m, s, correct=c) for (m, s), c in CORRECT.items()]
    endpoints = declare(
        ["ict-grpo@pass@4", "ict-random_sequence@pass@1", "ict-kl_cov@pass@1"], margin=0.05
    )
    build_report(runs, root / "r", endpoints=endpoints)
    return root / "r"


def paragraphs(md: str, heading: str) -> list[str]:
    start = md.index(f"## {heading}\n")
    section = md[start : md.index("\n## ", start + 1)]
    return [p for p in section.split("\n\n")[1:] if p.strip()]


def test_the_answer_section_opens_with_each_verdict_and_its_number(report):
    import json

    md = (report / "report.md").read_text()
    first, second, missing, rule, *rest = paragraphs(md, "Answer")
    raw = json.loads((report / "report.json").read_text())
    verdicts = {(c["a"], c["b"], c["key"]): c for c in raw["verdicts"]["comparisons"]}
    v4 = verdicts[("ict", "grpo", "eval/toy/pass@4")]
    v1 = verdicts[("ict", "random_sequence", "eval/toy/pass@1")]
    assert first.startswith(f"**ict - grpo, eval/toy/pass@4: {v4['verdict']}**: difference ")
    assert f"Holm p {v4['p_holm']:.3f}" in first and "3 seeds" in first
    assert f"{v4['difference']:+.3f} [" in first  # the number: the difference and its interval
    assert second.startswith(f"**ict - random_sequence, eval/toy/pass@1: {v1['verdict']}**")
    assert missing.startswith("**ict-kl_cov@pass@1: not run**")
    assert rule.startswith("**Verdict rule**") and rest[0].startswith("![")  # then the figure
    assert "**Verdict rule**" not in "\n\n".join(paragraphs(md, "Declared endpoints"))
    # the line's interval is the primary table's
    table_row = next(line for line in md.splitlines() if line.startswith("| ict - grpo | eval/"))
    assert first.split("difference ")[1].split(" (")[0] in table_row


def test_every_table_fits_the_page(report):
    md = (report / "report.md").read_text()
    tables = [b for b in parse_markdown(md, report).blocks if b[0] == "table"]
    assert tables and all(min_width_px(b[1], b[2]) <= TABLE_PX for b in tables)
    # the primary table (13 columns) was split in two, each with the comparison first
    parts = [b for b in tables if b[1][0] == "comparison"]
    assert len(parts) == 2 and sum(len(b[1]) - 1 for b in parts) == 12
    assert "verdict" in parts[0][1]
    page = (report / "report.html").read_text()
    assert "td{" not in page or "overflow-wrap:anywhere" in page


def test_split_columns_repeats_the_first_column_and_keeps_every_cell():
    header = ["run", *(f"setting_{i:02d}_with_a_long_name" for i in range(12))]
    rows = [[f"run{r}", *(f"value{r}{i}" for i in range(12))] for r in range(3)]
    assert min_width_px(header, rows) > TABLE_PX
    doc = Document("t")
    doc.table(header, rows)
    parts = [b for b in doc.blocks if b[0] == "table"]
    assert len(parts) > 1 and all(b[1][0] == "run" for b in parts)
    assert all(min_width_px(b[1], b[2]) <= TABLE_PX for b in parts)
    assert [h for b in parts for h in b[1][1:]] == header[1:]
    for r in range(3):
        assert [c for b in parts for c in b[2][r][1:]] == rows[r][1:]
    narrow = (["a", "b", "c"], [["1", "2", "3"]])
    assert split_columns(*narrow) == [narrow]
    # a word longer than LONG_WORD counts as LONG_WORD characters (the HTML breaks it)
    assert min_width_px(["k"], [["x" * 500]]) == min_width_px(["k"], [["x" * LONG_WORD]])
