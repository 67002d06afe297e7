"""`ict eval`: pass@k of a model (HF id, local dir, run dir, checkpoint, or the embedded default)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ict.data import SPLITS, file_stem, split_specs
from ict.errors import ConfigError
from ict.eval.metrics import curve_ks
from ict.eval.paper import check_paper_settings, expand_benchmarks, wants_paper_table
from ict.eval.runner import load_eval_items, results_table, run_eval
from ict.eval.settings import DTYPES, SAMPLERS, EvalSettings
from ict.files import (
    check_writable,
    read_json_if_present,
    write_atomic,
    write_json_atomic,
)
from ict.models import EMBEDDED_MODEL_LABEL
from ict.rewards import Verifier

DEFAULT_BENCHMARKS = "rg:chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=2"

EXAMPLES = """\
examples:
  ict eval --limit 20                                   # embedded SmolLM2-135M on held-out chain sums
  ict eval --model runs/my_run                          # a trained run: its task, its settings
  ict eval --model runs/my_run --n 16 --k 1,4,8         # ... with more samples
  ict eval --model Qwen/Qwen2.5-0.5B-Instruct --benchmarks gsm8k,math500 --data-dir data/
  ict eval --benchmarks 'rg:chain_sum?min_terms=3&max_terms=3' --limit 50
  ict eval --model Qwen/Qwen2.5-0.5B-Instruct --benchmarks paper --n 16 --k 1,4 --seeds 5 --data-dir data/
Benchmarks: paper (= math500, gsm8k, mmlu_stem, gpqa, aime23, aime24, aime25), math, amc23,
olympiadbench, minerva, commonsenseqa, rg:<task>[?config].
Local files: DIR/<benchmark>.jsonl or .parquet via --data-dir DIR or ICT_DATA_DIR (see docs/eval.md).
"""


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from err
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def split_benchmarks(text: str) -> list[str]:
    """Split on commas that separate specs (not the commas inside an rg config value list);
    the word `paper` becomes the paper's seven benchmarks."""
    return expand_benchmarks(split_specs(text))


def add_parser(subparsers, summary: str) -> None:
    p = subparsers.add_parser(
        "eval",
        help=summary,
        description=summary + ". For a run directory, every setting not given is the run's own: "
        "its task and the settings of its last evaluation (final_eval.json, heldout_after.json) "
        "or, without one, those its config.yaml derives (ict.train.evaluation).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--model",
        default=None,
        help="HF id, local dir, run dir or checkpoint dir (default: embedded SmolLM2-135M-Instruct)",
    )
    p.add_argument(
        "--benchmarks",
        default=None,
        help="comma-separated benchmark specs; 'paper' = the paper's seven, with its table "
        "(default: a run's own task, else held-out 2-term chain sums)",
    )
    p.add_argument(
        "--split",
        choices=SPLITS,
        default=None,
        help="which problems of each task: eval (held out, the default), validation, train",
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="evaluate with sampling seeds --seed .. --seed+N-1 (OUT/seed<s>/ each) and report "
        "the mean and 95%% interval over them (default 1)",
    )
    p.add_argument("--n", type=int, default=None, help="samples per problem (default 16)")
    p.add_argument(
        "--k",
        type=_int_list,
        default=None,
        help="pass@k values, comma-separated (default 1,2,4,... up to and including --n)",
    )
    p.add_argument(
        "--out", default=None, help="output dir (default: <run dir>/eval or runs/eval/<model>)"
    )
    p.add_argument("--temperature", type=float, default=None, help="default 1.0")
    p.add_argument("--top-p", type=float, default=None, help="default 1.0")
    p.add_argument("--max-new-tokens", type=int, default=None, help="default 256")
    p.add_argument(
        "--batch-size", type=int, default=None, help="sequences generated at once (default 32)"
    )
    p.add_argument("--seed", type=int, default=None, help="sampling and bootstrap seed (default 0)")
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help="first N problems per benchmark (reasoning-gym default: 100)",
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="directory with <benchmark>.jsonl/.parquet files (or env ICT_DATA_DIR)",
    )
    p.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default=None,
        help="how samples are drawn: batched (each sample keyed by problem and sample number, "
        "independent of batching; the default) or chunked (the older path, for results made "
        "with it); the two give different samples of the same distribution",
    )
    p.add_argument(
        "--eval-dtype",
        choices=DTYPES,
        default=None,
        help="the batched sampler's decoding matmuls: float32 (the default) or bf16 (faster "
        "where the CPU computes bf16 natively; a numerically different model)",
    )
    p.add_argument(
        "--backend",
        choices=["hf", "vllm"],
        default="hf",
        help="generation backend (vllm: GPU, pip install vllm)",
    )
    p.add_argument(
        "--device",
        default=None,
        help="torch device for --backend hf (default: a run's own, else cuda if available)",
    )
    p.add_argument(
        "--verify-timeout",
        type=float,
        default=5.0,
        help="seconds per math-verify call (hard limit)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="discard cached samples in --out made with other settings",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show third-party logs, warnings and loading bars (transformers, huggingface_hub, "
        "datasets)",
    )
    p.set_defaults(func=run)


