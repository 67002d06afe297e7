import json
import os
import re
from pathlib import Path

import pytest

from ict.cli import main
from ict.compare.grid import cell_dir, cell_state, run_grid
from ict.compare.presets import EvalSpec, Preset, WarmStart, get_preset
from ict.data.toy.add import ToyAddTask, reward
from ict.errors import ConfigError
from ict.report.comparison import build_report

TRAIN = dict(
    chat_template=False,
    stop=[],
    max_new_tokens=8,
    temperature=1.0,
    prompts_per_step=2,
    num_generations=2,
    generation_batch_size=8,
    micro_batch_size=8,
    learning_rate=1e-3,
    warmup_steps=0,
    max_steps=2,
    save_every=1,
    keep_last=1,
    log_samples_every=1,
    num_log_samples=2,
    plots=False,
    progress=False,
    device="cpu",
    autocast="off",
    task="toy:add",
    task_config={"max_a": 9, "max_b": 9},  # the toy task family of ict.data: toy:add?max_a=9&...
    train_size=50,
)
LABEL = "toy:add?max_a=9&max_b=9"  # the task's label in results and metric keys (its spec)


def tiny_preset() -> Preset:
    return Preset(
        "tiny",
        "test grid",
        dict(TRAIN),
        EvalSpec(size=6, n=2, ks=(1, 2)),
        methods=["grpo", "ict"],
        seeds=2,
        warm=WarmStart(
            hidden_size=16,
            num_layers=1,
            num_heads=2,
            intermediate_size=32,
            max_steps=10,
            check_every=10,
            batch_size=16,
        ),
    )


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ICT_CACHE", str(tmp_path / "cache"))


def steps_of(run_dir):
    return [
        json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]


def test_toy_score_and_splits_are_disjoint():
    assert (
        reward("4+5=9", 4, 5) == 1.0
        and reward("4+5=10", 4, 5) == 0.0
        and reward("nothing", 4, 5) == 0.0
    )
    task = ToyAddTask(max_a=9, max_b=9)
    assert not set(task.split("train", 80)) & set(task.split("test", 20))


# not marked slow: the issue wants the grid + resume check in CI (about 10 s on 1 core)
def test_interrupted_grid_resumes_and_finished_cells_are_not_rerun(tmp_path, cache):
    preset, out, logs = tiny_preset(), tmp_path / "grid", []
    run_grid(preset, out, stop_after=1, log=logs.append)  # "interrupted" after one step per cell
    # seed-major: an unfinished grid has every method of its first seeds
    cells = [cell_dir(out, m, s) for s in (0, 1) for m in ("grpo", "ict")]
    assert all(cell_state(c, 2) == "partial" and steps_of(c) == [1] for c in cells)
    assert "stopped early" in "\n".join(logs)

    dirs = run_grid(preset, out, log=logs.append)  # resumes from the step-1 checkpoints
    assert dirs == cells
    for c in cells:
        assert cell_state(c, 2) == "done" and steps_of(c) == [1, 2]
        final = json.loads((c / "final_eval.json").read_text())
        assert {k for k in final["metrics"] if "/pass@" in k} == {
            f"eval/{LABEL}/pass@1",
            f"eval/{LABEL}/pass@2",
        }
        counts = final["per_problem"][LABEL]  # what the report's bootstrap needs
        assert counts["n"] == [2] * 6 and len(counts["ids"]) == len(set(counts["ids"])) == 6
        assert final["metrics"][f"eval/{LABEL}/pass@1"] == pytest.approx(
            sum(counts["correct"]) / 12
        )
    # one line per cell and phase: "[k/4] method seed s: train ..." and "...: eval pass@1 x [lo, hi]"
    assert sum(": train stopped early" in line for line in logs) == 4
    assert (
        sum(re.match(r"\[\d/4\] \w+ seed \d: train resumed, 2 steps", x) is not None for x in logs)
        == 4
    )
    evals = [line for line in logs if ": eval pass@1 " in line and line.startswith("[")]
    assert len(evals) == 4 and all(
        re.search(r"pass@2 \d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", e) for e in evals
    )
    stamps = {
        c: [(c / f).stat().st_mtime_ns for f in ("metrics.jsonl", "final_eval.json")] for c in cells
    }

    logs.clear()
    run_grid(preset, out, log=logs.append)
    assert sum("done, skipped" in line for line in logs) == 4
    assert stamps == {
        c: [(c / f).stat().st_mtime_ns for f in ("metrics.jsonl", "final_eval.json")] for c in cells
    }

    md = build_report(dirs, out / "report").read_text()
    assert f"held-out {LABEL}/pass@2" in md and "| ict | 2 |" in md and "Mean Jaccard" in md


