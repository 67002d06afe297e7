"""The comparison report's answer, first: its declared question and a forest plot of the verdicts.

The question is the declared primary comparisons (ict.evidence.endpoints) in words; the figure
draws every comparison the verdicts judged on the held-out pass@k keys (one panel per k, in order
of k): the difference of the seed means with its paired t interval over seeds (the seed-level
test's own interval), primary comparisons starred, the verdict beside each. Used by the live report
(ict.report.comparison) and by a re-render (ict.report.rerender) alike.
"""

from __future__ import annotations

import math
from pathlib import Path

from ict.evidence.verdict import Judgement, Verdict
from ict.report.plots import ForestRow, plot_forest
from ict.report.verdicts import IDENTICAL_RUNS, Values, pass_key, seed_interval

FOREST_STEM = "answer_forest"


def question_text(judgement: Judgement, baseline: str) -> str:
    """The declared question in one sentence, from the primary comparisons (or, without any,
    every method against the baseline, exploratory)."""
    primary = judgement.endpoints.primary
    if not primary:
        return (
            f"No primary comparison was declared: every method is compared with **{baseline}**, "
            "and every verdict below is exploratory (a hypothesis for the next study)."
        )
    asked = "; ".join(f"is **{p.a}** different from **{p.b}** at {p.metric}" for p in primary)
    return (
        f"Declared question: {asked}? (Holm over the {len(primary)} primary comparisons; "
        "the others are exploratory.)"
    )


def forest_panels(
    judgement: Judgement, values: Values, confidence: float
) -> list[tuple[str, list[ForestRow]]]:
    """(panel title, rows) per held-out pass@k key the verdicts judged, by benchmark then k as a
    number; a panel's rows: every judged comparison at its key, in the verdicts' order."""
    keys = sorted({v.key for v in judgement.verdicts.values() if pass_key(v.key)}, key=pass_key)
    return [
        (
            key[5:],
            [_row(v, values, confidence) for v in judgement.verdicts.values() if v.key == key],
        )
        for key in keys
    ]


def _row(v: Verdict, values: Values, confidence: float) -> ForestRow:
    t = v.test
    low = high = None
    if t.identical:  # equal values on every seed at this key; identical arms: on every key
        verdict = "identical arms" if v.note == IDENTICAL_RUNS else "equal on every seed"
    else:
        verdict = v.word
        if t.design.startswith("paired t") and t.n >= 2:
            iv = seed_interval(values[v.key][v.a], values[v.key][v.b], confidence)
            low, high = iv.low, iv.high
    mean = t.mean if math.isfinite(t.mean) else 0.0
    return ForestRow(f"{v.a} - {v.b}", v.a, mean, low, high, v.primary, verdict)


def write_answer_section(
    doc,
    judgement: Judgement,
    values: Values,
    confidence: float,
    baseline: str,
    plots: Path,
    *,
    title: str = "",
) -> Path | None:
    """The "Answer" section: the declared question, then the forest plot of every held-out pass@k
    comparison (plots/answer_forest.png). Returns the figure's path (None: nothing held out)."""
    doc.heading("Answer")
    doc.para(question_text(judgement, baseline))
    pct = int(round(confidence * 100))
    path = plot_forest(
        forest_panels(judgement, values, confidence),
        plots / f"{FOREST_STEM}.png",
        title=title or f"Differences to {baseline} (seed means)",
        band_text=f"{pct}% paired t interval over seeds",
        margin=judgement.endpoints.margin,
    )
    if path is None:
        doc.para("No held-out pass@k in these runs: the verdicts are in the tables below.")
        return None
    doc.image(
        path,
        f"Each comparison's difference of seed means on the held-out problems, one panel per k; "
        f"bar: its {pct}% paired t interval over seeds (the seed-level test's own interval); "
        "star: a declared primary comparison; the verdict (seed-level test, Holm for the primary "
        "ones, TOST against the grey margin for 'equivalent') beside it. The numbers are in the "
        "tables under Final results.",
    )
    return path
