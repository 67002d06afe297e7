"""Seed-level tests against scipy: paired t, Welch t, the exact sign-flip permutation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from ict.evidence.seed_tests import paired_t_test, seed_test, sign_flip_p, welch_t_test

values = st.lists(st.floats(0, 1), min_size=2, max_size=9)


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 9), st.integers(0, 2**31 - 1))
def test_paired_t_matches_scipy(n, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.random(n), rng.random(n)
    test = paired_t_test(a, b)
    ref = stats.ttest_rel(a, b)
    assert test.design == "paired t" and test.n == n and test.df == n - 1
    assert test.mean == pytest.approx(np.mean(a - b))
    assert test.sd == pytest.approx(np.std(a - b, ddof=1))
    assert test.p == pytest.approx(ref.pvalue, rel=1e-7)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 8), st.integers(2, 8), st.integers(0, 2**31 - 1))
def test_welch_matches_scipy(na, nb, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.random(na), rng.random(nb) + 0.1
    test = welch_t_test(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert test.design == "welch t" and test.p == pytest.approx(ref.pvalue, rel=1e-7)
    assert test.df == pytest.approx(ref.df)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 9), st.integers(0, 2**31 - 1))
def test_sign_flip_matches_scipy_permutation_test(n, seed):
    d = np.random.default_rng(seed).normal(0.02, 0.08, n)
    ref = stats.permutation_test(
        (d,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
    )
    assert sign_flip_p(d) == pytest.approx(ref.pvalue)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 8])
def test_sign_flip_floor_is_two_to_the_one_minus_n(n):
    # every difference of one sign: only the observed pattern and its mirror are as extreme
    assert sign_flip_p(np.linspace(0.05, 0.1, n)) == pytest.approx(2.0 ** (1 - n))


def test_sign_flip_beyond_exact_enumeration_is_seeded_and_close():
    d = np.random.default_rng(1).normal(0.03, 0.08, 20)
    ref = stats.ttest_1samp(d, 0.0).pvalue
    p = sign_flip_p(d)
    assert p == sign_flip_p(d) and p == pytest.approx(ref, abs=0.03)


def test_identical_arms_and_constant_difference():
    same = paired_t_test([0.7, 0.8, 0.75], [0.7, 0.8, 0.75])
    assert same.identical and same.p == 1.0 and same.p_sign_flip == 1.0 and same.sd == 0.0
    shifted = paired_t_test([0.8, 0.9, 0.85], [0.7, 0.8, 0.75])
    assert not shifted.identical and shifted.p < 1e-10  # sd 0 up to rounding


def test_seed_test_pairs_shared_seeds_else_welch_else_none():
    a = {0: 0.5, 1: 0.6, 2: 0.7}
    assert seed_test(a, {0: 0.4, 1: 0.5, 2: 0.61}).design == "paired t"
    assert seed_test(a, {0: 0.4, 1: 0.5}).design == "paired t"  # contained seeds: paired
    assert seed_test(a, {0: 0.4, 1: 0.5}).n == 2
    assert seed_test(a, {5: 0.4, 6: 0.5}).design == "welch t"
    one = seed_test({0: 0.5}, {0: 0.4, 1: 0.45})
    assert one.design == "none" and "no seed-level test" in one.reason and not one.tested
    single = seed_test({0: 0.5}, {0: 0.4})
    assert single.design == "none" and single.mean == pytest.approx(0.1)
    assert seed_test({0: 0.5}, {0: 0.5}).identical
