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
  of the same mean with the block means removed from the error. The mean is the weighted sum of
  the block means, mean(d) = sum_b w_b dbar_b with w_b = n_b / n, so
  SE^2 = sum_b w_b^2 s_b^2 / n_b (s_b: SD of block b's differences) and the degrees of freedom are
  Welch-Satterthwaite's, df = SE^4 / sum_b [(w_b^2 s_b^2 / n_b)^2 / (n_b - 1)]: the blocks' SDs are
  not assumed equal (toy-cot-explore's two warm starts differed 5.6x: pooling gave df 18 where
  this gives about 10). With equal block sizes the SE is the pooled one (sum of squared
  within-block residuals / (n - B) / n); only df differs. `pooled=True`, or a block with one
  seed (no SD of its own), gives the randomized-block analysis with the pooled SD and n - B df.
  One block is the plain paired t.
- Warm starts as the unit (`unit_test`): each block's mean difference is one unit, the t test
  of their mean with B - 1 df (and the exact sign flip over the B units): the verdict is about
  warm starts drawn like these, not about these B warm starts (its power: ict.evidence.power.
  unit_design_power / unit_design_mde).

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

from ict.errors import ConfigError
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


def satterthwaite_df(parts: list[tuple[float, float]]) -> float:
    """Satterthwaite's df of a sum of variance estimates [(variance, its df), ...] (inf when every
    variance is 0)."""
    total = sum(v for v, _ in parts)
    denom = sum(v * v / df for v, df in parts if v > 0.0)
    return total * total / denom if denom > 0.0 else math.inf


def _groups(labels: list, n: int) -> dict:
    """{block: [indices]} in order of first appearance (`labels` [n])."""
    if len(labels) != n:
        raise ValueError(f"{len(labels)} block labels for {n} seeds")
    return {b: [i for i, x in enumerate(labels) if x == b] for b in dict.fromkeys(labels)}


def blocked_t(d, blocks, pooled: bool = False) -> tuple[float, float, float, str]:
    """(SD, SE of mean(d), df, design) of the blocked paired t of the differences `d` [n] with
    each one's block `blocks` [n] (module docstring; needs n > number of blocks); SD is sqrt(n)
    x SE for the Welch form."""
    d = np.asarray(d, dtype=np.float64).ravel()
    groups = _groups(list(blocks), d.size)
    n, nb = d.size, len(groups)
    if pooled or nb == 1 or min(len(idx) for idx in groups.values()) < 2:
        residuals = np.concatenate([d[idx] - d[idx].mean() for idx in groups.values()])
        sd = math.sqrt(np.sum(residuals**2) / (n - nb))
        return (
            sd,
            sd / math.sqrt(n),
            float(n - nb),
            ("paired t" if nb == 1 else f"paired t, {nb} blocks, pooled"),
        )
    parts = [
        ((len(idx) / n) ** 2 * float(d[idx].var(ddof=1)) / len(idx), len(idx) - 1.0)
        for idx in groups.values()
    ]  # (w_b^2 s_b^2 / n_b, n_b - 1)
    df = satterthwaite_df(parts)
    df = float(n - nb) if math.isinf(df) else df  # every block constant: p is 0 or 1 anyway
    se = math.sqrt(sum(v for v, _ in parts))
    return se * math.sqrt(n), se, df, f"paired t, {nb} blocks, Welch df"


def paired_t_test(a, b, blocks=None, *, pooled: bool = False) -> SeedTest:
    """Paired t test of mean(a - b) over matched seeds (`a`, `b`: [n], same seed order), with the
    exact sign-flip p beside it; `blocks` [n] (optional): each seed's block, and `pooled` the
    blocks' pooled SD and n - B df instead of the Welch-Satterthwaite df (module docstring).
    `sd`: the SD of the differences (blocked: the pooled within-block SD; with Welch df,
    sqrt(n) x SE, the same when the blocks have equal sizes)."""
    d = np.asarray(a, dtype=np.float64).ravel() - np.asarray(b, dtype=np.float64).ravel()
    n = d.size
    mean = float(d.mean()) if n else math.nan
    identical = bool(n and np.all(d == 0.0))
    labels = list(blocks) if blocks is not None else [0] * n
    if n < 2 or n - len(_groups(labels, n)) < 1:
        return SeedTest(
            "none", n, mean, math.nan, math.nan, math.nan, math.nan, None, identical,
            "one seed: no seed-level test (the interval covers evaluation noise only)"
            if n < 2 else "one seed per block: no blocked seed-level test",
        )  # fmt: skip
    sd, se, df, design = blocked_t(d, labels, pooled)
    if identical:
        p = 1.0
    elif se == 0.0:
        p = 0.0  # a constant non-zero difference on every seed (of each block)
    else:
        p = t_two_sided_p(mean / se, df)
    return SeedTest(design, n, mean, se, sd, df, p, sign_flip_p(d), identical)


def unit_test(a, b, blocks) -> SeedTest:
    """The t test of mean(a - b) with each block (warm start) as the unit: the B block means of
    the per-seed differences (`a`, `b`, `blocks`: [n], same seed order) tested as one sample,
    B - 1 df, with the exact sign flip over the B block means. `n` is B; `mean` the mean of the
    block means (mean(d) when every block has as many seeds)."""
    d = np.asarray(a, dtype=np.float64).ravel() - np.asarray(b, dtype=np.float64).ravel()
    groups = _groups(list(blocks), d.size)
    units = np.array([d[idx].mean() for idx in groups.values()])
    m = units.size
    mean = float(units.mean()) if m else math.nan
    identical = bool(d.size and np.all(d == 0.0))
    if m < 2:
        return SeedTest(
            "none", m, mean, math.nan, math.nan, math.nan, math.nan, None, identical,
            "one warm start: no test with warm starts as the unit",
        )  # fmt: skip
    sd = float(units.std(ddof=1))
    se = sd / math.sqrt(m)
    p = 1.0 if identical else (0.0 if se == 0.0 else t_two_sided_p(mean / se, m - 1))
    design = f"t over {m} warm starts"
    return SeedTest(design, m, mean, se, sd, float(m - 1), p, sign_flip_p(units), identical)


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


UNITS = ("seed", "warm start")  # what a seed-level comparison replicates (seed_test's `unit`)


def seed_test(
    values: Mapping, baseline: Mapping, blocks: Mapping | None = None, unit: str = "seed"
) -> SeedTest:
    """The seed-level test of mean(values) - mean(baseline), each {seed: number}; `blocks`
    {seed: block} (optional) blocks the paired test; `unit` "warm start" tests the blocks' mean
    differences instead (unit_test; needs `blocks`).

    Paired over the shared seeds when there are >= 2 of them and one arm's seeds contain the
    other's (the grid's design); else Welch over each arm's seeds; else no test. `identical`
    when both arms hold the same seeds with equal values."""
    if unit not in UNITS:
        raise ConfigError(f"unknown unit {unit!r}; use one of {', '.join(UNITS)}")
    shared = sorted(set(values) & set(baseline), key=str)
    same_seeds = set(values) == set(baseline)
    if len(shared) == min(len(values), len(baseline)) and (len(shared) >= 2 or same_seeds):
        a, b = [values[s] for s in shared], [baseline[s] for s in shared]
        if unit == "warm start":
            if not blocks:
                return SeedTest(
                    "none", 1, float(np.mean(a) - np.mean(b)) if a else math.nan, math.nan,
                    math.nan, math.nan, math.nan,
                    reason="one warm start: no test with warm starts as the unit",
                )  # fmt: skip
            return unit_test(a, b, [blocks[s] for s in shared])
        return paired_t_test(a, b, blocks=[blocks[s] for s in shared] if blocks else None)
    return welch_t_test(list(values.values()), list(baseline.values()))
