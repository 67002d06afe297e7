"""The narrowing screen's rule (ict.compare.screen) on synthetic evaluation results."""

import numpy as np
import pytest

from ict.compare.screen import (
    NarrowingCriterion,
    read_checkpoint,
    screen_configuration,
    seed_narrows,
)
from ict.eval.metrics import pass_at_k_per_problem

N = 64  # samples per problem
KS = [1, 2, 4, 8, 16, 32, 64]


def result(correct, step=0, n=N):
    correct = np.asarray(correct, int)
    return {
        "step": step,
        "per_problem": {
            "toy:paths": {
                "ids": [str(i) for i in range(len(correct))],
                "n": [n] * len(correct),
                "correct": correct.tolist(),
            }
        },
    }


def start_counts(p=400, rare=100):
    """Most problems solved often, `rare` of them solved 1-3 times in N."""
    rng = np.random.default_rng(0)
    c = rng.integers(20, 40, p)
    c[:rare] = rng.integers(1, 4, rare)
    return c


def sharpened(c0):
    """GRPO-like: common problems solved more often, rarely solved ones lost."""
    c = np.minimum(c0 + 20, N)
    c[c0 < 4] = 0
    return c


def test_a_sharpened_checkpoint_narrows():
    c0 = start_counts()
    reading = read_checkpoint(result(c0), result(sharpened(c0), step=100), KS)
    assert reading.pass1_rises and reading.pass1_change > 0
    assert 64 in reading.narrowed_ks and 2 not in reading.narrowed_ks
    assert reading.lost == 100 and reading.gained == 0
    assert reading.narrows
    # the printed change is the mean per-problem pass@k difference
    d = pass_at_k_per_problem([N] * 400, sharpened(c0), 64) - pass_at_k_per_problem(
        [N] * 400, c0, 64
    )
    assert reading.changes[64] == pytest.approx(d.mean())


def test_uniform_improvement_does_not_narrow():
    c0 = start_counts()
    better = np.minimum(c0 + 5, N)
    reading = read_checkpoint(result(c0), result(better, step=100), KS)
    assert reading.pass1_rises and not reading.narrowed_ks and not reading.narrows


def test_a_plain_fall_is_not_narrowing():
    c0 = start_counts()
    worse = c0 // 3
    reading = read_checkpoint(result(c0), result(worse, step=100), KS)
    assert not reading.pass1_rises and not reading.narrows


def test_bonferroni_over_k_widens_each_interval():
    c0 = start_counts()
    one = read_checkpoint(result(c0), result(sharpened(c0), step=1), [1, 64])
    many = read_checkpoint(result(c0), result(sharpened(c0), step=1), KS)
    lo1, hi1 = one.intervals[64]
    lo2, hi2 = many.intervals[64]
    assert hi2 - lo2 > hi1 - lo1


def test_consecutive_checkpoints_and_every_seed():
    c0 = start_counts()
    good = [result(sharpened(c0), step=s) for s in (100, 200)]
    broken = [result(sharpened(c0), step=100), result(c0, step=200), result(sharpened(c0), 300)]
    readings = [read_checkpoint(result(c0), r, KS) for r in broken]
    assert not seed_narrows(readings, 2) and seed_narrows(readings, 1)
    out = screen_configuration(result(c0), {0: good, 1: good}, KS)
    assert out["passes"] and out["seeds"][0]["narrows"]
    out = screen_configuration(result(c0), {0: good, 1: broken}, KS)
    assert not out["passes"] and not out["seeds"][1]["narrows"]
    assert out["criterion"] == NarrowingCriterion().__dict__


def test_different_problems_are_refused():
    c0 = start_counts()
    other = result(c0, step=100)
    other["per_problem"]["toy:paths"]["ids"][0] = "x"
    with pytest.raises(ValueError, match="different problems"):
        read_checkpoint(result(c0), other, KS)
