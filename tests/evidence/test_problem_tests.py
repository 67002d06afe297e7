"""The over-problems test and the blocked paired t against hand computations and scipy."""

import math

import numpy as np
import pytest
from scipy import stats

from ict.evidence.problem_tests import over_problems_test, satterthwaite_df
from ict.evidence.seed_tests import paired_t_test, seed_test


def test_one_block_is_scipys_paired_t():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.5, 0.1, 8), rng.normal(0.45, 0.1, 8)
    t = paired_t_test(a, b, blocks=[0] * 8)
    assert t.design == "paired t" and t.df == 7
    assert t.p == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-9)


def test_blocked_paired_t_removes_block_means():
    d = np.array([0.10, 0.12, 0.08, 0.11, -0.02, 0.00, -0.01, 0.01])
    blocks = [0, 0, 0, 0, 1, 1, 1, 1]
    t = paired_t_test(d, np.zeros(8), blocks=blocks, pooled=True)
    resid = np.r_[d[:4] - d[:4].mean(), d[4:] - d[4:].mean()]
    sd = math.sqrt(np.sum(resid**2) / 6)
    assert (t.design, t.df, t.sd) == ("paired t, 2 blocks, pooled", 6.0, pytest.approx(sd))
    assert t.se == pytest.approx(sd / math.sqrt(8))
    assert t.p == pytest.approx(2 * stats.t.sf(abs(d.mean()) / (sd / math.sqrt(8)), 6))
    # the block difference is not error: the blocked test is sharper than the plain one here
    assert t.p < paired_t_test(d, np.zeros(8)).p
    # seed_test passes the blocks through by seed
    st = seed_test(dict(enumerate(d)), dict.fromkeys(range(8), 0.0), dict(enumerate(blocks)))
    welch = paired_t_test(d, np.zeros(8), blocks=blocks)  # the default: Welch df
    assert st.p == pytest.approx(welch.p) and welch.se == pytest.approx(t.se)


def test_one_seed_per_block_has_no_test():
    t = paired_t_test([0.1, 0.2], [0.0, 0.0], blocks=[0, 1])
    assert not t.tested and "one seed per block" in t.reason


def test_over_problems_test_by_hand():
    rng = np.random.default_rng(1)
    seeds, problems = 6, 40
    b = {s: rng.uniform(0.2, 0.8, problems) for s in range(seeds)}
    effect = rng.normal(0.0, 0.1, problems)  # per-problem effect, the same for every seed
    a = {s: b[s] + 0.02 + effect + rng.normal(0, 0.03, problems) for s in range(seeds)}
    pt = over_problems_test(a, b)
    d = np.vstack([a[s] - b[s] for s in range(seeds)])
    ds = d.mean(1)
    var_s = ds.var(ddof=1) / seeds
    var_p = d.mean(0).var(ddof=1) / problems
    se = math.sqrt(var_s + var_p)
    df = (var_s + var_p) ** 2 / (var_s**2 / (seeds - 1) + var_p**2 / (problems - 1))
    assert pt.mean == pytest.approx(d.mean()) and pt.se == pytest.approx(se)
    assert pt.df == pytest.approx(df) and pt.se_problems == pytest.approx(math.sqrt(var_p))
    assert pt.p == pytest.approx(2 * stats.t.sf(abs(d.mean()) / se, df))
    # the seed-level test sees only var_s: its p is far smaller on these 40 problems
    assert paired_t_test(ds, np.zeros(seeds)).p < pt.p


def test_satterthwaite_and_degenerate_inputs():
    assert satterthwaite_df([(1.0, 4.0), (0.0, 9.0)]) == pytest.approx(4.0)
    assert satterthwaite_df([(1.0, 4.0), (1.0, 4.0)]) == pytest.approx(8.0)
    assert not over_problems_test({0: [1.0, 0.0]}, {0: [0.0, 0.0]}).tested  # one seed
    mixed = over_problems_test({0: [1, 0], 1: [1, 0, 1]}, {0: [0, 0], 1: [0, 0, 1]})
    assert not mixed.tested and "different problems" in mixed.reason
