"""Equivalence by two one-sided tests (TOST, Schuirmann 1987) against a declared margin.

H0: |true difference| >= margin. With the test's difference m, standard error se and df degrees
of freedom: p_low = P(T >= (m + margin) / se), p_high = P(T <= (m - margin) / se), and
p_TOST = max(p_low, p_high). p_TOST < alpha is the same as the (1 - 2 alpha) t interval lying
inside (-margin, +margin): "equivalent" then means "differs by less than the margin".
"""

from __future__ import annotations

import math

from ict.evidence.distributions import t_cdf
from ict.evidence.seed_tests import SeedTest


def tost_p(test: SeedTest, margin: float) -> float:
    """p of TOST for |difference| < `margin` (> 0) from a seed-level test; NaN without a test.
    Identical arms (difference 0 on every seed): 0."""
    if test.identical:
        return 0.0
    if not test.tested or not margin > 0:
        return math.nan
    if test.se == 0.0:
        return 0.0 if abs(test.mean) < margin else 1.0
    p_low = t_cdf(-(test.mean + margin) / test.se, test.df)
    p_high = t_cdf((test.mean - margin) / test.se, test.df)
    return max(p_low, p_high)