# flag -> EvalSettings field, for the flags that override a run's (or the default) settings
FLAG_SETTINGS = {
    "n": "n",
    "k": "k",
    "temperature": "temperature",
    "top_p": "top_p",
    "max_new_tokens": "max_new_tokens",
    "batch_size": "batch_size",
    "seed": "seed",
    "limit": "limit",
    "split": "split",
    "sampler": "sampler",
    "eval_dtype": "dtype",
}


def default_out_dir(model: str | None) -> str:
    """RUN/eval for a run directory, else runs/eval/<model> (runs/ is git-ignored)."""
    if model and run_config_path(model) is not None:
        return str(Path(model) / "eval")
    return str(Path("runs") / "eval" / file_stem(model or "smollm2-135m-instruct"))


def run_config_path(model: str | None) -> Path | None:
    """RUN/config.yaml when `model` is a run directory written by `ict train`, else None."""
    path = Path(model) / "config.yaml" if model else None
    return path if path is not None and path.is_file() else None


def run_defaults(model: str) -> tuple[list[str], EvalSettings, object]:
    """(task specs, settings, TrainConfig) of a run directory's own evaluation: those its last
    evaluation file stored (final_eval.json, then heldout_after.json), else those its config
    derives (ict.train.evaluation.eval_settings)."""
    from ict.train.config import TrainConfig
    from ict.train.evaluation import eval_settings
    from ict.train.problems import task_spec

    run = Path(model)
    config = TrainConfig.from_yaml(run / "config.yaml")
    for name in ("final_eval.json", "heldout_after.json"):
        saved = read_json_if_present(run / name)
        if isinstance(saved, dict) and isinstance(saved.get("settings"), dict):
            return list(saved["per_problem"]), EvalSettings.from_dict(saved["settings"]), config
    return [task_spec(config)], eval_settings(config), config


def resolve(args: argparse.Namespace) -> tuple[list[str], EvalSettings, object]:
    """(task specs, settings, the run's TrainConfig or None) from the flags: a run directory's own
    evaluation, or the defaults, with every flag given on top."""
    config = None
    if run_config_path(args.model) is not None:
        tasks, settings, config = run_defaults(args.model)
    else:
        tasks, settings = [DEFAULT_BENCHMARKS], EvalSettings()
    given = {
        field: getattr(args, flag)
        for flag, field in FLAG_SETTINGS.items()
        if getattr(args, flag) is not None
    }
    if args.benchmarks is not None:
        tasks = split_benchmarks(args.benchmarks)
    n = given.get("n", settings.n)
    if "k" not in given and (config is None or "n" in given):  # the pass@k-against-k curve
        given["k"] = curve_ks(n) if n >= 1 else [1]  # n < 1 is refused by validate()
    settings = settings.replace(**given, backend=args.backend)
    settings.validate()
    return tasks, settings, config


def run(args: argparse.Namespace) -> int:
    """Evaluate once per seed (the model is loaded once); the paper's table when asked for. The
    console is quiet (ict.console: no third-party bars, logs or warnings) unless --verbose."""
    import warnings

    from ict.console import quiet_console

    verbose = getattr(args, "verbose", False)
    with quiet_console(verbose), warnings.catch_warnings():
        if not verbose:
            warnings.simplefilter("ignore")  # third-party warnings (a plot's layout, generation)
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ict.models import check_model_path

    if args.seeds < 1:
        raise ConfigError(f"--seeds must be >= 1, got {args.seeds}")
    check_model_path(args.model)  # a mistyped local path: at once, not tried as a hub id
    out = args.out or default_out_dir(args.model)
    check_writable(out, flag="--out")  # read-only or full: before the model loads
    tasks, settings, config = resolve(args)
    paper = wants_paper_table(tasks)
    if paper:
        check_paper_settings(settings.n, settings.k)
    label = args.model or EMBEDDED_MODEL_LABEL
    results, sampler = [], None
    for seed in range(settings.seed, settings.seed + args.seeds):
        seed_settings = settings.replace(seed=seed)
        seed_out = out if args.seeds == 1 else f"{out}/seed{seed}"
        items = load_eval_items(tasks, seed_settings, args.data_dir)  # data errors first
        if sampler is None:  # loaded once: the seed only enters through sample(seed=...)
            sampler = make_sampler(args, seed_settings, config)
        results.append(_run_one(args, label, tasks, items, seed_settings, seed_out, sampler))
    if paper:
        _write_paper_table(results, out)
    return 0


