"""Issue 46's cheap re-run (exploratory): ICT and random_sequence at learning rate 2e-5 on
toy-cot-explore's stage-B design (2 warm starts x 10 seeds, 200 steps, the full pool, the final
evaluation on 512 test pairs x 32 samples, the KL to the start), to be read beside the committed
GRPO cells of docs/reports/toy-cot-explore at matched KL. Resumable; cells are claimed, so two
processes can share a block.

    python scripts/explore_rerun.py run --out runs/toy-cot-explore-lr2e-5 --block 0
    python scripts/explore_rerun.py run --out runs/toy-cot-explore-lr2e-5 --block 1
    python scripts/explore_rerun.py kl  --out runs/toy-cot-explore-lr2e-5 --block 0
    python scripts/explore_rerun.py kl  --out runs/toy-cot-explore-lr2e-5 --block 1

Cells: OUT/test-warm<b>/runs/<method>_seed<s>, warm start seed b, seeds 10b..10b+9, as stage B.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ict.compare.grid import (
    GridOptions,
    evaluate_start,
    plan_cells,
    prepare_start,
    run_all,
    write_grid_record,
)
from ict.compare.grid_metrics import GRID_METRICS
from ict.compare.presets import get_preset
from ict.fast import fast_path

PRESET = "toy-cot-explore"
SEEDS_PER_BLOCK = 10  # stage B's: warm start b, seeds 10b..10b+9
LR = 2e-5
HORIZON = 200  # stage B's horizon (the pilot's choice); the full pool, as stage B
METHODS = ("ict", "random_sequence")


def rerun_grid(out: Path, block: int):
    """(preset, grid options, grid directory, cells) of block `block` at LR."""
    preset = get_preset(PRESET)
    preset = dataclasses.replace(preset, warm=dataclasses.replace(preset.warm, seed=block))
    n = SEEDS_PER_BLOCK
    grid = GridOptions(
        methods=list(METHODS),
        seeds=list(range(n * block, n * (block + 1))),
        overrides={"learning_rate": LR, "max_steps": HORIZON},
    )
    target = out / f"test-warm{block}"
    return preset, grid, target, plan_cells(preset, target, grid)


def run(out: Path, block: int) -> None:
    preset, grid, target, cells = rerun_grid(out, block)
    with fast_path(True):
        start = prepare_start(preset, target, print)
        write_grid_record(target, preset, cells, grid)
        evaluate_start(cells[0], start, preset, grid)
        run_all(cells, start, preset, grid)


def kl(out: Path, block: int) -> None:
    """RUN/kl_to_start.json for every trained cell of the block: the study's registered grid
    metric with the preset's settings (64 test problems x 8 samples)."""
    preset, _, target, cells = rerun_grid(out, block)
    metric = GRID_METRICS["kl_to_start"]
    settings = metric.settings((preset.study or {}).get("metrics", {}).get("kl_to_start"))
    with fast_path(True):
        start = prepare_start(preset, target, print)
        metric.run(cells, start, settings, print)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["run", "kl"])
    parser.add_argument("--out", type=Path, default=Path("runs/toy-cot-explore-lr2e-5"))
    parser.add_argument("--block", type=int, required=True, choices=[0, 1])
    args = parser.parse_args(argv)
    if args.stage == "run":
        run(args.out, args.block)
    else:
        kl(args.out, args.block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
