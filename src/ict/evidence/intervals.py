"""Confidence intervals for results across seeds: Student t, paired t, Welch t; their text form.

Pure numpy (the t quantile: ict.evidence.distributions). An `Interval` with n < 2 has NaN bounds:
one seed gives no interval, and the report says so. Intervals describe; verdicts come from the
seed-level tests (ict.evidence.seed_tests, ict.evidence.verdict).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ict.errors import ConfigError
from ict.evidence.distributions import t_ppf


@dataclass(frozen=True)
class Interval:
    """mean with a two-sided `confidence` interval [low, high] from `n` values, by `method`."""

    mean: float
    low: float
    high: float
    n: int
    method: str  # "t", "paired t", "welch t", "hierarchical bootstrap", ...
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


def format_interval(iv: Interval, digits: int = 3, signed: bool = False) -> str:
    """'0.412 [0.380, 0.444]'; without an interval (n < 2): '0.412 (n=1, no interval)'."""
    sign = "+" if signed else ""
    if not math.isfinite(iv.mean):
        return "n/a"
    if not iv.defined:
        return f"{iv.mean:{sign}.{digits}f} (n={iv.n}, no interval)"
    return f"{iv.mean:{sign}.{digits}f} [{iv.low:{sign}.{digits}f}, {iv.high:{sign}.{digits}f}]"


def clipped(iv: Interval, low: float, high: float) -> Interval:
    """`iv` with its bounds clipped to [low, high] (fallback for results without per-unit data)."""
    if not iv.defined:
        return iv
    return Interval(
        iv.mean,
        min(max(iv.low, low), high),
        max(min(iv.high, high), low),
        iv.n,
        f"{iv.method}, clipped to [{low:g}, {high:g}]",
        iv.confidence,
    )
