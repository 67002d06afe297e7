"""Power and minimum detectable effect (MDE) of a two-sided t test.

With df degrees of freedom and critical value c = t_{1 - alpha/2, df}, a true difference delta
gives the noncentral t statistic with noncentrality ncp = delta / se, and
power(ncp) = P(T' > c) + P(T' < -c). The MDE at a given power is the delta whose ncp reaches that
power, times the standard error: mde = ncp* x se (for the paired test se = sd(d) / sqrt(n), so
the MDE follows the observed SD of the per-seed differences and the number of seeds).

A design with the warm start (initialisation) as the unit, n_inits warm starts x n_seeds seeds:
se = sqrt((sd_between^2 + sd_within^2 / n_seeds) / n_inits), df = n_inits - 1 (`unit_design_*`):
more seeds per warm start shrink only the within part, so the between-warm-start SD sets a floor
that only more warm starts lower.
"""

from __future__ import annotations

import math
from functools import lru_cache

from ict.errors import ConfigError
from ict.evidence.distributions import nct_cdf, t_ppf

POWER = 0.8


def t_test_power(ncp: float, df: float, alpha: float) -> float:
    """Power of the two-sided t test at level `alpha` with `df` degrees of freedom when the true
    noncentrality is `ncp` (difference / standard error)."""
    return _power(ncp, df, t_ppf(1.0 - alpha / 2.0, df))


def _power(ncp: float, df: float, c: float) -> float:
    """Power of the two-sided t test with critical value `c`."""
    return 1.0 - nct_cdf(c, df, ncp) + nct_cdf(-c, df, ncp)


@lru_cache(maxsize=1024)
def detectable_ncp(df: float, alpha: float, power: float = POWER) -> float:
    """The noncentrality at which the two-sided t test reaches `power` (bisection to 1e-9;
    cached: it depends on df, alpha and power only)."""
    if not (0.0 < alpha < 1.0 and alpha < power < 1.0 and df >= 1):
        raise ConfigError(
            f"detectable_ncp needs 0 < alpha < power < 1 and df >= 1, got alpha={alpha}, "
            f"power={power}, df={df}"
        )
    c = t_ppf(1.0 - alpha / 2.0, df)
    lo, hi = 0.0, 1.0
    while _power(hi, df, c) < power:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-9 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if _power(mid, df, c) < power:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def minimum_detectable_effect(se: float, df: float, alpha: float, power: float = POWER) -> float:
    """The true difference the two-sided t test detects with probability `power` at level `alpha`
    given the standard error `se` (same units as the difference); NaN when se or df is
    undefined, 0 when se is 0."""
    if not (math.isfinite(se) and math.isfinite(df)) or df < 1:
        return math.nan
    if se == 0.0:
        return 0.0
    return detectable_ncp(df, alpha, power) * se


# ---- warm starts as the unit -------------------------------------------------------------------
def unit_design_se(n_inits: int, n_seeds: int, sd_between: float, sd_within: float) -> float:
    """Standard error of the mean difference when the warm start (initialisation) is the unit:
    `n_inits` warm starts with `n_seeds` seeds each; a warm start's mean of the per-seed
    differences has variance sd_between^2 + sd_within^2 / n_seeds (`sd_between`: SD of the true
    difference across warm starts; `sd_within`: SD of a seed's difference around its warm
    start's), so SE = sqrt((sd_between^2 + sd_within^2 / n_seeds) / n_inits)."""
    if int(n_inits) != n_inits or int(n_seeds) != n_seeds or n_inits < 2 or n_seeds < 1:
        raise ConfigError(
            f"a warm-start design needs >= 2 warm starts and >= 1 seed each, got {n_inits} x "
            f"{n_seeds}"
        )
    if not (sd_between >= 0.0 and sd_within >= 0.0):
        raise ConfigError(f"SDs must be >= 0, got between {sd_between}, within {sd_within}")
    return math.sqrt((sd_between**2 + sd_within**2 / n_seeds) / n_inits)


def unit_design_power(
    delta: float, n_inits: int, n_seeds: int, sd_between: float, sd_within: float,
    alpha: float = 0.05,
) -> float:  # fmt: skip
    """Power of the test with warm starts as the unit (ict.evidence.seed_tests.unit_test: the
    t test of the warm-start means, n_inits - 1 df) to detect a true mean difference `delta` at
    level `alpha` (two-sided)."""
    se = unit_design_se(n_inits, n_seeds, sd_between, sd_within)
    if se == 0.0:
        return 1.0 if delta != 0.0 else alpha
    return t_test_power(delta / se, n_inits - 1, alpha)


def unit_design_mde(
    n_inits: int, n_seeds: int, sd_between: float, sd_within: float,
    alpha: float = 0.05, power: float = POWER,
) -> float:  # fmt: skip
    """The minimum detectable effect of the warm-start-as-unit design `n_inits` x `n_seeds` at
    `power` and level `alpha`, given the between- and within-warm-start SDs of the difference."""
    se = unit_design_se(n_inits, n_seeds, sd_between, sd_within)
    return minimum_detectable_effect(se, n_inits - 1, alpha, power)


def seeds_needed(sd: float, margin: float, alpha: float, power: float = POWER, most: int = 1000):
    """The fewest seeds n (at least 2) at which the paired t test over seeds (n - 1 degrees of
    freedom, per-seed differences of SD `sd`) detects a true difference of `margin` with `power`
    at level `alpha`: its MDE, detectable_ncp(n - 1) x sd / sqrt(n), is at most the margin. None
    when more than `most` seeds would be needed, or sd or margin is not a finite number (margin
    > 0)."""
    if not (math.isfinite(sd) and math.isfinite(margin)) or margin <= 0:
        return None
    for n in range(2, most + 1):
        if detectable_ncp(n - 1, alpha, power) * sd / math.sqrt(n) <= margin:
            return n
    return None
