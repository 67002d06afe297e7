"""The comparison report's answer, first: each declared comparison's verdict and number, the verdict
rule, and a forest plot of the verdicts.

The answer is one line per declared primary comparison (ict.evidence.endpoints): its verdict,
the difference with the interval the rule faces, Holm p and seeds; the figure
draws every comparison the verdicts judged on the held-out pass@k keys (one panel per k, in order
of k, titled "pass@4"): the difference of the seed means with its paired t interval over seeds
(the seed-level test's own interval), primary comparisons starred, the verdict beside each. A
second figure, plots/answer_declared.png (`declared_rows`, ict.report.plots.plot_answer), holds
the declared comparisons only, one row each in one panel, readable at README width. Used by the
live report (ict.report.comparison) and by a re-render (ict.report.rerender) alike.
"""

from __future__ import annotations

import math
from pathlib import Path

from ict.evidence.intervals import format_interval
from ict.evidence.verdict import Judgement, Verdict
from ict.report.plots import ForestRow, plot_answer, plot_forest
from ict.report.verdicts import (
    IDENTICAL_RUNS,
    Values,
    adjusted_interval,
    key_names,
    p_text,
    pass_key,
    seed_interval,
    test_interval,
    verdict_rule_text,
)

FOREST_STEM = "answer_forest"
DECLARED_STEM = "answer_declared"


def metric_title(key: str, several_benchmarks: bool = False) -> str:
    """A held-out key as a reader says it: 'eval/toy:cot/pass@4' -> 'pass@4' ('pass@4 on toy:cot'
    when the report holds several benchmarks, each by its task's name without its options)."""
    bench, k = pass_key(key) or (key, None)
    if k is None:
        return key
    return f"pass@{k} on {bench.split('?', 1)[0]}" if several_benchmarks else f"pass@{k}"


def answer_lines(judgement: Judgement, confidence: float) -> list[str]:
    """One line per declared primary comparison, in declaration order: its verdict and its number
    (the difference with the interval the verdict rule faces, Holm p, seeds), then any declared
    comparison these runs could not make."""
    names = key_names(judgement)
    m = judgement.family_size
    primary = judgement.endpoints.primary

    def declared_at(k) -> int:
        return next((i for i, e in enumerate(primary) if e.matches(*k)), len(primary))

    lines = []
    for k in sorted(judgement.family, key=declared_at):
        v = judgement.verdicts[k]
        t = v.test
        what = f"**{v.a} - {v.b}, {names[v.key]}: {v.word}**"
        seeds = f"{t.n} seed{'s' * (t.n != 1)}"
        if t.identical:
            number = f"identical on every seed ({seeds})"
        else:
            iv = adjusted_interval(v, m, confidence)
            diff = (
                f"{format_interval(iv, signed=True)} ({iv.confidence * 100:.3g}% interval "
                f"{iv.method}, Holm family of {m})"
                if iv is not None
                else (f"{t.mean:+.3f}" if math.isfinite(t.mean) else "no difference measured")
            )
            number = f"difference {diff}; Holm p {p_text(v.p_holm)}; {seeds}"
        note = f"; {v.note}" if v.note else ""
        lines.append(f"{what}: {number}{note}.")
    for spec in judgement.missing:
        lines.append(f"**{spec}: not run** (in the Holm family with p = 1).")
    return lines


def _several_benchmarks(judgement: Judgement) -> bool:
    return len({pass_key(v.key)[0] for v in judgement.verdicts.values() if pass_key(v.key)}) > 1


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
    several = _several_benchmarks(judgement)
    return [
        (
            metric_title(key, several),
            [
                _row(v, values, confidence)
                for v in sorted(judgement.verdicts.values(), key=_registry_order)
                if v.key == key
            ],
        )
        for key in keys
    ]


def _registry_order(v: Verdict) -> tuple[int, int]:
    """A comparison's place in every panel: by its methods' registry order (ict.methods.METHODS),
    so a row sits at the same height in each panel."""
    from ict.methods import METHODS

    names = list(METHODS)

    def place(name: str) -> int:
        return names.index(name) if name in names else len(names)

    return place(v.a), place(v.b)


def declared_rows(judgement: Judgement, values: Values, confidence: float) -> list[ForestRow]:
    """The declared (primary) comparisons on held-out pass@k keys, one row each in declaration
    order, labelled with their metric ('ict - grpo, pass@4')."""
    several = _several_benchmarks(judgement)
    primary = judgement.endpoints.primary

    def declared_at(v: Verdict) -> int:
        return next(i for i, e in enumerate(primary) if e.matches(v.a, v.b, v.key))

    declared = [v for v in judgement.verdicts.values() if v.primary and pass_key(v.key)]
    rows = []
    for v in sorted(declared, key=declared_at):
        row = _row(v, values, confidence)
        low, high = row.low, row.high
        if v.problem is not None and v.problem.tested:  # the interval the verdict rule faces
            iv = adjusted_interval(v, judgement.family_size, confidence)
            low, high = (iv.low, iv.high) if iv is not None else (low, high)
        label = f"{row.label}, {metric_title(v.key, several)}"
        rows.append(ForestRow(label, row.method, row.mean, low, high, True, row.verdict))
    return rows


def declared_band(judgement: Judgement, confidence: float) -> tuple[str, float]:
    """(what the declared figure's bars are, its margin): the Holm-adjusted interval over seeds
    and problems and the verdicts' derived margin where the runs hold per-problem values, else
    the paired t interval over seeds and the declared margin."""
    declared = [v for v in judgement.verdicts.values() if v.primary and pass_key(v.key)]
    margins = {round(v.margin, 9) for v in declared if math.isfinite(v.margin)}
    margin = margins.pop() if len(margins) == 1 else judgement.endpoints.margin
    if any(v.problem is not None and v.problem.tested for v in declared):
        m = judgement.family_size
        level = 100.0 * (1.0 - (1.0 - confidence) / max(1, m))
        return f"{level:g}% interval over seeds and problems, Holm family of {m}", margin
    return f"{int(round(confidence * 100))}% paired t interval over seeds", margin


def _row(v: Verdict, values: Values, confidence: float) -> ForestRow:
    t = v.test
    low = high = None
    if t.identical:  # equal values on every seed at this key; identical arms: on every key
        verdict = "identical arms" if v.note == IDENTICAL_RUNS else "equal on every seed"
    else:
        verdict = v.word
        if t.design == "paired t" and t.n >= 2:
            iv = seed_interval(values[v.key][v.a], values[v.key][v.b], confidence)
            low, high = iv.low, iv.high
        elif (iv := test_interval(t, confidence)) is not None:  # blocked, or warm starts as units
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
    """The "Answer" section: each declared primary comparison's verdict and number, one line each
    (answer_lines; without a declaration, the exploratory question), then the verdict rule, then
    the forest plot of every held-out pass@k comparison (plots/answer_forest.png). Returns the
    figure's path (None: nothing held out)."""
    doc.heading("Answer")
    lines = answer_lines(judgement, confidence)
    for line in lines or [question_text(judgement, baseline)]:
        doc.para(line)
    doc.para(verdict_rule_text(judgement))
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
    band, margin = declared_band(judgement, confidence)
    plot_answer(
        declared_rows(judgement, values, confidence),
        plots / f"{DECLARED_STEM}.png",
        title="Declared comparisons: difference of seed means (held-out problems)",
        band_text=band,
        margin=margin,
    )  # the README's figure (the report shows every comparison in the forest below)
    doc.image(
        path,
        f"Each comparison's difference of seed means on the held-out problems, one panel per k; "
        f"bar: its {pct}% paired t interval over seeds (the seed-level test's own interval); "
        "star: a declared primary comparison; the verdict (seed-level test, Holm for the primary "
        "ones, TOST against the grey margin for 'equivalent') beside it. The numbers are in the "
        "tables under Final results.",
    )
    return path
