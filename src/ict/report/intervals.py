"""Confidence intervals for results across seeds: Student t, Welch, paired, percentile bootstrap.

Pure numpy (no scipy at run time): the t quantile comes from the regularised incomplete beta
function (continued fraction, Numerical Recipes 6.4) inverted by bisection.
An `Interval` with n < 2 has NaN bounds: one seed gives no interval, and the report says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ict.errors import ConfigError


@dataclass(frozen=True)
class Interval:
    """mean with a two-sided `confidence` interval [low, high] from `n` values, by `method`."""

    mean: float
    low: float
    high: float
    n: int
    method: str  # "t", "paired t", "welch t" or "bootstrap"
    confidence: float = 0.95

    @property
    def defined(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    def contains(self, x: float) -> bool:
        """True when x lies inside the interval (or when the interval is undefined)."""
        return not self.defined or self.low <= x <= self.high

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float, xc: float | None = None) -> float:
    """Regularised incomplete beta I_x(a, b) for a, b > 0 and 0 <= x <= 1.

    `xc` = 1 - x computed without cancellation by the caller, when it has it."""
    xc = 1.0 - x if xc is None else xc
    if x <= 0.0:
        return 0.0
    if xc <= 0.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(xc)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, xc) / b


def t_cdf(t: float, df: float) -> float:
    """CDF of Student's t with `df` (> 0, real) degrees of freedom."""
    if t == 0.0:
        return 0.5
    # tail = I_x(df/2, 1/2) / 2 with x = df / (df + t^2); use the symmetric form when x is near 1
    x, xc = df / (df + t * t), t * t / (df + t * t)
    if x > 0.5:
        tail = 0.5 * (1.0 - betainc(0.5, df / 2.0, xc, x))
    else:
        tail = 0.5 * betainc(df / 2.0, 0.5, x, xc)
    return 1.0 - tail if t > 0 else tail


def t_ppf(q: float, df: float) -> float:
    """Quantile of Student's t: the t with t_cdf(t, df) = q, 0 < q < 1 (bisection to 1e-12)."""
    if not 0.0 < q < 1.0 or not df > 0:
        raise ConfigError(f"t_ppf needs 0 < q < 1 and df > 0, got q={q}, df={df}")
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < q:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def _check(values, confidence: float) -> np.ndarray:
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence}")
    x = np.asarray(values, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    return x


def t_interval(values, confidence: float = 0.95) -> Interval:
    """Student-t interval for the mean of `values` (e.g. one number per seed)."""
    x = _check(values, confidence)
    n = len(x)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "t", confidence)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, n, "t", confidence)
    se = float(x.std(ddof=1)) / math.sqrt(n)
    half = t_ppf(0.5 + confidence / 2.0, n - 1) * se
    return Interval(mean, mean - half, mean + half, n, "t", confidence)


def paired_difference(values, baseline, confidence: float = 0.95) -> Interval:
    """t interval for mean(values - baseline) over matched pairs (same seed, same data)."""
    a = np.asarray(values, dtype=np.float64).ravel()
    b = np.asarray(baseline, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ConfigError(f"paired difference needs equal lengths, got {a.shape} and {b.shape}")
    iv = t_interval(a - b, confidence)
    return Interval(iv.mean, iv.low, iv.high, iv.n, "paired t", confidence)


def welch_difference(values, baseline, confidence: float = 0.95) -> Interval:
    """Welch t interval for mean(values) - mean(baseline) (unpaired, unequal variances)."""
    a, b = _check(values, confidence), _check(baseline, confidence)
    n = min(len(a), len(b))
    if len(a) == 0 or len(b) == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "welch t", confidence)
    diff = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return Interval(diff, math.nan, math.nan, n, "welch t", confidence)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:
        return Interval(diff, diff, diff, n, "welch t", confidence)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t_ppf(0.5 + confidence / 2.0, df) * se
    return Interval(diff, diff - half, diff + half, n, "welch t", confidence)


def bootstrap_interval(
    values, confidence: float = 0.95, n_resamples: int = 10_000, seed: int = 0
) -> Interval:
    """Percentile bootstrap interval for the mean (resampling `values` with replacement)."""
    x = _check(values, confidence)
    n = len(x)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "bootstrap", confidence)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, n, "bootstrap", confidence)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return Interval(mean, float(low), float(high), n, "bootstrap", confidence)


def format_interval(iv: Interval, digits: int = 3, signed: bool = False) -> str:
    """'0.412 [0.380, 0.444]'; without an interval (n < 2): '0.412 (n=1, no interval)'."""
    sign = "+" if signed else ""
    if not math.isfinite(iv.mean):
        return "n/a"
    if not iv.defined:
        return f"{iv.mean:{sign}.{digits}f} (n={iv.n}, no interval)"
    return f"{iv.mean:{sign}.{digits}f} [{iv.low:{sign}.{digits}f}, {iv.high:{sign}.{digits}f}]"


def verdict(diff: Interval) -> str:
    """Plain words for a difference interval: never a gain without its interval."""
    if not math.isfinite(diff.mean):
        return "n/a"
    if not diff.defined:
        return "no interval (needs >= 2 seeds)"
    if diff.contains(0.0):
        return "no significant difference"
    return "higher" if diff.mean > 0 else "lower"
