"""Holm's step-down adjustment of a family of p-values (family-wise error at alpha).

Holm (1979): sort the m p-values, p_(1) <= ... <= p_(m); the adjusted p_(i) is
max_{j <= i} min(1, (m - j + 1) p_(j)). Rejecting every adjusted p below alpha controls the
probability of any false rejection at alpha under any dependence; it is uniformly more powerful
than Bonferroni (m p).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input order. A NaN (a declared comparison that could not be
    tested) counts as p = 1: it stays in the family, so leaving a comparison out cannot make the
    others easier to pass."""
    p = [1.0 if (x is None or math.isnan(x)) else float(x) for x in p_values]
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted
