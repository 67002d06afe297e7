"""Cells per hour of a small study through today's path and ict.fast's, side by side in one run.

A study is `ict compare --preset toy-cot-long`: for each (method, seed) cell the grid trains 150
GRPO-family steps (4 prompts x 8 samples, 52-token chains, 2 updates per step), evaluates 32
held-out problems x 64 samples every 50 steps and evaluates the trained cell once more
(final_eval.json). This benchmark runs the grid's own steps (`plan_cells`, `prepare_start`,
`run_cell`) for each cell twice, once with Hugging Face `generate` (`fast=False`, today's path)
and once with the fast path (`ict.fast`, what `ict compare` uses for these presets), the two runs
of a cell back to back with alternating order, and prints:
  - cells per hour of each path (3600 / mean seconds per cell: training, periodic and final
    evaluations, the cell's files) and their ratio, wall clock and process CPU time;
  - where a cell's time goes (rollout with its rewards, statistics, update, periodic evaluation,
    final evaluation, the rest: checkpoints, samples, metrics, copies), wall and CPU time, summed
    over the cells;
  - the per-study start (warm start from its cache, the start point's evaluations), once per path;
  - whether the two paths wrote the same results: every metrics.jsonl number but times and
    throughputs, every eval_steps/*.json and final_eval.json but its seconds and date.

The exploration study's cell (`--studies explore`: toy-cot-explore, one seed, 300 steps at
temperature 1.5, validation evaluations of 128 x 32 every 50 steps, the final one of 512 x 32 held
out) runs through the fast path twice, once with today's evaluation (`EvalSettings.sampler`
"chunked": ict.generation in chunks of the generation batch) and once with the batched one
(ict.fast.batched, the default), the two back to back in alternating order, and prints CPU
seconds per cell and per evaluation of each, the ratio of cells per CPU hour and of evaluations
per CPU hour (batched / today), whether training was the same on both (it must be: only the
evaluations' samples differ) and each path's pass@k.

  OMP_NUM_THREADS=1 python benchmarks/study_throughput.py                    # both studies
  OMP_NUM_THREADS=1 python benchmarks/study_throughput.py --studies explore  # the new cell only
  OMP_NUM_THREADS=1 python benchmarks/study_throughput.py --steps 50 --methods grpo ict entropy
  python benchmarks/study_throughput.py --quick     # tiny warm start, 3 steps (the test runs it)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402

PATHS = ("today", "fast")
PHASES = ("rollout", "statistics", "update", "periodic_eval", "final_eval", "other")
VOLATILE = ("time/", "throughput/")  # metrics that time the run, not its results


def quick_preset():
    """toy-cot-long's settings (4 prompts x 8, 2 updates per step, periodic evaluation) on sums of
    0..2 with a tiny warm start about half right (mixed rewards: the updates run), 3 steps."""
    import dataclasses

    from ict.compare.presets import EvalSpec, get_preset
    from ict.compare.warm_start import WarmStart

    preset = get_preset("toy-cot-long")
    preset.warm = WarmStart(
        hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_steps=50,
        check_every=25, batch_size=16, learning_rate=1e-2, target_accuracy=0.3,
    )  # fmt: skip
    preset.train.update(
        task="toy:add", task_config={"max_a": 2, "max_b": 2}, max_new_tokens=8, max_steps=3,
        eval_every=2, eval_size=3, eval_num_samples=8, save_every=2, log_samples_every=2,
    )  # fmt: skip
    preset.eval = dataclasses.replace(EvalSpec(size=3, n=8, ks=(1, 8)))
    return preset


class Timers:
    """Wall and process CPU seconds spent in the grid's phases, by name, while installed."""

    def __init__(self):
        self.wall = dict.fromkeys(PHASES[:-1], 0.0)
        self.cpu = dict.fromkeys(PHASES[:-1], 0.0)
        self._undo = []

    def wrap(self, owner, attr: str, name: str):
        original = getattr(owner, attr)

        def timed(*a, **k):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return original(*a, **k)
            finally:
                self.wall[name] += time.perf_counter() - t0
                self.cpu[name] += time.process_time() - c0

        setattr(owner, attr, timed)
        self._undo.append((owner, attr, original))

    def install(self):
        """The step's three phases (where ict.train.trainer and the step service ict.train.step
        bind them at import) and the grid's two evaluations."""
        import ict.train.step as step
        import ict.train.trainer as trainer
        from ict.compare import grid
        from ict.train.trainer import Trainer

        self.wrap(trainer, "collect_rollout", "rollout")
        self.wrap(step, "old_policy_pass", "statistics")
        self.wrap(step, "update_policy", "update")
        self.wrap(Trainer, "_evaluate", "periodic_eval")
        self.wrap(grid, "evaluate_cell", "final_eval")

    def restore(self):
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)


def run_cell_timed(preset, out: Path, method: str, seed: int, steps: int | None, fast: bool):
    """One cell through the grid's steps on one path; returns its record (seconds, phases)."""
    from ict.compare import grid
    from ict.fast import fast_path

    options = grid.GridOptions(
        methods=[method], seeds=[seed], overrides={"max_steps": steps} if steps else None,
        log=lambda line: None, fast=fast,
    )  # fmt: skip
    cells = grid.plan_cells(preset, out, options)
    timers = Timers()
    timers.install()
    try:
        with fast_path(fast):
            start = STARTS[(id(preset), fast)]
            t0, c0 = time.perf_counter(), time.process_time()
            grid.run_cell(cells[0], start, preset, options)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        timers.restore()
    run_dir = cells[0].run_dir
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    phases = {**timers.wall, "other": wall - sum(timers.wall.values())}
    cpu_phases = {**timers.cpu, "other": cpu - sum(timers.cpu.values())}
    return {"method": method, "seed": seed, "wall_s": wall, "cpu_s": cpu, "phases": phases,
            "cpu_phases": cpu_phases,
            "run_dir": str(run_dir), "steps": len(rows)}  # fmt: skip


STARTS: dict = {}
EVAL_PATHS = ("chunked", "batched")  # the explore study's two evaluations (EvalSettings.sampler)


def explore_preset(quick: bool):
    """toy-cot-explore (one seed through its own settings), or the quick preset at its
    temperature 1.5 with evaluations of 16 x 8 (periodic) and 24 x 8 (final)."""
    import dataclasses

    from ict.compare.presets import get_preset

    if not quick:
        return get_preset("toy-cot-explore")
    preset = quick_preset()
    preset.name = "toy-cot-explore (--quick)"
    preset.train.update(temperature=1.5, eval_size=16, eval_split="validation")
    preset.eval = dataclasses.replace(preset.eval, size=24)
    return preset


class EvalPath:
    """While installed, every training evaluation (ict.train.evaluation.eval_settings: the
    trainer's periodic ones, the grid's start and final ones) samples through `path`."""

    def __init__(self, path: str):
        self.path, self._original = path, None

    def __enter__(self):
        import ict.train.evaluation as evaluation

        original = self._original = evaluation.eval_settings
        path = self.path
        evaluation.eval_settings = lambda config, **ch: original(config, **{"sampler": path, **ch})
        return self

    def __exit__(self, *exc):
        import ict.train.evaluation as evaluation

        evaluation.eval_settings = self._original


def final_pass(run_dir: Path) -> dict:
    """The final evaluation's pass@k numbers of a cell."""
    result = json.loads((run_dir / "final_eval.json").read_text())
    (bench,) = result["benchmarks"].values()
    return {k: v for k, v in bench.items() if k.startswith("pass@") and not k.endswith("ci95")}


