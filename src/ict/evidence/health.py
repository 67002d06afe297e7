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

Learning signal (`judge_signal`): a group whose rewards are all equal (`zero_variance_share`, the
share of such groups in a step's batch, logged by every engine) has advantage 0 and teaches the
policy nothing; a step with no other group makes no policy-gradient update. A run is flagged when
at least NO_SIGNAL_SHARE of its groups carried no signal: during the run over the last W steps
(a warning, ict.train.outputs.SignalHealth), at its end over every step (summary.json, the final
line) and in the report's health section.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

WINDOW = 10  # logged steps per window
COLLAPSE_FRACTION = 0.2  # collapse: last-window entropy below a fifth of the first window's
EXPLOSION_MULTIPLE = 3.0  # explosion: last-window entropy above 3x the first window's
FORMAT_DROP_FRACTION = 0.5  # explosion: last-window format rate below half the first window's
NO_SIGNAL_SHARE = 0.8  # no signal: at least 4 groups in 5 with all-equal rewards


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


@dataclass(frozen=True)
class SignalJudgement:
    """The learning signal of `steps` logged steps: `share` (mean share of groups whose rewards
    were all equal), `silent_steps` (steps in which every group's were: no update), the
    `threshold` and the verdict `flagged` (share >= threshold)."""

    steps: int
    share: float
    silent_steps: int
    threshold: float
    flagged: bool

    def text(self, dynamic_sampling: bool = False) -> str:
        """'82% of groups carried no signal (3 of 12 steps none at all): raise
        --num-generations, enable --dynamic-sampling, or use an easier task'."""
        out = f"{self.share:.0%} of groups carried no signal"
        if self.silent_steps:
            out += f" ({self.silent_steps} of {self.steps} steps none at all: no update)"
        return f"{out}: {no_signal_advice(dynamic_sampling)}"

    def as_dict(self) -> dict:
        return {
            "no_signal": self.flagged, "no_signal_share": self.share,
            "no_signal_steps": self.silent_steps, "no_signal_threshold": self.threshold,
            "signal_steps_judged": self.steps,
        }  # fmt: skip


def no_signal_advice(dynamic_sampling: bool = False) -> str:
    """What to change when most groups carry no signal (with dynamic sampling already on, the
    cap on its rounds)."""
    if dynamic_sampling:
        return "raise --num-generations or --max-generation-rounds, or use an easier task"
    return "raise --num-generations, enable --dynamic-sampling, or use an easier task"


def judge_signal(
    zero_variance_share: Sequence[float | None], threshold: float = NO_SIGNAL_SHARE
) -> SignalJudgement | None:
    """The learning-signal judgement of a run's `zero_variance_share` series (one value in [0, 1]
    per logged step; None and NaN skipped); None without a value."""
    shares = [float(x) for x in zero_variance_share if x is not None and math.isfinite(x)]
    if not shares:
        return None
    share = sum(shares) / len(shares)
    silent = sum(x >= 1.0 for x in shares)
    return SignalJudgement(len(shares), share, silent, threshold, share >= threshold)
