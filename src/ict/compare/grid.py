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
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ict.compare.presets import EvalSpec, Preset
from ict.compare.tuning import (
    EDGES,
    RULES,
    TUNING_DIR,
    TuningSpec,
    add_growth,
    decide,
    tuning_path,
    tuning_record,
    value_name,
)
from ict.compare.warm_start import warm_start
from ict.data import HELDOUT_SPLIT
from ict.errors import ConfigError
from ict.eval import Evaluation
from ict.eval.backends import SamplerFactory
from ict.evidence.endpoints import parse_endpoint
from ict.files import read_json_if_present, read_json_required, write_json_atomic
from ict.models import load_model_and_tokenizer, model_label
from ict.train import TrainConfig, train
from ict.train.evaluation import STEP_EVAL_DIR, step_eval_path, training_evaluation
from ict.train.plan import resolve_device

logger = logging.getLogger("ict.compare")


def cell_dir(out_dir: Path, method: str, seed: int) -> Path:
    return Path(out_dir) / "runs" / f"{method}_seed{seed}"


def cell_state(run_dir: Path, max_steps: int) -> str:
    """'done', 'trained', 'partial' or 'new' (see the module docstring)."""
    if (run_dir / "final_eval.json").exists():
        return "done"
    summary = run_dir / "summary.json"
    if summary.exists() and int(read_json_required(summary).get("steps", 0)) >= max_steps:
        return "trained"
    if (run_dir / "metrics.jsonl").exists():
        return "partial"
    return "new"


def final_evaluation(config, preset: Preset, sampler_factory=None) -> Evaluation:
    """The grid's evaluation of a cell with TrainConfig `config`: the cell's own evaluation
    (ict.train.evaluation: its task, sampling and prompt rendering) with the preset's EvalSpec
    (problems, samples, k, seed; temperature and response budget when the spec sets them) on the
    spec's benchmarks, or the task's held-out split. Every cell, and the start point, with it.
    The split is always the held-out one (`HELDOUT_SPLIT`), whatever split the cells' periodic
    evaluations use (a preset may set `eval_split: validation` for its curves)."""
    spec: EvalSpec = preset.eval
    changes = dict(n=spec.n, k=list(spec.ks), limit=spec.size, seed=spec.seed, split=HELDOUT_SPLIT)
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
    sampler_factory: how every evaluation samples (ict.eval.backends; tests inject one);
    tuning: the tuning stage's mode, overriding the preset's (ict.compare.tuning); tuning_only:
    stop after it; poll_s: seconds between looks at cells other processes hold (`claim`);
    fast: sample with ict.fast when the cells start from a warm start (same samples, less time;
    False: Hugging Face `generate` throughout)."""

    methods: Sequence[str] | None = None
    seeds: Sequence[int] | None = None
    overrides: dict | None = None
    stop_after: int | None = None
    log: Callable[[str], None] = print
    sampler_factory: SamplerFactory | None = None
    tuning: str | None = None  # "per_method" | "shared" | "off"; None: the preset's (off if none)
    tuning_only: bool = False  # stop after the tuning stage (its table in OUT/tuning/tuning.json)
    poll_s: float = 15.0  # how often to look for cells another process is running
    fast: bool = True  # ict.fast for cells that start from an in-memory small model (warm start)


@dataclass
class Cell:
    """One (method, seed) cell of the grid: its TrainConfig, run directory and console tag."""

    method: str
    seed: int
    config: TrainConfig
    run_dir: Path
    tag: str  # "[3/10] entropy seed 0:"
    data_dir: str | None = None  # the preset's local benchmark files (Preset.data_dir)
    own_evaluation: bool = False  # final evaluation: the cell's own periodic one (tuning cells)


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
        if self.model is not None:  # on the cells' device (a GPU grid evaluates there)
            self.model.to(resolve_device(config.device))
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
    sampler_factory). The preset's benchmark files (`data_dir`) go to every cell's training and
    evaluation (Cell.data_dir)."""
    return _run_grid(preset, Path(out_dir), GridOptions(**options))


