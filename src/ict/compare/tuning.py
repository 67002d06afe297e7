"""The tuning stage of `ict compare`: each method's learning rate chosen on validation problems by a
rule fixed in advance, with the same effort for every method (torch-free: the rules and their table).

A preset's `TuningSpec` names the grid of values of one training option (`param`, the learning
rate by default) for every method (`values` or a `centre`, or `per_method` values), the tuning
seeds (disjoint from the test seeds 0..seeds-1), the validation metric and the `rule` (RULES). The
grid (ict.compare.grid.run_tuning) trains one tuning cell per (method, value, tuning seed) in
OUT/tuning/runs/, evaluating it on the task's `validation` split (disjoint from training and test
problems, ict.data) at each periodic checkpoint (`eval_every`) and at the end; `decide` applies the
rule to the cells' scores and names the points to add at the grid's edges; the stage repeats until
no point is added, then the test cells run at each method's selected value.

Two rules, each with its text (`Rule.text`, which docs/compare.md carries verbatim and the report
prints):
- `final_argmax` (issue 38): the primary endpoint's pass@k at the final step, a geometric grid of
  ratio 2, the argmax of the seed mean with ties (within 1 SE of the paired difference over tuning
  seeds) broken toward the centre of the tied plateau, grown at an edge until the optimum is
  bracketed (at most `grow` = 3 points per edge);
- `smallest_within_margin` (issue 30, the rule of docs/reports/toy-cot-long-tuned, kept so that
  study re-derives its choice): the mean over checkpoints, the smallest value within `tie_margin`
  of the best, one point grown at an edge. The default, for the presets declared with it.
`mode="per_method"` selects a value per method; `mode="shared"` one value for all methods (a
value's per-seed score: the mean over methods of their cells' scores), the field's usual design.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ict.errors import ConfigError
from ict.evidence.seed_tests import paired_t_test

MODES = ("per_method", "shared")
EDGES = ("low", "high")
TUNING_DIR = "tuning"  # OUT/tuning/{runs/, tuning.json}
DEFAULT_VALUES = (2e-5, 6.3e-5, 2e-4)

# What `final_argmax` needs before any cell runs (issue 38): enough validation problems and
# samples that the final pass@k is measured, and enough tuning seeds for a paired SE
MIN_VALIDATION_PROBLEMS = 128
MIN_VALIDATION_SAMPLES = 16
MIN_TUNING_SEEDS = 3
RATIO = 2.0  # `final_argmax`'s grid ratio
RATIO_TOLERANCE = 0.01  # relative: values written to 3 significant digits (6.3e-5 / 3.15e-5)

PerSeed = Mapping[float, Mapping[int, float]]  # {value: {tuning seed: cell score}}
Growths = Mapping[str, int]  # {"low": points added below, "high": points added above}


@dataclass(frozen=True)
class TuningSpec:
    """What the tuning stage tries and how it chooses (module docstring).

    param: the TrainConfig field tuned; values: its grid (every method), or `centre` with `points`
    (odd): centre x 2^(-h..h), h = (points - 1) / 2; per_method: a method's own grid; seeds:
    tuning seeds (disjoint from the test seeds); metric: the k of pass@k in the score (one k, the
    primary endpoint's, for `final_argmax`); rule: a name in RULES; tie_margin: absolute pass@k
    (`smallest_within_margin` only); grow: points added per method (`smallest_within_margin`:
    in all, default 1) or per edge (`final_argmax`: default 3); mode: "per_method" or "shared";
    validation_size, validation_samples: the validation evaluation's problems and samples per
    problem (None: the cells' eval_size / eval_num_samples)."""

    values: tuple[float, ...] = DEFAULT_VALUES
    param: str = "learning_rate"
    per_method: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    seeds: tuple[int, ...] = (1000, 1001)
    metric: tuple[int, ...] = (1, 4)
    tie_margin: float = 0.02
    grow: int | None = None
    mode: str = "per_method"
    validation_size: int | None = None
    validation_samples: int | None = None
    rule: str = "smallest_within_margin"
    centre: float | None = None
    points: int = 3

    def __post_init__(self) -> None:
        if self.centre is None:
            return
        if not self.centre > 0 or self.points < 1 or self.points % 2 == 0:
            raise ConfigError(
                f"tuning centre {self.centre} with points {self.points}: the centre must be > 0 "
                "and points an odd number (3: centre/2, centre, centre*2)"
            )
        half = (self.points - 1) // 2
        grid = tuple(float(f"{self.centre * RATIO**i:.3g}") for i in range(-half, half + 1))
        if self.values not in (DEFAULT_VALUES, grid):
            raise ConfigError("the tuning grid is given twice: keep `centre` or `values`, not both")
        object.__setattr__(self, "values", grid)

    @property
    def max_growth(self) -> int:
        """`grow`, or the rule's default."""
        return RULES[self.rule].default_grow if self.grow is None else self.grow

    def grid(self, method: str) -> tuple[float, ...]:
        """The sorted grid of `method` before any growth."""
        return tuple(sorted(self.per_method.get(method, self.values)))

    def validate(
        self,
        test_seeds: Sequence[int],
        *,
        validation_problems: int | None = None,
        validation_samples: int | None = None,
        primary_metrics: Sequence[str] = (),
    ) -> None:
        """ConfigError naming the first bad setting (before any cell runs). The validation
        evaluation's problems and samples per problem and the declared primary metrics
        ("pass@4", ...) are checked against `final_argmax`'s needs when given."""
        if self.rule not in RULES:
            raise ConfigError(f"tuning rule {self.rule!r} is not one of {', '.join(RULES)}")
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
        if self.tie_margin < 0 or self.max_growth < 0:
            raise ConfigError("tie_margin and grow must be >= 0")
        if self.mode == "shared" and self.per_method:
            raise ConfigError("shared tuning uses one grid for every method: drop per_method")
        if self.rule == "final_argmax":
            self._validate_final_argmax(
                grids, validation_problems, validation_samples, primary_metrics
            )

    def _validate_final_argmax(self, grids, problems, samples, primary_metrics) -> None:
        fix = "(issue 38's rule; rule: smallest_within_margin for the older one)"
        if len(self.seeds) < MIN_TUNING_SEEDS:
            raise ConfigError(
                f"tuning rule final_argmax needs >= {MIN_TUNING_SEEDS} tuning seeds for its "
                f"paired SE, got {len(self.seeds)}: list more under tuning: seeds {fix}"
            )
        if len(self.metric) != 1:
            raise ConfigError(
                f"tuning rule final_argmax scores one pass@k (the primary endpoint), got metric "
                f"{list(self.metric)}: give one k, e.g. metric: [32]"
            )
        (k,) = self.metric
        pass_metrics = [m for m in primary_metrics if m.startswith("pass@")]
        if pass_metrics and f"pass@{k}" not in pass_metrics:
            raise ConfigError(
                f"tuning metric pass@{k} is not a declared primary endpoint "
                f"({', '.join(sorted(set(pass_metrics)))}): final_argmax scores the primary "
                "endpoint; set tuning: metric to its k"
            )
        if problems is not None and problems < MIN_VALIDATION_PROBLEMS:
            raise ConfigError(
                f"tuning rule final_argmax needs >= {MIN_VALIDATION_PROBLEMS} validation "
                f"problems, got {problems}: set tuning: validation_size {fix}"
            )
        need = max(MIN_VALIDATION_SAMPLES, k)
        if samples is not None and samples < need:
            raise ConfigError(
                f"tuning rule final_argmax needs >= {need} samples per validation problem "
                f"(>= {MIN_VALIDATION_SAMPLES} and >= k of pass@{k}), got {samples}: set "
                "tuning: validation_samples"
            )
        for g in grids:
            s = sorted(g)
            if any(
                abs(b / a / RATIO - 1) > RATIO_TOLERANCE for a, b in zip(s, s[1:], strict=False)
            ):
                raise ConfigError(
                    f"tuning rule final_argmax needs a geometric grid of ratio {RATIO:g}, got "
                    f"{', '.join(f'{v:g}' for v in s)}: give tuning: centre (and points) instead"
                )


def value_name(value: float) -> str:
    """A value as it appears in a tuning cell's directory name: 2e-05, 6.3e-05, 0.0002."""
    return f"{value:.3g}"


def grown(grid: Sequence[float], edge: str, ratio: float | None = None) -> float:
    """The next point beyond the `edge` ("low" or "high") of a sorted geometric grid, at `ratio`
    (None: the ratio of the grid's two outermost points on that side), rounded to 3 significant
    digits."""
    g = sorted(grid)
    if edge == "low":
        return float(f"{g[0] / (ratio or g[1] / g[0]):.3g}")
    return float(f"{g[-1] * (ratio or g[-1] / g[-2]):.3g}")


def edge_of(value: float, grid: Sequence[float]) -> str | None:
    """ "low" / "high" when `value` is the grid's smallest / largest point, else None."""
    g = sorted(grid)
    return "low" if value == g[0] else "high" if value == g[-1] else None


def _pass_mean(result: dict, metric: Sequence[int]) -> float:
    (summary,) = result["benchmarks"].values()
    return sum(summary[f"pass@{k}"] for k in metric) / len(metric)


def cell_score(results: Sequence[dict], metric: Sequence[int]) -> float:
    """`smallest_within_margin`'s cell score: the mean over its checkpoint results (ict.eval
    result schema, one task) of the mean of pass@k over `metric`. NaN without results."""
    per_checkpoint = [_pass_mean(r, metric) for r in results]
    return sum(per_checkpoint) / len(per_checkpoint) if per_checkpoint else math.nan


def final_score(results: Sequence[dict], metric: Sequence[int]) -> float:
    """`final_argmax`'s cell score: pass@k (the mean over `metric`'s k; one k in a valid spec) of
    the result at the latest step, i.e. the cell's final evaluation. NaN without results."""
    if not results:
        return math.nan
    return _pass_mean(max(results, key=lambda r: int(r.get("step", 0))), metric)


@dataclass
class Choice:
    """The rule's outcome on one grid (one method, or every method in shared mode).

    scores: {value: mean over tuning seeds}; per_seed: {value: {seed: score}}; selected: the
    chosen value; grid: the points tried (grown ones included); grow: the points to add next
    (none: the stage is done); at_edge: the edges the best region still touches with no growth
    left (the best value may lie beyond); detail: the rule's own numbers (final_argmax: the
    argmax, each value's paired SE to it, the tied plateau)."""

    scores: dict[float, float]
    per_seed: dict[float, dict[int, float]]
    selected: float
    grid: tuple[float, ...]
    grow: tuple[float, ...] = ()
    at_edge: tuple[str, ...] = ()
    growths: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EDGES, 0))
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "grid": list(self.grid),
            "scores": {value_name(v): s for v, s in sorted(self.scores.items())},
            "per_seed": per_seed_json(self.per_seed),
            "selected": self.selected,
            "at_edge": list(self.at_edge),
            "growths": dict(self.growths),
            **self.detail,
        }


