"""Seed-level tests of a difference between two arms, from one number per seed and arm.

The unit of replication of an RL comparison is the training seed: every (method, seed) cell is
one independent training run, so the test of "method A differs from B" is over seeds, whatever
the number of problems each run is evaluated on (that evaluation noise is inside each seed's
number).

- Same seeds on both arms (the grid's paired design): the paired t test on the per-seed
  differences d_s = a_s - b_s, t = mean(d) / (sd(d) / sqrt(n)) with n - 1 degrees of freedom;
  the exact sign-flip permutation p (all 2^n sign patterns of d; the smallest possible p is
  2^(1-n), so it cannot reach 0.05 below 6 seeds) is reported beside it.
- Different seed sets: Welch's t test on the per-seed values of each arm.
- One seed on an arm (or one shared seed): no seed-level test.
- Blocks (e.g. the warm start each seed trained from, when a study uses several): the paired t
  with the block means removed, SE = sqrt(sum of squared within-block residuals / (n - B) / n),
  n - B degrees of freedom (a randomized-block analysis of the differences); one block is the
  plain paired t.

Degenerate cases: d all 0 (the arms are identical on every seed): p = 1, `identical`; d constant
and non-zero (sd 0): t is infinite, p = 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import product

import numpy as np

from ict.evidence.distributions import t_two_sided_p

EXACT_SIGN_FLIP_MAX = 16  # seeds up to which every sign pattern is enumerated (2^16 patterns)
SIGN_FLIP_DRAWS = 2**16  # random sign patterns beyond that (seeded)


@dataclass(frozen=True)
class SeedTest:
    """A seed-level test of mean(a) - mean(b).

    `design`: "paired t", "welch t" or "none"; `n`: paired seeds (paired), else the smaller arm;
    `mean`: the difference (paired: mean of the per-seed differences); `se`: its standard error;
    `sd`: SD of the per-seed differences (paired; NaN otherwise); `df`: degrees of freedom; `p`:
    two-sided p; `p_sign_flip`: exact sign-flip p (paired only); `identical`: every seed of both
    arms has the same value; `reason`: why there is no test (design "none")."""

    design: str
    n: int
    mean: float
    se: float
    sd: float
    df: float
    p: float
    p_sign_flip: float | None = None
    identical: bool = False
    reason: str = ""

    @property
    def tested(self) -> bool:
        return self.design != "none"


@lru_cache(maxsize=EXACT_SIGN_FLIP_MAX)
def _all_signs(n: int) -> np.ndarray:
    """[2^n, n]: every pattern of n signs (read-only, cached)."""
    signs = np.array(list(product((1.0, -1.0), repeat=n)))
    signs.flags.writeable = False
    return signs


def sign_flip_p(d, *, seed: int = 0) -> float:
    """Two-sided p of the sign-flip permutation test of mean(d) = 0: the share of sign patterns
    s in {-1, +1}^n with |mean(s * d)| >= |mean(d)| (exact up to EXACT_SIGN_FLIP_MAX values, else
    SIGN_FLIP_DRAWS seeded random patterns plus the observed one)."""
    d = np.asarray(d, dtype=np.float64).ravel()
    n = d.size
    if n == 0:
        return math.nan
    if n <= EXACT_SIGN_FLIP_MAX:
        signs = _all_signs(n)
    else:
        rng = np.random.default_rng(seed)
        signs = np.vstack([np.ones(n), rng.choice((-1.0, 1.0), size=(SIGN_FLIP_DRAWS, n))])
    observed = abs(d.mean())
    stats = np.abs(signs @ d) / n
    return float(np.mean(stats >= observed - 1e-12 * max(1.0, observed)))


def paired_t_test(a, b, blocks=None) -> SeedTest:
    """Paired t test of mean(a - b) over matched seeds (`a`, `b`: [n], same seed order), with the
    exact sign-flip p beside it; `blocks` [n] (optional): each seed's block (module docstring)."""
    d = np.asarray(a, dtype=np.float64).ravel() - np.asarray(b, dtype=np.float64).ravel()
    n = d.size
    mean = float(d.mean()) if n else math.nan
    identical = bool(n and np.all(d == 0.0))
    labels = list(blocks) if blocks is not None else [0] * n
    if len(labels) != n:
        raise ValueError(f"{len(labels)} block labels for {n} seeds")
    groups = {b: [i for i, x in enumerate(labels) if x == b] for b in dict.fromkeys(labels)}
    df = n - len(groups)
    if n < 2 or df < 1:
        return SeedTest(
            "none", n, mean, math.nan, math.nan, math.nan, math.nan, None, identical,
            "one seed: no seed-level test (the interval covers evaluation noise only)"
            if n < 2 else "one seed per block: no blocked seed-level test",
        )  # fmt: skip
    residuals = np.concatenate([d[idx] - d[idx].mean() for idx in groups.values()])
    sd = float(math.sqrt(np.sum(residuals**2) / df))
    se = sd / math.sqrt(n)
    if identical:
        p = 1.0
    elif se == 0.0:
        p = 0.0  # a constant non-zero difference on every seed (of each block)
    else:
        p = t_two_sided_p(mean / se, df)
    design = "paired t" if len(groups) == 1 else f"paired t, {len(groups)} blocks"
    return SeedTest(design, n, mean, se, sd, float(df), p, sign_flip_p(d), identical)


def welch_t_test(a, b) -> SeedTest:
    """Welch's t test of mean(a) - mean(b) over two independent sets of seeds."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    n = min(a.size, b.size)
    mean = float(a.mean() - b.mean()) if a.size and b.size else math.nan
    if a.size < 2 or b.size < 2:
        return SeedTest(
            "none", n, mean, math.nan, math.nan, math.nan, math.nan,
            reason="fewer than 2 seeds on an arm: no seed-level test",
        )  # fmt: skip
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0.0:
        p, df = (1.0 if mean == 0.0 else 0.0), float(a.size + b.size - 2)
    else:
        df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
        p = t_two_sided_p(mean / se, df)
    return SeedTest("welch t", n, mean, se, math.nan, df, p)


def seed_test(values: Mapping, baseline: Mapping, blocks: Mapping | None = None) -> SeedTest:
    """The seed-level test of mean(values) - mean(baseline), each {seed: number}; `blocks`
    {seed: block} (optional) blocks the paired test.

    Paired over the shared seeds when there are >= 2 of them and one arm's seeds contain the
    other's (the grid's design); else Welch over each arm's seeds; else no test. `identical`
    when both arms hold the same seeds with equal values."""
    shared = sorted(set(values) & set(baseline), key=str)
    same_seeds = set(values) == set(baseline)
    if len(shared) == min(len(values), len(baseline)) and (len(shared) >= 2 or same_seeds):
        return paired_t_test(
            [values[s] for s in shared],
            [baseline[s] for s in shared],
            blocks=[blocks[s] for s in shared] if blocks else None,
        )
    return welch_t_test(list(values.values()), list(baseline.values()))
