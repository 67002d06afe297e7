"""End to end: `ict eval` of the tiny offline model on fixture files and a reasoning-gym task."""

import json
import re

import numpy as np
import pytest

from ict.cli import main
from ict.cli.eval import split_benchmarks
from ict.compare.presets import FIXTURES_DIR
from ict.errors import ConfigError

FIXTURES = FIXTURES_DIR  # the fixture files shipped with ict (package data)


def test_split_benchmarks_keeps_list_values_together():
    assert split_benchmarks("gsm8k, rg:x?a=[1,2]&b=3,math500") == [
        "gsm8k",
        "rg:x?a=[1,2]&b=3",
        "math500",
    ]


def test_ict_eval_end_to_end_and_rerun_uses_the_cache(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [
        "eval",
        "--model",
        str(tiny_model_dir),
        "--benchmarks",
        "gsm8k,commonsenseqa,rg:chain_sum?min_terms=2&max_terms=2",
        "--data-dir",
        str(FIXTURES),
        "--n",
        "2",
        "--k",
        "1,2",
        "--limit",
        "2",
        "--max-new-tokens",
        "6",
        "--batch-size",
        "4",
        "--out",
        str(out),
        "--seed",
        "1",
    ]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "pass@2 (95% CI)" in table and "| gsm8k | 2 |" in table and "commonsenseqa" in table
    # every pass@k and accuracy cell: value [low, high] as fractions, inside [0, 1], around it
    cells = re.findall(r"(\d\.\d{3}) \[(\d\.\d{3}), (\d\.\d{3})\]", table)
    assert len(cells) == 3 * 3  # 3 benchmarks x (pass@1, pass@2, accuracy)
    assert all(0 <= float(lo) <= float(v) <= float(hi) <= 1 for v, lo, hi in cells)
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["benchmarks"]) == {
        "gsm8k",
        "commonsenseqa",
        "rg:chain_sum?min_terms=2&max_terms=2",
    }
    assert summary["settings"]["max_new_tokens"] == 6 and summary["model"] == str(tiny_model_dir)
    for m in summary["benchmarks"].values():
        assert m["problems"] == 2 and 0.0 <= m["pass@1"] <= m["pass@2"] <= 1.0
        assert 0 < m["response_length_mean"] <= 6
    lines = (out / "samples" / "gsm8k.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert len(lines) == 2 and len(first["samples"]) == 2
    assert {
        "text",
        "answer",
        "correct",
        "reward",
        "format_ok",
        "length",
        "timed_out",
        "error",
    } <= set(first["samples"][0])
    # A rerun finds every problem cached and reproduces the summary.
    assert main(argv) == 0
    again = json.loads((out / "summary.json").read_text())
    assert again["benchmarks"] == summary["benchmarks"]


def test_evaluate_hook_returns_flat_metrics():
    from ict.eval import evaluate
    from ict.testing import tiny_model_and_tokenizer

    model, tokenizer = tiny_model_and_tokenizer()
    spec = "rg:chain_sum?min_terms=2&max_terms=2"
    metrics = evaluate(model, tokenizer, [spec], n=2, k=[1, 2], limit=2, max_new_tokens=4)
    prefix = f"eval/{spec}/"
    assert {
        prefix + "pass@1",
        prefix + "pass@2",
        prefix + "accuracy",
        prefix + "format_rate",
    } <= set(metrics)
    assert all(isinstance(v, float) for v in metrics.values())
    assert 0.0 <= metrics[prefix + "pass@1"] <= metrics[prefix + "pass@2"] <= 1.0
    # One spec as a string, default k = powers of two up to n.
    single = evaluate(model, tokenizer, spec, n=4, limit=1, max_new_tokens=2)
    assert {prefix + f"pass@{k}" for k in (1, 2, 4)} <= set(single)


def test_missing_benchmark_file_is_a_one_line_error(tiny_model_dir, tmp_path, capsys):
    code = main(
        [
            "eval",
            "--model",
            str(tiny_model_dir),
            "--benchmarks",
            "aime24",
            "--data-dir",
            str(tmp_path),
            "--n",
            "1",
            "--k",
            "1",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "aime24.jsonl" in err and "HuggingFaceH4/aime_2024" in err


def test_k_larger_than_n_is_rejected(capsys):
    assert main(["eval", "--n", "2", "--k", "1,4"]) == 2
    assert "raise --n" in capsys.readouterr().err


def test_vllm_backend_missing_is_a_clear_error(tmp_path, capsys):
    pytest.importorskip("torch")
    from ict.eval.backends import vllm_available

    if vllm_available():
        pytest.skip("vLLM is installed")
    assert main(["eval", "--backend", "vllm", "--model", "x/y", "--out", str(tmp_path)]) == 2
    assert "pip install vllm" in capsys.readouterr().err


def test_ict_eval_reports_every_power_of_two_k_and_n_by_default(tiny_model_dir, tmp_path, capsys):
    """Without --k: pass@k for k = 1, 2, 4 and n = 6, each equal to the binomial formula
    averaged over the cached per-problem counts, and the pass@k-against-k plot."""
    from scipy.special import comb

    out = tmp_path / "out"
    spec = "rg:chain_sum?min_terms=2&max_terms=2"
    argv = ["eval", "--model", str(tiny_model_dir), "--benchmarks", spec, "--n", "6", "--limit", "3",
            "--max-new-tokens", "4", "--batch-size", "12", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert all(f"pass@{k} (95% CI)" in table for k in (1, 2, 4, 6)) and "pass@8" not in table
    summary = json.loads((out / "summary.json").read_text())
    assert summary["settings"]["k"] == [1, 2, 4, 6]
    (cache,) = (out / "samples").glob("*.jsonl")  # one benchmark: one cache file
    records = [json.loads(line) for line in cache.read_text().splitlines()]
    assert len(records) == 3
    m = summary["benchmarks"][spec]
    for k in (1, 2, 4, 6):
        expected = np.mean(
            [1 - comb(r["n"] - r["num_correct"], k) / comb(r["n"], k) for r in records]
        )
        assert m[f"pass@{k}"] == pytest.approx(expected)
        low, high = m[f"pass@{k}_ci95"]
        assert 0.0 <= low <= m[f"pass@{k}"] <= high <= 1.0
    assert (out / "pass_at_k.png").stat().st_size > 0


def test_ict_eval_of_a_run_repeats_its_own_final_evaluation(tmp_path, capsys):
    """`ict eval --model RUN` evaluates the run's own task with the settings of its last
    evaluation (heldout_after.json) and gives the same numbers; it prints fractions."""
    from ict.testing import tiny_model_and_tokenizer
    from ict.train import TrainConfig, train

    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    run = tmp_path / "run"
    config = TrainConfig(
        task="rg:chain_sum?min_terms=2&max_terms=2", max_steps=1, prompts_per_step=2,
        num_generations=2, max_new_tokens=6, eval_size=3, eval_num_samples=4, eval_seed=11,
        generation_batch_size=8, micro_batch_size=4, top_p=0.9, plots=False, progress=False,
        device="cpu", autocast="off", output_dir=str(run),
    )  # fmt: skip
    summary = train(config, model=model, tokenizer=tokenizer)
    after = json.loads((run / "heldout_after.json").read_text())
    capsys.readouterr()
    assert main(["eval", "--model", str(run), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    again = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert again["settings"] == after["settings"] and again["settings"]["top_p"] == 0.9
    assert again["per_problem"] == after["per_problem"]  # the same problems, the same samples
    assert again["benchmarks"] == after["benchmarks"]  # lengths and formats too
    (label,) = again["benchmarks"]
    value = again["benchmarks"][label]["pass@1"]
    assert value == pytest.approx(summary["heldout"]["after"]["mean"])
    short = label.split("?")[0]  # the console's name of the task (ict.data.short_labels)
    assert f"| {short} | 3 | {value:.3f} [" in printed and "values are fractions" in printed


def test_ict_eval_of_a_run_without_evaluation_files_derives_them_from_its_config(tmp_path):
    """A run directory with only config.yaml: its task and the settings its config derives; a
    flag given on the command line wins."""
    from ict.cli import build_parser
    from ict.cli.eval import resolve
    from ict.train import TrainConfig
    from ict.train.evaluation import eval_settings
    from ict.train.problems import task_spec

    config = TrainConfig(task="toy:add", stop=[], eval_size=5, eval_num_samples=8, temperature=0.7)
    config.save_yaml(tmp_path / "config.yaml")
    args = build_parser().parse_args(["eval", "--model", str(tmp_path)])
    tasks, settings, loaded = resolve(args)
    assert tasks == [task_spec(config)] and settings == eval_settings(config)
    assert (settings.temperature, settings.stop, settings.limit) == (0.7, [], 5)
    args = build_parser().parse_args(["eval", "--model", str(tmp_path), "--n", "2"])
    assert resolve(args)[1].n == 2 and resolve(args)[1].k == [1, 2]


def test_sampler_and_eval_dtype_flags_reach_the_settings(tmp_path):
    """--sampler / --eval-dtype set EvalSettings.sampler / dtype; without them the defaults (or a
    run's own) stay; a value outside the choices is refused by argparse."""
    from ict.cli import build_parser
    from ict.cli.eval import resolve
    from ict.eval.settings import EvalSettings

    parse = build_parser().parse_args
    default = resolve(parse(["eval"]))[1]
    assert (default.sampler, default.dtype) == (EvalSettings().sampler, EvalSettings().dtype)
    chunked = resolve(parse(["eval", "--sampler", "chunked"]))[1]
    bf16 = resolve(parse(["eval", "--eval-dtype", "bf16"]))[1]
    assert (chunked.sampler, chunked.dtype) == ("chunked", "float32")
    assert (bf16.sampler, bf16.dtype) == ("batched", "bf16")
    prints = {s.fingerprint("toy", "m") for s in (default, chunked, bf16)}
    assert len(prints) == 3  # a cache never mixes them
    with pytest.raises(ConfigError, match="needs sampler=batched"):
        resolve(parse(["eval", "--sampler", "chunked", "--eval-dtype", "bf16"]))
    with pytest.raises(SystemExit):
        parse(["eval", "--sampler", "fast"])
