"""Power and MDE of the t test against scipy's noncentral t (solved with scipy's brentq)."""

import pytest
from scipy import optimize, stats

from ict.evidence.power import detectable_ncp, minimum_detectable_effect, t_test_power


def scipy_power(ncp, df, alpha):
    c = stats.t.ppf(1 - alpha / 2, df)
    # P(T' < -c; ncp) = P(T' > c; -ncp); scipy's sf stays finite far in the tail where its cdf
    # returns nan
    return stats.nct.sf(c, df, ncp) + stats.nct.sf(c, df, -ncp)


@pytest.mark.parametrize("df", [1, 2, 4, 9, 30])
@pytest.mark.parametrize("alpha", [0.05, 0.025, 0.01])
def test_detectable_ncp_matches_scipy(df, alpha):
    ref = optimize.brentq(lambda x: scipy_power(x, df, alpha) - 0.8, 0.0, 200.0, xtol=1e-10)
    assert detectable_ncp(df, alpha) == pytest.approx(ref, rel=1e-5)
    assert t_test_power(ref, df, alpha) == pytest.approx(0.8, abs=1e-6)


def test_mde_of_the_issue_five_seeds():
    # 5 seeds, SD of the per-seed differences 0.08: se = 0.08 / sqrt(5); docs/compare.md: 0.135
    se = 0.08 / 5**0.5
    ref = optimize.brentq(lambda x: scipy_power(x, 4, 0.05) - 0.8, 0.0, 50.0, xtol=1e-10) * se
    mde = minimum_detectable_effect(se, 4, 0.05)
    assert mde == pytest.approx(ref, rel=1e-5) and round(mde, 3) == 0.135
    assert minimum_detectable_effect(0.0, 4, 0.05) == 0.0
    assert minimum_detectable_effect(float("nan"), float("nan"), 0.05) != mde


def test_power_at_zero_is_alpha():
    for df in (1, 4, 20):
        assert t_test_power(0.0, df, 0.05) == pytest.approx(0.05, abs=1e-6)