def _run_grid(preset: Preset, out: Path, grid: GridOptions) -> list[Path]:
    """The grid's steps: plan the cells, prepare the start, the tuning stage (when on), record the
    grid, evaluate the start, run each cell (waiting for cells another process holds); sampling
    through ict.fast when the cells start from a warm start (`GridOptions.fast`)."""
    from ict.fast import fast_path

    cells = plan_cells(preset, out, grid)  # validates every test cell before anything runs
    spec = tuning_spec(preset, grid)  # and the tuning stage, before the start model is made
    with fast_path(grid.fast and preset.warm is not None):
        start = prepare_start(preset, out, grid.log)
        if spec is not None:
            selected = run_tuning(preset, out, spec, start, grid)
            if selected is None or grid.tuning_only:
                return []
            per_method = {m: {spec.param: v} for m, v in selected.items()}
            cells = plan_cells(preset, out, grid, per_method)
        write_grid_record(out, preset, cells, grid)
        if not preset.eval.benchmarks:  # the paper's table (named benchmarks) has no start row
            evaluate_start(cells[0], start, preset, grid)
        run_all(cells, start, preset, grid)
    return [cell.run_dir for cell in cells]


def plan_cells(
    preset: Preset, out: Path, grid: GridOptions, per_method: dict[str, dict] | None = None
) -> list[Cell]:
    """The cells in run order, seed-major (an unfinished grid still has every method for its
    first seeds); their TrainConfigs are validated here, before anything is written.
    `per_method`: TrainConfig fields of each method's cells (the tuning stage's selection)."""
    methods = list(preset.methods if grid.methods is None else grid.methods)
    seeds = list(range(preset.seeds)) if grid.seeds is None else list(grid.seeds)
    if not methods or not seeds:
        raise ConfigError("the grid needs at least one method and one seed")
    pairs = [(m, s) for s in seeds for m in methods]
    return [
        Cell(
            method,
            seed,
            cell_config(preset, method, seed, grid, (per_method or {}).get(method)),
            cell_dir(out, method, seed),
            f"[{index}/{len(pairs)}] {method} seed {seed}:",
            data_dir=preset.data_dir,
        )
        for index, (method, seed) in enumerate(pairs, start=1)
    ]


def cell_config(
    preset: Preset, method: str, seed: int, grid: GridOptions, extra: dict | None = None
) -> TrainConfig:
    """A cell's TrainConfig: the preset's shared and per-method settings, the grid's overrides,
    `extra` (a tuning value, the validation split) and the seed. The grid evaluates every cell
    itself: no per-run before/after held-out evaluation."""
    return TrainConfig(
        **{
            "heldout_eval": False,
            **preset.cell_train(method),
            **(grid.overrides or {}),
            **(extra or {}),
            "seed": seed,
        }
    )


# ---------------------------------------------------------------------------------------------
# The tuning stage (ict.compare.tuning: the rule; here: its cells)
# ---------------------------------------------------------------------------------------------
def tuning_spec(preset: Preset, grid: GridOptions) -> TuningSpec | None:
    """The tuning stage this call runs: the preset's TuningSpec with the grid's mode, or None
    (mode "off", or a preset without one). ConfigError for a mode the preset cannot run, or a
    rule whose needs (tuning seeds, validation problems and samples of the tuning cells, the
    declared primary endpoint) the preset does not meet: before any cell runs."""
    mode = grid.tuning
    if mode == "off" or (mode is None and preset.tuning is None):
        return None
    if preset.tuning is None:
        raise ConfigError(
            f"preset {preset.name!r} declares no tuning grid; --tuning needs a preset with one "
            "(e.g. toy-cot-long) or --tuning off"
        )
    spec = preset.tuning if mode is None else TuningSpec(**{**preset.tuning.__dict__, "mode": mode})
    seeds = list(range(preset.seeds)) if grid.seeds is None else list(grid.seeds)
    spec.validate(seeds)  # the spec alone, before a cell's config is built from it
    methods = list(preset.methods if grid.methods is None else grid.methods)
    configs = [
        tuning_cell(preset, Path("."), spec, m, spec.grid(m)[0], spec.seeds[0], grid).config
        for m in methods
    ]
    spec.validate(
        seeds,
        validation_problems=min(c.eval_size for c in configs),
        validation_samples=min(c.eval_num_samples for c in configs),
        primary_metrics=[parse_endpoint(p).metric for p in preset.primary],
    )
    return spec


