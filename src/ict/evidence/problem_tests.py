"""The over-problems test of a difference between two arms: seeds AND problems as sources of
variation (the "two-way variance-components t").

Every run of a grid is evaluated on the same P problems, so a seed-level test (ict.evidence.
seed_tests) is a statement about those P problems: a method effect that differs from problem to
problem and is shared by every seed (a persistent per-problem effect) is invisible to it. With
only 32 problems that made the seed-level t say "higher/lower" over new problems most of the time
when there was no effect on average (tests/evidence/test_problem_null.py measures it). This test
adds the problems' share of the uncertainty:

    d_{s,p} = a_{s,p} - b_{s,p}                (seed s, problem p; per-problem pass@k)
    d_s     = mean_p d_{s,p}                   (the per-seed differences of the seed-level test)
    dbar_p  = mean_s d_{s,p}                   (the seed-averaged per-problem differences)
    SE^2    = SE_seeds^2 + var_p(dbar_p) / P   (var with P - 1 in the denominator)
    df      = SE^4 / (SE_seeds^4 / df_seeds + (var_p(dbar_p) / P)^2 / (P - 1))   (Satterthwaite)

SE_seeds and df_seeds are the seed-level test's (paired t, blocked when blocks are given). The
estimate is the same mean difference; the sum double-counts the evaluation noise already inside
SE_seeds, so the test is conservative by that much. Inputs are per-seed arrays over the same
problems in the same order (the grid's design); anything else has no over-problems test.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ict.evidence.distributions import t_two_sided_p
from ict.evidence.seed_tests import SeedTest, paired_t_test, satterthwaite_df


@dataclass(frozen=True)
class ProblemTest:
    """The over-problems test of mean(a) - mean(b) (module docstring).

    `seeds`, `problems`: counts; `mean`: the difference; `se`, `df`, `p`: the combined test;
    `se_seeds`: the seed-level part; `se_problems`: sqrt(var_p(dbar_p) / P); `reason`: why there
    is no test (then `design` is "none")."""

    design: str
    seeds: int
    problems: int
    mean: float
    se: float
    se_seeds: float
    se_problems: float
    df: float
    p: float
    reason: str = ""

    @property
    def tested(self) -> bool:
        return self.design != "none"

    @property
    def identical(self) -> bool:
        return self.tested and self.se == 0.0 and self.mean == 0.0

    def as_dict(self) -> dict:
        return {
            "test": self.design, "seeds": self.seeds, "problems": self.problems,
            "difference": self.mean, "se": self.se, "se_seeds": self.se_seeds,
            "se_problems": self.se_problems, "df": self.df, "p": self.p, "reason": self.reason,
        }  # fmt: skip


def _none(reason: str, seeds: int = 0, problems: int = 0) -> ProblemTest:
    nan = math.nan
    return ProblemTest("none", seeds, problems, nan, nan, nan, nan, nan, nan, reason)


def over_problems_test(
    a: Mapping, b: Mapping, blocks: Mapping | None = None, seed_level: SeedTest | None = None
) -> ProblemTest:
    """The over-problems test of a - b; `a`, `b`: {seed: [P] per-problem values} over the same
    problems in the same order; `blocks`: {seed: block} (e.g. the warm start) for the seed-level
    part; `seed_level`: that part when already computed (else the paired t, blocked)."""
    shared = sorted(set(a) & set(b), key=str)
    if len(shared) < 2:
        return _none("fewer than 2 shared seeds: no over-problems test", len(shared))
    rows = [np.asarray(a[s], float) - np.asarray(b[s], float) for s in shared]
    if len({r.size for r in rows}) != 1:
        return _none("runs evaluated on different problems: no over-problems test", len(shared))
    d = np.vstack(rows)  # [seeds, problems]
    n, p = d.shape
    if p < 2:
        return _none("fewer than 2 problems: no over-problems test", n, p)
    if seed_level is None:
        seed_level = paired_t_test(
            d.mean(1), np.zeros(n), blocks=[blocks[s] for s in shared] if blocks else None
        )
    var_problems = float(d.mean(0).var(ddof=1)) / p
    var_seeds = seed_level.se**2
    se = math.sqrt(var_seeds + var_problems)
    mean = float(d.mean())
    df = satterthwaite_df([(var_seeds, seed_level.df), (var_problems, p - 1)])
    if se == 0.0:
        pv = 1.0 if mean == 0.0 else 0.0
    else:
        pv = t_two_sided_p(mean / se, df)
    return ProblemTest(
        "two-way variance-components t", n, p, mean, se, seed_level.se, math.sqrt(var_problems),
        df, pv,
    )  # fmt: skip
