"""Run a grid of methods x seeds with identical data, budget and evaluation; resumable.

Cell RUN = OUT/runs/<method>_seed<seed>. A cell's state is read from its files:
  done     final_eval.json exists                       -> never rerun
  trained  summary.json says max_steps were done        -> only the final evaluation runs
  partial  metrics.jsonl exists (interrupted)           -> resumed from its latest checkpoint
  new      nothing yet                                  -> trained from the shared start
Every cell of a seed sees the same prompts in the same order (same data_seed and seed); every
cell starts from the same weights and is evaluated on the same held-out problems and samples.

Every task is an ict.data spec (`preset.task`, the toy tasks included): the trainer loads its
problems, the evaluation its held-out split. What differs between presets is the start point
(`StartPoint`): the preset's `model`, or a supervised warm start in memory (`preset.warm`).
Steps of `run_grid`: plan_cells -> write_grid_record -> prepare_start -> run_cell for each cell
(train_cell, then evaluate_cell).
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ict.compare.presets import EvalSpec, Preset
from ict.errors import ConfigError
from ict.files import write_json_atomic

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


def evaluate_in_memory(model, tokenizer, preset: Preset) -> dict:
    """pass@k of an in-memory `model` on the held-out problems of the preset's task (ict.data,
    split "eval"), sampled with `generate` from each item's prompt and scored by `item.score`,
    with a bootstrap interval over problems and the per-problem counts (`per_problem_record`).
    The label is the task's name as a file stem ("toy:add" -> "toy_add")."""
    import torch

    from ict.data import file_stem, load_task
    from ict.eval.metrics import pass_at_k_per_problem
    from ict.evidence.bootstrap import bootstrap_ci
    from ict.generation import generate
    from ict.train import TrainConfig

    spec: EvalSpec = preset.eval
    trained_on = TrainConfig(**preset.train)
    items = load_task(preset.task, split="eval", size=spec.size)
    label = file_stem(items[0].task)
    model.eval()
    with torch.no_grad():
        rollout = generate(
            model,
            tokenizer,
            [item.prompt for item in items],
            num_samples=spec.n,
            temperature=spec.temperature,
            max_new_tokens=trained_on.max_new_tokens,
            batch_size=256,
            seed=spec.seed,
        )
    correct = np.zeros(len(items), dtype=int)
    for i, text in zip(rollout.prompt_index.tolist(), rollout.texts, strict=True):
        correct[i] += _is_correct(items[i].score(text))
    metrics, intervals = {}, {}
    for k in spec.ks:
        per_problem = pass_at_k_per_problem([spec.n] * len(items), correct, k)
        metrics[f"eval/{label}/pass@{k}"] = float(per_problem.mean())
        intervals[f"eval/{label}/pass@{k}"] = bootstrap_ci(per_problem, seed=spec.seed)
    return {
        "metrics": metrics,
        "bootstrap_95": intervals,
        "per_problem": {
            label: per_problem_record([it.id for it in items], [spec.n] * len(items), correct)
        },
    }


evaluate_toy = evaluate_in_memory  # its old name


def _is_correct(score) -> int:
    """1 for a right answer: a Verdict's `correct`, or a number score of 1.0 (toy scorers)."""
    if hasattr(score, "correct"):
        return int(bool(score.correct))
    return int(float(score) >= 1.0)


def evaluate_task(run_dir: Path | None, preset: Preset) -> dict:
    """pass@k of a finished cell's checkpoint on its task via ict.eval, with per-problem counts;
    `run_dir` None: the cells' start model (the preset's `model`, default the embedded one)."""
    from ict.eval import runner
    from ict.eval.scoring import ItemScorer
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
    # each item's own scorer, as training and ict.eval.run_eval score (ict.eval.scoring)
    sampler, verifier = runner.hf_sampler(model, tokenizer, settings), default_verifier()
    scorer = ItemScorer(verifier)
    metrics, intervals, per_problem = {}, {}, {}
    try:
        for label, bench_items in items.items():
            records = runner.evaluate_benchmark(label, bench_items, sampler, scorer, settings)
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


@dataclass
class GridOptions:
    """What one `run_grid` call runs; every field is optional.

    methods: default the preset's; seeds: default range(preset.seeds); overrides: TrainConfig
    fields applied to every cell (e.g. max_steps); stop_after: train at most this many steps per
    cell in this call (simulates an interruption; tests); log: takes one line (default print);
    fast: sample with ict.fast when the cells start from a warm start (same samples, less time;
    False: Hugging Face `generate` throughout)."""

    methods: Sequence[str] | None = None
    seeds: Sequence[int] | None = None
    overrides: dict | None = None
    stop_after: int | None = None
    log: Callable[[str], None] = print
    fast: bool = True  # ict.fast for cells that start from an in-memory small model (warm start)


@dataclass
class Cell:
    """One (method, seed) cell of the grid: its TrainConfig, run directory and console tag."""

    method: str
    seed: int
    config: Any  # ict.train.TrainConfig
    run_dir: Path
    tag: str  # "[3/10] entropy seed 0:"