def tuning_cell(
    preset: Preset, out: Path, spec: TuningSpec, method: str, value: float, seed: int,
    grid: GridOptions,
) -> Cell:  # fmt: skip
    """The (method, value, tuning seed) cell: evaluated on the validation split, periodically and
    at the end (OUT/tuning/runs/<method>_<param><value>_seed<seed>)."""
    short = "lr" if spec.param == "learning_rate" else spec.param
    extra = {spec.param: value, "eval_split": "validation"}
    if spec.validation_size is not None:
        extra["eval_size"] = spec.validation_size
    if spec.validation_samples is not None:
        extra["eval_num_samples"] = spec.validation_samples
    name = f"{method}_{short}{value_name(value)}_seed{seed}"
    return Cell(
        method, seed, cell_config(preset, method, seed, grid, extra),
        out / TUNING_DIR / "runs" / name, f"[tuning] {method} {short}={value_name(value)} seed {seed}:",
        data_dir=preset.data_dir,
        own_evaluation=True,
    )  # fmt: skip


def checkpoint_results(run_dir: Path) -> list[dict]:
    """A finished cell's evaluations after RL: its periodic ones (eval_steps/, step > 0) and its
    final one when that is not at a periodic step."""
    results = [
        read_json_if_present(p) for p in sorted((run_dir / STEP_EVAL_DIR).glob("step_*.json"))
    ]
    results = [r for r in results if r is not None and int(r.get("step", 0)) > 0]
    final = read_json_if_present(run_dir / "final_eval.json")
    if final is not None and int(final.get("step", -1)) not in {int(r["step"]) for r in results}:
        results.append(final)
    return results


def run_tuning(
    preset: Preset, out: Path, spec: TuningSpec, start: StartPoint, grid: GridOptions
) -> dict[str, float] | None:
    """Train every tuning cell, score each with the rule (`spec.rule`, ict.compare.tuning.RULES)
    and let the rule choose (`decide`); while it names points beyond a grid's edges, add them and
    train their cells. Writes OUT/tuning/tuning.json; returns {method: selected value}, or None
    when stopped early (`stop_after`). Resumable, and shared with other processes through
    claims."""
    methods = list(preset.methods if grid.methods is None else grid.methods)
    rule = RULES[spec.rule]
    grids = {m: list(spec.grid(m)) for m in methods}
    growths = {m: dict.fromkeys(EDGES, 0) for m in methods}
    while True:
        cells = [
            tuning_cell(preset, out, spec, m, v, s, grid)
            for m in methods for v in grids[m] for s in spec.seeds
        ]  # fmt: skip
        run_all(cells, start, preset, grid)
        if any(cell_state(c.run_dir, c.config.max_steps) != "done" for c in cells):
            return None  # stopped early (stop_after): a rerun resumes the stage
        scores: dict[str, dict[float, dict[int, float]]] = {m: {} for m in methods}
        for c in cells:
            value = getattr(c.config, spec.param)
            score = rule.score(checkpoint_results(c.run_dir), spec.metric)
            scores[c.method].setdefault(value, {})[c.seed] = score
        choices = decide(spec, grids, growths, scores)
        growing = {m: c.grow for m, c in choices.items() if c.grow}
        if not growing:
            break
        for m, values in growing.items():
            grids[m], growths[m] = add_growth(grids[m], growths[m], values)
            added = ", ".join(f"{spec.param}={v:.3g}" for v in values)
            grid.log(f"[tuning] {m}: best at the grid's edge; adding {added}")
    write_json_atomic(tuning_path(out), tuning_record(spec, choices, scores))
    selected = {m: c.selected for m, c in choices.items()}
    grid.log(
        "[tuning] selected "
        + ", ".join(f"{m} {spec.param}={value_name(v)}" for m, v in selected.items())
        + f" ({tuning_path(out)})"
    )
    flagged = {id(c): (m if spec.mode == "per_method" else "shared", c) for m, c in choices.items()}
    for name, c in flagged.values():
        if c.at_edge:
            grid.log(
                f"[tuning] {name}: the best region still reaches the grid's "
                f"{' and '.join(c.at_edge)} edge after its growth: the best value may lie beyond"
            )
    return selected


# ---------------------------------------------------------------------------------------------
# Running cells, alone or beside other processes on the same grid directory
# ---------------------------------------------------------------------------------------------
@contextmanager
def claim(run_dir: Path) -> Iterator[bool]:
    """Hold `run_dir` for this process while the block runs: yields True when the claim is
    ours, False when a live process on this machine holds it. The claim is the file
    `.<name>.claim` beside the cell (pid and host); a claim whose process is gone is taken over.
    So several `ict compare` processes can share one grid directory, each running other cells."""
    path = run_dir.parent / f".{run_dir.name}.claim"
    path.parent.mkdir(parents=True, exist_ok=True)
    me = f"{os.getpid()} {socket.gethostname()}"
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            if _held_by_live_process(path):
                yield False
                return
            path.unlink(missing_ok=True)  # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as f:
            f.write(me)
        try:
            yield True
        finally:
            path.unlink(missing_ok=True)
        return
    yield False