def per_seed_json(per_seed: PerSeed) -> dict:
    """{value name: {seed as text: score}}, sorted: the record's form of a per-seed table."""
    return {
        value_name(v): {str(k): s for k, s in sorted(p.items())}
        for v, p in sorted(per_seed.items())
    }


def _table(per_seed: PerSeed, grid: Sequence[float]) -> tuple[dict, dict]:
    """({value: seed mean (NaN without seeds)}, {value: {seed: score}}) over `grid`."""
    table = {v: dict(per_seed.get(v, {})) for v in grid}
    scores = {v: (sum(p.values()) / len(p) if p else math.nan) for v, p in table.items()}
    return scores, table


def _finite(scores: Mapping[float, float]) -> dict[float, float]:
    finite = {v: s for v, s in scores.items() if math.isfinite(s)}
    if not finite:
        raise ConfigError("no tuning cell has a validation score: the tuning stage cannot choose")
    return finite


# ---- smallest_within_margin (issue 30) ------------------------------------------------------
def select_value(scores: Mapping[float, float], tie_margin: float) -> float:
    """The smallest value whose score is within `tie_margin` of the best (NaN scores ignored)."""
    finite = _finite(scores)
    best = max(finite.values())
    return min(v for v, s in finite.items() if s >= best - tie_margin - 1e-12)