def test_grid_same_data_for_every_method(tmp_path, cache):
    preset = tiny_preset()
    preset.methods, preset.seeds = ["grpo", "ict"], 1
    dirs = run_grid(preset, tmp_path / "g", log=lambda _: None)
    prompts = [
        [json.loads(line)["prompt"] for line in (d / "samples.jsonl").read_text().splitlines()]
        for d in dirs
    ]
    assert prompts[0] == prompts[1]  # identical data order across methods of one seed
    assert cell_state(dirs[0], 2) == "done"


def test_presets_and_bad_grid(tmp_path):
    assert [get_preset(n).name for n in ("toy", "quick", "smollm")] == ["toy", "quick", "smollm"]
    toy = get_preset("toy")
    # both ICT variants: the paper's and the earlier batch-mean guess, 5 seeds (issue 9)
    assert toy.methods == ["grpo", "entropy", "stapo", "random", "ict", "ict_batch_mean"]
    assert toy.seeds >= 5
    assert get_preset("quick").train["dense_warmup_steps"] < get_preset("quick").train["max_steps"]
    with pytest.raises(ConfigError, match="unknown preset"):
        get_preset("huge")
    with pytest.raises(ConfigError, match="at least one method"):
        run_grid(tiny_preset(), tmp_path / "grid", methods=[], seeds=[0])
    assert not (tmp_path / "grid").exists()


