"""Blocked designs (several warm starts): the blocked paired t with Welch-Satterthwaite df, the
test with warm starts as the unit and its power, against scipy and by simulation.

The simulations use toy-cot-explore's components (ICT - GRPO at test pass@32, 2 warm starts x 10
seeds): within-warm-start SDs 0.106 and 0.019 (5.6x apart), warm-start means -0.115 / -0.017.
"""

import math

import numpy as np
import pytest
from scipy import stats

from ict.errors import ConfigError
from ict.evidence.power import unit_design_mde, unit_design_power, unit_design_se
from ict.evidence.seed_tests import blocked_t, paired_t_test, seed_test, unit_test

SD_BLOCKS = (0.106, 0.019)  # toy-cot-explore, ICT - GRPO at pass@32, per warm start
SEEDS = 10


def _hand_welch(d, blocks):
    """By hand: mean = sum w_b dbar_b, SE^2 = sum w_b^2 s_b^2 / n_b, Satterthwaite df."""
    d, blocks = np.asarray(d), np.asarray(blocks)
    n = d.size
    v = [(np.sum(blocks == b) / n) ** 2 * d[blocks == b].var(ddof=1) / np.sum(blocks == b)
         for b in np.unique(blocks)]  # fmt: skip
    dfs = [np.sum(blocks == b) - 1 for b in np.unique(blocks)]
    se = math.sqrt(sum(v))
    df = sum(v) ** 2 / sum(x * x / k for x, k in zip(v, dfs, strict=True))
    return se, df, 2 * stats.t.sf(abs(d.mean()) / se, df)


def test_one_block_is_scipys_one_sample_and_paired_t():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.5, 0.1, 9), rng.normal(0.46, 0.1, 9)
    t = paired_t_test(a, b, blocks=["ws0"] * 9)
    assert t.design == "paired t" and t.df == 8
    assert t.p == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-9)
    assert t.p == pytest.approx(stats.ttest_1samp(a - b, 0.0).pvalue, rel=1e-9)
    assert t == paired_t_test(a, b)  # one block is the unblocked test, to the bit


@pytest.mark.parametrize("sizes", [(10, 10), (4, 7), (3, 5, 8)])
def test_blocked_t_is_the_hand_satterthwaite_computation(sizes):
    rng = np.random.default_rng(sum(sizes))
    blocks = np.repeat(np.arange(len(sizes)), sizes)
    sds = np.array([0.1, 0.02, 0.05])[blocks]
    d = rng.normal(0.03 + 0.05 * blocks, sds)
    t = paired_t_test(d, np.zeros(d.size), blocks=list(blocks))
    se, df, p = _hand_welch(d, blocks)
    assert t.design == f"paired t, {len(sizes)} blocks, Welch df"
    assert t.mean == pytest.approx(d.mean()) and t.se == pytest.approx(se)
    assert t.df == pytest.approx(df) and t.p == pytest.approx(p, rel=1e-7)
    assert n_minus_b(sizes) > t.df  # unequal SDs: fewer df than pooling claims


def n_minus_b(sizes):
    return sum(sizes) - len(sizes)


def test_equal_blocks_keep_the_pooled_se_and_equal_sds_keep_its_df():
    rng = np.random.default_rng(5)
    d = rng.normal(0.0, 0.05, 20)
    blocks = [0] * 10 + [1] * 10
    welch, pooled = paired_t_test(d, 0 * d, blocks), paired_t_test(d, 0 * d, blocks, pooled=True)
    assert pooled.design == "paired t, 2 blocks, pooled" and pooled.df == 18
    assert welch.se == pytest.approx(pooled.se) and welch.sd == pytest.approx(pooled.sd)
    assert welch.df < 18
    # identical block SDs: Satterthwaite gives back n - B exactly
    same = np.r_[d[:10], d[:10] + 1.0]
    assert paired_t_test(same, 0 * same, blocks).df == pytest.approx(18.0)


