"""Run the exploration study (docs/reports/toy-cot-explore/PROTOCOL.md) stage by stage; resumable.

    python scripts/explore_study.py pilot  --out runs/toy-cot-explore   # stage A: 12 pilot cells
    python scripts/explore_study.py decide --out runs/toy-cot-explore   # the declared choice
    python scripts/explore_study.py test   --out runs/toy-cot-explore --block 0   # stage B
    python scripts/explore_study.py test   --out runs/toy-cot-explore --block 1

Every stage is the grid of `ict compare` (ict.compare.grid): cells are claimed, so two processes
can run the same command on one directory (two workers), and either can be killed and restarted.
Stage A: OUT/pilot-<pool>/tuning/runs/<method>_lr<lr>_seed2000 (ict.compare.explore names the
grid). `decide` writes OUT/pilot_choice.json. Stage B block b: warm start seed b, test seeds
10b..10b+9, at the pilot's shared lr, pool and horizon, in OUT/test-warm<b>/runs/<method>_seed<s>.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from ict.compare import explore
from ict.compare.grid import (
    GridOptions,
    checkpoint_results,
    evaluate_start,
    plan_cells,
    prepare_start,
    run_all,
    tuning_cell,
    write_grid_record,
)
from ict.compare.presets import get_preset
from ict.compare.tuning import TuningSpec
from ict.errors import ConfigError
from ict.fast import fast_path
from ict.files import read_json, write_json_atomic

PRESET = "toy-cot-explore"
SEEDS_PER_BLOCK = 10
PILOT_SPEC = TuningSpec(
    values=explore.PILOT_LRS, seeds=(explore.PILOT_SEED,), metric=explore.PILOT_K, grow=0,
    validation_size=128, validation_samples=32,
)  # fmt: skip


def pool_options(pool: str) -> GridOptions:
    size = explore.PILOT_POOLS[pool]
    return GridOptions(overrides={"train_size": size} if size else {})


def pilot_cells(preset, out: Path):
    """{(method, pool, lr): Cell} of stage A."""
    cells = {}
    for pool in explore.POOL_ORDER:
        grid = pool_options(pool)
        for method in explore.PILOT_METHODS:
            for lr in explore.PILOT_LRS:
                cells[(method, pool, lr)] = tuning_cell(
                    preset, out / f"pilot-{pool}", PILOT_SPEC, method, lr, explore.PILOT_SEED, grid
                )
    return cells


def run_pilot(out: Path) -> None:
    preset = get_preset(PRESET)
    cells = pilot_cells(preset, out)
    # lr-major, so two workers finish whole (pool, lr) pairs together
    order = sorted(cells, key=lambda k: (explore.PILOT_LRS.index(k[2]), k[1], k[0]))
    with fast_path(True):
        start = prepare_start(preset, out, print)
        run_all([cells[k] for k in order], start, preset, GridOptions())


def decide(out: Path) -> explore.PilotChoice:
    preset = get_preset(PRESET)
    curves = {}
    for key, cell in pilot_cells(preset, out).items():
        before = read_json(cell.run_dir / "heldout_before.json")
        if before is None or read_json(cell.run_dir / "final_eval.json") is None:
            raise ConfigError(f"pilot cell {cell.run_dir} is not done: run the pilot stage first")
        curves[key] = explore.curve_of([before, *checkpoint_results(cell.run_dir)])
    choice = explore.choose(curves)
    table = [
        {"method": m, "pool": p, "lr": lr, "curve": [dataclasses.asdict(pt) for pt in c]}
        for (m, p, lr), c in curves.items()
    ]
    write_json_atomic(out / "pilot_choice.json", {"choice": choice.as_dict(), "cells": table})
    for (m, p, lr), c in curves.items():
        line = " ".join(f"{pt.step}:{pt.pass1:.3f}/{pt.pass32:.3f}" for pt in c)
        print(f"{m:5s} pool {p:4s} lr {lr:.3g}  step:pass@1/pass@32  {line}")
    print(f"choice: {choice.reason}")
    return choice


def run_test(out: Path, block: int) -> None:
    record = read_json(out / "pilot_choice.json")
    if record is None:
        raise ConfigError(f"no {out}/pilot_choice.json: run `decide` after the pilot")
    choice = record["choice"]
    if choice["pool"] is None:
        raise ConfigError(f"the pilot found no stable narrowing regime ({choice['reason']})")
    preset = get_preset(PRESET)
    preset = dataclasses.replace(preset, warm=dataclasses.replace(preset.warm, seed=block))
    overrides = {"learning_rate": choice["lr"], "max_steps": choice["horizon"]}
    size = explore.PILOT_POOLS[choice["pool"]]
    if size:
        overrides["train_size"] = size
    seeds = range(SEEDS_PER_BLOCK * block, SEEDS_PER_BLOCK * (block + 1))
    grid = GridOptions(seeds=list(seeds), overrides=overrides)
    target = out / f"test-warm{block}"
    cells = plan_cells(preset, target, grid)
    with fast_path(True):
        start = prepare_start(preset, target, print)
        write_grid_record(target, preset, cells, grid)
        evaluate_start(cells[0], start, preset, grid)
        run_all(cells, start, preset, grid)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=("pilot", "decide", "test"))
    parser.add_argument("--out", type=Path, default=Path("runs/toy-cot-explore"))
    parser.add_argument("--block", type=int, choices=(0, 1), default=0)
    args = parser.parse_args(argv)
    try:
        if args.stage == "pilot":
            run_pilot(args.out)
        elif args.stage == "decide":
            decide(args.out)
        else:
            run_test(args.out, args.block)
    except ConfigError as err:
        print(f"explore_study: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
