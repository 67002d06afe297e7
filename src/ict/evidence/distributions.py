"""Distribution functions for the seed-level tests, in pure numpy / math (no scipy at run time).

- Student t: CDF from the regularised incomplete beta function (continued fraction, Numerical
  Recipes 6.4), quantile by bisection.
- Standard normal: CDF from the rational erfc approximation of Numerical Recipes 6.2 (`erfcc`,
  fractional error below 1.2e-7 everywhere), vectorised.
- Noncentral t: CDF by quadrature over the chi variable, P(T <= t) = E_W[Phi(t W - ncp)] with
  W = sqrt(V / df), V ~ chi^2_df; used for the power of a t test (ict.evidence.power).

Every function is checked against scipy in tests/evidence.
"""

from __future__ import annotations

import math

import numpy as np

from ict.errors import ConfigError


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
    """CDF of Student's t with `df` (> 0, real) degrees of freedom; t may be +-inf."""
    if t == 0.0:
        return 0.5
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    # tail = I_x(df/2, 1/2) / 2 with x = df / (df + t^2); betainc picks the continued fraction
    # that keeps the relative precision of a small tail (a switch on x > 0.5 here cancelled:
    # t = -9.92, df = 98.6 gave p = 2.2e-16 instead of 1.7e-16)
    x, xc = df / (df + t * t), t * t / (df + t * t)
    tail = 0.5 * betainc(df / 2.0, 0.5, x, xc)
    return 1.0 - tail if t > 0 else tail


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom (the lower tail is computed
    directly, so small p keep their relative precision)."""
    return min(1.0, 2.0 * t_cdf(-abs(t), df))


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


_ERFC = (
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
    0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277,
)  # fmt: skip


def erfc(x) -> np.ndarray:
    """Complementary error function, elementwise (Numerical Recipes `erfcc`: fractional error
    below 1.2e-7)."""
    x = np.asarray(x, dtype=np.float64)
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.zeros_like(t)
    for coef in reversed(_ERFC[1:]):
        poly = (poly + coef) * t
    ans = t * np.exp(-z * z + _ERFC[0] + poly)
    return np.where(x >= 0, ans, 2.0 - ans)


def normal_cdf(x) -> np.ndarray:
    """Standard normal CDF, elementwise."""
    return 0.5 * erfc(-np.asarray(x, dtype=np.float64) / math.sqrt(2.0))


_NODES = 4001  # Simpson nodes over u = sqrt(W) (odd)


def nct_cdf(t: float, df: float, ncp: float) -> float:
    """CDF of the noncentral t with `df` (>= 1) degrees of freedom and noncentrality `ncp`.

    T = (Z + ncp) / W with W = sqrt(V / df), V ~ chi^2_df, so P(T <= t) = E_W[Phi(t W - ncp)].
    Integrated with Simpson's rule over u = sqrt(W) (smooth at W = 0 for every df >= 1) on the
    range that holds all but ~1e-30 of W's mass."""
    if not df >= 1:
        raise ConfigError(f"nct_cdf needs df >= 1, got {df}")
    spread = 12.0 / math.sqrt(df)
    lo, hi = math.sqrt(max(0.0, 1.0 - spread)), math.sqrt(1.0 + spread)
    u = np.linspace(lo, hi, _NODES)
    w = u * u
    half = df / 2.0
    log_norm = math.log(2.0) + half * math.log(half) - math.lgamma(half)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_f = log_norm + (df - 1.0) * np.log(w) - half * w * w
        at_zero = math.exp(log_norm) if df == 1 else 0.0  # the density's limit at W = 0
        density = np.where(w > 0, np.exp(log_f), at_zero)
    integrand = normal_cdf(t * w - ncp) * density * 2.0 * u  # dW = 2u du
    step = (hi - lo) / (_NODES - 1)
    weights = np.ones(_NODES)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    return float(min(1.0, max(0.0, step / 3.0 * (weights @ integrand))))
