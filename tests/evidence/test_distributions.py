"""ict.evidence.distributions against scipy (the reference; scipy is a dev dependency only)."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import special, stats

from ict.errors import ConfigError
from ict.evidence.distributions import (
    betainc,
    erfc,
    nct_cdf,
    normal_cdf,
    t_cdf,
    t_ppf,
    t_two_sided_p,
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
    with pytest.raises(ConfigError, match="0 < q < 1"):
        t_ppf(1.0, 3)


@given(st.floats(0.1, 50), st.floats(0.1, 50), st.floats(0, 1))
def test_betainc_matches_scipy(a, b, x):
    assert betainc(a, b, x) == pytest.approx(special.betainc(a, b, x), abs=1e-9)


@given(st.floats(-20, 20), st.floats(0.5, 100))
def test_t_cdf_matches_scipy(t, df):
    assert t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-9)


@given(st.floats(-40, 40), st.floats(1, 100))
def test_two_sided_p_matches_scipy_with_relative_precision_in_the_tail(t, df):
    ref = 2 * stats.t.sf(abs(t), df)
    assert t_two_sided_p(t, df) == pytest.approx(min(1.0, ref), rel=1e-7, abs=1e-300)


def test_infinite_t():
    assert t_cdf(float("inf"), 3) == 1.0 and t_cdf(float("-inf"), 3) == 0.0
    assert t_two_sided_p(float("inf"), 3) == 0.0


def test_erfc_and_normal_cdf_match_scipy():
    x = np.linspace(-9, 9, 3601)
    # Numerical Recipes' erfcc: fractional error below 1.2e-7 everywhere
    np.testing.assert_allclose(erfc(x), special.erfc(x), rtol=1.2e-7)
    np.testing.assert_allclose(normal_cdf(x), stats.norm.cdf(x), atol=1e-7)


@settings(max_examples=60, deadline=None)
@given(st.floats(-15, 15), st.sampled_from([1, 1.3, 2, 3, 4, 7.5, 9, 30, 300]), st.floats(-5, 30))
def test_nct_cdf_matches_scipy(t, df, ncp):
    ref = stats.nct.cdf(t, df, ncp)
    assume(np.isfinite(ref))  # scipy returns nan far in some tails (e.g. t=-2, df=1, ncp=9)
    assert nct_cdf(t, df, ncp) == pytest.approx(ref, abs=2e-7)


def test_nct_cdf_without_noncentrality_is_student_t():
    for df in (1, 2, 5, 40):
        for t in (-3.0, -0.4, 0.0, 1.1, 6.0):
            assert nct_cdf(t, df, 0.0) == pytest.approx(t_cdf(t, df), abs=2e-7)
    with pytest.raises(ConfigError, match="df >= 1"):
        nct_cdf(1.0, 0.5, 0.0)
