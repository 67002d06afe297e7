"""benchmarks/train_step.py --tiny runs end to end and reports what the docs table needs."""

import json

from tests.benchmarks import load_benchmark


def test_tiny_smoke(tmp_path, capsys):
    out = tmp_path / "result.json"
    argv = ["--tiny", "--prompts-per-step", "4", "--num-generations", "4", "--repeats", "1"]
    assert load_benchmark("train_step").main([*argv, "--autocast", "off", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    variants = result["variants"]
    assert set(variants) == {"grpo_today", "grpo_1", "grpo_123", "ict_123"}
    assert variants["grpo_today"]["vs_grpo_today"] == 1.0
    # 2 of the 4 groups have all-equal rewards: (1) runs the other half of the rows
    assert result["batch"]["all_equal_groups"] == 2
    assert variants["grpo_today"]["rows_run"] == 16
    assert variants["grpo_1"]["rows_run"] == variants["ict_123"]["rows_run"] == 8
    assert variants["ict_123"]["loss_tokens"] < variants["grpo_123"]["loss_tokens"]
    assert variants["grpo_123"]["tokens"] <= variants["grpo_1"]["tokens"]
    assert result["stats_vs_floor"]["head_passes"] == 1.0  # group_position: one pass
    assert "| ict_123 |" in capsys.readouterr().out