def explore_study(a, out: Path) -> dict:
    """The exploration study's cell through today's evaluation and the batched one (module
    docstring); prints its tables, returns its record."""
    preset = explore_preset(a.quick)
    from ict.compare.warm_start import warm_start

    warm_start(preset.task, preset.warm)  # into the cache if missing (not timed)
    starts = {}
    for path in EVAL_PATHS:
        with EvalPath(path):
            c0 = time.process_time()
            starts[path] = prepare(preset, out / path, True, ["grpo"], a.steps)
            starts[path]["cpu_s"] = time.process_time() - c0
    cells = []
    for index, seed in enumerate(range(a.seeds)):
        order = EVAL_PATHS if index % 2 == 0 else EVAL_PATHS[::-1]
        pair = {}
        for path in order:
            with EvalPath(path):
                pair[path] = run_cell_timed(preset, out / path, "grpo", seed, a.steps, True)
            pair[path]["pass"] = final_pass(Path(pair[path]["run_dir"]))
            evals = sorted((Path(pair[path]["run_dir"]) / "eval_steps").glob("*.json"))
            pair[path]["evaluations"] = len(evals) + 1  # the periodic ones and the final one
            print(
                f"explore grpo seed {seed} [{path} evaluation]: {pair[path]['cpu_s']:.1f} s CPU",
                flush=True,
            )
        training = [
            [
                {k: v for k, v in row.items() if not k.startswith("eval/")}
                for row in results_of(Path(pair[p]["run_dir"]))["metrics"]
            ]
            for p in EVAL_PATHS
        ]  # every training number (the periodic evaluations' numbers differ: other samples)
        pair["same_training"] = training[0] == training[1]
        cells.append(pair)
    summary = {}
    for path in EVAL_PATHS:
        cpu = sum(c[path]["cpu_s"] for c in cells) / len(cells)
        ev = sum(c[path]["cpu_phases"]["periodic_eval"] + c[path]["cpu_phases"]["final_eval"]
                 for c in cells)  # fmt: skip
        count = sum(c[path]["evaluations"] for c in cells)
        summary[path] = {
            "cpu_s_per_cell": cpu, "cells_per_cpu_hour": 3600 / cpu,
            "eval_cpu_s": ev, "evaluations": count,
            "evaluations_per_cpu_hour": 3600 * count / max(ev, 1e-9),
            "cpu_phases": {p: sum(c[path]["cpu_phases"][p] for c in cells) for p in PHASES},
            "start_cpu_s": starts[path]["cpu_s"],
        }  # fmt: skip
    b, t = summary["batched"], summary["chunked"]
    record = {
        "preset": preset.name, "seeds": a.seeds, "steps": cells[0]["batched"]["steps"],
        "cells": cells, "summary": summary,
        "cell_ratio": b["cells_per_cpu_hour"] / t["cells_per_cpu_hour"],
        "eval_ratio": b["evaluations_per_cpu_hour"] / t["evaluations_per_cpu_hour"],
        "same_training": all(c["same_training"] for c in cells),
    }  # fmt: skip
    print(f"\nstudy: {preset.name}, grpo, {a.seeds} seed(s), {record['steps']} steps per cell "
          f"(fast path), today's evaluation (chunked) and the batched one\n")  # fmt: skip
    headers = ["evaluation", "CPU s / cell", "cells / CPU hour", "evaluations / cell",
               "evaluation CPU s / cell", "evaluations / CPU hour", "study start CPU s"]  # fmt: skip
    rows = [
        [p, f"{summary[p]['cpu_s_per_cell']:.1f}", f"{summary[p]['cells_per_cpu_hour']:.1f}",
         f"{summary[p]['evaluations'] / len(cells):.0f}",
         f"{summary[p]['eval_cpu_s'] / len(cells):.1f}",
         f"{summary[p]['evaluations_per_cpu_hour']:.1f}", f"{summary[p]['start_cpu_s']:.1f}"]
        for p in EVAL_PATHS
    ]  # fmt: skip
    print(_common.table(headers, rows))
    print(f"\ncells per CPU hour, batched / today: {record['cell_ratio']:.2f}x")
    print(f"evaluations per CPU hour, batched / today: {record['eval_ratio']:.2f}x")
    print(f"same training on both: {'yes' if record['same_training'] else 'NO'}")
    for p in EVAL_PATHS:
        values = ", ".join(f"{k} {v:.4f}" for k, v in cells[0][p]["pass"].items())
        print(f"final evaluation, {p}: {values}")
    return record


def prepare(preset, out: Path, fast: bool, methods: list[str], steps: int | None) -> dict:
    """The grid's per-study start on one path (warm start from its cache, the start point's
    evaluations: warm_start.json and the step-0 held-out file, as `run_grid` makes them)."""
    from ict.compare import grid
    from ict.fast import fast_path

    t0 = time.perf_counter()
    with fast_path(fast):
        start = grid.prepare_start(preset, out, lambda line: None)
        options = grid.GridOptions(
            methods=methods[:1], seeds=[0], overrides={"max_steps": steps} if steps else None,
            log=lambda line: None, fast=fast,
        )  # fmt: skip
        first = grid.plan_cells(preset, out, options)[0]
        grid.evaluate_start(first, start, preset, options)  # OUT/start_eval.json, once per grid
        grid.start_heldout(first, start, options)  # the cells' step-0 evaluation, once per grid
    STARTS[(id(preset), fast)] = start
    return {"wall_s": time.perf_counter() - t0}


def results_of(run_dir: Path) -> dict:
    """What a cell's results are, without its timings."""
    metrics = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        metrics.append({k: v for k, v in row.items() if not k.startswith(VOLATILE)})
    from ict.eval.runner import without_when

    evals = {}
    for path in sorted((run_dir / "eval_steps").glob("*.json")) + [run_dir / "final_eval.json"]:
        evals[path.name] = without_when(json.loads(path.read_text()))
    return {"metrics": metrics, "evals": evals}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--methods", nargs="+", default=None, help="default grpo ict")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 (default 1)")
    parser.add_argument("--steps", type=int, default=None, help="default: the preset's 150")
    parser.add_argument("--out", default=None, help="grid folders (default: a temp dir)")
    parser.add_argument(
        "--studies", nargs="+", choices=("long", "explore"), default=["long", "explore"],
        help="long: toy-cot-long through today's path and the fast one; explore: the "
        "toy-cot-explore cell through today's evaluation and the batched one (default both)",
    )  # fmt: skip
    parser.add_argument("--json", default=None)
    a = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from ict.compare.presets import get_preset

    if a.quick:
        os.environ.setdefault("ICT_CACHE", tempfile.mkdtemp(prefix="ict_cache_"))
        preset = quick_preset()
    else:
        preset = get_preset("toy-cot-long")
    methods = a.methods or ["grpo", "ict"]
    out = Path(a.out or tempfile.mkdtemp(prefix="ict_study_"))
    info = _common.machine()
    explore = explore_study(a, out / "explore") if "explore" in a.studies else None
    if "long" not in a.studies:
        info["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        print(f"\nmachine: {_common.describe_machine(info)}; load average at the end "
              f"{info['load_average_end'][0]:.2f}")  # fmt: skip
        if a.json:
            Path(a.json).write_text(json.dumps({"machine": info, "explore": explore}, indent=1))
        return 0
    from ict.compare.warm_start import warm_start

    warm_start(
        preset.task, preset.warm
    )  # into the cache if missing (not timed): both paths load it
    starts = {path: prepare(preset, out / path, path == "fast", methods, a.steps) for path in PATHS}
    cells = []
    for index, (seed, method) in enumerate((s, m) for s in range(a.seeds) for m in methods):
        order = PATHS if index % 2 == 0 else PATHS[::-1]
        pair = {}
        for path in order:
            pair[path] = run_cell_timed(preset, out / path, method, seed, a.steps, path == "fast")
            print(
                f"{method} seed {seed} [{path}]: {pair[path]['wall_s']:.1f} s wall, "
                f"{pair[path]['cpu_s']:.1f} s CPU",
                flush=True,
            )
        pair["identical"] = results_of(Path(pair["today"]["run_dir"])) == results_of(
            Path(pair["fast"]["run_dir"])
        )
        cells.append(pair)
    info["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    summary = {}
    for path in PATHS:
        wall = sum(c[path]["wall_s"] for c in cells) / len(cells)
        cpu = sum(c[path]["cpu_s"] for c in cells) / len(cells)
        summary[path] = {
            "s_per_cell": wall, "cpu_s_per_cell": cpu, "cells_per_hour": 3600 / wall,
            "cells_per_cpu_hour": 3600 / cpu,
            "phases": {p: sum(c[path]["phases"][p] for c in cells) for p in PHASES},
            "cpu_phases": {p: sum(c[path]["cpu_phases"][p] for c in cells) for p in PHASES},
            "start_s": starts[path]["wall_s"],
        }  # fmt: skip
    ratio = summary["fast"]["cells_per_hour"] / summary["today"]["cells_per_hour"]
    cpu_ratio = summary["fast"]["cells_per_cpu_hour"] / summary["today"]["cells_per_cpu_hour"]
    identical = all(c["identical"] for c in cells)

    steps = cells[0]["today"]["steps"]
    print(f"\nmachine: {_common.describe_machine(info)}; load average at the end "
          f"{info['load_average_end'][0]:.2f}")  # fmt: skip
    print(f"study: {preset.name}, methods {', '.join(methods)}, {a.seeds} seed(s), {steps} steps "
          f"per cell, {len(cells)} cells per path\n")  # fmt: skip
    headers = ["path", "s / cell", "CPU s / cell", "cells / hour", "cells / CPU hour",
               "study start (s)"]  # fmt: skip
    rows = [
        [p, f"{summary[p]['s_per_cell']:.1f}", f"{summary[p]['cpu_s_per_cell']:.1f}",
         f"{summary[p]['cells_per_hour']:.1f}", f"{summary[p]['cells_per_cpu_hour']:.1f}",
         f"{summary[p]['start_s']:.1f}"]
        for p in PATHS
    ]  # fmt: skip
    print(_common.table(headers, rows))
    print(f"\ncells per hour, fast / today: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU time")
    print(f"same results on both paths: {'yes' if identical else 'NO'} ({len(cells)} cells)\n")
    headers = ["phase (s, all cells)", "today wall", "fast wall", "today CPU", "fast CPU",
               "today / fast (CPU)", "share of today's CPU"]  # fmt: skip
    t, f = summary["today"], summary["fast"]
    total = sum(t["cpu_phases"].values())
    rows = [
        [ph, f"{t['phases'][ph]:.1f}", f"{f['phases'][ph]:.1f}", f"{t['cpu_phases'][ph]:.1f}",
         f"{f['cpu_phases'][ph]:.1f}",
         f"{t['cpu_phases'][ph] / max(f['cpu_phases'][ph], 1e-9):.2f}x",
         f"{100 * t['cpu_phases'][ph] / max(total, 1e-9):.0f}%"]
        for ph in PHASES
    ]  # fmt: skip
    print(_common.table(headers, rows))
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {
                    "machine": info,
                    "preset": preset.name,
                    "methods": methods,
                    "seeds": a.seeds,
                    "steps": steps,
                    "cells": cells,
                    "summary": summary,
                    "ratio": ratio,
                    "cpu_ratio": cpu_ratio,
                    "identical": identical,
                    "explore": explore,
                },
                indent=1,
            )  # fmt: skip
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