def test_a_block_of_one_seed_falls_back_to_the_pooled_sd():
    t = paired_t_test([0.1, 0.2, 0.15, 0.3], [0.0] * 4, blocks=[0, 0, 0, 1])
    assert t.design == "paired t, 2 blocks, pooled" and t.df == 2
    sd, se, df, design = blocked_t([0.1, 0.2, 0.15, 0.3], [0, 0, 0, 1])
    assert (se, df, design) == (t.se, t.df, t.design)


def test_welch_df_keeps_the_false_positive_rate_where_pooling_is_liberal():
    """Null (no difference within either warm start), toy-cot-explore's block SDs and sizes:
    the pooled df (18) rejects too often, the Welch df holds alpha (20,000 simulated studies)."""
    rng = np.random.default_rng(11)
    reps = 20_000
    blocks = [0] * SEEDS + [1] * SEEDS
    d = np.hstack([rng.normal(0.0, s, (reps, SEEDS)) for s in SD_BLOCKS])
    se, df, df_pooled = np.empty(reps), np.empty(reps), np.empty(reps)
    for i in range(reps):
        _, se[i], df[i], _ = blocked_t(d[i], blocks)
        _, se_p, df_pooled[i], _ = blocked_t(d[i], blocks, pooled=True)
        assert se[i] == pytest.approx(se_p)  # balanced: the same SE, only df differs
    t = np.abs(d.mean(1)) / se
    p_welch, p_pooled = 2 * stats.t.sf(t, df), 2 * stats.t.sf(t, df_pooled)
    welch, pooled = np.mean(p_welch < 0.05), np.mean(p_pooled < 0.05)
    se_rate = math.sqrt(0.05 * 0.95 / reps)  # 0.0015
    assert abs(welch - 0.05) < 4 * se_rate
    assert pooled > 0.05 + 4 * se_rate and pooled > welch + 0.005