def test_cli_compare_from_runs_and_bad_flags(tmp_path, capsys):
    from report.helpers import write_run

    runs = [
        str(write_run(tmp_path / "r", m, s, final_pass=0.3 + 0.1 * s))
        for m in ("grpo", "ict")
        for s in (0, 1)
    ]
    assert main(["compare", "--runs", *runs, "--out", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep" / "report.html").exists() and "report:" in capsys.readouterr().out
    assert main(["compare", "--runs", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["compare", "--preset", "toy", "--seeds", "0"]) == 2
    assert "--seeds must be >= 1" in capsys.readouterr().err


class CountingSampler:
    """A scripted sampler (ict.eval.backends) that answers "no" and records which model each
    evaluation sampled (its `config._name_or_path`) and with which settings."""

    def __init__(self):
        self.evaluations = []

    def factory(self, model, tokenizer, settings):
        self.evaluations.append((model.config._name_or_path, settings))
        return self

    def sample(self, prompts, *, n, seed):
        return [[("<answer>no</answer>", 3)] * n for _ in prompts]


def test_task_cells_are_evaluated_on_the_task_they_trained_on():
    """The final evaluation is the cells' own evaluation (their full task spec, options included,
    their response budget, stop strings, top-p, generation batch and prompt rendering) with the
    preset's problems, samples, k and seed."""
    from ict.compare.grid import final_evaluation
    from ict.train import TrainConfig
    from ict.train.problems import task_spec

    train = dict(max_steps=1, max_new_tokens=20, top_p=0.9, stop=["</a>"], generation_batch_size=6)
    preset = Preset("p", "", train, EvalSpec(size=3, n=2, ks=(1,), seed=7))
    config = TrainConfig(**preset.cell_train("grpo"))
    evaluation = final_evaluation(config, preset)
    assert evaluation.tasks == [task_spec(TrainConfig())]  # the default task, with its options
    assert "min_terms=2" in evaluation.tasks[0]
    s = evaluation.settings
    assert (s.max_new_tokens, s.top_p, s.stop, s.batch_size) == (20, 0.9, ["</a>"], 6)
    assert (s.n, s.k, s.limit, s.seed, s.temperature) == (2, [1], 3, 7, config.temperature)
    assert s.chat_template is config.chat_template and s.split == "eval"
    paper = Preset("q", "", train, EvalSpec(n=2, ks=(1,), temperature=0.6, benchmarks=("gsm8k",)))
    assert final_evaluation(config, paper).tasks == ["gsm8k"]
    assert final_evaluation(config, paper).settings.temperature == 0.6


def test_task_grid_evaluates_its_start_model_once(tmp_path):
    """A preset without a warm start (a model on a task) gets the start model's evaluation once per
    grid (OUT/start_eval.json, the report's before-RL point), under the cells' final evaluation;
    each cell's checkpoint is evaluated from its run directory; a rerun evaluates nothing again."""
    from ict.testing import save_tiny_model

    model_dir = save_tiny_model(tmp_path / "tiny")
    train = dict(
        model=str(model_dir), max_steps=1, prompts_per_step=2, num_generations=2, max_new_tokens=4,
        micro_batch_size=4, save_every=1, train_size=4, plots=False, progress=False, device="cpu",
        autocast="off",
    )  # fmt: skip
    preset = Preset("p", "", train, EvalSpec(size=3, n=2, ks=(1, 2)), methods=["grpo"])
    sampler, lines = CountingSampler(), []
    out = tmp_path / "g"
    run_grid(preset, out, seeds=[0, 1], log=lines.append, sampler_factory=sampler.factory)
    cells = [cell_dir(out, "grpo", s) for s in (0, 1)]
    sampled = [Path(name).name for name, _ in sampler.evaluations]
    assert sampled == ["tiny"] + ["step_000001"] * 2  # the start model, then each checkpoint
    assert len({json.dumps(s.as_dict()) for _, s in sampler.evaluations}) == 1  # one evaluation
    start = json.loads((out / "start_eval.json").read_text())
    finals = [json.loads((c / "final_eval.json").read_text()) for c in cells]
    assert all(f["settings"] == start["settings"] and f["step"] == 1 for f in finals)
    assert start["step"] == 0 and start["model"] == str(model_dir)
    (label,) = start["per_problem"]
    assert start["per_problem"][label]["n"] == [2, 2, 2]
    assert any(line.startswith("start point: eval pass@1 0.000 [0.000, 0.000]") for line in lines)
    run_grid(preset, out, seeds=[0, 1], log=lines.append, sampler_factory=sampler.factory)
    assert len(sampler.evaluations) == 3  # nothing evaluated again


def test_cli_grid_console_is_quiet_unless_verbose(tmp_path, cache, monkeypatch, capfd):
    import transformers.utils.logging as tf_logging

    import ict.compare.presets

    monkeypatch.setattr(ict.compare.presets, "get_preset", lambda name: tiny_preset())
    before = (tf_logging.get_verbosity(), tf_logging.is_progress_bar_enabled())
    args = ["compare", "--methods", "grpo", "--seeds", "1"]
    assert main([*args, "--out", str(tmp_path / "quiet")]) == 0
    out, err = capfd.readouterr()
    assert "Loading weights" not in out + err and "it/s" not in out + err
    lines = [line for line in out.splitlines() if line.startswith("[1/1] grpo seed 0:")]
    assert [line.split(":")[1].split()[0] for line in lines] == ["train", "eval"]
    assert (tf_logging.get_verbosity(), tf_logging.is_progress_bar_enabled()) == before  # restored
    assert "TQDM_DISABLE" not in os.environ  # bars that use tqdm directly come back too

    assert main([*args, "--out", str(tmp_path / "loud"), "--verbose"]) == 0
    out, err = capfd.readouterr()
    assert "Loading weights" in out + err


def test_quiet_console_keeps_errors_and_verbose_changes_nothing():
    import transformers.utils.logging as tf_logging
    from huggingface_hub import utils as hub_utils

    from ict.cli.compare import quiet_console

    original = tf_logging.get_verbosity()
    tf_logging.set_verbosity_warning()
    try:
        state = (tf_logging.get_verbosity(), tf_logging.is_progress_bar_enabled())
        with quiet_console():
            assert tf_logging.get_verbosity() == tf_logging.ERROR  # errors still print
            assert not tf_logging.is_progress_bar_enabled()
            assert hub_utils.are_progress_bars_disabled()
        assert (tf_logging.get_verbosity(), tf_logging.is_progress_bar_enabled()) == state
        with quiet_console(verbose=True):
            assert (tf_logging.get_verbosity(), tf_logging.is_progress_bar_enabled()) == state
    finally:
        tf_logging.set_verbosity(original)


def test_smollm_cot_preset_cells_are_valid_chains():
    from ict.data import prompts
    from ict.train import TrainConfig
    from ict.train.problems import task_spec

    preset = get_preset("smollm-cot")
    assert {"grpo", "ict", "random_sequence"} <= set(preset.methods)
    for method in preset.methods:
        config = TrainConfig(**preset.cell_train(method))  # validates against the registries
        assert config.max_new_tokens >= 80  # room for a 5-term running-total chain
    spec = task_spec(TrainConfig(**preset.cell_train("ict")))
    assert "template=running_total_3shot" in spec and "min_terms=4" in spec
    assert "running_total_3shot" in prompts.PROMPT_TEMPLATES
    # the evaluation samples as training does, and the paper's ICT reaches its sparse phase
    assert preset.eval.temperature == preset.train["temperature"]
    from ict.train.plan import RunPlan

    ict_cell = RunPlan.from_config(TrainConfig(**preset.cell_train("ict"))).method
    assert 0 < ict_cell.dense_warmup_steps < preset.train["max_steps"]


def test_grid_with_periodic_evaluation_shares_step_zero_and_reports_step_curves(tmp_path, cache):
    """eval_every: the start model is evaluated once per grid and copied to every cell as
    heldout_before.json (step 0, the schema of RUN/eval_steps/step_*.json, the same problems and
    sampling seed). With the final evaluation's settings equal to the periodic ones (as in
    toy-cot-long), it is one evaluation: the before-RL number (OUT/start_eval.json) is the step-0
    number, and each cell's final number is its last periodic one. The report draws and tabulates
    the curves against step."""
    preset = tiny_preset()
    preset.train.update(eval_every=1, eval_size=4, eval_num_samples=4)
    preset.eval = EvalSpec(size=4, n=4, ks=(1, 2, 4), seed=1234)  # = the periodic evaluation
    logs = []
    dirs = run_grid(preset, tmp_path / "g", seeds=[0, 1], log=logs.append)
    assert len(list((tmp_path / "g" / "start_evals").glob("*.json"))) == 1
    assert sum(line.startswith("start point: eval") for line in logs) == 1
    start = json.loads((tmp_path / "g" / "start_eval.json").read_text())
    before = [json.loads((d / "heldout_before.json").read_text()) for d in dirs]
    assert all(b == start for b in before) and start["step"] == 0  # one number before RL
    for d in dirs:
        for step in (1, 2):
            result = json.loads((d / "eval_steps" / f"step_{step:06d}.json").read_text())
            assert result["settings"] == start["settings"]  # eval_seed, not the cell's seed
            assert result["per_problem"][LABEL]["ids"] == start["per_problem"][LABEL]["ids"]
            assert result["per_problem"][LABEL]["n"] == [4] * 4 and result["step"] == step
        final = json.loads((d / "final_eval.json").read_text())
        last = json.loads((d / "eval_steps" / "step_000002.json").read_text())
        assert final["per_problem"] == last["per_problem"]  # the checkpoint = the model at step 2
        assert final["metrics"] == last["metrics"] and final["settings"] == last["settings"]
    report = tmp_path / "g" / "report"
    md = build_report(dirs, report).read_text()
    assert "| method | step | seeds | pass@1 | pass@4 | H (nats) | H2 (nats) |" in md
    assert "| grpo | 0 | 2 |" in md and "| ict | 2 | 2 |" in md
    assert (report / "plots" / "exploration_steps.png").exists()
    assert (report / "plots" / "pass_at_k_toy_add_max_a_9_max_b_9.png").exists()
    # the start model's evaluation (OUT/start_eval.json) is the before-RL reference
    assert "| k | before RL | grpo | ict |" in md
    logs.clear()
    run_grid(preset, tmp_path / "g", seeds=[0, 1], log=logs.append)
    assert not any(line.startswith("start point: eval") for line in logs)  # nothing again


def test_periodic_and_final_evaluations_with_other_settings_each_evaluate_the_start_once(
    tmp_path, cache
):
    """The cells' periodic evaluation (eval_size x eval_num_samples) differs from the final one
    (the EvalSpec): the start model is evaluated once under each, step 0 under the periodic one."""
    preset = tiny_preset()
    preset.train.update(eval_every=2, eval_size=4, eval_num_samples=4, eval_split="validation")
    logs = []
    dirs = run_grid(preset, tmp_path / "g", seeds=[0], log=logs.append)
    assert len(list((tmp_path / "g" / "start_evals").glob("*.json"))) == 2
    before = json.loads((dirs[0] / "heldout_before.json").read_text())
    start = json.loads((tmp_path / "g" / "start_eval.json").read_text())
    final = json.loads((dirs[0] / "final_eval.json").read_text())
    assert before["settings"]["n"] == 4 and start["settings"]["n"] == 2
    # the curves on the validation split; the start point and the final result on the held-out one
    assert before["settings"]["split"] == "validation"
    assert start["settings"]["split"] == final["settings"]["split"] == "eval"
    ids = {label: set(v["ids"]) for label, v in final["per_problem"].items()}
    curve = {label: set(v["ids"]) for label, v in before["per_problem"].items()}
    assert all(not (ids[label] & curve[label]) for label in ids)  # disjoint problems
