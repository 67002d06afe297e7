"""pass@k against brute-force enumeration and known values; bootstrap interval sanity."""

import itertools
from math import comb

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ict.eval import pass_at_k, pass_at_k_per_problem


def brute_force_pass_at_k(n, c, k):
    """Fraction of k-subsets of n samples (c correct) that contain at least one correct sample."""
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_matches_enumeration_over_subsets(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)


@given(
    st.integers(1, 200).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_matches_exact_binomial_formula(args):
    n, c, k = args
    exact = 1 - comb(n - c, k) / comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-9)


def test_known_values():
    assert pass_at_k(16, 0, 4) == 0.0
    assert pass_at_k(16, 16, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(16, 13, 4) == 1.0  # n - c = 3 < k
    # Large n: the product form stays finite where the binomials would overflow floats.
    assert 0.0 < pass_at_k(5000, 1, 1000) == pytest.approx(0.2)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(4, 1, 8)
    with pytest.raises(ValueError, match="c <= n"):
        pass_at_k(4, 5, 1)


def test_per_problem_mean():
    values = pass_at_k_per_problem([4, 4], [1, 0], 2)
    np.testing.assert_allclose(values, [0.5, 0.0])


def comb_pass_at_k(n, c, k):
    """The textbook formula with exact binomials (scipy), independent of the product form."""
    from scipy.special import comb as scomb

    return 1.0 - scomb(n - c, k, exact=True) / scomb(n, k, exact=True)


def test_curve_ks_are_powers_of_two_and_n():
    from ict.eval import curve_ks, default_ks

    assert curve_ks(1) == [1] and curve_ks(64) == [1, 2, 4, 8, 16, 32, 64]
    assert curve_ks(6) == [1, 2, 4, 6] and curve_ks(2) == [1, 2]
    assert default_ks(1) == [1] and default_ks(6) == [1, 2, 4]  # powers of two <= n only
    assert default_ks(16) == [1, 2, 4, 8, 16]


@pytest.mark.parametrize("n", [4, 6, 64])
def test_pass_at_k_matrix_matches_binomials_for_every_k(n):
    from ict.eval import curve_ks, pass_at_k_matrix

    rng = np.random.default_rng(n)
    c = rng.integers(0, n + 1, 30)
    ks = curve_ks(n)
    matrix = pass_at_k_matrix([n] * 30, c, ks)
    assert matrix.shape == (len(ks), 30)
    expected = [[comb_pass_at_k(n, int(ci), k) for ci in c] for k in ks]
    np.testing.assert_allclose(matrix, expected, atol=1e-12)
    assert np.all(np.diff(matrix, axis=0) >= -1e-12)  # pass@k never falls with k