@dataclass
class StartPoint:
    """Where every cell starts, and so how a cell's checkpoint is sampled for its evaluation:

    - an in-memory model and tokenizer (a supervised warm start): each cell trains a copy, and its
      checkpoint is evaluated with that tokenizer (`evaluate_in_memory`);
    - none: each cell loads the preset's `model` itself and is evaluated by ict.eval
      (`evaluate_task`)."""

    model: Any = None
    tokenizer: Any = None

    def cell_model(self) -> tuple[Any, Any]:
        """(model, tokenizer) to train a cell from: a fresh copy of the start, or (None, None)."""
        if self.model is None:
            return None, None
        return copy.deepcopy(self.model), self.tokenizer

    def start_model(self, config) -> tuple[Any, Any]:
        """(model, tokenizer) of the start point for an evaluation: the warm start itself (not
        copied: evaluation does not change it) or `config.model` loaded as the trainer loads it."""
        if self.model is not None:
            return self.model, self.tokenizer
        import torch

        from ict.models import ensure_pad_token, load_model_and_tokenizer
        from ict.train.trainer import resolve_device

        model, tokenizer = load_model_and_tokenizer(
            config.model, dtype=getattr(torch, config.dtype), device=resolve_device(config.device)
        )
        if tokenizer.pad_token_id is None:
            ensure_pad_token(tokenizer)
        return model, tokenizer

    def evaluate(self, run_dir: Path, preset: Preset) -> dict:
        """The final evaluation of a trained cell (its latest checkpoint)."""
        if self.model is None:
            return evaluate_task(run_dir, preset)
        from ict.files import latest_checkpoint

        trained = type(self.model).from_pretrained(latest_checkpoint(run_dir))
        return evaluate_in_memory(trained, self.tokenizer, preset)


def run_grid(preset: Preset, out_dir: str | Path, **options) -> list[Path]:
    """Train and evaluate every (method, seed) cell not yet done; returns the cell directories.

    options: the fields of GridOptions (methods, seeds, overrides, stop_after, log). The preset's
    benchmark files (`data_dir`) are visible to training and evaluation while it runs."""
    from ict.compare.presets import using_data_dir

    grid = GridOptions(**options)
    with using_data_dir(preset.data_dir):
        return _run_grid(preset, Path(out_dir), grid)


def _run_grid(preset: Preset, out: Path, grid: GridOptions) -> list[Path]:
    """The grid's steps: plan the cells, record the grid, prepare the start, run each cell."""
    from ict.fast import fast_path

    cells = plan_cells(preset, out, grid)
    write_grid_record(out, preset, cells, grid)
    with fast_path(grid.fast and preset.warm is not None):
        start = prepare_start(preset, out, grid.log)
        for cell in cells:
            run_cell(cell, start, preset, grid)
    return [cell.run_dir for cell in cells]


def plan_cells(preset: Preset, out: Path, grid: GridOptions) -> list[Cell]:
    """The cells in run order, seed-major (an unfinished grid still has every method for its
    first seeds); their TrainConfigs are validated here, before anything is written."""
    from ict.train import TrainConfig

    methods = list(preset.methods if grid.methods is None else grid.methods)
    seeds = list(range(preset.seeds)) if grid.seeds is None else list(grid.seeds)
    if not methods or not seeds:
        raise ConfigError("the grid needs at least one method and one seed")
    pairs = [(m, s) for s in seeds for m in methods]
    return [
        Cell(
            method,
            seed,
            # the grid evaluates every cell itself: no per-run before/after held-out evaluation
            TrainConfig(
                **{
                    "heldout_eval": False,
                    **preset.cell_train(method),
                    **(grid.overrides or {}),
                    "seed": seed,
                }
            ),
            cell_dir(out, method, seed),
            f"[{index}/{len(pairs)}] {method} seed {seed}:",
        )
        for index, (method, seed) in enumerate(pairs, start=1)
    ]


def write_grid_record(out: Path, preset: Preset, cells: list[Cell], grid: GridOptions) -> None:
    """OUT/grid.json: the preset's name, the methods and seeds of this call, the shared training
    settings and the evaluation."""
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "preset": preset.name,
        "methods": list(dict.fromkeys(c.method for c in cells)),
        "seeds": list(dict.fromkeys(c.seed for c in cells)),
        "train": {"heldout_eval": False, **preset.train, **(grid.overrides or {})},
        "eval": preset.eval.__dict__,
    }
    write_json_atomic(out / "grid.json", record)


