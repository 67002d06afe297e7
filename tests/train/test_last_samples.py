"""A run logs its samples at its last step too, so `ict inspect RUN` shows the trained run's last
step by default (a 3-step run logging every 2 steps shows step 3, not step 2)."""

import json
from pathlib import Path

from ict.cli import main
from ict.train import train


def test_the_last_step_is_logged_and_inspect_shows_it(tiny, digit_problems, tiny_config, capsys):
    config = tiny_config(max_steps=3, log_samples_every=2, heldout_eval=False)
    train(config, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)
    run = Path(config.output_dir)
    lines = (run / "samples.jsonl").read_text().splitlines()
    assert sorted({json.loads(line)["step"] for line in lines}) == [1, 2, 3]
    assert main(["inspect", str(run), "--no-html"]) == 0
    out = capsys.readouterr().out
    assert "(step 3)" in out and "(step 2)" not in out
