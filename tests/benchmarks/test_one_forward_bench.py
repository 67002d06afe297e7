"""benchmarks/one_forward.py --tiny runs end to end: both paths, the same update, fewer tokens."""

import json

from tests.benchmarks import load_benchmark


def test_tiny_smoke(tmp_path, capsys):
    out = tmp_path / "result.json"
    argv = ["--tiny", "--prompts-per-step", "4", "--num-generations", "4", "--repeats", "1"]
    assert load_benchmark("one_forward").main([*argv, "--autocast", "off", "--json", str(out)]) == 0
    methods = json.loads(out.read_text())["methods"]
    assert set(methods) == {"grpo", "ict"}
    for result in methods.values():
        # the one-forward step runs every token once; the separate pass runs the statistics
        # pass over every row and the update's forward over the rows it trains on
        assert result["one_forward_tokens"] < result["separate_tokens"]
        assert result["selection_differs"] == 0  # the same update to float rounding
        assert result["grad_norm_difference_rel"] < 1e-4 and result["loss_difference"] < 1e-5
        assert result["ratio"] > 0
    assert "| ict |" in capsys.readouterr().out
