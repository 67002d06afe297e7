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


def test_a_collapse_in_the_dense_warm_up_is_reported_as_the_warm_ups(tmp_path):
    """Issue 50: the report's flag names the phase (the warm-up, i.e. GRPO) it fell in."""
    from pathlib import Path

    from ict.report.document import Document
    from ict.report.health import write_health_section
    from ict.report.runs import Run

    entropy = [0.71, 0.52, 0.21, 0.08, 0.08, 0.07]
    ict = Run(Path("ict_seed0"), {"method": "ict", "seed": 0}, [
        {"step": s, "valid/entropy": h, "dense_warmup": s <= 3}
        for s, h in enumerate(entropy, 1)
    ])  # fmt: skip
    old = Run(Path("grpo_seed0"), {"method": "grpo", "seed": 0}, [
        {"step": s, "valid/entropy": h} for s, h in enumerate(entropy, 1)
    ])  # fmt: skip
    doc = Document(title="t")
    raw = write_health_section(doc, [ict, old], {"ict": [ict], "grpo": [old]})
    md = doc.markdown(tmp_path)
    assert "| ict | 1 | 0: COLLAPSE in the warm-up (GRPO) |" in md
    assert "| grpo | 1 | 0: COLLAPSE |" in md  # no dense_warmup logged: no phase named
    assert "1 of them in the dense warm-up" in md
    by = {r["method"]: r for r in raw["runs"]}
    assert by["ict"]["phases"]["collapse_in"] == "warm-up" and "phases" not in by["grpo"]
