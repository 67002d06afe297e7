"""Safe rewards (errors and hangs give 0 and are counted), JSONL truncation, entropy health."""

import json
import time

from ict.files import JsonlWriter, truncate_jsonl
from ict.train.outputs import EntropyHealth
from ict.train.safe_rewards import reward_responses


def test_raising_and_hanging_scorers_score_zero_and_are_counted():
    def good(text):
        return 1.0 if text == "a" else 0.0

    def boom(text):
        raise RuntimeError("verifier bug")

    def hang(text):
        time.sleep(5)
        return 1.0

    start = time.perf_counter()
    out = reward_responses(
        [good, boom, hang, good, lambda t: (1.0, True)], ["a", "a", "a", "b", "x"], timeout_s=0.2
    )
    assert time.perf_counter() - start < 2
    assert out.rewards == [1.0, 0.0, 0.0, 0.0, 1.0]
    assert (out.errors, out.timeouts) == (2, 1)
    assert out.formatted == [None, None, None, None, True]


def test_verdict_error_flags_count_as_errors():
    from ict.rewards.verify import Verdict

    out = reward_responses(
        [
            lambda t: Verdict(0.0, False, None, False, error="bad"),
            lambda t: Verdict(0.0, False, None, False, timed_out=True),
            lambda t: Verdict(1.0, True, "3", True),
        ],
        ["", "", ""],
        timeout_s=1,
    )
    assert out.rewards == [0.0, 0.0, 1.0] and (out.errors, out.timeouts) == (2, 1)
    assert out.formatted[2] is True


def test_truncate_jsonl_keeps_steps_up_to_checkpoint_and_drops_torn_line(tmp_path):
    path = tmp_path / "m.jsonl"
    writer = JsonlWriter(path)
    for step in range(1, 6):
        writer.write({"step": step, "x": float("nan") if step == 2 else step})
    writer.close()
    with open(path, "a") as f:
        f.write('{"step": 6, "x"')  # killed mid-write
    truncate_jsonl(path, 3)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[1]["x"] is None  # NaN is written as null


def test_entropy_health_is_judged_over_windows_and_a_blip_only_warns(caplog):
    health = EntropyHealth(
        window=2, collapse_fraction=0.5, explosion_multiple=2.0, format_drop_fraction=0.5
    )
    assert health.update(1, 1.0, 0.8) == {
        "health/entropy_collapse": False,
        "health/entropy_explosion": False,
    }
    health.update(2, 1.0, 0.8)
    with caplog.at_level("WARNING", logger="ict.train"):
        out = health.update(3, 0.3, 0.8)  # one step at 0.3x the first window: a blip
    assert "not a verdict" in caplog.text
    # no verdict from one step: the rows carry a judgement once two whole windows exist
    assert out == {"health/entropy_collapse": False, "health/entropy_explosion": False}
    health.update(4, 1.0, 0.8)
    assert health.update(5, 1.0, 0.8)["health/entropy_collapse"] is False  # recovered
    for step in range(6, 10):
        out = health.update(step, 0.4, 0.8)  # the last two steps' mean 0.4 < 0.5 x 1.0
    assert out["health/entropy_collapse"] is True and out["health/entropy_ratio"] == 0.4
    summary = health.summary()
    assert summary["entropy_collapse"] and not summary["entropy_explosion"]
    assert summary["criterion"] == (
        "last-2 mean H 0.40x first-2 (collapse < 0.5x, explosion > 2x); "
        "format rate 1.00x (explosion < 0.5x)"
    )
    for step in range(10, 12):
        out = health.update(step, 1.0, 0.3)  # the format rate falls to 0.375x: explosion
    assert out["health/entropy_explosion"] is True
    clone = EntropyHealth(window=2)
    clone.load_state_dict(health.state_dict())
    assert clone.entropies == health.entropies and clone.formats == health.formats


def test_report_to_without_the_package_is_a_clear_config_error(monkeypatch, tmp_path):
    import sys

    import pytest

    from ict.errors import ConfigError
    from ict.train.outputs import ExternalLogger

    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    with pytest.raises(ConfigError, match="pip install wandb"):
        ExternalLogger("wandb", tmp_path, {})
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(ConfigError, match="pip install tensorboard"):
        ExternalLogger("tensorboard", tmp_path, {})


def test_summary_and_final_line_name_the_phase_of_a_collapse():
    """The default run's collapse fell in its dense warm-up (GRPO): summary.json's health and the
    final line say so, apart from the method's own steps (issue 50)."""
    from ict.train.evaluation import headline

    health = EntropyHealth()
    entropy = [0.71, 0.52, 0.21, 0.08, 0.08, 0.07]
    for step, h in enumerate(entropy, 1):
        health.update(step, h, None, dense=step <= 3)
    summary = health.summary("ict")
    assert summary["entropy_collapse"] and summary["collapse_in"] == "warm-up"
    assert summary["phases"]["warm-up"]["steps"] == [1, 3]
    text = (
        "entropy collapse in the dense warm-up (GRPO, steps 1-3: H 0.71 -> 0.21 nats), "
        "not in ict's own steps 4-6 (H 0.08 -> 0.07 nats)"
    )
    assert summary["entropy_collapse_text"] == text
    assert headline(None, {"health": summary}) == text
    clone = EntropyHealth()
    clone.load_state_dict(health.state_dict())
    assert clone.summary("ict") == summary
    old = EntropyHealth()  # a checkpoint written before the phases: judged as a whole only
    old.load_state_dict({"entropies": entropy, "formats": []})
    assert "phases" not in old.summary() and old.summary()["entropy_collapse"]
    assert headline(None, {"health": old.summary()}) == "entropy collapse"