def choose_smallest_within_margin(
    per_seed: PerSeed, spec: TuningSpec, grid: Sequence[float], growths: Growths
) -> Choice:
    """`smallest_within_margin` on {value: {seed: cell score}} over `grid`: the mean over seeds
    per value, the selected value, and one point beyond the selection's edge while fewer than
    `spec.max_growth` points were added in all."""
    grid = sorted(grid)
    scores, table = _table(per_seed, grid)
    selected = select_value(scores, spec.tie_margin)
    edge = edge_of(selected, grid)
    used = sum(growths.values())
    grow = (grown(grid, edge),) if edge is not None and used < spec.max_growth else ()
    at_edge = (edge,) if edge is not None and not grow else ()
    return Choice(scores, table, selected, tuple(grid), grow, at_edge, dict(growths))


# ---- final_argmax (issue 38) ----------------------------------------------------------------
def paired_se(a: Mapping[int, float], b: Mapping[int, float]) -> float:
    """SE of mean(a - b) over the tuning seeds both hold: sd of the per-seed differences (n - 1)
    / sqrt(n) (ict.evidence.seed_tests.paired_t_test); NaN below 2 shared seeds."""
    seeds = sorted(set(a) & set(b))
    return paired_t_test([a[s] for s in seeds], [b[s] for s in seeds]).se


