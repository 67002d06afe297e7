"""Equivalence by two one-sided tests (TOST, Schuirmann 1987) against a declared margin.

H0: |true difference| >= margin. With the test's difference m, standard error se and df degrees
of freedom: p_low = P(T >= (m + margin) / se), p_high = P(T <= (m - margin) / se), and
p_TOST = max(p_low, p_high). p_TOST < alpha is the same as the (1 - 2 alpha) t interval lying
inside (-margin, +margin): "equivalent" then means "differs by less than the margin".

Non-inferiority (one side of TOST): H0: true difference <= -margin, p = P(T >= (m + margin) / se)
(`non_inferiority_p`); its mirror `inferiority_p` tests H0: difference >= -margin, i.e. whether
the difference lies beyond the margin. Both take a seed-level test (ict.evidence.seed_tests) or an
over-problems test (ict.evidence.problem_tests): anything with mean, se, df, tested, identical.
"""

from __future__ import annotations

import math

from ict.evidence.distributions import t_cdf
from ict.evidence.problem_tests import ProblemTest
from ict.evidence.seed_tests import SeedTest


def _one_sided(test: SeedTest | ProblemTest, bound: float, above: bool) -> float:
    """p for H1: difference > `bound` (`above`) or < `bound`, from the test's t distribution."""
    if test.se == 0.0:
        return 0.0 if (test.mean > bound if above else test.mean < bound) else 1.0
    t = (test.mean - bound) / test.se
    return t_cdf(-t, test.df) if above else t_cdf(t, test.df)


def non_inferiority_p(test: SeedTest | ProblemTest, margin: float) -> float:
    """One-sided p of H0: difference <= -`margin` (> 0); NaN without a test. Identical arms: 0."""
    if test.identical:
        return 0.0
    if not test.tested or not margin > 0:
        return math.nan
    return _one_sided(test, -margin, above=True)


def inferiority_p(test: SeedTest | ProblemTest, margin: float) -> float:
    """One-sided p of H0: difference >= -`margin` (> 0): small when the difference lies beyond
    the margin; the complement of `non_inferiority_p` (NaN without a test; identical arms: 1)."""
    return 1.0 - non_inferiority_p(test, margin)


def tost_p(test: SeedTest | ProblemTest, margin: float) -> float:
    """p of TOST for |difference| < `margin` (> 0) from a seed-level test; NaN without a test.
    Identical arms (difference 0 on every seed): 0."""
    if test.identical:
        return 0.0
    if not test.tested or not margin > 0:
        return math.nan
    return max(_one_sided(test, -margin, above=True), _one_sided(test, margin, above=False))
