import numpy as np
import pytest

from ict.evidence.bootstrap import bootstrap_ci


def test_bootstrap_interval_sanity():
    rng = np.random.default_rng(1)
    values = rng.random(200)
    low, high = bootstrap_ci(values, seed=3)
    assert low < values.mean() < high
    # Width close to the normal approximation 2 * 1.96 * sd / sqrt(P).
    expected = 2 * 1.96 * values.std(ddof=1) / np.sqrt(values.size)
    assert high - low == pytest.approx(expected, rel=0.15)
    assert bootstrap_ci(values, seed=3) == (low, high)  # seeded
    assert bootstrap_ci([0.25] * 5) == (0.25, 0.25)
    assert all(np.isnan(bootstrap_ci([])))
