"""Overlap study: which tokens ICT and 20-Entropy pick across a run (from samples.jsonl records).

Per logged step: Jaccard of the two selections (pooled over the step's responses) next to the
Jaccard two independent random selections of the same sizes would have on average,
a*b / (a + b - a*b) for selected fractions a and b. Over the run: the tokens each selector picks
most often (with how often the token appears), and where in the response they sit (10 bins of
relative position t / L).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ict.report.plots import save_figure
from ict.report.tokenmap import validate_record

POSITION_BINS = 10


@dataclass
class OverlapStudy:
    """Results of `overlap_study` for selectors a (default ict) and b (default entropy)."""

    a: str
    b: str
    steps: list[int] = field(default_factory=list)
    jaccard: list[float] = field(default_factory=list)  # per step
    chance: list[float] = field(default_factory=list)  # per step, independent random selections
    tokens: int = 0  # response tokens analysed
    responses: int = 0
    top: dict[str, list[tuple[str, int, int]]] = field(
        default_factory=dict
    )  # (token, picked, seen)
    position: dict[str, np.ndarray] = field(default_factory=dict)  # [POSITION_BINS] fractions

    @property
    def mean_jaccard(self) -> float:
        return float(np.mean(self.jaccard)) if self.jaccard else float("nan")

    @property
    def mean_chance(self) -> float:
        return float(np.mean(self.chance)) if self.chance else float("nan")


def overlap_study(
    records: list[dict], a: str = "ict", b: str = "entropy", top: int = 10
) -> OverlapStudy:
    """Overlap of selectors `a` and `b` over records that hold both selections (others skipped)."""
    study = OverlapStudy(a=a, b=b)
    by_step: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    picked = {a: Counter(), b: Counter()}
    seen = Counter()
    pos_counts = {name: np.zeros(POSITION_BINS) for name in (a, b, "all tokens")}
    for i, rec in enumerate(records):
        validate_record(rec, i)
        sel = rec.get("selected", {})
        if a not in sel or b not in sel or not rec["tokens"]:
            continue
        ma, mb = np.asarray(sel[a], bool), np.asarray(sel[b], bool)
        by_step.setdefault(int(rec.get("step", 0)), []).append((ma, mb))
        tokens = np.asarray(rec["tokens"], dtype=object)
        seen.update(rec["tokens"])
        picked[a].update(tokens[ma].tolist())
        picked[b].update(tokens[mb].tolist())
        n = len(tokens)
        bins = np.minimum((np.arange(n) * POSITION_BINS) // n, POSITION_BINS - 1)
        pos_counts[a] += np.bincount(bins[ma], minlength=POSITION_BINS)
        pos_counts[b] += np.bincount(bins[mb], minlength=POSITION_BINS)
        pos_counts["all tokens"] += np.bincount(bins, minlength=POSITION_BINS)
        study.tokens += n
        study.responses += 1
    for step in sorted(by_step):
        ma = np.concatenate([x for x, _ in by_step[step]])
        mb = np.concatenate([y for _, y in by_step[step]])
        union = np.sum(ma | mb)
        if union == 0:
            continue
        fa, fb = ma.mean(), mb.mean()
        study.steps.append(step)
        study.jaccard.append(float(np.sum(ma & mb) / union))
        study.chance.append(float(fa * fb / (fa + fb - fa * fb)))
    study.top = {
        name: [(t, c, seen[t]) for t, c in picked[name].most_common(top)] for name in (a, b)
    }
    study.position = {k: v / v.sum() if v.sum() else v for k, v in pos_counts.items()}
    return study


def _show(token: str) -> str:
    return (
        token.replace("\n", "\\n").replace("\t", "\\t").replace("|", "\\|").replace(" ", "␣")
        or "(empty)"
    )


def overlap_markdown(study: OverlapStudy) -> str:
    """Markdown: a summary sentence, the top-token table side by side, the position table."""
    if not study.steps:
        return f"No samples hold both `{study.a}` and `{study.b}` selections; no overlap study.\n"
    lines = [
        f"{study.responses} responses ({study.tokens} tokens) over {len(study.steps)} logged steps. "
        f"Mean Jaccard of {study.a} vs {study.b} selections: {study.mean_jaccard:.3f} "
        f"(independent random selections of the same sizes: {study.mean_chance:.3f}). "
        + (
            f"{study.a} picks largely different tokens than {study.b}."
            if study.mean_jaccard < 0.5
            else f"{study.a} and {study.b} pick largely the same tokens."
        ),
        "",
        f"| rank | {study.a} token | picked / seen | {study.b} token | picked / seen |",
        "|---:|---|---:|---|---:|",
    ]
    ta, tb = study.top[study.a], study.top[study.b]
    for r in range(max(len(ta), len(tb))):
        ca = f"`{_show(ta[r][0])}` | {ta[r][1]} / {ta[r][2]}" if r < len(ta) else " | "
        cb = f"`{_show(tb[r][0])}` | {tb[r][1]} / {tb[r][2]}" if r < len(tb) else " | "
        lines.append(f"| {r + 1} | {ca} | {cb} |")
    lines += [
        "",
        "Share of each selector's picks by relative position in the response (t / L):",
        "",
    ]
    edges = [f"{i / POSITION_BINS:.1f}-{(i + 1) / POSITION_BINS:.1f}" for i in range(POSITION_BINS)]
    lines += ["| selector | " + " | ".join(edges) + " |", "|---|" + "---:|" * POSITION_BINS]
    for name, frac in study.position.items():
        lines.append(f"| {name} | " + " | ".join(f"{x:.2f}" for x in frac) + " |")
    return "\n".join(lines) + "\n"


def plot_overlap(study: OverlapStudy, path: str | Path) -> Path | None:
    """Two panels: Jaccard per step vs chance; share of picks by relative position."""
    if not study.steps:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=100)
    ax1.plot(study.steps, study.jaccard, marker="o", ms=3, label=f"{study.a} vs {study.b}")
    ax1.plot(
        study.steps, study.chance, ls="--", color="grey", label="random selections, same sizes"
    )
    ax1.set(title="Selection overlap (Jaccard)", xlabel="step", ylabel="Jaccard", ylim=(0, 1))
    ax1.legend(fontsize=8)
    centers = (np.arange(POSITION_BINS) + 0.5) / POSITION_BINS
    width = 0.8 / POSITION_BINS / len(study.position)
    for i, (name, frac) in enumerate(study.position.items()):
        ax2.bar(centers + (i - 1) * width, frac, width=width, label=name)
    ax2.set(
        title="Where picks sit in the response",
        xlabel="relative position t / L",
        ylabel="share of picks",
    )
    ax2.legend(fontsize=8)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    return save_figure(fig, path)
