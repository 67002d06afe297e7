"""Null simulation with a persistent per-problem method effect: the verdict rule in force must say
"higher"/"lower" over NEW problems at most alpha of the time, "equivalent" at most alpha of the time
when the true effect sits on the margin, and have the power the t formula promises.

The data (variance components of docs/reports/toy-cot-long-tuned, re-analysed in
shared/docs/MEASUREMENTS.md): the per-problem difference of two methods on seed s and problem p is

    d_{s,p} = mu + e_p + beta_w(s) + delta_s + eps_{s,p}

with a per-problem method effect e_p ~ N(0, 0.074) shared by every seed (new problems in every
replication: the population is the problems, not these problems), a warm-start block effect
beta_w (+-0.02, summing to 0: the warm starts are fixed blocks, and the null is no effect on
average over them; the blocked test must remove it from the seed-level error), a seed effect
delta_s and evaluation noise eps ~ N(0, 0.05) (which puts the SD of the per-seed difference near the
study's 0.01). Arms are built as b = q + noise, a = b + d, so the tests see real per-arm
values.
"""

import math

import numpy as np
import pytest

from ict.evidence.endpoints import declare
from ict.evidence.power import t_test_power
from ict.evidence.problem_tests import over_problems_test
from ict.evidence.seed_tests import seed_test
from ict.evidence.verdict import judge

ALPHA = 0.05
TAU = 0.074  # SD of the persistent per-problem method effect
SIGMA_SEED = 0.01  # seed-level SD of the paired difference (the study's 0.008-0.011)
SIGMA_EVAL = 0.05
REPS = 1000  # 10 seeds: the exact sign flip is cached, so these are cheap
REPS_20 = 500  # 20 seeds: each seed-level test draws 65,536 sign patterns
KEY = ("a", "b", "eval/sim/pass@32")


def mc_bound(rate: float, reps: int = REPS) -> float:
    """rate + 3 Monte-Carlo standard errors."""
    return rate + 3 * math.sqrt(rate * (1 - rate) / reps)


def simulate(rng, *, seeds, problems, mu=0.0, blocks=1, sigma_seed=SIGMA_SEED, tau=TAU):
    """[seeds, problems] values of arm a and arm b, and each seed's block."""
    block = np.repeat(np.arange(blocks), seeds // blocks)
    q = rng.uniform(0.3, 0.7, problems)
    e = rng.normal(0, tau, problems)
    beta = np.linspace(-0.02, 0.02, blocks)[block][:, None] if blocks > 1 else 0.0
    delta = rng.normal(0, sigma_seed, (seeds, 1))
    b = q + rng.normal(0, SIGMA_EVAL, (seeds, problems))
    a = b + mu + e + beta + delta + rng.normal(0, SIGMA_EVAL, (seeds, problems))
    return a, b, dict(enumerate(block.tolist()))


def verdicts(rng, *, reps=REPS, margin=0.03, **kw) -> dict:
    """Counts of each rule's words over `reps` replications: the seed-level test alone and the
    rule in force (seed-level AND over-problems)."""
    endpoints = declare(["a-b@pass@32"], alpha=ALPHA, margin=margin)
    out = {"seed_only_diff": 0, "rule_diff": 0, "rule_equiv": 0, "se": [], "df": []}
    for _ in range(reps):
        a, b, blocks = simulate(rng, **kw)
        per_a, per_b = dict(enumerate(a)), dict(enumerate(b))
        st = seed_test(
            {s: v.mean() for s, v in per_a.items()},
            {s: v.mean() for s, v in per_b.items()},
            blocks=blocks,
        )
        pt = over_problems_test(per_a, per_b, blocks=blocks, seed_level=st)
        seed_only = judge({KEY: st}, endpoints).verdicts[KEY].word
        rule = judge({KEY: st}, endpoints, problem_tests={KEY: pt}).verdicts[KEY].word
        out["seed_only_diff"] += seed_only in ("higher", "lower")
        out["rule_diff"] += rule in ("higher", "lower")
        out["rule_equiv"] += rule == "equivalent"
        out["se"].append(pt.se)
        out["df"].append(pt.df)
    return out


@pytest.fixture(scope="module")
def null_32():
    return verdicts(np.random.default_rng(1), seeds=10, problems=32)


def test_the_seed_level_test_alone_fails_over_new_problems(null_32):
    # the problem the rule fixes: with 32 shared problems the seed-level t calls a difference
    # most of the time (the simulation: 59%)
    assert null_32["seed_only_diff"] / REPS > 0.4


def test_false_higher_or_lower_rate_is_at_most_alpha(null_32):
    assert null_32["rule_diff"] / REPS <= mc_bound(ALPHA)


def test_false_rate_with_warm_start_blocks_and_many_problems():
    out = verdicts(np.random.default_rng(2), seeds=20, problems=512, blocks=2, reps=REPS_20)
    assert out["rule_diff"] / REPS_20 <= mc_bound(ALPHA, REPS_20)


def test_equivalent_is_said_at_most_alpha_of_the_time_on_the_margin():
    margin = 0.03
    out = verdicts(
        np.random.default_rng(3), seeds=20, problems=512, blocks=2, mu=margin, margin=margin,
        reps=REPS_20,
    )  # fmt: skip
    assert out["rule_equiv"] / REPS_20 <= mc_bound(ALPHA, REPS_20)


def test_power_at_a_stated_effect_matches_the_t_formula():
    # the study's design: 512 problems, 2 warm starts x 10 seeds, seed SD 0.03; effect 0.03
    mu, reps = 0.03, REPS_20
    out = verdicts(
        np.random.default_rng(4), seeds=20, problems=512, blocks=2, mu=mu, sigma_seed=0.03,
        reps=reps,
    )  # fmt: skip
    power = out["rule_diff"] / reps
    se, df = float(np.mean(out["se"])), float(np.mean(out["df"]))
    expected = t_test_power(mu / se, df, ALPHA)
    assert power >= 0.8
    assert abs(power - expected) < 3 * math.sqrt(expected * (1 - expected) / reps) + 0.03
