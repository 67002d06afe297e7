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
Every evaluation is one ict.eval.Evaluation derived from the cell's training config
(ict.train.evaluation): the periodic ones the trainer runs, the cells' final one
(`final_evaluation`: with the preset's EvalSpec) and the start model's under both (computed once
per grid), so the before-RL number and a cell's step-0 number are one evaluation.
Steps of `run_grid`: plan_cells -> write_grid_record -> prepare_start -> evaluate_start ->
run_cell for each cell (start_heldout, train_cell, then evaluate_cell).
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

import torch

from ict.compare.presets import EvalSpec, Preset, using_data_dir
from ict.compare.warm_start import warm_start
from ict.errors import ConfigError
from ict.eval import Evaluation
from ict.eval.backends import SamplerFactory
from ict.files import read_json, write_json_atomic
from ict.models import load_model_and_tokenizer, model_label
from ict.train import TrainConfig, train
from ict.train.evaluation import training_evaluation
from ict.train.trainer import resolve_device

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


def final_evaluation(config, preset: Preset, sampler_factory=None) -> Evaluation:
    """The grid's evaluation of a cell with TrainConfig `config`: the cell's own evaluation
    (ict.train.evaluation: its task, sampling and prompt rendering) with the preset's EvalSpec
    (problems, samples, k, seed; temperature and response budget when the spec sets them) on the
    spec's benchmarks, or the task's held-out split. Every cell, and the start point, with it."""
    spec: EvalSpec = preset.eval
    changes = dict(n=spec.n, k=list(spec.ks), limit=spec.size, seed=spec.seed)
    if spec.temperature is not None:
        changes["temperature"] = spec.temperature
    if spec.max_new_tokens is not None:
        changes["max_new_tokens"] = spec.max_new_tokens
    return training_evaluation(
        config, sampler_factory=sampler_factory, data_dir=preset.data_dir,
        tasks=spec.benchmarks, **changes,
    )  # fmt: skip


@dataclass
class GridOptions:
    """What one `run_grid` call runs; every field is optional.

    methods: default the preset's; seeds: default range(preset.seeds); overrides: TrainConfig
    fields applied to every cell (e.g. max_steps); stop_after: train at most this many steps per
    cell in this call (simulates an interruption; tests); log: takes one line (default print);
    sampler_factory: how every evaluation samples (ict.eval.backends; tests inject one)."""

    methods: Sequence[str] | None = None
    seeds: Sequence[int] | None = None
    overrides: dict | None = None
    stop_after: int | None = None
    log: Callable[[str], None] = print
    sampler_factory: SamplerFactory | None = None


@dataclass
class Cell:
    """One (method, seed) cell of the grid: its TrainConfig, run directory and console tag."""

    method: str
    seed: int
    config: TrainConfig
    run_dir: Path
    tag: str  # "[3/10] entropy seed 0:"


@dataclass
class StartPoint:
    """Where every cell starts: an in-memory model and tokenizer (a supervised warm start; each
    cell trains a copy), or none (each cell loads the preset's `model` itself)."""

    model: Any = None
    tokenizer: Any = None
    name: str | None = None  # the warm start's stable name ("warm start toy-cot/<cache key>")

    def cell_model(self) -> tuple[Any, Any]:
        """(model, tokenizer) to train a cell from: a fresh copy of the start, or (None, None)."""
        if self.model is None:
            return None, None
        return copy.deepcopy(self.model), self.tokenizer

    def start_model(self, config: TrainConfig) -> tuple[Any, Any]:
        """(model, tokenizer) of the start point for an evaluation: the warm start itself (not
        copied: evaluation does not change it) or `config.model` loaded as the trainer loads it."""
        if self.model is not None:
            return self.model, self.tokenizer
        return load_for(config, config.model)

    def label(self, config: TrainConfig) -> str:
        """What the grid's evaluation files call the start model: the warm start's name, or the
        cells' `model` (the same across reruns, so a cached start evaluation is found again)."""
        return self.name or model_label(config.model)


def load_for(config: TrainConfig, source) -> tuple[Any, Any]:
    """(model, tokenizer) of `source` (a model name or a run directory: its latest checkpoint)
    with the dtype and device `config`'s cells train with."""
    return load_model_and_tokenizer(
        source, dtype=getattr(torch, config.dtype), device=resolve_device(config.device)
    )


def run_grid(preset: Preset, out_dir: str | Path, **options) -> list[Path]:
    """Train and evaluate every (method, seed) cell not yet done; returns the cell directories.

    options: the fields of GridOptions (methods, seeds, overrides, stop_after, log,
    sampler_factory). The preset's benchmark files (`data_dir`) are visible to training and
    evaluation while it runs."""
    grid = GridOptions(**options)
    with using_data_dir(preset.data_dir):
        return _run_grid(preset, Path(out_dir), grid)


def _run_grid(preset: Preset, out: Path, grid: GridOptions) -> list[Path]:
    """The grid's steps: plan the cells, record the grid, prepare the start, run each cell."""
    cells = plan_cells(preset, out, grid)
    write_grid_record(out, preset, cells, grid)
    start = prepare_start(preset, out, grid.log)
    if not preset.eval.benchmarks:  # the paper's table (named benchmarks) has no start row
        evaluate_start(cells[0], start, preset, grid)
    for cell in cells:
        run_cell(cell, start, preset, grid)
    return [cell.run_dir for cell in cells]


def plan_cells(preset: Preset, out: Path, grid: GridOptions) -> list[Cell]:
    """The cells in run order, seed-major (an unfinished grid still has every method for its
    first seeds); their TrainConfigs are validated here, before anything is written."""
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
    """The cells' start point: the preset's supervised warm start (cached; OUT/warm_start.json
    records it), or the preset's `model`, which each cell loads itself."""
    if preset.warm is None:
        return StartPoint()
    t0 = time.perf_counter()
    base, tokenizer, info = warm_start(preset.task, preset.warm)
    log(
        f"warm start on {preset.task}: {'cached' if info['cached'] else 'trained'} ({info['steps']} "
        f"steps, sampled accuracy {info['accuracy']:.2f}, {time.perf_counter() - t0:.0f} s) "
        f"{info['path']}"
    )
    write_json_atomic(out / "warm_start.json", info)
    path = Path(info["path"])
    return StartPoint(base, tokenizer, f"warm start {path.parent.name}/{path.name}")


def start_result(
    evaluation: Evaluation, start: StartPoint, config: TrainConfig, out: Path, log
) -> dict:
    """`evaluation` of the start model, once per grid and evaluation: computed into
    OUT/start_evals/<hash of the model, tasks and settings>.json, read from there after."""
    label = start.label(config)
    path = out / "start_evals" / f"{evaluation.key(label)}.json"
    saved = read_json(path)
    if evaluation.matches(saved, label):
        return saved
    model, tokenizer = start.start_model(config)
    result = evaluation.write(path, model, tokenizer, model_label=label, step=0)
    log(f"start point: eval {eval_line(result)} ({path.name}, {result['seconds']:.0f} s)")
    return result


def evaluate_start(cell: Cell, start: StartPoint, preset: Preset, grid: GridOptions) -> None:
    """OUT/start_eval.json: the start model under the cells' final evaluation (the report's
    "before RL")."""
    out = cell.run_dir.parent.parent
    evaluation = final_evaluation(cell.config, preset, grid.sampler_factory)
    result = start_result(evaluation, start, cell.config, out, grid.log)
    write_json_atomic(out / "start_eval.json", result)


def run_cell(cell: Cell, start: StartPoint, preset: Preset, grid: GridOptions) -> None:
    """Bring one cell to "done" (see the module docstring): train or resume it unless it is
    trained, then evaluate it; a cell stopped early by `stop_after` is left to a rerun."""
    state = cell_state(cell.run_dir, cell.config.max_steps)
    if state == "done":
        grid.log(f"{cell.tag} done, skipped")
        return
    start_heldout(cell, start, grid)
    if state in ("new", "partial") and not train_cell(cell, start, state, grid):
        return
    evaluate_cell(cell, preset, grid)


def start_heldout(cell: Cell, start: StartPoint, grid: GridOptions) -> None:
    """RUN/heldout_before.json of a cell with periodic evaluation (`eval_every`): the start
    model under the cell's own evaluation (ict.train.evaluation), so that its step curves start at
    step 0; computed once per grid (`start_result`; the same file as OUT/start_eval.json's when
    the settings agree) and copied into each cell, where the trainer finds it."""
    cfg, target = cell.config, cell.run_dir / "heldout_before.json"
    if not cfg.eval_every or target.exists():
        return
    evaluation = training_evaluation(cfg, sampler_factory=grid.sampler_factory)
    result = start_result(evaluation, start, cfg, cell.run_dir.parent.parent, grid.log)
    write_json_atomic(target, result)


def train_cell(cell: Cell, start: StartPoint, state: str, grid: GridOptions) -> bool:
    """Train a "new" cell from the start point or resume a "partial" one; False when stopped
    early (stop_after)."""
    model, tokenizer = start.cell_model()
    t0 = time.perf_counter()
    summary = train(
        cell.config.replace(output_dir=str(cell.run_dir)),
        run_dir=cell.run_dir,
        resume=state == "partial",
        model=model,
        tokenizer=tokenizer,
        stop_after=grid.stop_after,
        sampler_factory=grid.sampler_factory,
    )
    if not summary:
        grid.log(f"{cell.tag} train stopped early (stop_after={grid.stop_after}); rerun to resume")
        return False
    grid.log(
        f"{cell.tag} train {'resumed, ' if state == 'partial' else ''}{cell.config.max_steps} "
        f"steps {time.perf_counter() - t0:.0f} s"
    )
    return True


def evaluate_cell(cell: Cell, preset: Preset, grid: GridOptions) -> None:
    """The cell's final evaluation (`final_evaluation` of its latest checkpoint) in
    RUN/final_eval.json (this marks it done)."""
    t0 = time.perf_counter()
    evaluation = final_evaluation(cell.config, preset, grid.sampler_factory)
    model, tokenizer = load_for(cell.config, cell.run_dir)
    result = evaluation.write(
        cell.run_dir / "final_eval.json", model, tokenizer,
        model_label=cell.run_dir.name, step=cell.config.max_steps,
    )  # fmt: skip
    grid.log(f"{cell.tag} eval {eval_line(result)} {time.perf_counter() - t0:.0f} s")


def eval_line(result: dict) -> str:
    """'pass@1 0.610 [0.520, 0.700], pass@4 ...' of an evaluation result (95% CI over problems;
    the benchmark named when there are several)."""
    parts = []
    for label, m in result["benchmarks"].items():
        name = f"{label} " if len(result["benchmarks"]) > 1 else ""
        for k in result["settings"]["k"]:
            low, high = m[f"pass@{k}_ci95"]
            parts.append(f"{name}pass@{k} {m[f'pass@{k}']:.3f} [{low:.3f}, {high:.3f}]")
    return ", ".join(parts)
