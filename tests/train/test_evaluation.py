"""Before/after held-out comparison: paired by problem, intervals inside their ranges."""

import numpy as np
import pytest

from ict.train.evaluation import compare_before_after, headline


def result(correct, n=4, ids=None):
    ids = ids or [f"p{i}" for i in range(len(correct))]
    return {
        "settings": {"n": n},
        "per_problem": {"task": {"ids": ids, "n": [n] * len(correct), "correct": correct}},
    }


def test_difference_is_paired_by_problem_and_bounded():
    rng = np.random.default_rng(0)
    before = rng.integers(0, 3, 40).tolist()
    after = [min(4, c + 1) for c in before]  # every problem improves by one sample in four
    out = compare_before_after(result(before), result(after))
    assert out["before"]["mean"] == pytest.approx(np.mean(before) / 4)
    assert out["difference"]["mean"] == pytest.approx((np.mean(after) - np.mean(before)) / 4)
    d = out["difference"]
    # paired: the per-problem differences are all 0.25, so the interval collapses onto it
    assert d["low"] == pytest.approx(0.25) and d["high"] == pytest.approx(0.25)
    for key in ("before", "after"):
        assert 0 <= out[key]["low"] <= out[key]["mean"] <= out[key]["high"] <= 1
    assert out["problems"] == 40 and out["samples_per_problem"] == 4


def test_no_change_interval_contains_zero_and_degenerate_inputs():
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 5, 60).tolist(), rng.integers(0, 5, 60).tolist()
    d = compare_before_after(result(a), result(b))["difference"]
    assert -1 <= d["low"] <= d["high"] <= 1
    all_zero = compare_before_after(result([0] * 10), result([0] * 10))
    assert all_zero["before"] == {"mean": 0.0, "low": 0.0, "high": 0.0}
    all_one = compare_before_after(result([0] * 10), result([4] * 10))
    assert all_one["difference"]["low"] == pytest.approx(1.0)


def test_different_problems_are_refused():
    with pytest.raises(ValueError, match="different problems"):
        compare_before_after(result([1, 2]), result([1, 2], ids=["x", "y"]))


def test_headline():
    cmp = compare_before_after(result([0, 1, 1, 2]), result([2, 2, 3, 4]))
    line = headline(cmp, {"reward_first_steps": 0.3, "reward_last_steps": 0.52, "health": {}})
    assert line.startswith("held-out pass@1 0.25 -> 0.69 (+0.44 [")
    assert line.endswith("; reward 0.30 -> 0.52; no entropy collapse or explosion")
    flagged = headline(None, {"health": {"entropy_collapse": True}})
    assert flagged == "entropy collapse"
