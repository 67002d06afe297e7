"""The report's health section judges each run's learning signal (zero_variance_share)."""

import json

from ict.report.comparison import build_report

from .helpers import write_run


def test_health_section_flags_runs_without_signal_and_shows_refill_cost(tmp_path):
    silent = write_run(tmp_path, "grpo", 0, extra={"zero_variance_share": 0.875})
    refilled = write_run(
        tmp_path, "ict", 0,
        extra={"zero_variance_share": 0.0, "dynamic/rounds": 3, "rollout/sequences": 192,
               "dynamic/cap_hit": False},
    )  # fmt: skip
    build_report([silent, refilled], tmp_path / "r")
    raw = json.loads((tmp_path / "r" / "report.json").read_text())["health"]["signal"]
    by = {r["method"]: r for r in raw["runs"]}
    assert raw["flagged"] == 1 and by["grpo"]["no_signal"] and not by["ict"]["no_signal"]
    assert by["grpo"]["no_signal_share"] == 0.875 and by["grpo"]["no_signal_steps"] == 0
    assert by["ict"]["dynamic_sampling"] and by["ict"]["sequences_per_step"] == 192
    assert not by["grpo"]["dynamic_sampling"] and by["grpo"]["sequences_per_step"] is None
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| grpo | 1 | 0.88 | 0 | no | - | 0 | 0: 88% |" in md
    assert "| ict | 1 | 0.00 | 0 | yes | 192 | 0 | - |" in md
    assert "enable --dynamic-sampling" in md


def test_runs_that_never_logged_the_share_leave_the_table_out(tmp_path):
    build_report([write_run(tmp_path, "grpo", 0)], tmp_path / "r")
    raw = json.loads((tmp_path / "r" / "report.json").read_text())["health"]["signal"]
    assert raw == {"runs": [], "flagged": 0}
    assert "Learning signal" not in (tmp_path / "r" / "report.md").read_text()
