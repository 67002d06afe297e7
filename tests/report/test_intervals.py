import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from ict.errors import ConfigError
from ict.report.intervals import (
    Interval,
    betainc,
    bootstrap_interval,
    format_interval,
    paired_difference,
    t_cdf,
    t_interval,
    t_ppf,
    verdict,
    welch_difference,
)


@pytest.mark.parametrize("df", [1, 2, 3, 4.5, 10, 30, 200])
@pytest.mark.parametrize("q", [0.5, 0.9, 0.975, 0.995, 0.025])
def test_t_ppf_matches_scipy(df, q):
    assert t_ppf(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-8, abs=1e-10)


def test_t_ppf_known_table_values():
    # textbook table: t_{0.975, 2} = 4.303, t_{0.975, 9} = 2.262, t_{0.975, inf} -> 1.960
    assert t_ppf(0.975, 2) == pytest.approx(4.3027, abs=1e-4)
    assert t_ppf(0.975, 9) == pytest.approx(2.2622, abs=1e-4)
    assert t_ppf(0.975, 1e6) == pytest.approx(1.95996, abs=1e-4)


@given(st.floats(0.1, 50), st.floats(0.1, 50), st.floats(0, 1))
def test_betainc_matches_scipy(a, b, x):
    from scipy.special import betainc as ref

    assert betainc(a, b, x) == pytest.approx(ref(a, b, x), abs=1e-9)


@given(st.floats(-20, 20), st.floats(0.5, 100))
def test_t_cdf_matches_scipy(t, df):
    assert t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-9)


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
    assert verdict(paired_difference([0.5], [0.4])) == "no interval (needs >= 2 seeds)"


def test_paired_difference_uses_pairs():
    a, b = np.array([0.50, 0.60, 0.70]), np.array([0.40, 0.52, 0.61])
    iv = paired_difference(a, b)
    ref = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert iv.low == pytest.approx(ref.low) and iv.high == pytest.approx(ref.high)
    assert iv.method == "paired t" and verdict(iv) == "higher"


def test_welch_difference_matches_scipy():
    a, b = np.array([0.5, 0.6, 0.72, 0.55]), np.array([0.4, 0.41, 0.6])
    iv = welch_difference(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert iv.low == pytest.approx(ref.low) and iv.high == pytest.approx(ref.high)


def test_overlapping_difference_is_not_significant():
    iv = paired_difference([0.5, 0.4, 0.6], [0.45, 0.5, 0.5])
    assert iv.contains(0.0) and verdict(iv) == "no significant difference"


def test_bootstrap_covers_mean_and_is_seeded():
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 1.0, 50)
    a, b = bootstrap_interval(x, seed=1), bootstrap_interval(x, seed=1)
    assert a == b and a.low < x.mean() < a.high
    # close to the t interval for n = 50 normal data
    t = t_interval(x)
    assert a.half_width == pytest.approx(t.half_width, rel=0.2)


def test_bad_confidence_is_a_config_error():
    with pytest.raises(ConfigError, match="confidence"):
        t_interval([1, 2], confidence=95)


def test_format_signed():
    iv = Interval(0.031, -0.01, 0.072, 3, "paired t")
    assert format_interval(iv, signed=True) == "+0.031 [-0.010, +0.072]"
