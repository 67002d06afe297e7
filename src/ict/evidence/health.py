"""Entropy health judged over windows: the mean of the last W logged steps against the first W.

collapse:  last-W mean entropy < collapse_fraction x first-W mean;
explosion: last-W mean entropy > explosion_multiple x first-W mean, or the last-W mean format
           rate < format_drop_fraction x its first-W mean (when a format rate is logged).
W is `window`, shrunk to half the logged steps for short runs so the windows never overlap; with
fewer than 2 logged steps there is no judgement. A single step outside these bounds is a blip: a
warning in the training log (ict.train.outputs.EntropyHealth), never a verdict. The criterion is
printed beside every flag, e.g. "last-10 mean H 0.12x first-10 (collapse < 0.2x)".

One copy of the criterion: the trainer's EntropyHealth (summary.json) and the report's health
section both call `judge_health`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

WINDOW = 10  # logged steps per window
COLLAPSE_FRACTION = 0.2  # collapse: last-window entropy below a fifth of the first window's
EXPLOSION_MULTIPLE = 3.0  # explosion: last-window entropy above 3x the first window's
FORMAT_DROP_FRACTION = 0.5  # explosion: last-window format rate below half the first window's


@dataclass(frozen=True)
class HealthCriterion:
    """The thresholds of the window judgement (see the module text)."""

    window: int = WINDOW
    collapse_fraction: float = COLLAPSE_FRACTION
    explosion_multiple: float = EXPLOSION_MULTIPLE
    format_drop_fraction: float = FORMAT_DROP_FRACTION


@dataclass(frozen=True)
class HealthJudgement:
    """The window judgement of one run: `window` (W used), `entropy_first` / `entropy_last`
    (window means, nats), `ratio` (last / first), the format rate's ratio (or None), the flags
    and `text` (the criterion beside the numbers)."""

    window: int
    entropy_first: float
    entropy_last: float
    ratio: float
    format_ratio: float | None
    collapse: bool
    explosion: bool
    criterion: HealthCriterion

    @property
    def criterion_text(self) -> str:
        """'last-10 vs first-10 mean H (collapse < 0.2x, explosion > 3x)'."""
        c, w = self.criterion, self.window
        out = (
            f"last-{w} vs first-{w} mean H (collapse < {c.collapse_fraction:g}x, "
            f"explosion > {c.explosion_multiple:g}x"
        )
        if self.format_ratio is not None:
            out += f"; format rate < {c.format_drop_fraction:g}x"
        return out + ")"

    @property
    def text(self) -> str:
        """'last-10 mean H 0.12x first-10 (collapse < 0.2x, explosion > 3x)'."""
        c, w = self.criterion, self.window
        out = (
            f"last-{w} mean H {self.ratio:.2f}x first-{w} "
            f"(collapse < {c.collapse_fraction:g}x, explosion > {c.explosion_multiple:g}x)"
        )
        if self.format_ratio is not None:
            out += (
                f"; format rate {self.format_ratio:.2f}x (explosion < {c.format_drop_fraction:g}x)"
            )
        return out

    def as_dict(self) -> dict:
        return {
            "window": self.window, "entropy_first": self.entropy_first,
            "entropy_last": self.entropy_last, "ratio": self.ratio,
            "format_ratio": self.format_ratio, "entropy_collapse": self.collapse,
            "entropy_explosion": self.explosion, "criterion": self.text,
        }  # fmt: skip


def _ratio(values: Sequence[float], w: int) -> tuple[float, float, float]:
    first = sum(values[:w]) / w
    last = sum(values[-w:]) / w
    return first, last, (last / first if first > 0 else math.nan)


def judge_health(
    entropy: Sequence[float],
    format_rate: Sequence[float] | None = None,
    criterion: HealthCriterion = HealthCriterion(),
) -> HealthJudgement | None:
    """The window judgement of a run's logged `entropy` series (one value per logged step, nats)
    and optional `format_rate` series; None with fewer than 2 finite values."""
    h = [float(x) for x in entropy if x is not None and math.isfinite(x)]
    w = min(criterion.window, len(h) // 2)
    if w < 1:
        return None
    first, last, ratio = _ratio(h, w)
    collapse = math.isfinite(ratio) and ratio < criterion.collapse_fraction
    explosion = math.isfinite(ratio) and ratio > criterion.explosion_multiple
    f = [float(x) for x in (format_rate or []) if x is not None and math.isfinite(x)]
    format_ratio = None
    wf = min(criterion.window, len(f) // 2)
    if wf >= 1:
        f_first, _, format_ratio = _ratio(f, wf)
        if f_first > 0 and format_ratio < criterion.format_drop_fraction:
            explosion = True
        if not math.isfinite(format_ratio):
            format_ratio = None
    return HealthJudgement(w, first, last, ratio, format_ratio, collapse, explosion, criterion)
