"""The trainer's learning-signal check over windows (ict.train.outputs.SignalHealth)."""

import logging

import pytest

from ict.train.outputs import SignalHealth


def _run(shares, window, caplog):
    health = SignalHealth(window)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ict.train"):
        rows = [{"step": s, **health.update(s, x)} for s, x in enumerate(shares, start=1)]
    return health, rows, [r.getMessage() for r in caplog.records]


def test_window_verdict_and_one_warning_per_window(caplog):
    # hovering at the threshold (0.8): a warning, then quiet for the next `window` steps
    shares = [0.75, 0.875] * 6
    health, rows, warnings = _run(shares, 4, caplog)
    assert [w.split(":")[0] for w in warnings] == ["steps 1-4", "steps 5-8", "steps 9-12"]
    assert warnings[0] == (
        "steps 1-4: 81% of groups carried no signal: raise --num-generations, enable "
        "--dynamic-sampling, or use an easier task"
    )
    assert [r["health/no_signal"] for r in rows[:4]] == [False, False, False, True]
    assert rows[1]["health/no_signal_share"] == pytest.approx(0.8125)  # fewer steps: theirs
    assert health.summary()["no_signal"] and health.summary()["no_signal_share"] == 0.8125


def test_quiet_with_signal_and_replay_rebuilds_the_state(caplog):
    _, rows, warnings = _run([0.25, 0.5, 0.75, 0.5], 2, caplog)
    assert not warnings and not any(r["health/no_signal"] for r in rows)
    # a resumed run rebuilds the state from metrics.jsonl: the same warnings from there on
    shares = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    _, full, full_warnings = _run(shares, 2, caplog)
    resumed = SignalHealth(2)
    resumed.replay([{"step": s, "zero_variance_share": x} for s, x in enumerate(shares[:3], 1)])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ict.train"):
        rest = [{"step": s, **resumed.update(s, shares[s - 1])} for s in range(4, 8)]
    assert rest == full[3:]
    assert [r.getMessage() for r in caplog.records] == full_warnings[1:]
