"""The `ict` command: a thin dispatcher over one module per subcommand.

Each subcommand module in `ict.cli` defines `add_parser(subparsers, summary)` (which registers the
subcommand and sets `func`) and imports heavy libraries only inside its `run` function, so that
`ict --help` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys

from ict.cli.catalog import METHODS
from ict.errors import UserError

# (module, one-line summary); order is the order shown in `ict --help`.
SUBCOMMANDS = [
    (
        "train",
        f"train a model with ICT or one of {len(METHODS) - 1} other methods (see train --help)",
    ),
    ("eval", "pass@k of a model or run on benchmarks and procedural tasks"),
    ("compare", "grid of methods x seeds with one report (pass@k with intervals, curves)"),
    ("inspect", "token map: which tokens each selector picks, coloured by H, H2 or JS"),
    ("stats", "token statistics demo on a small random batch (no model needed)"),
]

EPILOG = """\
Quick start:
  ict train                      # embedded default: SmolLM2-135M-Instruct, method ict, 2 CPU cores:
                                 # ~5 min with native bf16, ~10 min in float32
  ict train --method grpo        # the same run with a baseline
  ict eval --model runs/<run>    # pass@k of the trained model
  ict compare --preset toy       # {toy}, one report
Run `ict <command> --help` for each command's options.
"""


def epilog() -> str:
    """EPILOG with the toy preset's grid size read from the preset registry."""
    from ict.cli.compare import grid_size

    return EPILOG.format(toy=grid_size("toy"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ict",
        description="Token-selective RL with verifiable rewards (RLVR) for language models.",
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from ict import __version__

    parser.add_argument("--version", action="version", version=f"ict {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="<command>")
    for name, summary in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"ict.cli.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"ict.cli.{name}":
                raise
            continue
        module.add_parser(subparsers, summary)
    return parser


NEGATIVE_NUMBER = re.compile(r"-(\d[\d_]*\.?\d*|\.\d+)([eE][+-]?\d+)?|-(inf|nan)", re.I)


def join_negative_values(argv: list[str]) -> list[str]:
    """`--flag -1e-5` -> `--flag=-1e-5`: argparse reads a word starting with `-` that is not a
    plain decimal (`-1e-5`, `-inf`) as an option, so a negative value after a long option is
    joined to it, the spelling argparse reads as a value (`--flag=-1e-5` itself is unchanged)."""
    out: list[str] = []
    for word in argv:
        previous = out[-1] if out else ""
        if (
            NEGATIVE_NUMBER.fullmatch(word)
            and previous.startswith("--")
            and "=" not in previous
            and previous != "--"
        ):
            out[-1] = f"{previous}={word}"
        else:
            out.append(word)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(join_negative_values(sys.argv[1:] if argv is None else list(argv)))
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except UserError as err:  # bad input: one clear message, no traceback
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a write that failed on the way (disk full, read-only): one line
        from ict.files import is_write_failure, write_failure

        if not is_write_failure(err):
            raise
        print(f"error: {write_failure(err)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