def _held_by_live_process(path: Path) -> bool:
    """True when the claim at `path` names a running process of this host (or another host)."""
    try:
        pid, host = path.read_text().split()
    except (OSError, ValueError):
        return True  # being written right now
    if host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_all(cells: Sequence[Cell], start: StartPoint, preset: Preset, grid: GridOptions) -> None:
    """Bring every cell to "done": run those no other process holds, then wait for the rest
    (running one itself when its holder is gone). Returns early only with `stop_after`."""
    pending = list(cells)
    while pending:
        held = []
        for cell in pending:
            if run_cell(cell, start, preset, grid) == "held":
                held.append(cell)
        if grid.stop_after is not None:
            return
        pending = [c for c in held if cell_state(c.run_dir, c.config.max_steps) != "done"]
        if pending:
            grid.log(f"waiting for {len(pending)} cell(s) another process is running")
            time.sleep(grid.poll_s)


def write_grid_record(out: Path, preset: Preset, cells: list[Cell], grid: GridOptions) -> None:
    """OUT/grid.json: the preset's name, the methods and seeds of this call, the shared training
    settings, each method's learning rate (the tuning stage's choice when it ran) and the
    evaluation."""
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "preset": preset.name,
        "methods": list(dict.fromkeys(c.method for c in cells)),
        "seeds": list(dict.fromkeys(c.seed for c in cells)),
        "train": {"heldout_eval": False, **preset.train, **(grid.overrides or {})},
        "learning_rate": {c.method: c.config.learning_rate for c in cells},
        "tuned": tuning_path(out).is_file(),
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
    saved = read_json_if_present(path)
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


def run_cell(cell: Cell, start: StartPoint, preset: Preset, grid: GridOptions) -> str:
    """Bring one cell to "done" (see the module docstring): train or resume it unless it is
    trained, then evaluate it; a cell stopped early by `stop_after` is left to a rerun. Returns
    "done", "stopped" (stop_after) or "held" (another process holds it: `claim`)."""
    if cell_state(cell.run_dir, cell.config.max_steps) == "done":
        grid.log(f"{cell.tag} done, skipped")
        return "done"
    with claim(cell.run_dir) as mine:
        if not mine:
            return "held"
        state = cell_state(cell.run_dir, cell.config.max_steps)  # it may have finished meanwhile
        if state == "done":
            return "done"
        start_heldout(cell, start, grid)
        if state in ("new", "partial") and not train_cell(cell, start, state, grid):
            return "stopped"
        evaluate_cell(cell, preset, grid)
        return "done"


def start_heldout(cell: Cell, start: StartPoint, grid: GridOptions) -> None:
    """RUN/heldout_before.json of a cell with periodic evaluation (`eval_every`): the start
    model under the cell's own evaluation (ict.train.evaluation), so that its step curves start at
    step 0; computed once per grid (`start_result`; the same file as OUT/start_eval.json's when
    the settings agree) and copied into each cell, where the trainer finds it."""
    cfg, target = cell.config, cell.run_dir / "heldout_before.json"
    if not cfg.eval_every or target.exists():
        return
    evaluation = training_evaluation(
        cfg, sampler_factory=grid.sampler_factory, data_dir=cell.data_dir
    )
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
        data_dir=cell.data_dir,
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
    """The cell's final evaluation of its latest checkpoint in RUN/final_eval.json (this marks it
    done): `final_evaluation` for a test cell, the cell's own (periodic) evaluation for a tuning
    cell. When the cell's periodic evaluation after its last step is that same evaluation (same
    tasks and settings, as in toy-cot-long), its result is the final one: the same samples, not
    drawn twice."""
    t0 = time.perf_counter()
    if cell.own_evaluation:
        evaluation = training_evaluation(cell.config, sampler_factory=grid.sampler_factory)
    else:
        evaluation = final_evaluation(cell.config, preset, grid.sampler_factory)
    path, step = cell.run_dir / "final_eval.json", cell.config.max_steps
    last = read_json_if_present(step_eval_path(cell.run_dir, step))
    if evaluation.matches(last):
        result = {**last, "model": cell.run_dir.name}
        write_json_atomic(path, result)
    else:
        model, tokenizer = load_for(cell.config, cell.run_dir)
        result = evaluation.write(path, model, tokenizer, model_label=cell.run_dir.name, step=step)
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
