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

Phases (`judge_phases`): a run whose first steps were a dense warm-up (every valid token
selected, i.e. GRPO; the logged `dense_warmup` metric) is also judged phase by phase, so that a
collapse in the warm-up is reported as the warm-up's, apart from the method's own steps: the
final line, summary.json's health and the report say which phase a flag belongs to.

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


# ---- the phases of a run with a dense warm-up ------------------------------------------------
WARMUP, METHOD = "warm-up", "method"


@dataclass(frozen=True)
class PhaseHealth:
    """The window judgement of each phase of a run whose first steps were a dense warm-up
    (every valid token selected: plain GRPO) and whose later steps were the method's own:
    `warmup` / `method` the judgement of each phase's own steps (None with fewer than 2),
    `warmup_steps` / `method_steps` the (first, last) logged step of each, `entropy` the
    (first, last) logged entropy of each phase (nats), and `collapse_in` / `explosion_in`: the
    phase the run's flag is attributed to (None when the run is not flagged).

    Attribution: the method's steps are blamed only when their own judgement is flagged (then
    also the warm-up when its own is); a run flagged overall whose method steps are not lost
    (or gained) its entropy before them: in the warm-up, or at the switch from it."""

    warmup_steps: tuple[int, int]
    method_steps: tuple[int, int]
    warmup_entropy: tuple[float, float]
    method_entropy: tuple[float, float]
    warmup: HealthJudgement | None
    method: HealthJudgement | None
    collapse_in: str | None
    explosion_in: str | None

    def where(self, flag: str) -> str | None:
        """The phase `flag` ("collapse" or "explosion") is attributed to."""
        return self.collapse_in if flag == "collapse" else self.explosion_in

    def text(self, flag: str, method: str) -> str:
        """'entropy collapse in the dense warm-up (GRPO, steps 1-3: H 0.71 -> 0.21 nats), not in
        ict's own steps 4-6 (H 0.21 -> 0.19 nats)'; the plain flag when not attributed."""
        where = self.where(flag)
        (w0, w1), (m0, m1) = self.warmup_steps, self.method_steps
        warm = (
            f"the dense warm-up (GRPO, steps {w0}-{w1}: H {self.warmup_entropy[0]:.2f} -> "
            f"{self.warmup_entropy[1]:.2f} nats)"
        )
        own = (
            f"{method}'s own steps {m0}-{m1} (H {self.method_entropy[0]:.2f} -> "
            f"{self.method_entropy[1]:.2f} nats)"
        )
        if where == WARMUP:
            return f"entropy {flag} in {warm}, not in {own}"
        if where == METHOD:
            return f"entropy {flag} in {own}, not in {warm}"
        if where == f"{WARMUP} and {METHOD}":
            return f"entropy {flag} in {warm} and in {own}"
        return f"entropy {flag}"

    def as_dict(self) -> dict:
        def phase(steps, entropy, j):
            return {
                "steps": list(steps), "entropy_first_step": entropy[0],
                "entropy_last_step": entropy[1], **(j.as_dict() if j is not None else {}),
            }  # fmt: skip

        return {
            WARMUP: phase(self.warmup_steps, self.warmup_entropy, self.warmup),
            METHOD: phase(self.method_steps, self.method_entropy, self.method),
            "collapse_in": self.collapse_in,
            "explosion_in": self.explosion_in,
        }


def _attribute(run_flag: bool, warmup_flag: bool, method_flag: bool) -> str | None:
    if not run_flag:
        return None
    if method_flag:
        return f"{WARMUP} and {METHOD}" if warmup_flag else METHOD
    return WARMUP


def judge_phases(
    steps: Sequence[int],
    entropy: Sequence[float],
    dense: Sequence[bool],
    format_rate: Sequence[float] | None = None,
    criterion: HealthCriterion = HealthCriterion(),
) -> PhaseHealth | None:
    """The judgement of each phase (PhaseHealth) of a run's logged steps: `steps`, `entropy`
    (nats) and `dense` (whether the step was a dense warm-up step, the `dense_warmup` metric)
    aligned, one per logged step; `format_rate` aligned too, or None. None when the run has no
    warm-up step, or no step after it, or fewer than 2 entropies."""
    rows = [
        (int(st), float(h), bool(d), None if format_rate is None else format_rate[i])
        for i, (st, h, d) in enumerate(zip(steps, entropy, dense, strict=True))
        if h is not None and math.isfinite(h)
    ]
    warm = [r for r in rows if r[2]]
    own = [r for r in rows if not r[2]]
    if not warm or not own:
        return None
    overall = judge_health(
        [r[1] for r in rows], None if format_rate is None else [r[3] for r in rows], criterion
    )
    if overall is None:
        return None

    def judge(part):
        fmt = None if format_rate is None else [r[3] for r in part]
        return judge_health([r[1] for r in part], fmt, criterion)

    jw, jm = judge(warm), judge(own)
    return PhaseHealth(
        (warm[0][0], warm[-1][0]), (own[0][0], own[-1][0]),
        (warm[0][1], warm[-1][1]), (own[0][1], own[-1][1]), jw, jm,
        _attribute(overall.collapse, bool(jw and jw.collapse), bool(jm and jm.collapse)),
        _attribute(overall.explosion, bool(jw and jw.explosion), bool(jm and jm.explosion)),
    )  # fmt: skip


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
