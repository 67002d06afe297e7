"""TOST against scipy's one-sided t tests, and its tie to the (1 - 2 alpha) interval."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from ict.evidence.equivalence import inferiority_p, non_inferiority_p, tost_p
from ict.evidence.intervals import paired_difference
from ict.evidence.problem_tests import over_problems_test
from ict.evidence.seed_tests import paired_t_test, seed_test


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 9), st.integers(0, 2**31 - 1), st.sampled_from([0.02, 0.03, 0.05, 0.1]))
def test_tost_matches_two_one_sided_scipy_tests(n, seed, margin):
    rng = np.random.default_rng(seed)
    d = rng.normal(0.0, 0.03, n)
    low = stats.ttest_1samp(d, -margin, alternative="greater").pvalue
    high = stats.ttest_1samp(d, margin, alternative="less").pvalue
    assert tost_p(paired_t_test(d, np.zeros(n)), margin) == pytest.approx(max(low, high))


def test_tost_agrees_with_the_90_percent_interval():
    a, b = np.array([0.70, 0.71, 0.69, 0.72, 0.70]), np.array([0.70, 0.70, 0.70, 0.71, 0.70])
    iv = paired_difference(a, b, confidence=0.90)
    test = paired_t_test(a, b)
    for margin in (0.005, 0.01, 0.02, 0.05):
        inside = -margin < iv.low and iv.high < margin
        assert (tost_p(test, margin) < 0.05) == inside


def test_identical_is_equivalent_and_no_test_is_nan():
    assert tost_p(seed_test({0: 0.5, 1: 0.6}, {0: 0.5, 1: 0.6}), 0.03) == 0.0
    assert np.isnan(tost_p(seed_test({0: 0.5}, {0: 0.4}), 0.03))


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 9), st.integers(0, 2**31 - 1), st.sampled_from([0.02, 0.05, 0.1]))
def test_non_inferiority_and_inferiority_match_scipy_one_sided_tests(n, seed, margin):
    rng = np.random.default_rng(seed)
    d = rng.normal(-0.03, 0.05, n)
    test = paired_t_test(d, np.zeros(n))
    greater = stats.ttest_1samp(d, -margin, alternative="greater").pvalue
    less = stats.ttest_1samp(d, -margin, alternative="less").pvalue
    assert non_inferiority_p(test, margin) == pytest.approx(greater)
    assert inferiority_p(test, margin) == pytest.approx(less)
    assert non_inferiority_p(test, margin) + inferiority_p(test, margin) == pytest.approx(1.0)


def test_non_inferiority_reads_an_over_problems_test_by_its_own_se_and_df():
    rng = np.random.default_rng(3)
    a = {s: rng.binomial(1, 0.6, 40).astype(float) for s in range(5)}
    b = {s: rng.binomial(1, 0.6, 40).astype(float) for s in range(5)}
    test = over_problems_test(a, b)
    expected = stats.t.sf((test.mean + 0.1) / test.se, test.df)
    assert non_inferiority_p(test, 0.1) == pytest.approx(expected)


def test_one_sided_edge_cases():
    same = seed_test({0: 0.5, 1: 0.6}, {0: 0.5, 1: 0.6})
    assert non_inferiority_p(same, 0.03) == 0.0 and inferiority_p(same, 0.03) == 1.0
    none = seed_test({0: 0.5}, {0: 0.4})
    assert np.isnan(non_inferiority_p(none, 0.03)) and np.isnan(inferiority_p(none, 0.03))
    constant = paired_t_test([0.5, 0.5, 0.5], [0.6, 0.6, 0.6])  # -0.1 on every seed: se 0
    assert non_inferiority_p(constant, 0.05) == 1.0 and inferiority_p(constant, 0.05) == 0.0
    assert non_inferiority_p(constant, 0.2) == 0.0
