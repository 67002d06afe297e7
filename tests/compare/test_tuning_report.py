"""The report's tuning section: the rule's own text, the score-against-lr figure (one panel per
arm, one point per tuning seed and value, the selection starred, a red title at a capped edge),
the table with the edge flag; an issue-30 record (the committed study's) still renders."""

import json
from pathlib import Path

import matplotlib.colors as mcolors

from ict.compare.tuning import EDGES, RULES, TuningSpec, decide, tuning_record
from ict.report import tuning as section
from ict.report.document import Document

from .test_tuning_rule import GRID, SEEDS, SPEC, peak, table

ROOT = Path(__file__).resolve().parents[2]


def record_of(spec, scores, growths=None):
    grids = {m: list(GRID) for m in scores}
    growths = growths or {m: dict.fromkeys(EDGES, 0) for m in scores}
    return json.loads(json.dumps(tuning_record(spec, decide(spec, grids, growths, scores), scores)))


def captured(monkeypatch):
    """The figures the section saves, kept open for inspection."""
    figures = []
    original = section.save_figure

    def keep(fig, path):
        figures.append(
            [
                (ax.get_title(), ax.title.get_color(), list(ax.collections), list(ax.lines))
                for ax in fig.axes
                if ax.axison
            ]
        )
        return original(fig, path)

    monkeypatch.setattr(section, "save_figure", keep)
    return figures


def test_the_section_shows_each_arms_curve_per_seed_and_flags_a_capped_edge(tmp_path, monkeypatch):
    figures = captured(monkeypatch)
    scores = {
        "grpo": table(peak(4e-5)),  # interior
        "ict": table(lambda v: 0.3 - 0.03 * (v / 1e-5)),  # best at the low edge
    }
    record = record_of(SPEC, scores, {"grpo": {"low": 0, "high": 0}, "ict": {"low": 3, "high": 0}})
    doc = Document("t")
    assert section.write_tuning_section(doc, record, tmp_path / "plots") is record
    md = doc.markdown(tmp_path)
    assert RULES["final_argmax"].text in md and "rule `final_argmax`" in md
    assert "![" in md and (tmp_path / "plots" / "tuning.png").stat().st_size > 1000
    assert "**At the grid's edge after its last growth:** ict (low edge)" in md
    assert "| ict |" in md and "1e-05 (at edge) |" in md and "grpo (" not in md.split("edge")[-1]
    (panels,) = figures
    assert [p[0] for p in panels] == ["grpo: 4e-05", "ict: 1e-05 (at low edge)"]
    red = mcolors.to_rgba("#b00020")
    assert mcolors.to_rgba(panels[1][1]) == red and mcolors.to_rgba(panels[0][1]) != red
    for _, _, collections, _ in panels:  # one scatter per value, one point per tuning seed
        points = [c for c in collections if len(c.get_offsets())]
        assert len(points) == len(GRID) and all(len(c.get_offsets()) == len(SEEDS) for c in points)
    grpo_scatter = [c.get_offsets() for c in panels[0][2] if len(c.get_offsets())]
    assert sorted(grpo_scatter[2][:, 1]) == sorted(scores["grpo"][4e-5].values())
    star = [line for line in panels[0][3] if line.get_marker() == "*"]
    assert [tuple(line.get_xydata()[0]) for line in star] == [
        (4e-5, record["methods"]["grpo"]["scores"]["4e-05"])
    ]


def test_shared_mode_has_a_panel_for_the_mean_over_methods(tmp_path, monkeypatch):
    figures = captured(monkeypatch)
    spec = TuningSpec(**{**SPEC.__dict__, "mode": "shared"})
    record = record_of(spec, {"grpo": table(peak(8e-5)), "ict": table(peak(2e-5))})
    doc = Document("t")
    section.write_tuning_section(doc, record, tmp_path)
    (panels,) = figures
    assert [p[0].split(":")[0] for p in panels] == ["grpo", "ict", "shared (mean over methods)"]
    assert "made on the mean over methods" in doc.markdown(tmp_path)


def test_the_committed_studys_issue_30_record_still_renders():
    record = json.loads((ROOT / "docs/reports/toy-cot-long-tuned/report.json").read_text())
    doc = Document("t")
    section.write_tuning_section(doc, record["tuning"])  # no plots folder: no figure
    md = doc.markdown(ROOT)
    assert "the smallest value within 0.02 of the best wins" in md and "![" not in md
    assert "| ict |" in md and "**0.760**" in md
