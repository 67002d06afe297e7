import math

import numpy as np
import pytest
from scipy import stats

from ict.errors import ConfigError
from ict.evidence.intervals import (
    Interval,
    clipped,
    format_interval,
    paired_difference,
    t_interval,
    welch_difference,
)


def test_t_interval_matches_scipy():
    x = np.array([0.41, 0.47, 0.39, 0.52])
    iv = t_interval(x)
    low, high = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert (iv.mean, iv.n, iv.method) == (pytest.approx(x.mean()), 4, "t")
    assert iv.low == pytest.approx(low) and iv.high == pytest.approx(high)


def test_t_interval_hand_computed():
    # values 1, 2, 3: mean 2, sd 1, se 1/sqrt(3), t_{0.975,2} = 4.302653
    iv = t_interval([1.0, 2.0, 3.0])
    half = 4.302652729911275 / math.sqrt(3)
    assert iv.low == pytest.approx(2 - half) and iv.high == pytest.approx(2 + half)


def test_one_value_gives_no_interval_and_says_so():
    iv = t_interval([0.5])
    assert iv.mean == 0.5 and not iv.defined
    assert "no interval" in format_interval(iv)
    assert not paired_difference([0.5], [0.4]).defined


def test_paired_difference_uses_pairs():
    a, b = np.array([0.50, 0.60, 0.70]), np.array([0.40, 0.52, 0.61])
    iv = paired_difference(a, b)
    ref = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert iv.low == pytest.approx(ref.low) and iv.high == pytest.approx(ref.high)
    assert iv.method == "paired t" and iv.low > 0


def test_welch_difference_matches_scipy():
    a, b = np.array([0.5, 0.6, 0.72, 0.55]), np.array([0.4, 0.41, 0.6])
    iv = welch_difference(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert iv.low == pytest.approx(ref.low) and iv.high == pytest.approx(ref.high)


def test_overlapping_difference_contains_zero():
    iv = paired_difference([0.5, 0.4, 0.6], [0.45, 0.5, 0.5])
    assert iv.contains(0.0)


def test_bad_confidence_is_a_config_error():
    with pytest.raises(ConfigError, match="confidence"):
        t_interval([1, 2], confidence=95)


def test_format_signed():
    iv = Interval(0.031, -0.01, 0.072, 3, "paired t")
    assert format_interval(iv, signed=True) == "+0.031 [-0.010, +0.072]"


def test_clipped_keeps_the_mean_and_names_the_clip():
    iv = clipped(Interval(0.57, 0.125, 1.015, 2, "t"), 0.0, 1.0)
    assert (iv.mean, iv.low, iv.high) == (0.57, 0.125, 1.0)
    assert iv.method == "t, clipped to [0, 1]"
