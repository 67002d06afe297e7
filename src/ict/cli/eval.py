"""`ict eval`: pass@k of a model (HF id, local dir, run dir, checkpoint, or the embedded default)."""

from __future__ import annotations

import argparse

DEFAULT_BENCHMARKS = "rg:chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=2"

EXAMPLES = """\
examples:
  ict eval --limit 20                                   # embedded SmolLM2-135M on held-out chain sums
  ict eval --model runs/my_run --n 16 --k 1,4,8         # a trained run (its latest checkpoint)
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
    from ict.data import split_specs
    from ict.eval.paper import expand_benchmarks

    return expand_benchmarks(split_specs(text))


def add_parser(subparsers, summary: str) -> None:
    p = subparsers.add_parser(
        "eval",
        help=summary,
        description=summary,
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
        default=DEFAULT_BENCHMARKS,
        help="comma-separated benchmark specs; 'paper' = the paper's seven, with its table "
        "(default: held-out 2-term chain sums)",
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="evaluate with sampling seeds --seed .. --seed+N-1 (OUT/seed<s>/ each) and report "
        "the mean and 95%% interval over them (default 1)",
    )
    p.add_argument("--n", type=int, default=16, help="samples per problem (default 16)")
    p.add_argument(
        "--k",
        type=_int_list,
        default=None,
        help="pass@k values, comma-separated (default 1,2,4,... up to and including --n)",
    )
    p.add_argument(
        "--out", default=None, help="output dir (default: <run dir>/eval or eval_out/<model>)"
    )
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=32, help="sequences generated at once")
    p.add_argument("--seed", type=int, default=0, help="sampling and bootstrap seed")
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
        "--backend",
        choices=["hf", "vllm"],
        default="hf",
        help="generation backend (vllm: GPU, pip install vllm)",
    )
    p.add_argument(
        "--device",
        default=None,
        help="torch device for --backend hf (default: cuda if available, else cpu)",
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
    p.set_defaults(func=run)


def default_out_dir(model: str | None) -> str:
    from pathlib import Path

    if model and (Path(model) / "config.yaml").is_file():  # a run directory
        return str(Path(model) / "eval")
    from ict.data import file_stem

    return str(Path("eval_out") / file_stem(model or "smollm2-135m-instruct"))


def run(args: argparse.Namespace) -> int:
    """Evaluate once per seed (the model is loaded once); the paper's table when asked for."""
    from ict.errors import ConfigError
    from ict.eval.paper import check_paper_settings, wants_paper_table

    if args.seeds < 1:
        raise ConfigError(f"--seeds must be >= 1, got {args.seeds}")
    if args.k is None:  # every power of two below n, and n: the pass@k-against-k curve
        from ict.eval.metrics import curve_ks

        args.k = curve_ks(args.n) if args.n >= 1 else [1]  # n < 1 is refused by validate()
    benchmarks = split_benchmarks(args.benchmarks)
    paper = wants_paper_table(benchmarks)
    if paper:
        check_paper_settings(args.n, args.k)
    out = args.out or default_out_dir(args.model)
    summaries, sampler = [], None
    for seed in range(args.seed, args.seed + args.seeds):
        seed_out = out if args.seeds == 1 else f"{out}/seed{seed}"
        summary, sampler = _run_one(args, seed, benchmarks, seed_out, sampler)
        summaries.append(summary)
    if paper:
        _write_paper_table(summaries, out, args.model)
    return 0