def choose_final_argmax(
    per_seed: PerSeed, spec: TuningSpec, grid: Sequence[float], growths: Growths
) -> Choice:
    """`final_argmax` on {value: {seed: cell score}} over `grid` (values without a score are
    left out):
    - best: the argmax of the seed mean; a value is tied with it when its mean is below the
      best's by less than the SE of their paired difference over tuning seeds (`paired_se`), or
      not below at all;
    - the plateau: the contiguous run of tied grid points around the best; the selection is its
      centre point (in grid steps, i.e. log lr), of two central points the one with the higher
      mean;
    - growth: a plateau that reaches an edge of the grid adds one point beyond that edge (x or
      / RATIO) while that edge has had fewer than `spec.max_growth` points added; when none is
      left that edge is flagged (`at_edge`). The optimum is bracketed when the plateau is
      interior: the points on both sides of it are below the best by >= 1 SE."""
    grid = sorted(grid)
    scores, table = _table(per_seed, grid)
    finite = _finite(scores)
    points = [v for v in grid if v in finite]
    best = max(points, key=lambda v: finite[v])
    se = {v: (0.0 if v == best else paired_se(table[v], table[best])) for v in points}

    def tied(v: float) -> bool:
        gap = finite[best] - finite[v]
        return v == best or gap <= 0.0 or gap < se[v]

    i = points.index(best)
    lo, hi = i, i
    while lo > 0 and tied(points[lo - 1]):
        lo -= 1
    while hi < len(points) - 1 and tied(points[hi + 1]):
        hi += 1
    centre = (lo + hi) / 2
    central = [j for j in range(lo, hi + 1) if abs(j - centre) <= 0.5]
    selected = points[max(central, key=lambda j: finite[points[j]])]
    touches = {"low": lo == 0, "high": hi == len(points) - 1}
    reached = [e for e in EDGES if touches[e]]
    grow = tuple(grown(grid, e, RATIO) for e in reached if growths.get(e, 0) < spec.max_growth)
    at_edge = tuple(e for e in reached if growths.get(e, 0) >= spec.max_growth)
    detail = {
        "best": best,
        "se_to_best": {value_name(v): s for v, s in se.items()},
        "tied": [v for v in points if tied(v)],
        "plateau": [points[lo], points[hi]],
    }
    return Choice(scores, table, selected, tuple(grid), grow, at_edge, dict(growths), detail)


# ---- the rules --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """A tuning rule: `score` maps a cell's evaluations after RL (ict.eval results, step > 0,
    the final one included) and the metric's k to one number; `choose` applies the selection
    and growth to {value: {seed: score}}; `text` says it in words (docs/compare.md, the report)."""

    name: str
    score: Callable[[Sequence[dict], Sequence[int]], float]
    choose: Callable[[PerSeed, TuningSpec, Sequence[float], Growths], Choice]
    default_grow: int
    text: str


RULES: dict[str, Rule] = {
    "final_argmax": Rule(
        "final_argmax",
        final_score,
        choose_final_argmax,
        3,
        "A cell's score is the primary endpoint, the validation pass@k of the tuning `metric`, at "
        "the final step. A value's score is the mean over tuning seeds (at least 3, with at least "
        "128 validation problems and 16 samples per problem, and k for pass@k; refused before "
        "any cell runs otherwise). The grid is geometric with ratio 2. The best value is the argmax of the seed mean; a value is tied "
        "with it when its mean is below the best's by less than one SE of their paired "
        "difference (the SD of the per-seed differences over sqrt(n), paired over tuning seeds). "
        "The selection is the centre of the tied plateau around the best (the contiguous tied "
        "points; of two central points, the higher mean). While the plateau reaches an edge of "
        "the grid, the grid grows by one point beyond that edge (x2 or /2), at most `grow` (3) "
        "times per edge, so the choice is bracketed: the points on both sides of the plateau are "
        "below the best by at least one SE. A plateau still at an edge after its last growth is "
        "flagged: the best value may lie beyond the grid.",
    ),
    "smallest_within_margin": Rule(
        "smallest_within_margin",
        cell_score,
        choose_smallest_within_margin,
        1,
        "A cell's score is the mean of the tuning `metric`'s validation pass@k averaged over its "
        "evaluations after RL (step 0 is the same for every cell and is left out). A value's "
        "score is the mean over tuning seeds. The smallest value within `tie_margin` of the best "
        "wins. When the choice sits at an edge of the grid, the grid grows by one point beyond "
        "it at the grid's own ratio (at most `grow` times per method, 1 by default) and the rule "
        "is applied again.",
    ),
}


def shared_per_seed(per_method: Mapping[str, PerSeed]) -> dict[float, dict[int, float]]:
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


def decide(
    spec: TuningSpec,
    grids: Mapping[str, Sequence[float]],
    growths: Mapping[str, Growths],
    scores: Mapping[str, PerSeed],
) -> dict[str, Choice]:
    """One round of the tuning stage: each method's Choice under `spec.rule` (per-method mode),
    or one shared Choice on the mean over methods, the same object for every method (shared
    mode). `grids`, `growths`, `scores`: per method (its grid, its points added per edge, its
    {value: {seed: cell score}}); in shared mode every method holds the same grid."""
    rule = RULES[spec.rule]
    methods = list(grids)
    if spec.mode == "per_method":
        return {m: rule.choose(scores[m], spec, grids[m], growths[m]) for m in methods}
    first = methods[0]
    shared = rule.choose(shared_per_seed(scores), spec, grids[first], growths[first])
    return dict.fromkeys(methods, shared)


def add_growth(
    grid: Sequence[float], growths: Growths, points: Sequence[float]
) -> tuple[list[float], dict[str, int]]:
    """The grid with `points` added (each below or above it) and the per-edge counts updated."""
    counts = dict(growths)
    for v in points:
        edge = "low" if v < min(grid) else "high"
        counts[edge] = counts.get(edge, 0) + 1
    return sorted({*grid, *points}), counts


def tuning_record(
    spec: TuningSpec, choices: Mapping[str, Choice], scores: Mapping[str, PerSeed] | None = None
) -> dict:
    """OUT/tuning/tuning.json: the declared rule, each method's table and selection. Shared mode
    (`scores`: each method's own {value: {seed: cell score}}): each method's own table with the
    shared selection, and the shared table the rule chose on under "shared"."""
    rule = RULES[spec.rule]
    described = {
        "name": rule.name,
        "text": rule.text,
        "param": spec.param,
        "mode": spec.mode,
        "seeds": list(spec.seeds),
        "metric": [f"pass@{k}" for k in spec.metric],
        "grow": spec.max_growth,
        "split": "validation",
    }
    if spec.rule == "smallest_within_margin":  # the fields its report paragraph reads
        described |= {
            "score": "mean over checkpoints after RL of the mean of the metric's pass@k, "
            "then mean over tuning seeds",
            "tie_margin": spec.tie_margin,
            "tie_break": "smallest value within the margin of the best",
        }
    else:
        described |= {
            "score": "pass@k at the final step, then mean over tuning seeds",
            "ratio": RATIO,
            "tie_break": "centre of the plateau within 1 paired SE of the argmax",
        }
    record: dict = {"rule": described}
    if spec.mode == "shared" and choices:
        shared = next(iter(choices.values()))
        record["shared"] = shared.as_dict()
        record["methods"] = {}
        for m in choices:
            own_scores, own = _table((scores or {}).get(m, {}), shared.grid)
            record["methods"][m] = {
                **Choice(own_scores, own, shared.selected, shared.grid).as_dict(),
                "at_edge": list(shared.at_edge),
                "growths": dict(shared.growths),
            }
    else:
        record["methods"] = {m: c.as_dict() for m, c in choices.items()}
    record["selected"] = {m: c.selected for m, c in choices.items()}
    return record


def tuning_path(out: str | Path) -> Path:
    return Path(out) / TUNING_DIR / "tuning.json"
