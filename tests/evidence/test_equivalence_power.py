"""No "equivalent" below the number of seeds the power calculation needs: TOST may pass on two
seeds whose differences happen to agree, but the paired t test over those seeds could not have
detected a difference of the margin's size (its MDE exceeds the margin); such a verdict is
"inconclusive" and says how many seeds the calculation needs. The count is checked against
scipy's noncentral t."""

import math

import pytest
from scipy import stats

from ict.evidence.endpoints import declare
from ict.evidence.equivalence import tost_p
from ict.evidence.power import seeds_needed
from ict.evidence.seed_tests import seed_test
from ict.evidence.verdict import judge

KEY = ("entropy", "grpo", "eval/t/pass@1")


def scipy_power(n: int, sd: float, delta: float, alpha: float) -> float:
    """Power of the two-sided paired t test over n seeds at a true difference `delta`."""
    df, ncp = n - 1, delta / (sd / math.sqrt(n))
    c = stats.t.ppf(1 - alpha / 2, df)
    return stats.nct.sf(c, df, ncp) + stats.nct.cdf(-c, df, ncp)


@pytest.mark.parametrize(
    "sd, margin, alpha",
    [(0.08, 0.135, 0.05), (0.02, 0.03, 0.05), (0.01, 0.03, 0.025), (0.05, 0.03, 0.05)],
)
def test_seeds_needed_is_the_fewest_with_80_percent_power_at_the_margin(sd, margin, alpha):
    n = seeds_needed(sd, margin, alpha)
    assert n is not None and scipy_power(n, sd, margin, alpha) >= 0.8 - 1e-6
    if n > 2:
        assert scipy_power(n - 1, sd, margin, alpha) < 0.8
    assert seeds_needed(0.08, 0.135, 0.05) == 5  # docs/compare.md's case: 5 seeds detect 0.135
    assert seeds_needed(0.0, 0.03, 0.05) == 2 and seeds_needed(math.nan, 0.03, 0.05) is None


def test_two_agreeing_seeds_pass_tost_but_are_not_equivalent():
    a, b = {0: 0.500, 1: 0.605}, {0: 0.501, 1: 0.600}  # differences -0.001, +0.005
    test = seed_test(a, b)
    assert tost_p(test, 0.03) < 0.05  # TOST alone would say equivalent
    v = judge({KEY: test}, declare(margin=0.03)).get(*KEY)
    assert v.mde > 0.03 and v.word == "inconclusive"
    need = seeds_needed(test.sd, 0.03, 0.05)
    assert need == 3 and f"needs {need} seeds" in v.note and "2 seeds" in v.note
    # the same spread of differences over the seeds it needs: equivalent
    a5 = {s: 0.5 + 0.02 * s + d for s, d in enumerate([-0.001, 0.005, -0.001, 0.005, 0.002])}
    b5 = {s: 0.5 + 0.02 * s for s in range(5)}
    v5 = judge({KEY: seed_test(a5, b5)}, declare(margin=0.03)).get(*KEY)
    assert v5.mde <= 0.03 and v5.word == "equivalent"


def test_identical_arms_need_two_seeds():
    one = judge({KEY: seed_test({0: 0.5}, {0: 0.5})}, declare()).get(*KEY)
    assert one.test.identical and one.word == "inconclusive"
    two = judge({KEY: seed_test({0: 0.5, 1: 0.7}, {0: 0.5, 1: 0.7})}, declare()).get(*KEY)
    assert two.word == "equivalent" and two.note == "identical on every seed"
