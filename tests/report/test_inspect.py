import json

import numpy as np
import pytest

from ict.cli import main

from .helpers import make_sample, write_run


@pytest.fixture
def run_dir(tmp_path):
    rng = np.random.default_rng(0)
    samples = [make_sample(step, list("1+2=3"), rng) for step in (1, 1, 5)]
    return write_run(tmp_path, "ict", 0, samples=samples)


def test_inspect_run_last_step_terminal_and_html(run_dir, capsys):
    assert main(["inspect", str(run_dir), "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "(step 5)" in out and "(step 1)" not in out and "\\x1b[" not in out
    page = (run_dir / "token_map.html").read_text()
    assert page.count('class="resp"') == 1


def test_inspect_step_all_and_errors(run_dir, tmp_path, capsys):
    assert (
        main(
            [
                "inspect",
                str(run_dir),
                "--step",
                "1",
                "--no-terminal",
                "--html",
                str(tmp_path / "m.html"),
            ]
        )
        == 0
    )
    assert (tmp_path / "m.html").read_text().count('class="resp"') == 2
    assert main(["inspect", str(run_dir), "--all-steps", "--no-html"]) == 0
    assert capsys.readouterr().out.count("--- response") == 3
    assert main(["inspect", str(run_dir), "--step", "7"]) == 2
    assert "logged steps: 1, 5" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path / "nope")]) == 2
    assert main(["inspect", "--model", "x"]) == 2
    assert "--prompt" in capsys.readouterr().err


def test_records_from_model_match_selectors():
    from ict.report.tokenmap import validate_record
    from ict.testing import tiny_model_and_tokenizer
    from ict.train.inspect import records_from_model

    model, tok = tiny_model_and_tokenizer(seed=0)
    records = records_from_model(model, tok, ["1+2=", "3+4="], num_samples=2, max_new_tokens=10)
    assert len(records) == 4
    for i, rec in enumerate(records):
        validate_record(rec, i)
        assert "".join(rec["tokens"]).startswith(rec["response"][:3])
        assert all(0 <= x <= np.log(2) + 1e-5 for x in rec["js"])
        assert all(r <= h + 1e-4 for r, h in zip(rec["renyi2"], rec["entropy"], strict=True))
    n_valid = sum(len(r["tokens"]) for r in records)
    # the paper's ICT keeps the top 10% of each response (at least one token)
    for rec in records:
        assert sum(rec["selected"]["ict"]) == max(1, int(np.ceil(0.1 * len(rec["tokens"]))))
        assert len(rec["prob"]) == len(rec["tokens"]) and "reward" in rec
    # 20-Entropy keeps the top 20% of the whole batch
    assert sum(sum(r["selected"]["entropy"]) for r in records) == int(np.ceil(0.2 * n_valid))
    # entropy selection = the top-H tokens of the batch
    h = np.concatenate([r["entropy"] for r in records])
    sel = np.concatenate([r["selected"]["entropy"] for r in records]).astype(bool)
    assert h[sel].min() >= h[~sel].max() - 1e-6
    json.dumps(records)  # serialisable like samples.jsonl


@pytest.mark.parametrize("model_name", ["tiny", pytest.param("embedded", marks=pytest.mark.slow)])
def test_inspect_model_marks_what_a_training_step_selects(tmp_path, monkeypatch, model_name):
    """`ict inspect --model`'s ict marks are the training step's own selection on the same
    rollout: a native step is run with its rollout and old policy captured, and the inspect path
    scores that rollout with the old policy. "embedded": the default SmolLM2-135M (GGUF)."""
    import copy

    import ict.train.trainer as trainer_module
    from ict.testing import tiny_model_and_tokenizer
    from ict.train import TrainConfig
    from ict.train.inspect import inspect_plan, records_from_rollout
    from ict.train.trainer import Trainer

    if model_name == "tiny":
        model, tok = tiny_model_and_tokenizer(seed=0)
    else:
        from ict.models import load_model_and_tokenizer

        model, tok = load_model_and_tokenizer(None)
    seen = {}
    original = trainer_module.collect_rollout

    def capture(model, *args, **kwargs):
        seen["old"] = copy.deepcopy(model)
        seen["batch"], metrics = original(model, *args, **kwargs)
        return seen["batch"], metrics

    monkeypatch.setattr(trainer_module, "collect_rollout", capture)
    config = TrainConfig(
        method="ict", max_steps=2, dense_warmup_steps=0, prompts_per_step=2, num_generations=4,
        max_new_tokens=8, autocast="off", heldout_eval=False, plots=False, progress=False,
        log_samples_every=1, num_log_samples=8, output_dir=str(tmp_path / "run"),
    )  # fmt: skip
    from ict.train.problems import Problem

    problems = [Problem(f"{a}+{a}=", lambda r, a=a: float(str(2 * a) in r)) for a in range(1, 9)]
    trainer = Trainer(config, model=model, tokenizer=tok, problems=problems)
    trainer.train(stop_after=1)
    trained = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").open()]

    batch = seen["batch"]
    records = records_from_rollout(
        seen["old"], tok, batch.rollout, batch.prompts,
        inspect_plan("ict", 4, 1.0, 0, precision="off"),
    )  # fmt: skip
    assert len(trained) == len(records) == 8
    for step_record, inspected in zip(trained, records, strict=True):
        assert step_record["tokens"] == inspected["tokens"]
        assert step_record["selected"]["ict"] == inspected["selected"]["ict"]
        assert step_record["js"] == inspected["js"]


def test_inspect_writes_plain_text_off_a_terminal_and_colour_on_one(run_dir, capsys, monkeypatch):
    """Into a file or a pipe (capsys: not a terminal) no ANSI codes; on a terminal, or with
    --color, coloured; --no-color wins."""
    assert main(["inspect", str(run_dir), "--no-html"]) == 0
    out = capsys.readouterr().out
    assert "(step 5)" in out and "\x1b[" not in out
    assert main(["inspect", str(run_dir), "--no-html", "--color"]) == 0
    assert "\x1b[" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    assert main(["inspect", str(run_dir), "--no-html"]) == 0
    assert "\x1b[" in capsys.readouterr().out
    assert main(["inspect", str(run_dir), "--no-html", "--no-color"]) == 0
    assert "\x1b[" not in capsys.readouterr().out
