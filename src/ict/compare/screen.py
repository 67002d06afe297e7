"""The narrowing screen (issue 46): does dense GRPO, on a task and at a learning rate, raise pass@1
while it loses pass@k at large k on held-out problems, checkpoint after checkpoint and seed after
seed? A testbed for exploration-keeping methods must show that before any method is compared on it.

Inputs are evaluation results (the schema of ict.eval.runner: `per_problem` counts n and correct
per problem) of the start model and of a cell's checkpoints, all on the same problems and
sampling settings (a grid's periodic evaluations on the validation split). For each checkpoint t
against the start (`read_checkpoint`), per problem and paired:
- pass@1 rises: the percentile-bootstrap interval over problems (level `level`) of the mean
  per-problem pass@1 difference lies above 0;
- pass@k narrows: for some k of `ks` (k > 1) the interval of the pass@k difference lies below 0,
  each k's interval at level 1 - (1 - level) / (number of k > 1) (Bonferroni over the k);
- problems lost exceed problems gained: lost = solved at least once at the start and never at t,
  gained = the reverse (with n samples, pass@n's numerator), the sharpening of Yue et al.
  (arXiv 2504.13837) rather than a plain fall in accuracy.
A checkpoint narrows when all three hold; a seed narrows when `min_consecutive` consecutive
checkpoints do (`seed_narrows`); a configuration passes when every screened seed does
(`screen_configuration`). The criterion is declared with the screen's protocol before it runs
(docs/reports/toy-paths-screen/PROTOCOL.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from ict.eval.metrics import pass_at_k_per_problem
from ict.evidence.bootstrap import bootstrap_ci


@dataclass(frozen=True)
class NarrowingCriterion:
    """The declared screen rule (module docstring): bootstrap level, resamples and seed, how many
    consecutive checkpoints must narrow."""

    level: float = 0.95
    resamples: int = 2000
    seed: int = 0
    min_consecutive: int = 2


@dataclass
class CheckpointReading:
    """One checkpoint against the start: pass@1 change with its interval, each k's pass@k change
    and interval (k > 1), the k whose interval lies below 0, problems lost and gained."""

    step: int
    pass1: float
    pass1_change: float
    pass1_interval: tuple[float, float]
    changes: dict[int, float] = field(default_factory=dict)
    intervals: dict[int, tuple[float, float]] = field(default_factory=dict)
    narrowed_ks: list[int] = field(default_factory=list)
    lost: int = 0
    gained: int = 0

    @property
    def pass1_rises(self) -> bool:
        return self.pass1_interval[0] > 0

    @property
    def narrows(self) -> bool:
        return self.pass1_rises and bool(self.narrowed_ks) and self.lost > self.gained

    def as_dict(self) -> dict:
        out = asdict(self)
        out.update(pass1_rises=self.pass1_rises, narrows=self.narrows)
        return out


def counts(result: dict) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(problem ids, n [P], correct [P]) of a one-benchmark evaluation result."""
    (per,) = result["per_problem"].values()
    return list(per["ids"]), np.asarray(per["n"], int), np.asarray(per["correct"], int)


def read_checkpoint(
    start: dict, after: dict, ks: Sequence[int], criterion: NarrowingCriterion | None = None
) -> CheckpointReading:
    """The checkpoint `after` against `start` (same problems, in the same order; ValueError if not)
    at pass@1 and at each k of `ks` (every k <= the samples per problem)."""
    criterion = criterion or NarrowingCriterion()
    ids0, n0, c0 = counts(start)
    ids1, n1, c1 = counts(after)
    if ids0 != ids1:
        raise ValueError("the start and the checkpoint were evaluated on different problems")
    big = [int(k) for k in ks if int(k) > 1]
    alpha_k = (1 - criterion.level) / max(len(big), 1)

    def change(k: int, level: float) -> tuple[float, tuple[float, float]]:
        d = pass_at_k_per_problem(n1, c1, k) - pass_at_k_per_problem(n0, c0, k)
        low, high = bootstrap_ci(
            d, num_resamples=criterion.resamples, level=level, seed=criterion.seed
        )
        return float(d.mean()), (float(low), float(high))

    p1, iv1 = change(1, criterion.level)
    reading = CheckpointReading(
        step=int(after.get("step", 0)),
        pass1=float(np.mean(c1 / n1)),
        pass1_change=p1,
        pass1_interval=iv1,
        lost=int(np.sum((c0 > 0) & (c1 == 0))),
        gained=int(np.sum((c0 == 0) & (c1 > 0))),
    )
    for k in big:
        mean, iv = change(k, 1 - alpha_k)
        reading.changes[k], reading.intervals[k] = mean, iv
        if iv[1] < 0:
            reading.narrowed_ks.append(k)
    return reading


def seed_narrows(readings: Sequence[CheckpointReading], min_consecutive: int = 2) -> bool:
    """True when `min_consecutive` consecutive checkpoints (in step order) narrow."""
    run = 0
    for reading in sorted(readings, key=lambda r: r.step):
        run = run + 1 if reading.narrows else 0
        if run >= min_consecutive:
            return True
    return False


def screen_configuration(
    start: dict,
    seeds: dict[int, Sequence[dict]],
    ks: Sequence[int],
    criterion: NarrowingCriterion | None = None,
) -> dict:
    """The screen of one configuration: `seeds` maps each screened seed to its checkpoints'
    results (every one on the start's problems and settings). Returns {"passes": every seed
    narrows, "seeds": {seed: {"narrows", "checkpoints": [CheckpointReading.as_dict()]}},
    "criterion": the rule's settings}."""
    criterion = criterion or NarrowingCriterion()
    if not seeds:
        raise ValueError("a screen needs at least one seed's checkpoints")
    out = {}
    for seed, results in sorted(seeds.items()):
        readings = [read_checkpoint(start, r, ks, criterion) for r in results]
        out[seed] = {
            "narrows": seed_narrows(readings, criterion.min_consecutive),
            "checkpoints": [r.as_dict() for r in sorted(readings, key=lambda r: r.step)],
        }
    return {
        "passes": all(s["narrows"] for s in out.values()),
        "seeds": out,
        "criterion": asdict(criterion),
    }
