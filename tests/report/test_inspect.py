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
    from ict.report.from_model import records_from_model
    from ict.report.tokenmap import validate_record
    from ict.testing import tiny_model_and_tokenizer

    model, tok = tiny_model_and_tokenizer(seed=0)
    records = records_from_model(model, tok, ["1+2=", "3+4="], num_samples=2, max_new_tokens=10)
    assert len(records) == 4
    for i, rec in enumerate(records):
        validate_record(rec, i)
        assert "".join(rec["tokens"]).startswith(rec["response"][:3])
        assert all(0 <= x <= np.log(2) + 1e-5 for x in rec["js"])
        assert all(r <= h + 1e-4 for r, h in zip(rec["renyi2"], rec["entropy"], strict=True))
    n_valid = sum(len(r["tokens"]) for r in records)
    assert sum(sum(r["selected"]["ict"]) for r in records) == int(np.ceil(0.1 * n_valid))
    assert sum(sum(r["selected"]["entropy"]) for r in records) == int(np.ceil(0.2 * n_valid))
    # entropy selection = the top-H tokens of the batch
    h = np.concatenate([r["entropy"] for r in records])
    sel = np.concatenate([r["selected"]["entropy"] for r in records]).astype(bool)
    assert h[sel].min() >= h[~sel].max() - 1e-6
    json.dumps(records)  # serialisable like samples.jsonl
