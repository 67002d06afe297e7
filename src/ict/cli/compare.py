"""`ict compare`: a grid of methods x seeds with one report, or a report from existing runs."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from pathlib import Path

from ict.errors import ConfigError

EXAMPLES = """\
examples:
  ict compare --preset toy                  # toy task: warm start + 6 methods x 5 seeds (2 CPU cores)
  ict compare --preset toy-cot              # reasoning chains: 52-token answers, 7 methods x 5 seeds
  ict compare --quick                       # a few minutes, first contact
  ict compare                               # embedded SmolLM2 on chain_sum (preset smollm)
  ict compare --preset smollm-cot --methods grpo,ict,random_sequence --seeds 2   # SmolLM2 chains
  ict compare --preset toy --methods grpo,ict --seeds 5 --steps 100
  ict compare --runs runs/a runs/b runs/c   # report from existing run directories (any engine)
  ict compare --preset paper --dry-run      # the paper's grid end to end on a tiny model + fixtures
  ict compare --preset paper --model-size 1.5b   # the paper's grid on GPUs (docs/paper.md)
Rerunning the same command resumes: finished cells are skipped, interrupted ones resume.
"""


def add_parser(subparsers, summary: str) -> None:
    p = subparsers.add_parser(
        "compare",
        help=summary,
        description=summary,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--preset",
        choices=["smollm", "smollm-cot", "toy", "toy-cot", "quick", "paper"],
        default="smollm",
        help="what to train and how long (default smollm: the embedded default model; paper: "
        "the paper's grid, Qwen2.5-Instruct on GSM8K + MATH, seven benchmarks, see docs/paper.md)",
    )
    p.add_argument(
        "--model-size",
        choices=["0.5b", "1.5b", "7b"],
        default="0.5b",
        help="paper preset: the Qwen2.5-Instruct size (default 0.5b)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="paper preset: run the whole pipeline with a tiny offline model and the benchmark "
        "fixtures (minutes on a CPU; checks the pipeline, not the claim)",
    )
    p.add_argument("--quick", action="store_true", help="same as --preset quick")
    p.add_argument(
        "--methods",
        help="comma-separated methods (default: the preset's; any name of ict.methods, e.g. "
        "grpo,entropy,stapo,random,ict,ict_batch_mean)",
    )
    p.add_argument("--seeds", type=int, help="number of seeds 0..N-1 (default: the preset's, 3)")
    p.add_argument("--steps", type=int, help="RL steps per cell (default: the preset's)")
    p.add_argument(
        "--out",
        help="grid directory (default runs/compare-<preset>); the report goes to OUT/report",
    )
    p.add_argument(
        "--runs", nargs="+", metavar="DIR", help="build the report from these run directories only"
    )
    p.add_argument(
        "--baseline", default="grpo", help="method the others are compared with (default grpo)"
    )
    p.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument("--title", help="report title")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show third-party logs and loading bars (transformers, huggingface_hub, datasets)",
    )
    p.set_defaults(func=run)


@contextlib.contextmanager
def quiet_console(verbose: bool = False):
    """Silence transformers' info logs and the loading/saving bars of transformers,
    huggingface_hub and datasets for the duration (errors still print); no-op when `verbose`.
    Restores the previous verbosity and bar settings on exit."""
    if verbose:
        yield
        return
    import transformers.utils.logging as tf_logging
    from huggingface_hub import utils as hub_utils

    # TQDM_DISABLE: bars that use tqdm directly (e.g. transformers' GGUF de-quantisation)
    env = {
        "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TQDM_DISABLE": "1",
    }
    saved_env = {key: os.environ.get(key) for key in env}
    saved = (
        tf_logging.get_verbosity(),
        tf_logging.is_progress_bar_enabled(),
        hub_utils.are_progress_bars_disabled(),
    )
    os.environ.update(env)
    tf_logging.set_verbosity_error()
    tf_logging.disable_progress_bar()
    hub_utils.disable_progress_bars()
    datasets_bars = _datasets_bars(enable=False)
    try:
        yield
    finally:
        tf_logging.set_verbosity(saved[0])
        if saved[1]:
            tf_logging.enable_progress_bar()
        if not saved[2]:
            hub_utils.enable_progress_bars()
        if datasets_bars:
            _datasets_bars(enable=True)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _datasets_bars(*, enable: bool) -> bool:
    """Switch datasets' bars if datasets is already imported (else the env variable covers it);
    returns whether they were on before a disable."""
    import sys

    if "datasets" not in sys.modules:
        return False
    from datasets.utils import logging as ds_logging

    if enable:
        ds_logging.enable_progress_bar()
        return True
    was_on = ds_logging.is_progress_bar_enabled()
    ds_logging.disable_progress_bar()
    return was_on


def _start_note(result: dict) -> str:
    """The report's "before RL" sentence from an evaluation result of the start model."""
    from ict.compare.grid import eval_line

    return (
        f"Before RL, the same held-out evaluation gives {eval_line(result)} "
        "(the start model: 95% bootstrap intervals over problems)."
    )


def run(args) -> int:
    from ict.report.comparison import build_report

    if args.runs:
        out = Path(args.out or "compare-report")
        md = build_report(
            args.runs,
            out,
            title=args.title or "ict compare",
            baseline=args.baseline,
            confidence=args.confidence,
        )
        print(f"report: {md} and {md.with_suffix('.html')}")
        return 0

    from ict.compare.grid import run_grid
    from ict.compare.presets import get_preset

    name = "quick" if args.quick else args.preset
    if args.dry_run and name != "paper":
        raise ConfigError("--dry-run belongs to --preset paper")
    default_out = f"runs/compare-{name}{'-dry-run' if args.dry_run else ''}"
    out = Path(args.out or default_out)
    if name == "paper":
        preset = get_preset("paper", model_size=args.model_size, dry_run=args.dry_run, work_dir=out)
    else:
        preset = get_preset(name)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None
    if args.seeds is not None and args.seeds < 1:
        raise ConfigError(f"--seeds must be >= 1, got {args.seeds}")
    if args.steps is not None and args.steps < 1:
        raise ConfigError(f"--steps must be >= 1, got {args.steps}")
    overrides = {"max_steps": args.steps} if args.steps else None
    with quiet_console(args.verbose):
        dirs = run_grid(
            preset,
            out,
            methods=methods,
            seeds=range(args.seeds) if args.seeds else None,
            overrides=overrides,
            log=lambda line: print(line, flush=True),
        )
    notes = [f"Preset **{preset.name}**: {preset.description}"]
    warm = out / "warm_start.json"
    if warm.exists():
        info = json.loads(warm.read_text())
        notes.append(
            f"Supervised warm start: {info['steps']} steps, sampled accuracy {info['accuracy']:.2f} "
            "on 200 training problems before RL (every cell starts from these weights)."
        )
        if "eval" in info:
            notes.append(_start_note(info["eval"]))
    start = out / "start_eval.json"
    if start.exists():
        notes.append(_start_note(json.loads(start.read_text())))
    md = build_report(
        dirs,
        out / "report",
        title=args.title or f"ict compare - {preset.name}",
        baseline=args.baseline,
        confidence=args.confidence,
        notes=notes,
    )
    print(f"report: {md} and {md.with_suffix('.html')}")
    if preset.eval.benchmarks:  # the paper's table: P@1 / P@4 per benchmark and their average
        from ict.eval.paper import write_grid_paper_table

        print(write_grid_paper_table(dirs, out / "report"))
    return 0