def prepare_start(preset: Preset, out: Path, log: Callable[[str], None]) -> StartPoint:
    """The cells' start point, with its held-out evaluation once per grid: the warm start's in
    OUT/warm_start.json, a task preset's start model in OUT/start_eval.json (not for named
    benchmarks: the paper's table has no start row)."""
    if preset.warm is not None:
        return _warm_start(preset, out, log)
    if not preset.eval.benchmarks and not (out / "start_eval.json").exists():
        t0 = time.perf_counter()
        result = evaluate_task(None, preset)
        write_json_atomic(out / "start_eval.json", result)
        log(f"start point: eval {eval_line(result)} {time.perf_counter() - t0:.0f} s")
    return StartPoint()


def _warm_start(preset: Preset, out: Path, log: Callable[[str], None]) -> StartPoint:
    """The supervised warm start on the preset's task (cached), its held-out pass@k recorded."""
    from ict.compare.warm_start import warm_start

    t0 = time.perf_counter()
    base, tokenizer, info = warm_start(preset.task, preset.warm)
    log(
        f"warm start on {preset.task}: {'cached' if info['cached'] else 'trained'} ({info['steps']} "
        f"steps, sampled accuracy {info['accuracy']:.2f}, {time.perf_counter() - t0:.0f} s) "
        f"{info['path']}"
    )
    if "eval" not in info:  # the start point's held-out pass@k, once per grid
        info["eval"] = evaluate_in_memory(base, tokenizer, preset)
    write_json_atomic(out / "warm_start.json", info)
    return StartPoint(base, tokenizer)


def run_cell(cell: Cell, start: StartPoint, preset: Preset, grid: GridOptions) -> None:
    """Bring one cell to "done" (see the module docstring): train or resume it unless it is
    trained, then evaluate it; a cell stopped early by `stop_after` is left to a rerun."""
    state = cell_state(cell.run_dir, cell.config.max_steps)
    if state == "done":
        grid.log(f"{cell.tag} done, skipped")
        return
    start_heldout(cell, start, grid.log)
    if state in ("new", "partial") and not train_cell(cell, start, state, grid):
        return
    evaluate_cell(cell, start, preset, grid.log)


def start_heldout(cell: Cell, start: StartPoint, log: Callable[[str], None]) -> None:
    """RUN/heldout_before.json of a cell with periodic evaluation (`eval_every`): the start
    model's held-out evaluation with the cell's settings (ict.train.heldout, the schema of the
    step files), so that the step curves start at step 0. Computed once per grid and settings
    (OUT/start_heldout/<hash>.json) and copied into each cell; the trainer reuses the file when
    `heldout_eval` is on, instead of evaluating the same start model in every cell."""
    import hashlib

    from ict.train.heldout import heldout_settings, load_result, write_heldout_eval
    from ict.train.problems import task_spec

    cfg, target = cell.config, cell.run_dir / "heldout_before.json"
    if not cfg.eval_every or target.exists():
        return
    from ict.models import model_label

    label = model_label(cfg.model, start.model)  # as the trainer labels the cell's model
    settings = json.dumps([task_spec(cfg), heldout_settings(cfg, label).__dict__], default=str)
    key = hashlib.sha256(settings.encode()).hexdigest()[:16]
    cache = cell.run_dir.parent.parent / "start_heldout" / f"{key}.json"
    result = load_result(cache)
    if result is None:
        model, tokenizer = start.start_model(cfg)
        result = write_heldout_eval(cache, model, tokenizer, cfg, model_label=label, step=0)
        s = result["summary"]
        log(
            f"start point: step-0 held-out pass@1 {s['pass@1']:.3f} ({cache.name}, {result['seconds']:.0f} s)"
        )
    write_json_atomic(target, result)


def train_cell(cell: Cell, start: StartPoint, state: str, grid: GridOptions) -> bool:
    """Train a "new" cell from the start point or resume a "partial" one; False when stopped
    early (stop_after)."""
    from ict.train import train

    model, tokenizer = start.cell_model()
    t0 = time.perf_counter()
    summary = train(
        cell.config.replace(output_dir=str(cell.run_dir)),
        run_dir=cell.run_dir,
        resume=state == "partial",
        model=model,
        tokenizer=tokenizer,
        stop_after=grid.stop_after,
    )
    if not summary:
        grid.log(f"{cell.tag} train stopped early (stop_after={grid.stop_after}); rerun to resume")
        return False
    grid.log(
        f"{cell.tag} train {'resumed, ' if state == 'partial' else ''}{cell.config.max_steps} "
        f"steps {time.perf_counter() - t0:.0f} s"
    )
    return True


def evaluate_cell(cell: Cell, start: StartPoint, preset: Preset, log: Callable[[str], None]):
    """The cell's final evaluation with its settings, in RUN/final_eval.json (this marks it done)."""
    t0 = time.perf_counter()
    result = start.evaluate(cell.run_dir, preset)
    result["settings"] = {
        "problems": preset.eval.size,
        "samples_per_problem": preset.eval.n,
        "temperature": preset.eval.temperature,
        "seed": preset.eval.seed,
    }
    write_json_atomic(cell.run_dir / "final_eval.json", result)
    log(f"{cell.tag} eval {eval_line(result)} {time.perf_counter() - t0:.0f} s")


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
