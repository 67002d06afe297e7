"""The learning-signal judgement (ict.evidence.health.judge_signal)."""

import math

import pytest

from ict.evidence.health import NO_SIGNAL_SHARE, judge_signal, no_signal_advice


def test_share_silent_steps_and_verdict():
    # 12 steps, 8 groups each: 3 steps with no group with signal, the rest 6 or 7 of 8 silent
    shares = [1.0, 0.75, 0.875, 1.0, 0.75, 0.75, 0.875, 0.75, 1.0, 0.75, 0.5, 0.875]
    j = judge_signal(shares)
    assert j.steps == 12 and j.silent_steps == 3
    assert j.share == pytest.approx(sum(shares) / 12) and j.flagged  # 0.8229 >= 0.8
    assert j.text() == (
        "82% of groups carried no signal (3 of 12 steps none at all: no update): "
        "raise --num-generations, enable --dynamic-sampling, or use an easier task"
    )
    assert j.as_dict()["no_signal"] is True and j.as_dict()["no_signal_steps"] == 3


def test_threshold_none_and_nan_and_the_advice_with_refill_on():
    assert NO_SIGNAL_SHARE == 0.8
    quiet = judge_signal([0.25, 0.5, None, math.nan, 0.75])
    assert quiet.steps == 3 and quiet.share == pytest.approx(0.5) and not quiet.flagged
    assert "none at all" not in quiet.text()
    assert judge_signal([]) is None and judge_signal([None]) is None
    assert judge_signal([0.5], threshold=0.5).flagged
    assert "--max-generation-rounds" in no_signal_advice(dynamic_sampling=True)
