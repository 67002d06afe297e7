import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ict.errors import ConfigError
from ict.evidence.hierarchical import bootstrap_difference, bootstrap_mean, run_units
from ict.evidence.intervals import t_interval


def runs_of(*rows, ids=True):
    return [run_units(r, ids=[f"p{i}" for i in range(len(r))] if ids else None) for r in rows]


@pytest.mark.parametrize("value", [0.0, 1.0])
@pytest.mark.parametrize("seeds", [1, 2, 3])
def test_all_equal_values_give_a_point_interval_inside_the_range(value, seeds):
    runs = runs_of(*([[value] * 20] * seeds))
    iv = bootstrap_mean(runs)
    assert (iv.mean, iv.low, iv.high, iv.n) == (value, value, value, seeds)
    diff = bootstrap_difference(dict(enumerate(runs)), dict(enumerate(runs)))
    assert (diff.low, diff.high) == (0.0, 0.0)


def test_one_seed_is_a_bootstrap_over_problems():
    values = np.r_[np.ones(30), np.zeros(70)]
    iv = bootstrap_mean(runs_of(values))
    assert iv.method == "bootstrap over problems" and iv.n == 1
    # binomial standard error sqrt(.3 * .7 / 100) = 0.046: the 95% interval is about +-0.09
    assert iv.low == pytest.approx(0.3 - 0.09, abs=0.025)
    assert iv.high == pytest.approx(0.3 + 0.09, abs=0.025)


def test_two_seeds_of_a_proportion_stay_in_range_where_t_does_not():
    # the case: 2 seeds far apart near a bound; Student t leaves [0, 1]
    a = np.r_[np.ones(48), np.zeros(2)]  # 0.96
    b = np.r_[np.ones(18), np.zeros(32)]  # 0.36
    t = t_interval([a.mean(), b.mean()])
    assert t.low < 0 or t.high > 1
    iv = bootstrap_mean(runs_of(a, b))
    assert iv.method == "hierarchical bootstrap" and iv.n == 2
    assert 0.0 <= iv.low < iv.mean < iv.high <= 1.0
    # the seed level matters: wider than either run's own interval over problems
    own = bootstrap_mean(runs_of(a))
    assert iv.high - iv.low > own.high - own.low


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 4),
    st.integers(1, 12),
    st.integers(0, 2**31 - 1),
    st.sampled_from([0.8, 0.95, 0.99]),
)
def test_bounds_never_leave_the_unit_interval(seeds, problems, data_seed, confidence):
    rng = np.random.default_rng(data_seed)
    a = [rng.integers(0, 2, problems).astype(float) for _ in range(seeds)]
    b = [rng.random(problems) for _ in range(seeds)]
    iv = bootstrap_mean(runs_of(*a), confidence)
    assert 0.0 <= iv.low <= iv.high <= 1.0
    d = bootstrap_difference(dict(enumerate(runs_of(*a))), dict(enumerate(runs_of(*b))))
    assert -1.0 <= d.low <= d.high <= 1.0


def test_seeded_and_deterministic():
    rng = np.random.default_rng(3)
    runs = runs_of(rng.random(40), rng.random(40))
    assert bootstrap_mean(runs, seed=5) == bootstrap_mean(runs, seed=5)
    assert bootstrap_mean(runs, seed=5) != bootstrap_mean(runs, seed=6)


def test_paired_difference_removes_shared_problem_difficulty():
    # problems vary a lot in difficulty, the method adds +0.05 on every problem of every seed:
    # the paired interval is tight around 0.05, an unpaired one (other seeds) is much wider
    rng = np.random.default_rng(0)
    base = [np.clip(rng.random(60), 0, 0.9) for _ in range(3)]
    better = [b + 0.05 for b in base]
    paired = bootstrap_difference(
        dict(enumerate(runs_of(*better))), dict(enumerate(runs_of(*base)))
    )
    assert paired.method == "paired hierarchical bootstrap"
    assert paired.low == pytest.approx(0.05) and paired.high == pytest.approx(0.05)
    unpaired = bootstrap_difference(
        {10 + i: r for i, r in enumerate(runs_of(*better))}, dict(enumerate(runs_of(*base)))
    )
    assert unpaired.method == "unpaired hierarchical bootstrap"
    assert unpaired.low < 0.05 - 0.02 and unpaired.high > 0.05 + 0.02


def test_problems_drawn_per_run_when_ids_differ():
    a = run_units(np.r_[np.ones(10), np.zeros(10)], ids=[f"a{i}" for i in range(20)])
    b = run_units(np.r_[np.ones(10), np.zeros(10)], ids=[f"b{i}" for i in range(20)])
    d = bootstrap_difference({0: a}, {0: b})
    # same values, independent problem draws: centred on 0 with a real width
    assert d.mean == 0.0 and d.low < -0.1 and d.high > 0.1


def test_bad_inputs_are_config_errors():
    with pytest.raises(ConfigError, match="finite"):
        run_units([0.5, float("nan")])
    with pytest.raises(ConfigError, match="one id per value"):
        run_units([0.5, 0.5], ids=["a"])
    with pytest.raises(ConfigError, match="confidence"):
        bootstrap_mean(runs_of([0.5]), confidence=95)
    assert not bootstrap_mean([]).defined
