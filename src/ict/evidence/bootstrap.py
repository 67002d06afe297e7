"""The percentile bootstrap of a mean over problems: one run's interval (`ict eval`, a grid cell).

Across seeds and problems the report uses ict.evidence.hierarchical instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bootstrap_ci(
    values: Sequence[float], *, num_resamples: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of per-problem `values` [P] (resampling problems).

    Returns (low, high); (v, v) for a single problem; (nan, nan) for none.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    index = rng.integers(0, values.size, size=(num_resamples, values.size))
    means = values[index].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)
