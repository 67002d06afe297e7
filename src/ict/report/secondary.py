"""A study's declared secondary endpoints, computed from its run directories (torch-free).

- `non_inferiority`: is `method` - `baseline` at a pass@k key above -margin, where the margin is
  `fraction` x the baseline's mean change from its start model at that key, measured in the same
  study (ict.report.problems.baseline_change)? One-sided at alpha, by the same two tests as a
  primary verdict: the seed-level paired t (blocked by warm start where the runs come from
  several) and the over-problems two-way t (ict.evidence.problem_tests). "non-inferior" when both
  reject H0: difference <= -margin; "inferior" when both reject H0: difference >= -margin (the
  difference lies beyond the margin); otherwise "not shown".
- `difference_tests`: those two tests, two-sided, for a secondary difference (e.g. pass@4).
- `arm_values`: any one number per run (e.g. a KL to the start model) summarised per arm.
- `entropy_ratios`: each arm's entropy ratio (the mean valid-token entropy of the last W logged
  steps over the first W, ict.report.health.run_health), its mean over seeds with a t interval,
  and each arm's blocked paired t against the baseline's ratio.

Inputs are `{method: [Run]}` groups (ict.report.runs.load_run); seeds pair runs across methods.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ict.evidence.equivalence import inferiority_p, non_inferiority_p
from ict.evidence.intervals import t_interval
from ict.evidence.problem_tests import ProblemTest, over_problems_test
from ict.evidence.seed_tests import SeedTest, seed_test
from ict.report.comparison import final_values, seed_key, unit_values
from ict.report.health import run_health
from ict.report.problems import baseline_change, problem_values, warm_start_blocks
from ict.report.runs import Run


@dataclass(frozen=True)
class NonInferiority:
    """`method` - `baseline` at `key` against -`margin` (`margin` = `fraction` x |`change`|, the
    baseline's mean change from the start); `seeds` / `problems`: the two tests; `p_*`: their
    one-sided p of non-inferiority and of inferiority; `verdict`: "non-inferior", "inferior" or
    "not shown" (module docstring); `reason`: why there is no margin (then verdict "not shown")."""

    method: str
    baseline: str
    key: str
    fraction: float
    change: float | None
    margin: float
    alpha: float
    seeds: SeedTest | None
    problems: ProblemTest | None
    p_non_inferior: tuple[float, float]
    p_inferior: tuple[float, float]
    verdict: str
    reason: str = ""

    def as_dict(self) -> dict:
        return {
            "method": self.method, "baseline": self.baseline, "key": self.key,
            "fraction": self.fraction, "baseline_change": self.change, "margin": self.margin,
            "alpha": self.alpha,
            "difference": self.seeds.mean if self.seeds else None,
            "seed_level": _test_dict(self.seeds), "over_problems": _test_dict(self.problems),
            "p_non_inferior": {"seed_level": self.p_non_inferior[0],
                               "over_problems": self.p_non_inferior[1]},
            "p_inferior": {"seed_level": self.p_inferior[0], "over_problems": self.p_inferior[1]},
            "verdict": self.verdict, "reason": self.reason,
        }  # fmt: skip


def _test_dict(test) -> dict | None:
    if test is None:
        return None
    if isinstance(test, ProblemTest):
        return test.as_dict()
    return {"test": test.design, "seeds": test.n, "difference": test.mean, "se": test.se,
            "df": test.df, "p_two_sided": test.p}  # fmt: skip


def difference_tests(
    groups: Mapping[str, Sequence[Run]], method: str, baseline: str, key: str
) -> tuple[SeedTest, ProblemTest | None]:
    """The two tests of `method` - `baseline` at `key` a primary verdict uses (two-sided p):
    the seed-level test (paired t blocked by warm start where the runs come from several) and,
    where every run holds per-problem values of the same problems, the over-problems test."""
    blocks = warm_start_blocks([r for m in (method, baseline) for r in groups[m]], seed_key)
    seeds = seed_test(
        final_values(groups[method], key), final_values(groups[baseline], key), blocks
    )
    units = problem_values({m: groups[m] for m in (method, baseline)}, key, unit_values, seed_key)
    if not units or not seeds.design.startswith("paired t"):
        return seeds, None
    return seeds, over_problems_test(units[method], units[baseline], blocks, seed_level=seeds)


def non_inferiority(
    groups: Mapping[str, Sequence[Run]],
    method: str,
    baseline: str,
    key: str,
    fraction: float,
    alpha: float = 0.05,
) -> NonInferiority:
    """The declared non-inferiority of `method` - `baseline` at `key` (module docstring)."""
    change = baseline_change(groups[baseline], key)
    nan2 = (math.nan, math.nan)
    if change is None or change == 0.0:
        why = "the baseline's change from the start is not measured" if change is None else (
            "the baseline did not change from the start"
        )  # fmt: skip
        return NonInferiority(method, baseline, key, fraction, change, math.nan, alpha, None,
                              None, nan2, nan2, "not shown", f"{why}: no margin")  # fmt: skip
    margin = fraction * abs(change)
    seeds, problems = difference_tests(groups, method, baseline, key)
    tests = (seeds, problems)  # no per-problem values: NaN there, the seed-level test decides
    p_ni = tuple(non_inferiority_p(t, margin) if t else math.nan for t in tests)
    p_inf = tuple(inferiority_p(t, margin) if t else math.nan for t in tests)
    decided = [p for p in p_ni if math.isfinite(p)]
    beyond = [p for p in p_inf if math.isfinite(p)]
    if decided and all(p < alpha for p in decided):
        verdict = "non-inferior"
    elif beyond and all(p < alpha for p in beyond):
        verdict = "inferior"
    else:
        verdict = "not shown"
    return NonInferiority(method, baseline, key, fraction, change, margin, alpha, seeds,
                          problems, p_ni, p_inf, verdict)  # fmt: skip


@dataclass(frozen=True)
class ArmValues:
    """One number per run (e.g. the entropy ratio) by arm and seed, its mean and 95% t interval
    over seeds, and each arm's blocked paired t against the baseline's values."""

    baseline: str
    per_seed: dict[str, dict]
    mean: dict[str, float]
    interval: dict[str, tuple[float, float]]
    against_baseline: dict[str, SeedTest]

    def as_dict(self) -> dict:
        return {
            "baseline": self.baseline,
            "per_seed": {m: {str(s): v for s, v in d.items()} for m, d in self.per_seed.items()},
            "mean": self.mean,
            "interval": {m: list(v) for m, v in self.interval.items()},
            "against_baseline": {m: _test_dict(t) for m, t in self.against_baseline.items()},
        }


def arm_values(
    groups: Mapping[str, Sequence[Run]], baseline: str, value: Callable[[Run], float | None]
) -> ArmValues:
    """`value(run)` of every run (None or NaN: left out), summarised per arm (ArmValues); the
    paired tests are blocked by warm start where the runs come from several."""
    per_seed: dict[str, dict] = {}
    for method, runs in groups.items():
        for run in runs:
            v = value(run)
            if v is not None and math.isfinite(v):
                per_seed.setdefault(method, {})[seed_key(run)] = float(v)
    blocks = warm_start_blocks([r for runs in groups.values() for r in runs], seed_key)
    mean, interval, against = {}, {}, {}
    for method, values in per_seed.items():
        iv = t_interval(list(values.values()))
        mean[method], interval[method] = iv.mean, (iv.low, iv.high)
        if method != baseline and baseline in per_seed:
            against[method] = seed_test(values, per_seed[baseline], blocks)
    return ArmValues(baseline, per_seed, mean, interval, against)


def entropy_ratio(run: Run) -> float | None:
    """The run's last-W / first-W mean valid-token entropy (ict.report.health.run_health)."""
    judgement = run_health(run)
    return None if judgement is None else judgement.ratio


def entropy_ratios(groups: Mapping[str, Sequence[Run]], baseline: str) -> ArmValues:
    """The entropy ratio of every arm (module docstring); runs without a judgement are left out."""
    return arm_values(groups, baseline, entropy_ratio)