def _run_one(args, label: str, tasks, items, settings: EvalSettings, seed_out: str, sampler):
    """One evaluation into `seed_out`: prints its table, returns the result."""
    verifier = Verifier(timeout_s=args.verify_timeout)
    try:
        result = run_eval(
            sampler,
            tasks,
            settings,
            model=label,
            verifier=verifier,
            items=items,
            out_dir=seed_out,
            overwrite=args.overwrite,
            progress=lambda msg: print(msg, file=sys.stderr, flush=True),
        )
    finally:
        verifier.close()
    print(results_table(result))
    plot = _write_k_plot(result, seed_out)
    print(
        f"\nmodel {result['model']}; {settings.split} split, n={settings.n}, "
        f"temperature={settings.temperature}, top_p={settings.top_p}, "
        f"max_new_tokens={settings.max_new_tokens}, seed={settings.seed}; values are fractions, "
        f"95% bootstrap CI over problems.\nwrote {seed_out}/summary.json, summary.md, "
        f"samples/{', pass_at_k.png' if plot else ''}"
    )
    return result


def _write_k_plot(result: dict, out: str):
    """OUT/pass_at_k.png: pass@k against k (log2 axis), one line per benchmark with its 95%
    bootstrap band over problems, each named by its full task spec (wrapped by the legend; the
    console's short labels are for the console); None when matplotlib is missing or there is one
    k only."""
    ks = result["settings"]["k"]
    if len(ks) < 2:
        return None
    try:
        from ict.report.plots import k_curves_from_summary, plot_k_curves

        curves = k_curves_from_summary(result)
        return plot_k_curves(
            curves,
            Path(out) / "pass_at_k.png",
            title=f"pass@k against k - {result['model']} (n = {result['settings']['n']})",
        )
    except ImportError:  # matplotlib is an optional dependency (ict[train])
        return None


def _write_paper_table(results: list[dict], out: str) -> None:
    """Print the paper's table and save it as OUT/paper_table.json and OUT/paper_table.md."""
    from ict.eval.paper import paper_markdown, paper_table

    table = paper_table(results)
    table["model"] = results[0]["model"]
    table["seeds_used"] = [r["settings"]["seed"] for r in results]
    text = paper_markdown(table, label=table["model"])
    print("\n" + text)
    write_json_atomic(Path(out) / "paper_table.json", table)
    write_atomic(Path(out) / "paper_table.md", text + "\n")
    print(f"wrote {out}/paper_table.json, paper_table.md")


def make_sampler(args: argparse.Namespace, settings: EvalSettings, config):
    """The generation backend for the CLI flags (loads the model: a run's with its dtype and
    device unless --device says otherwise)."""
    if settings.backend == "vllm":
        from ict.eval.backends import VLLMSampler

        if args.model is None:
            raise ConfigError("--backend vllm needs --model (an HF id or a local HF model dir)")
        return VLLMSampler(_vllm_model_path(args.model), settings)
    import torch

    from ict.eval.backends import hf_sampler
    from ict.models import load_model_and_tokenizer

    dtype, device = None, args.device
    if config is not None:
        from ict.train.plan import resolve_device

        dtype = getattr(torch, config.dtype)
        device = device or str(resolve_device(config.device))
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = load_model_and_tokenizer(args.model, dtype=dtype, device=device)
    return hf_sampler(model, tokenizer, settings)


def _vllm_model_path(model: str) -> str:
    """A run dir or checkpoint dir resolves to its checkpoint folder (vLLM reads HF folders)."""
    try:
        from ict.models import resolve_checkpoint_dir

        resolved = resolve_checkpoint_dir(Path(model))
    except Exception:  # noqa: BLE001 - not a run dir: pass through
        resolved = None
    return str(resolved) if resolved is not None else model
