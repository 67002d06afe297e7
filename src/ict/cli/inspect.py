"""`ict inspect`: token maps of a run's saved samples or of a model's responses to a few prompts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ict.errors import DataError, UserError

EXAMPLES = """\
examples:
  ict inspect runs/my-run                      # samples.jsonl of a run, last logged step
  ict inspect runs/my-run --step 10 --metric entropy
  ict inspect --model runs/my-run --prompt "What is 17+25?" --num-samples 2
  ict inspect runs/my-run --html map.html > map.txt   # plain text in a file
"""


def add_parser(subparsers, summary: str) -> None:
    p = subparsers.add_parser(
        "inspect",
        help=summary,
        description=summary,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", nargs="?", help="run directory (reads its samples.jsonl)")
    p.add_argument(
        "--model",
        help="instead of saved samples: a model (run dir, checkpoint, HF id/dir; "
        "'default' = the embedded SmolLM2) to sample from --prompt",
    )
    p.add_argument("--prompt", action="append", default=[], help="prompt for --model (repeatable)")
    p.add_argument(
        "--num-samples",
        type=int,
        default=4,
        help="responses per prompt with --model (default 4; the paper's score compares a "
        "prompt's responses, so one sample scores 0 everywhere)",
    )
    p.add_argument(
        "--max-new-tokens", type=int, default=64, help="response length limit with --model"
    )
    p.add_argument(
        "--temperature", type=float, default=1.0, help="sampling temperature with --model"
    )
    p.add_argument(
        "--autocast",
        choices=["auto", "bf16", "fp16", "off"],
        default="auto",
        help="autocast of the --model scoring pass: auto (bf16 only where the hardware has "
        "native bf16, else float32) | bf16 | fp16 | off (default auto)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--step", type=int, help="training step to show (default: the last logged one)")
    p.add_argument("--all-steps", action="store_true", help="show every logged step")
    p.add_argument("--max-responses", type=int, default=8, help="responses shown (default 8)")
    p.add_argument(
        "--metric",
        choices=["js", "entropy", "renyi2"],
        default="js",
        help="colour tokens by JS score, Shannon entropy H or Renyi-2 entropy H2 (default js)",
    )
    p.add_argument(
        "--method",
        default="ict",
        help="method whose selection is marked in the terminal; with --model also the method "
        "scored and selected as a training step would (default ict, the paper's)",
    )
    p.add_argument("--selector", dest="method", help=argparse.SUPPRESS)  # the earlier name
    p.add_argument(
        "--html",
        help="write the HTML token map here (default RUN/token_map.html, with --model "
        "runs/inspect/<model>/token_map.html)",
    )
    p.add_argument("--no-html", action="store_true", help="terminal output only")
    p.add_argument("--no-terminal", action="store_true", help="HTML only")
    p.add_argument("--no-color", action="store_true", help="terminal output without ANSI colours")
    p.add_argument(
        "--color",
        action="store_true",
        help="ANSI colours even when the output is not a terminal (default: colours on a "
        "terminal only, plain text into a file or a pipe)",
    )
    p.set_defaults(func=run)


def pick_records(records: list[dict], step: int | None, all_steps: bool, limit: int) -> list[dict]:
    """Records of one step (default the last), or of all steps; at most `limit`."""
    if not records:
        return []
    if not all_steps:
        steps = sorted({r.get("step", 0) for r in records})
        wanted = steps[-1] if step is None else step
        if wanted not in steps:
            raise DataError(
                f"no samples at step {wanted}; logged steps: {', '.join(map(str, steps))}"
            )
        records = [r for r in records if r.get("step", 0) == wanted]
    return records[:limit]


def use_color(args) -> bool:
    """ANSI colours: on a terminal, or with --color; never with --no-color (a file or a pipe
    gets plain text)."""
    if args.no_color:
        return False
    return bool(args.color) or sys.stdout.isatty()


def _model_html(model: str) -> Path:
    """The token map's default path for --model: runs/inspect/<model>/token_map.html (runs/ is
    git-ignored)."""
    from ict.data import file_stem
    from ict.models import EMBEDDED_DEFAULT

    name = None if model == "default" else model
    return (
        Path("runs")
        / "inspect"
        / file_stem(Path(name).name if name else EMBEDDED_DEFAULT)
        / "token_map.html"
    )


def run(args) -> int:
    from ict.files import check_writable, write_atomic

    if args.html and not args.no_html:  # read-only or full: before torch and the model load
        check_writable(Path(args.html).parent, flag="--html")
    elif not args.no_html and (args.model or args.run):  # the default place of the map
        run = Path(args.run or ".")
        default = (
            _model_html(args.model).parent if args.model else run if run.is_dir() else run.parent
        )
        check_writable(default, flag="--html")
    from ict.report.tokenmap import render_html, render_terminal

    if args.model:
        if not args.prompt:
            raise UserError('--model needs at least one --prompt "..."')
        from ict.models import check_model_path, load_model_and_tokenizer
        from ict.precision import choose_precision
        from ict.train.inspect import records_from_model

        name = None if args.model == "default" else args.model
        check_model_path(name)  # a mistyped local path: at once, not tried as a hub id
        default_html = _model_html(args.model)
        model, tokenizer = load_model_and_tokenizer(name)
        precision = choose_precision(args.autocast, next(model.parameters()).device)
        print(precision.describe(), file=sys.stderr)
        records = records_from_model(
            model,
            tokenizer,
            args.prompt,
            num_samples=args.num_samples,
            temperature=args.temperature,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            precision=precision,
            method=args.method,
        )
        title = f"ict token map - {args.model}"
    else:
        if not args.run:
            raise UserError(
                'give a run directory (ict inspect RUN_DIR) or --model M --prompt "..."'
            )
        from ict.files import read_jsonl

        path = Path(args.run)
        samples = path / "samples.jsonl" if path.is_dir() else path
        if not samples.exists():
            raise DataError(
                f"{samples} not found; train with log_samples_every > 0, or use --model and --prompt"
            )
        records = pick_records(read_jsonl(samples), args.step, args.all_steps, args.max_responses)
        if not records:
            raise DataError(f"{samples} holds no samples yet")
        title = f"ict token map - {path.name}"
        default_html = (path if path.is_dir() else path.parent) / "token_map.html"
    records = records[: args.max_responses]
    if not args.no_terminal:
        sys.stdout.write(
            render_terminal(
                records, metric=args.metric, selector=args.method, color=use_color(args)
            )
        )
    if not args.no_html:
        out = Path(args.html) if args.html else default_html
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, render_html(records, title=title, metric=args.metric))
        print(f"token map: {out}")
    return 0