def _run_one(args: argparse.Namespace, seed: int, benchmarks, seed_out: str, sampler):
    """One evaluation with sampling seed `seed` into `seed_out`: (summary, sampler)."""
    import sys

    from ict.eval.runner import (
        EMBEDDED_MODEL_LABEL,
        EvalSettings,
        load_all_eval_items,
        results_table,
        run_eval,
    )
    from ict.rewards import Verifier

    settings = EvalSettings(
        model=args.model or EMBEDDED_MODEL_LABEL,
        n=args.n,
        k=args.k,
        temperature=args.temperature,
        top_p=args.top_p,
        max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size,
        seed=seed,
        limit=args.limit,
        backend=args.backend,
    )
    settings.validate()
    items = load_all_eval_items(benchmarks, settings.limit, args.data_dir)  # data errors first
    if sampler is None:  # loaded once: the seed only enters through sample(seed=...)
        sampler = make_sampler(args, settings)
    verifier = Verifier(timeout_s=args.verify_timeout)
    try:
        summary = run_eval(
            sampler,
            benchmarks,
            settings,
            out_dir=seed_out,
            data_dir=args.data_dir,
            verifier=verifier,
            overwrite=args.overwrite,
            items=items,
            progress=lambda msg: print(msg, file=sys.stderr, flush=True),
        )
    finally:
        verifier.close()
    print(results_table(summary))
    plot = _write_k_plot(summary, seed_out)
    print(
        f"\nmodel {summary['model']}; n={settings.n}, temperature={settings.temperature}, "
        f"top_p={settings.top_p}, max_new_tokens={settings.max_new_tokens}, seed={settings.seed}; "
        f"values in %, 95% bootstrap CI over problems.\nwrote {seed_out}/summary.json, summary.md, "
        f"samples/{', pass_at_k.png' if plot else ''}"
    )
    return summary, sampler


def _write_k_plot(summary: dict, out: str):
    """OUT/pass_at_k.png: pass@k against k (log2 axis), one line per benchmark with its 95%
    bootstrap band over problems; None when matplotlib is missing or there is one k only."""
    from pathlib import Path

    ks = summary["settings"]["k"]
    if len(ks) < 2:
        return None
    try:
        from ict.report.plots import k_curves_from_summary, plot_k_curves

        return plot_k_curves(
            k_curves_from_summary(summary),
            Path(out) / "pass_at_k.png",
            title=f"pass@k against k - {summary['model']} (n = {summary['settings']['n']})",
        )
    except ImportError:  # matplotlib is an optional dependency (ict[train])
        return None


def _write_paper_table(summaries: list[dict], out: str, model: str | None) -> None:
    """Print the paper's table and save it as OUT/paper_table.json and OUT/paper_table.md."""
    from pathlib import Path

    from ict.eval.paper import paper_markdown, paper_table
    from ict.files import write_atomic, write_json_atomic

    table = paper_table(summaries)
    table["model"] = summaries[0]["model"]
    table["seeds_used"] = [s["settings"]["seed"] for s in summaries]
    text = paper_markdown(table, label=table["model"])
    print("\n" + text)
    write_json_atomic(Path(out) / "paper_table.json", table)
    write_atomic(Path(out) / "paper_table.md", text + "\n")
    print(f"wrote {out}/paper_table.json, paper_table.md")


def make_sampler(args: argparse.Namespace, settings):
    """The generation backend for the CLI flags (loads the model)."""
    if args.backend == "vllm":
        from ict.eval.backends import VLLMSampler

        if args.model is None:
            from ict.errors import ConfigError

            raise ConfigError("--backend vllm needs --model (an HF id or a local HF model dir)")
        return VLLMSampler(
            _vllm_model_path(args.model),
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_new_tokens=settings.max_new_tokens,
            stop=settings.stop,
        )
    import torch

    from ict.eval.runner import hf_sampler
    from ict.models import load_model_and_tokenizer

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = load_model_and_tokenizer(args.model, device=device)
    return hf_sampler(model, tokenizer, settings)


def _vllm_model_path(model: str) -> str:
    """A run dir or checkpoint dir resolves to its checkpoint folder (vLLM reads HF folders)."""
    from pathlib import Path

    try:
        from ict.models import resolve_checkpoint_dir

        resolved = resolve_checkpoint_dir(Path(model))
    except Exception:  # noqa: BLE001 - not a run dir: pass through
        resolved = None
    return str(resolved) if resolved is not None else model
