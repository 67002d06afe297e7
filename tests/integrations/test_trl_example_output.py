"""examples/trl/train_ict.py ends by printing the trained run's last-step metrics and the file
that holds every step's (not the `{}` of TRL's end-of-training row)."""

import json
import runpy
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "examples" / "trl" / "train_ict.py"


def test_example_prints_the_trained_runs_metrics_and_where_they_are(tmp_path, capsys):
    trainer = runpy.run_path(str(SCRIPT))["main"](["--quick", "--output-dir", str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    path = tmp_path / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    last = rows[-1]
    assert last["selected_fraction"] == trainer.state.log_history[-2]["selected_fraction"]
    summary = next(line for line in out if line.startswith("step 3 of 3:"))
    assert f"reward {last['reward']:.4g}" in summary
    assert f"selected_fraction {last['selected_fraction']:.4g}" in summary
    assert f"metrics of every step: {path}" in out
    assert "{}" not in out
