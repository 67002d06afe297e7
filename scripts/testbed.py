"""Issue 46's narrowing testbed, stage by stage (docs/reports/toy-paths-screen/PROTOCOL.md); resumable.

    python scripts/testbed.py warm    --variant V --block B        # warm start B of variant V
    python scripts/testbed.py screen  --variant V --lr LR          # GRPO, warm start 0, seeds 0-2
    python scripts/testbed.py control --variant V --lr LR --block B  # GRPO, W-REINFORCE, warm start B
    python scripts/testbed.py decide                               # the rule -> OUT/screen.json
    python scripts/testbed.py paths                                # path shares of final policies
    python scripts/testbed.py report  --variant V --lr LR --dest D   # the control's report

Every stage is a grid of `ict compare` (ict.compare.grid) from the preset `toy-paths-screen` with
the task options and warm-start settings of a declared variant (VARIANTS): cells are claimed, so
several processes can run one command on one directory. `--device` is where the cells train
(default the CPU: a 470k-parameter model is launch-bound on a GPU shared by many processes) and
`--eval-device` where every evaluation samples (ict.eval.backends.on_device: a copy of the model
there; `cuda` decodes thousands of rows at once); `warm --device cuda` trains a warm start on a GPU.
Screen grid: OUT/screen-<V>-lr<LR>/runs/grpo_seed<s>. Control grid: OUT/control-<V>-lr<LR>/warm<B>/
runs/<method>_seed<B>, final evaluation on 512 test problems x 256.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from functools import partial
from pathlib import Path

from ict.compare.grid import (
    GridOptions,
    checkpoint_results,
    evaluate_start,
    plan_cells,
    prepare_start,
    run_all,
    write_grid_record,
)
from ict.compare.presets import EvalSpec, get_preset
from ict.compare.screen import NarrowingCriterion, screen_configuration
from ict.compare.warm_start import warm_start
from ict.files import read_json, write_json_atomic

PRESET = "toy-paths-screen"
SCREEN_LRS = (1e-4, 3e-4)  # declared in PROTOCOL.md, lowest first
# the task variants, in the declared order (PROTOCOL.md): A is the preset itself (round 1); round 2
# teaches the long path's carries on half of the warm start's examples and shows it on 4, 8 or 16
# percent, with a fixed 2000-step warm start
ROUND2_WARM = {"max_steps": 2000, "target_accuracy": 1.0, "check_every": 500}
VARIANTS = {
    "A": ({}, {}),
    "B4": ({"long_pct": 4, "sft_carry_pct": 50}, ROUND2_WARM),
    "B8": ({"long_pct": 8, "sft_carry_pct": 50}, ROUND2_WARM),
    "B16": ({"long_pct": 16, "sft_carry_pct": 50}, ROUND2_WARM),
}
SCREEN_SEEDS = (0, 1, 2)  # on warm start 0
CONTROL_BLOCKS = (1, 2, 3, 4)  # warm starts of the positive control, one seed each (= block)
CONTROL_METHODS = ("grpo", "w_reinforce")
KS = tuple(2**i for i in range(9))  # 1 .. 256
CONTROL_EVAL = EvalSpec(size=512, n=256, ks=KS, seed=1234)


def preset_for(block: int, variant: str = "A"):
    """The preset of `variant` (VARIANTS: task options and warm-start settings) with warm start
    seed `block`."""
    preset = get_preset(PRESET)
    task, warm = VARIANTS[variant]
    train = {**preset.train, "task_config": {**preset.train["task_config"], **task}}
    return dataclasses.replace(
        preset, train=train, warm=dataclasses.replace(preset.warm, seed=block, **warm)
    )


def grid_options(
    seeds, lr: float, device: str, eval_device: str | None, curves: bool = True
) -> GridOptions:
    """The grid of one stage: `seeds`, the learning rate, the cells' device, and the evaluations'
    (a copy of the model there) when it differs. `curves` False drops the periodic validation
    evaluations and the trainer's own before/after ones (a CPU-only control: the grid's final
    evaluation, the primary endpoint, stays)."""
    from ict.eval.backends import on_device

    factory = on_device(eval_device) if eval_device and eval_device != device else None
    overrides = {"learning_rate": lr, "device": device}
    if not curves:
        overrides.update(eval_every=0, heldout_eval=False)
    return GridOptions(seeds=list(seeds), overrides=overrides, sampler_factory=factory)


def lr_name(lr: float) -> str:
    return f"{lr:.0e}".replace("e-0", "e-")


def run_grid_dir(preset, target: Path, grid: GridOptions) -> None:
    from ict.fast import fast_path

    cells = plan_cells(preset, target, grid)
    with fast_path(True):  # CPU only; a GPU grid samples with Hugging Face generate
        start = prepare_start(preset, target, print)
        write_grid_record(target, preset, cells, grid)
        evaluate_start(cells[0], start, preset, grid)
        run_all(cells, start, preset, grid)


def screen_dir(out: Path, lr: float, variant: str = "A") -> Path:
    return out / f"screen-{variant}-lr{lr_name(lr)}"


def control_dir(out: Path, lr: float, block: int, variant: str = "A") -> Path:
    return out / f"control-{variant}-lr{lr_name(lr)}" / f"warm{block}"


def run_screen(out: Path, lr: float, variant: str, device: str, eval_device: str | None) -> None:
    grid = grid_options(SCREEN_SEEDS, lr, device, eval_device)
    run_grid_dir(preset_for(0, variant), screen_dir(out, lr, variant), grid)


def run_control(
    out: Path,
    lr: float,
    block: int,
    variant: str,
    device: str,
    eval_device: str | None,
    curves: bool = True,
) -> None:
    preset = dataclasses.replace(
        preset_for(block, variant), eval=CONTROL_EVAL, methods=list(CONTROL_METHODS)
    )
    grid = grid_options([block], lr, device, eval_device, curves)
    run_grid_dir(preset, control_dir(out, lr, block, variant), grid)


def start_of(cell_dir: Path) -> dict:
    """The start model's periodic evaluation (the curves' step 0) of a cell."""
    result = read_json(cell_dir / "heldout_before.json")
    if result is None:
        raise SystemExit(f"{cell_dir} has no heldout_before.json (not started?)")
    return result


def decide(out: Path) -> dict:
    """screen.json: the declared rule on every screened (variant, lr), in the declared order
    (VARIANTS, then lowest lr first); the testbed is the first configuration that passes."""
    table, chosen = {}, None
    for variant, lr in [(v, lr) for v in VARIANTS for lr in SCREEN_LRS]:
        runs = screen_dir(out, lr, variant) / "runs"
        if not runs.is_dir():
            continue
        seeds = {s: checkpoint_results(runs / f"grpo_seed{s}") for s in SCREEN_SEEDS}
        seeds = {
            s: [r for r in rs if r["settings"]["split"] == "validation"] for s, rs in seeds.items()
        }
        name = f"{variant} lr {lr_name(lr)}"
        if not all(seeds.values()):
            table[name] = {"passes": None, "why": "not every seed has checkpoints"}
            continue
        start = start_of(runs / f"grpo_seed{SCREEN_SEEDS[0]}")
        result = screen_configuration(start, seeds, KS, NarrowingCriterion())
        table[name] = {"variant": variant, "lr": lr, **result}
        if result["passes"] and chosen is None:
            chosen = {"variant": variant, "lr": lr}
    record = {"chosen": chosen, "configurations": table}
    write_json_atomic(out / "screen.json", record)
    for name, result in table.items():
        if result.get("passes") is None:
            print(f"{name}: {result['why']}")
            continue
        for seed, s in result["seeds"].items():
            line = "  ".join(
                f"{c['step']}:{c['pass1']:.3f}/{c['changes'].get(256, float('nan')):+.3f}"
                f"{'*' if c['narrows'] else ''} L{c['lost']}G{c['gained']}"
                for c in s["checkpoints"]
            )
            print(f"{name} seed {seed} narrows={s['narrows']}  step:pass@1/dpass@256 {line}")
        print(f"{name}: passes={result['passes']}")
    print(f"testbed: {chosen}")
    return record


PATH_PROBLEMS, PATH_SAMPLES, PATH_SEED = 512, 16, 1234  # the paths stage: test problems x samples


def path_shares(model, tokenizer, task, pairs, temperature: float, max_new_tokens: int) -> dict:
    """{"carry" / "no_carry": {"short", "long", "other": share of samples, "correct": accuracy}}
    of `model`'s samples (PATH_SAMPLES per pair) on `pairs` (ict.data.toy.paths.strategy)."""
    import numpy as np

    from ict.data.toy.paths import has_carry, reward, strategy
    from ict.generation import generate

    rollout = generate(
        model, tokenizer, [task.prompt(a, b) for a, b in pairs], num_samples=PATH_SAMPLES,
        temperature=temperature, max_new_tokens=max_new_tokens, batch_size=8192, seed=PATH_SEED,
    )  # fmt: skip
    rows: dict = {"carry": [], "no_carry": []}
    for i, text in enumerate(rollout.texts):
        a, b = pairs[i // PATH_SAMPLES]
        kind = "carry" if has_carry(a, b, task.digits) else "no_carry"
        rows[kind].append((strategy(text), reward(text, a, b, task.digits)))
    out = {}
    for kind, got in rows.items():
        names = [g[0] for g in got]
        out[kind] = {
            **{s: names.count(s) / max(len(names), 1) for s in ("short", "long", "other")},
            "correct": float(np.mean([g[1] for g in got])) if got else float("nan"),
            "samples": len(got),
        }
    return out


def paths(out: Path, device: str) -> None:
    """RUN/paths.json for every finished control cell and OUT/control-lr*/warm<B>/start_paths.json
    for its start model: the share of samples on each path, by carry class (the protocol's
    descriptive secondary)."""
    from ict.compare.grid import load_for
    from ict.data.toy import toy_task
    from ict.train.plan import resolve_device

    for variant, lr, block in [
        (v, lr, b) for v in VARIANTS for lr in SCREEN_LRS for b in CONTROL_BLOCKS
    ]:
        target = control_dir(out, lr, block, variant)
        if not (target / "grid.json").is_file():
            continue
        preset = preset_for(block, variant)
        cfg = plan_cells(preset, target, GridOptions(seeds=[block]))[0].config
        cfg = dataclasses.replace(cfg, device=device)
        task = toy_task(preset.task)
        pairs = task.split("test", PATH_PROBLEMS)
        shares = partial(
            path_shares, task=task, pairs=pairs, temperature=cfg.temperature,
            max_new_tokens=cfg.max_new_tokens,
        )  # fmt: skip
        start = target / "start_paths.json"
        if not start.is_file():
            model, tok, _ = warm_start(preset.task, preset.warm)
            model.to(resolve_device(device))
            write_json_atomic(start, shares(model, tok))
        for run in sorted((target / "runs").glob("*_seed*")):
            dest = run / "paths.json"
            if dest.is_file() or not (run / "final_eval.json").is_file():
                continue
            result = shares(*load_for(cfg, run))
            write_json_atomic(dest, result)
            print(run, result)


PRIMARY = "w_reinforce-grpo@pass@256"  # the positive control's declared primary comparison


def report(out: Path, variant: str, lr: float, dest: Path) -> Path:
    """DEST/report.md (.html, .json, plots/): the positive control's comparison report over the
    finished control cells of (variant, lr): the declared primary with the initialisation as the
    unit (ict.evidence: warm starts as units, one seed each), and the path shares (paths.json)."""
    from ict.evidence.endpoints import declare
    from ict.report.comparison import build_report

    runs = sorted(
        d
        for b in CONTROL_BLOCKS
        for d in (control_dir(out, lr, b, variant) / "runs").glob("*_seed*")
        if (d / "final_eval.json").is_file()
    )
    if not runs:
        raise SystemExit(f"no finished control cells of {variant} at lr {lr}")
    rows = ["| warm start | model | long path share (carry / no carry) | correct (carry / no carry) |",
            "|---|---|---|---|"]  # fmt: skip
    for b in CONTROL_BLOCKS:
        target = control_dir(out, lr, b, variant)
        for label, path in [("start", target / "start_paths.json"),
                            *[(d.name.split("_seed")[0], d / "paths.json")
                              for d in sorted((target / "runs").glob("*_seed*"))]]:  # fmt: skip
            p = read_json(path)
            if p:
                rows.append(
                    f"| {b} | {label} | {p['carry']['long']:.3f} / {p['no_carry']['long']:.3f} | "
                    f"{p['carry']['correct']:.3f} / {p['no_carry']['correct']:.3f} |"
                )
    notes = [
        f"The positive control of docs/reports/toy-paths-screen/PROTOCOL.md on the testbed the "
        f"screen chose (variant {variant}, lr {lr:g}): warm starts {', '.join(map(str, CONTROL_BLOCKS))}"
        f", one RL seed each (seed = warm start); the initialisation is the unit.",
        "Path shares of 512 test problems x 16 samples (scripts/testbed.py paths):\n\n"
        + "\n".join(rows),
    ]
    return build_report(
        runs, dest, title=f"toy-paths positive control ({variant}, lr {lr:g})",
        endpoints=declare(
            [PRIMARY], unit="warm start",
            source="declared in docs/reports/toy-paths-screen/PROTOCOL.md before any cell ran",
        ),
        lr_choice="the screen's declared rule (PROTOCOL.md): the first configuration that "
        "passes; GRPO and W-REINFORCE share it, as the protocol declares",
        notes=notes,
    )  # fmt: skip


def warm(block: int, variant: str, device: str) -> None:
    preset = preset_for(block, variant)
    _, _, info = warm_start(preset.task, preset.warm, device=None if device == "cpu" else device)
    print(json.dumps({k: info[k] for k in ("path", "steps", "accuracy", "seconds", "cached")}))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["warm", "screen", "control", "decide", "paths", "report"])
    parser.add_argument("--dest", type=Path, default=Path("docs/reports/toy-paths-screen/control"))
    parser.add_argument("--out", type=Path, default=Path("runs/toy-paths"))
    parser.add_argument("--lr", type=float)
    parser.add_argument("--block", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--eval-device", default=None)
    parser.add_argument("--variant", default="A", choices=list(VARIANTS))
    parser.add_argument(
        "--no-curves",
        action="store_true",
        help="control: no periodic validation evaluations (CPU time); the final one stays",
    )
    args = parser.parse_args(argv)
    if args.stage in ("screen", "control", "report") and args.lr not in SCREEN_LRS:
        parser.error(f"--lr must be one of the declared {SCREEN_LRS}")
    if args.stage == "warm":
        warm(args.block, args.variant, args.device)
    elif args.stage == "screen":
        run_screen(args.out, args.lr, args.variant, args.device, args.eval_device)
    elif args.stage == "control":
        run_control(
            args.out,
            args.lr,
            args.block,
            args.variant,
            args.device,
            args.eval_device,
            curves=not args.no_curves,
        )
    elif args.stage == "report":
        print(report(args.out, args.variant, args.lr, args.dest))
    elif args.stage == "paths":
        paths(args.out, args.eval_device or args.device)
    else:
        decide(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
