"""Run a grid of methods x seeds with identical data, budget and evaluation; resumable.

Cell RUN = OUT/runs/<method>_seed<seed>. A cell's state is read from its files:
  done     final_eval.json exists                       -> never rerun
  trained  summary.json says max_steps were done        -> only the final evaluation runs
  partial  metrics.jsonl exists (interrupted)           -> resumed from its latest checkpoint
  new      nothing yet                                  -> trained from the shared start
Every cell of a seed sees the same prompts in the same order (same data_seed and seed); every
cell starts from the same weights and is evaluated on the same held-out problems and samples.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ict.compare.presets import EvalSpec, Preset
from ict.errors import ConfigError
from ict.eval.files import write_json_atomic

logger = logging.getLogger("ict.compare")


def cell_dir(out_dir: Path, method: str, seed: int) -> Path:
    return Path(out_dir) / "runs" / f"{method}_seed{seed}"


def cell_state(run_dir: Path, max_steps: int) -> str:
    """'done', 'trained', 'partial' or 'new' (see the module docstring)."""
    if (run_dir / "final_eval.json").exists():
        return "done"
    summary = run_dir / "summary.json"
    if summary.exists() and int(json.loads(summary.read_text()).get("steps", 0)) >= max_steps:
        return "trained"
    if (run_dir / "metrics.jsonl").exists():
        return "partial"
    return "new"


def per_problem_record(ids: Sequence, n: Sequence[int], correct: Sequence[int]) -> dict:
    """final_eval.json's per-problem block of one benchmark: {"ids", "n", "correct"}, each [P]
    (samples and correct samples per problem), so the report can recompute pass@k per problem
    and bootstrap over problems (and over seeds, with the same problems for every cell)."""
    return {
        "ids": [str(i) for i in ids],
        "n": [int(x) for x in n],
        "correct": [int(x) for x in correct],
    }


def toy_module(task):
    """(module, benchmark label) of a toy task: ict.compare.toy_cot for a ToyCotTask (the chain
    task), else ict.compare.toy (addition); both give problems, score and warm_start."""
    from ict.compare import toy, toy_cot

    if isinstance(task, toy_cot.ToyCotTask):
        return toy_cot, "toy_cot"
    return toy, "toy_add"


def evaluate_toy(model, tokenizer, preset: Preset) -> dict:
    """pass@k on the toy task's held-out pairs, with a bootstrap interval over problems and the
    per-problem counts (see `per_problem_record`)."""
    import torch

    from ict.eval.metrics import bootstrap_ci, pass_at_k_per_problem
    from ict.generation import generate

    spec: EvalSpec = preset.eval
    pairs = preset.toy.split("test", spec.size)
    task, label = toy_module(preset.toy)
    model.eval()
    with torch.no_grad():
        rollout = generate(
            model,
            tokenizer,
            [p.prompt for p in task.problems(preset.toy, "test", spec.size)],
            num_samples=spec.n,
            temperature=spec.temperature,
            max_new_tokens=preset.train["max_new_tokens"],
            batch_size=256,
            seed=spec.seed,
        )
    correct = np.zeros(len(pairs), dtype=int)
    for i, text in zip(rollout.prompt_index.tolist(), rollout.texts, strict=True):
        correct[i] += int(task.score(text, *pairs[i]))
    metrics, intervals = {}, {}
    for k in spec.ks:
        per_problem = pass_at_k_per_problem([spec.n] * len(pairs), correct, k)
        metrics[f"eval/{label}/pass@{k}"] = float(per_problem.mean())
        intervals[f"eval/{label}/pass@{k}"] = bootstrap_ci(per_problem, seed=spec.seed)
    ids = [f"{a}+{b}" for a, b in pairs]
    return {
        "metrics": metrics,
        "bootstrap_95": intervals,
        "per_problem": {label: per_problem_record(ids, [spec.n] * len(pairs), correct)},
    }


def evaluate_task(run_dir: Path | None, preset: Preset) -> dict:
    """pass@k of a finished cell's checkpoint on its task via ict.eval, with per-problem counts;
    `run_dir` None: the cells' start model (the preset's `model`, default the embedded one)."""
    from ict.eval import runner
    from ict.models import load_model_and_tokenizer
    from ict.rewards import default_verifier
    from ict.train import TrainConfig
    from ict.train.problems import task_spec

    spec = preset.eval
    trained_on = TrainConfig(
        **preset.train
    )  # the cells' task and response budget, defaults included
    if spec.benchmarks:  # named benchmarks (the paper's seven), not the task's held-out split
        from ict.eval.paper import evaluate_cell

        return evaluate_cell(
            run_dir, spec, data_dir=preset.data_dir, max_new_tokens=trained_on.max_new_tokens
        )
    items = runner.load_all_eval_items([task_spec(trained_on)], spec.size)
    model, tokenizer = load_model_and_tokenizer(
        str(run_dir) if run_dir is not None else trained_on.model
    )
    settings = runner.EvalSettings(  # as ict.eval.evaluate (the training hook) sets them
        model=type(model).__name__,
        n=spec.n,
        k=list(spec.ks),
        temperature=spec.temperature,
        max_new_tokens=trained_on.max_new_tokens,
        seed=spec.seed,
        limit=spec.size,
        num_bootstrap=200,
    )
    settings.validate()
    sampler, verifier = runner.hf_sampler(model, tokenizer, settings), default_verifier()
    metrics, intervals, per_problem = {}, {}, {}
    try:
        for label, bench_items in items.items():
            records = runner.evaluate_benchmark(label, bench_items, sampler, verifier, settings)
            summary = runner.summarise(records, settings)
            for k in spec.ks:
                metrics[f"eval/{label}/pass@{k}"] = summary[f"pass@{k}"]
                intervals[f"eval/{label}/pass@{k}"] = summary[f"pass@{k}_ci95"]
            metrics[f"eval/{label}/accuracy"] = summary["accuracy"]
            per_problem[label] = per_problem_record(
                [r["id"] for r in records],
                [r["n"] for r in records],
                [r["num_correct"] for r in records],
            )
    finally:
        close = getattr(verifier, "close", None)
        if close is not None:
            close()
    return {"metrics": metrics, "bootstrap_95": intervals, "per_problem": per_problem}


def run_grid(preset: Preset, out_dir: str | Path, **options) -> list[Path]:
    """Train and evaluate every (method, seed) cell not yet done; returns the cell directories.

    options (all optional): methods (default the preset's), seeds (default range(preset.seeds)),
    overrides (TrainConfig fields applied to every cell, e.g. max_steps), stop_after (train at
    most this many steps per cell in this call: simulates an interruption; tests), log (a
    callable taking one line, default print). The preset's benchmark files (`data_dir`) are
    visible to training and evaluation while it runs."""
    from ict.compare.presets import using_data_dir

    with using_data_dir(preset.data_dir):
        return _run_grid(preset, out_dir, **options)


def _run_grid(
    preset: Preset,
    out_dir: str | Path,
    *,
    methods: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    overrides: dict | None = None,
    stop_after: int | None = None,
    log: Callable[[str], None] = print,
) -> list[Path]:
    from ict.train import TrainConfig, train

    out = Path(out_dir)
    methods = list(preset.methods if methods is None else methods)
    seeds = list(range(preset.seeds)) if seeds is None else list(seeds)
    if not methods or not seeds:
        raise ConfigError("the grid needs at least one method and one seed")
    # the grid evaluates every cell itself: no per-run before/after held-out evaluation
    settings = {"heldout_eval": False, **preset.train, **(overrides or {})}
    configs = {
        (m, s): TrainConfig(
            **{"heldout_eval": False, **preset.cell_train(m), **(overrides or {}), "seed": s}
        )
        for s in seeds  # seed-major: an unfinished grid still has every method for its first seeds
        for m in methods
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "grid.json").write_text(
        json.dumps(
            {
                "preset": preset.name,
                "methods": methods,
                "seeds": seeds,
                "train": settings,
                "eval": preset.eval.__dict__,
            },
            indent=2,
            default=str,
        )
    )

    base = tokenizer = problems = None
    if preset.toy is not None:
        toy, _ = toy_module(preset.toy)
        t0 = time.perf_counter()
        base, tokenizer, info = toy.warm_start(preset.toy, preset.warm)
        log(
            f"toy warm start: {'cached' if info['cached'] else 'trained'} ({info['steps']} steps, "
            f"sampled accuracy {info['accuracy']:.2f}, {time.perf_counter() - t0:.0f} s) {info['path']}"
        )
        if "eval" not in info:  # the start point's held-out pass@k, once per grid
            info["eval"] = evaluate_toy(base, tokenizer, preset)
        (out / "warm_start.json").write_text(json.dumps(info, indent=2))
        problems = toy.problems(preset.toy, "train", configs[methods[0], seeds[0]].train_size)
    elif not preset.eval.benchmarks and not (out / "start_eval.json").exists():
        t0 = time.perf_counter()  # the start point's held-out pass@k, once per grid
        result = evaluate_task(None, preset)
        write_json_atomic(out / "start_eval.json", result)
        log(f"start point: eval {eval_line(result)} {time.perf_counter() - t0:.0f} s")

    dirs = []
    for index, ((method, seed), config) in enumerate(configs.items(), start=1):
        run_dir = cell_dir(out, method, seed)
        dirs.append(run_dir)
        tag = f"[{index}/{len(configs)}] {method} seed {seed}:"
        state = cell_state(run_dir, config.max_steps)
        if state == "done":
            log(f"{tag} done, skipped")
            continue
        model = copy.deepcopy(base) if base is not None else None
        if state in ("new", "partial"):
            t0 = time.perf_counter()
            summary = train(
                config.replace(output_dir=str(run_dir)),
                run_dir=run_dir,
                resume=state == "partial",
                model=model,
                tokenizer=tokenizer if model is not None else None,
                problems=problems,
                stop_after=stop_after,
            )
            if not summary:
                log(f"{tag} train stopped early (stop_after={stop_after}); rerun to resume")
                continue
            log(
                f"{tag} train {'resumed, ' if state == 'partial' else ''}{config.max_steps} steps "
                f"{time.perf_counter() - t0:.0f} s"
            )
        t0 = time.perf_counter()
        if base is not None:
            from transformers import LlamaForCausalLM

            from ict.train.checkpoint import latest_checkpoint

            trained = LlamaForCausalLM.from_pretrained(latest_checkpoint(run_dir))
            result = evaluate_toy(trained, tokenizer, preset)
        else:
            result = evaluate_task(run_dir, preset)
        result["settings"] = {
            "problems": preset.eval.size,
            "samples_per_problem": preset.eval.n,
            "temperature": preset.eval.temperature,
            "seed": preset.eval.seed,
        }
        write_json_atomic(run_dir / "final_eval.json", result)
        log(f"{tag} eval {eval_line(result)} {time.perf_counter() - t0:.0f} s")
    return dirs


def eval_line(result: dict) -> str:
    """'pass@1 0.610 [0.520, 0.700], pass@4 ...' from a final_eval result (95% CI over problems)."""
    ci = result.get("bootstrap_95", {})
    parts = []
    for key, value in result["metrics"].items():
        if "/pass@" not in key:
            continue
        text = f"{key.split('/')[-1]} {value:.3f}"
        if key in ci and len(ci[key]) == 2:
            text += f" [{ci[key][0]:.3f}, {ci[key][1]:.3f}]"
        parts.append(text)
    return ", ".join(parts)
