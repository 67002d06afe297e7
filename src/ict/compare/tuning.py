"""The tuning stage of `ict compare`: each method's learning rate chosen on validation problems by a
rule fixed in advance, with the same effort for every method (torch-free: the rule and its table).

A preset's `TuningSpec` names the grid of values of one training option (`param`, the learning
rate by default) for every method (`values`, or `per_method` values), the tuning seeds (disjoint
from the test seeds 0..seeds-1), the validation metric and the tie margin. The grid
(ict.compare.grid.run_tuning) trains one tuning cell per (method, value, tuning seed) in
OUT/tuning/runs/, evaluating it on the task's `validation` split (disjoint from training and test
problems, ict.data) at each periodic checkpoint (`eval_every`) and at the end; the test cells then
run at each method's selected value.

The rule, declared before any cell runs:
- a cell's score is its validation metric (the mean of pass@k over `metric`'s k) averaged over its
  checkpoints (the periodic evaluations after RL steps, the final one included; step 0 is the
  start model, the same for every cell, and is left out);
- a value's score is the mean over tuning seeds of its cells' scores;
- the selected value is the smallest whose score is within `tie_margin` of the best (a tie goes to
  the smaller, i.e. more conservative, learning rate);
- when the selected value sits at an edge of the grid, the grid grows by one point beyond that
  edge (the grid's own ratio), at most `grow` times per method, and the rule is applied again.
`mode="per_method"` selects a value per method; `mode="shared"` selects one value for all methods
(the mean over methods of their value scores), the field's one-learning-rate design with tuning
effort equal for all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ict.errors import ConfigError

MODES = ("per_method", "shared")
TUNING_DIR = "tuning"  # OUT/tuning/{runs/, tuning.json}


@dataclass(frozen=True)
class TuningSpec:
    """What the tuning stage tries and how it chooses (module docstring).

    param: the TrainConfig field tuned; values: its grid (every method), per_method: a method's own
    grid; seeds: tuning seeds (disjoint from the test seeds); metric: the k of pass@k averaged into
    the validation metric; tie_margin: absolute pass@k; grow: edge extensions per method; mode:
    "per_method" or "shared"; validation_size, validation_samples: the validation evaluation's
    problems and samples per problem (None: the cells' eval_size / eval_num_samples)."""

    values: tuple[float, ...] = (2e-5, 6.3e-5, 2e-4)
    param: str = "learning_rate"
    per_method: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    seeds: tuple[int, ...] = (1000, 1001)
    metric: tuple[int, ...] = (1, 4)
    tie_margin: float = 0.02
    grow: int = 1
    mode: str = "per_method"
    validation_size: int | None = None
    validation_samples: int | None = None

    def grid(self, method: str) -> tuple[float, ...]:
        """The sorted grid of `method` before any growth."""
        return tuple(sorted(self.per_method.get(method, self.values)))

    def validate(self, test_seeds: Sequence[int]) -> None:
        """ConfigError naming the first bad setting (before any cell runs)."""
        if self.mode not in MODES:
            raise ConfigError(f"tuning mode {self.mode!r} is not one of {', '.join(MODES)}")
        grids = [self.values, *self.per_method.values()]
        if any(len(g) < 2 or any(not v > 0 for v in g) for g in grids):
            raise ConfigError("a tuning grid needs at least two positive values")
        if not self.seeds:
            raise ConfigError("the tuning stage needs at least one tuning seed")
        shared = sorted(set(self.seeds) & set(test_seeds))
        if shared:
            raise ConfigError(
                f"tuning seeds {shared} are also test seeds: tuning and test seeds must be "
                "disjoint (choose tuning seeds >= the number of test seeds, e.g. 1000, 1001)"
            )
        if not self.metric or any(k < 1 for k in self.metric):
            raise ConfigError(f"the tuning metric needs k >= 1, got {list(self.metric)}")
        if self.tie_margin < 0 or self.grow < 0:
            raise ConfigError("tie_margin and grow must be >= 0")
        if self.mode == "shared" and self.per_method:
            raise ConfigError("shared tuning uses one grid for every method: drop per_method")


def value_name(value: float) -> str:
    """A value as it appears in a tuning cell's directory name: 2e-05, 6.3e-05, 0.0002."""
    return f"{value:.3g}"


def grown(grid: Sequence[float], edge: str) -> float:
    """The next point beyond the `edge` ("low" or "high") of a sorted geometric grid, at the ratio
    of its two outermost points on that side, rounded to 3 significant digits."""
    g = sorted(grid)
    if edge == "low":
        return float(f"{g[0] * g[0] / g[1]:.3g}")
    return float(f"{g[-1] * g[-1] / g[-2]:.3g}")


def cell_score(results: Sequence[dict], metric: Sequence[int]) -> float:
    """A tuning cell's validation score: the mean over its checkpoint results (ict.eval result
    schema, one task) of the mean of pass@k over `metric`. NaN without results."""
    per_checkpoint = []
    for result in results:
        (summary,) = result["benchmarks"].values()
        per_checkpoint.append(sum(summary[f"pass@{k}"] for k in metric) / len(metric))
    return sum(per_checkpoint) / len(per_checkpoint) if per_checkpoint else math.nan


def select_value(scores: Mapping[float, float], tie_margin: float) -> float:
    """The smallest value whose score is within `tie_margin` of the best (NaN scores ignored)."""
    finite = {v: s for v, s in scores.items() if math.isfinite(s)}
    if not finite:
        raise ConfigError("no tuning cell has a validation score: the tuning stage cannot choose")
    best = max(finite.values())
    return min(v for v, s in finite.items() if s >= best - tie_margin - 1e-12)


def edge_of(value: float, grid: Sequence[float]) -> str | None:
    """ "low" / "high" when `value` is the grid's smallest / largest point, else None."""
    g = sorted(grid)
    return "low" if value == g[0] else "high" if value == g[-1] else None


@dataclass
class Choice:
    """The tuning stage's outcome for one method (or for all, in shared mode): `scores` {value:
    mean validation score over tuning seeds}, `per_seed` {value: {seed: score}}, the `selected`
    value, the final `grid` (grown points included) and whether it may still `grow` (the selected
    value at an edge with growth left)."""

    scores: dict[float, float]
    per_seed: dict[float, dict[int, float]]
    selected: float
    grid: tuple[float, ...]
    grow_to: float | None = None

    def as_dict(self) -> dict:
        return {
            "grid": list(self.grid),
            "scores": {value_name(v): s for v, s in sorted(self.scores.items())},
            "per_seed": {
                value_name(v): {str(k): s for k, s in sorted(p.items())}
                for v, p in sorted(self.per_seed.items())
            },
            "selected": self.selected,
            "at_edge_not_grown": self.grow_to is not None,
        }


def choose(
    per_seed: Mapping[float, Mapping[int, float]],
    spec: TuningSpec,
    grid: Sequence[float],
    grows_used: int,
) -> Choice:
    """Apply the rule to {value: {seed: cell score}} over `grid`: the mean over seeds per value,
    the selected value, and the next point to add (`grow_to`) when the selection sits at an edge
    and fewer than `spec.grow` points were added."""
    scores = {
        v: (sum(p.values()) / len(p) if p else math.nan)
        for v, p in ((v, per_seed.get(v, {})) for v in grid)
    }
    selected = select_value(scores, spec.tie_margin)
    edge = edge_of(selected, grid)
    grow_to = grown(grid, edge) if edge is not None and grows_used < spec.grow else None
    return Choice(
        scores, {v: dict(per_seed.get(v, {})) for v in grid}, selected, tuple(grid), grow_to
    )


def shared_per_seed(
    per_method: Mapping[str, Mapping[float, Mapping[int, float]]],
) -> dict[float, dict[int, float]]:
    """Shared mode: {value: {seed: mean over methods of that seed's cell score}} over the values
    and seeds every method has a score for."""
    methods = list(per_method)
    values = set.intersection(*(set(per_method[m]) for m in methods)) if methods else set()
    out: dict[float, dict[int, float]] = {}
    for v in sorted(values):
        seeds = set.intersection(*(set(per_method[m][v]) for m in methods))
        out[v] = {
            s: sum(per_method[m][v][s] for m in methods) / len(methods) for s in sorted(seeds)
        }
    return out


def tuning_record(spec: TuningSpec, choices: Mapping[str, Choice]) -> dict:
    """OUT/tuning/tuning.json: the declared rule and each method's table and selection."""
    return {
        "rule": {
            "param": spec.param,
            "mode": spec.mode,
            "seeds": list(spec.seeds),
            "metric": [f"pass@{k}" for k in spec.metric],
            "score": "mean over checkpoints after RL of the mean of the metric's pass@k, "
            "then mean over tuning seeds",
            "tie_margin": spec.tie_margin,
            "tie_break": "smallest value within the margin of the best",
            "grow": spec.grow,
            "split": "validation",
        },
        "methods": {m: c.as_dict() for m, c in choices.items()},
        "selected": {m: c.selected for m, c in choices.items()},
    }


def tuning_path(out: str | Path) -> Path:
    return Path(out) / TUNING_DIR / "tuning.json"