def test_the_verdict_rule_reads_the_welch_df():
    from ict.evidence.endpoints import declare
    from ict.report.verdicts import evaluate

    rng = np.random.default_rng(2)
    seeds = range(2 * SEEDS)
    blocks = {s: f"ws{s // SEEDS}" for s in seeds}
    grpo = {s: 0.9 for s in seeds}
    ict = {s: 0.9 + rng.normal(-0.03, SD_BLOCKS[s // SEEDS]) for s in seeds}
    values = {"eval/toy/pass@32": {"grpo": grpo, "ict": ict}}
    j = evaluate(values, "grpo", declare(["ict-grpo@pass@32"]), blocks=blocks)
    v = j.get("ict", "grpo", "eval/toy/pass@32")
    d = np.array([ict[s] - grpo[s] for s in seeds])
    se, df, p = _hand_welch(d, [s // SEEDS for s in seeds])
    assert v.test.design == "paired t, 2 blocks, Welch df"
    assert v.test.df == pytest.approx(df) and v.test.p == pytest.approx(p, rel=1e-7)


# ---- warm starts as the unit ------------------------------------------------------------------
def test_unit_test_is_scipys_t_over_the_warm_start_means():
    rng = np.random.default_rng(4)
    blocks = np.repeat(np.arange(8), 3)
    d = rng.normal(0.02, 0.05, 8)[blocks] + rng.normal(0, 0.03, blocks.size)
    t = unit_test(d, np.zeros(d.size), list(blocks))
    means = np.array([d[blocks == b].mean() for b in range(8)])
    ref = stats.ttest_1samp(means, 0.0)
    assert (t.design, t.n, t.df) == ("t over 8 warm starts", 8, 7.0)
    assert t.p == pytest.approx(ref.pvalue, rel=1e-8) and t.sd == pytest.approx(means.std(ddof=1))
    flip = stats.permutation_test((means,), np.mean, permutation_type="samples", n_resamples=np.inf)
    assert t.p_sign_flip == pytest.approx(flip.pvalue)


def test_toy_cot_explore_with_warm_starts_as_units_is_p_041():
    """The two warm starts' means of ICT - GRPO at pass@32 (-0.115, -0.017): p = 0.41 with 1 df,
    as the independent re-analysis found (scipy on the two means)."""
    d = np.r_[np.full(10, -0.11484375), np.full(10, -0.0169921875)]
    t = unit_test(d, np.zeros(20), [0] * 10 + [1] * 10)
    assert t.p == pytest.approx(stats.ttest_1samp([-0.11484375, -0.0169921875], 0).pvalue)
    assert round(t.p, 2) == 0.41


def test_seed_test_unit_option_and_endpoints_declare_it():
    from ict.evidence.endpoints import declare

    values = {s: 0.5 + 0.01 * s for s in range(6)}
    base = dict.fromkeys(range(6), 0.5)
    blocks = {s: s // 2 for s in range(6)}
    assert seed_test(values, base, blocks, "warm start").design == "t over 3 warm starts"
    assert not seed_test(values, base, None, "warm start").tested
    with pytest.raises(ConfigError, match="unknown unit"):
        seed_test(values, base, blocks, "problem")
    e = declare(["ict-grpo@pass@32"], unit="warm start")
    assert e.as_dict()["unit"] == "warm start" and "unit" not in declare().as_dict()


def test_unit_design_power_is_scipys_noncentral_t():
    n_inits, k, sb, sw, delta = 8, 3, 0.05, 0.08, 0.06
    se = math.sqrt((sb**2 + sw**2 / k) / n_inits)
    assert unit_design_se(n_inits, k, sb, sw) == pytest.approx(se)
    df, c = n_inits - 1, stats.t.ppf(0.975, n_inits - 1)
    ref = stats.nct.sf(c, df, delta / se) + stats.nct.cdf(-c, df, delta / se)
    assert unit_design_power(delta, n_inits, k, sb, sw) == pytest.approx(ref, abs=1e-5)
    mde = unit_design_mde(n_inits, k, sb, sw)
    assert stats.nct.sf(c, df, mde / se) + stats.nct.cdf(-c, df, mde / se) == pytest.approx(
        0.8, abs=1e-5
    )
    # more seeds per warm start only shrink the within part: the between SD sets a floor
    assert unit_design_mde(8, 1000, sb, sw) > unit_design_mde(16, 1, sb, 0.0)
    with pytest.raises(ConfigError, match=">= 2 warm starts"):
        unit_design_se(1, 10, sb, sw)


def test_unit_design_power_by_simulation():
    """8 warm starts x 3 seeds at the MDE: unit_test rejects ~80% of simulated studies."""
    rng = np.random.default_rng(8)
    n_inits, k, sb, sw = 8, 3, 0.065, 0.076  # toy-cot-explore's components (ICT - GRPO, pass@32)
    mde = unit_design_mde(n_inits, k, sb, sw)
    blocks = list(np.repeat(np.arange(n_inits), k))
    reps, hits = 3000, 0
    for _ in range(reps):
        d = mde + rng.normal(0, sb, n_inits)[blocks] + rng.normal(0, sw, n_inits * k)
        hits += unit_test(d, np.zeros(d.size), blocks).p < 0.05
    assert abs(hits / reps - 0.8) < 4 * math.sqrt(0.16 / reps)


def test_with_random_warm_starts_only_the_unit_test_holds_alpha():
    """Warm-start effects drawn at random (SD 0.065, toy-cot-explore's between-warm-start SD of
    ICT - GRPO at pass@32) and no effect on average, 8 warm starts x 3 seeds: the blocked test
    (about these warm starts) says "different" far more often than alpha; the unit test holds
    it."""
    rng = np.random.default_rng(21)
    reps, n_inits, k = 4000, 8, 3
    blocks = list(np.repeat(np.arange(n_inits), k))
    sds = np.where(np.arange(n_inits) % 2 == 0, *SD_BLOCKS)[blocks]
    d = (
        rng.normal(0, 0.065, (reps, n_inits))[:, blocks]
        + rng.normal(size=(reps, n_inits * k)) * sds
    )
    unit = np.mean([unit_test(x, 0 * x, blocks).p < 0.05 for x in d])
    se_df = np.array([blocked_t(x, blocks)[1:3] for x in d])  # the blocked test's SE and df
    blocked = np.mean(2 * stats.t.sf(np.abs(d.mean(1)) / se_df[:, 0], se_df[:, 1]) < 0.05)
    assert abs(unit - 0.05) < 4 * math.sqrt(0.05 * 0.95 / reps)
    assert blocked > 0.12
