"""`ict eval`'s console: no third-party loading bars, logs or warnings unless --verbose, and each
task named by its short label (the full spec once, under the table; kept in the files)."""

import json

from ict.cli import main

SPEC = "rg:chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=2&allow_negation=false"


def _argv(model, out, *extra):
    return [
        "eval", "--model", str(model), "--benchmarks", SPEC, "--n", "2", "--k", "1,2",
        "--limit", "2", "--max-new-tokens", "4", "--out", str(out), *extra,
    ]  # fmt: skip


def test_ict_eval_is_quiet_and_names_the_task_by_a_short_label(tiny_model_dir, tmp_path, capfd):
    assert main(_argv(tiny_model_dir, tmp_path / "a")) == 0
    out, err = capfd.readouterr()
    assert "Loading weights" not in err and "it/s" not in err and "Warning" not in err
    assert "rg:chain_sum: 2/2 problems" in err and SPEC not in err
    assert "| rg:chain_sum | 2 |" in out
    assert out.count(SPEC) == 1 and f"rg:chain_sum: `{SPEC}`" in out  # once, under the table
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert list(summary["benchmarks"]) == [SPEC]  # the files keep the full label


def test_ict_eval_verbose_shows_the_loading_bars(tiny_model_dir, tmp_path, capfd):
    assert main(_argv(tiny_model_dir, tmp_path / "b", "--verbose")) == 0
    assert "Loading weights" in capfd.readouterr().err


def test_short_labels_are_the_task_names_numbered_when_shared():
    from ict.data import short_labels

    assert short_labels(["gsm8k", SPEC, "rg:chain_sum?min_terms=3", "rg:basic_arithmetic"]) == {
        "gsm8k": "gsm8k",
        SPEC: "rg:chain_sum (1)",
        "rg:chain_sum?min_terms=3": "rg:chain_sum (2)",
        "rg:basic_arithmetic": "rg:basic_arithmetic",
    }
