"""The exploration study's stages (docs/reports/toy-cot-explore): a thin caller of ict.compare.study.

    python scripts/explore_study.py STAGE --out runs/toy-cot-explore [--block B] [--dest DIR]

is `ict compare --preset toy-cot-explore --stage STAGE --out OUT [--block B] [--dest DIR]`, the
stages declared in the preset's `study` mapping (src/ict/configs/presets/toy-cot-explore.yaml);
`kl` is the `metrics` stage (the committed COMMAND.md runs it under that name). Kept so that the
commands in docs/reports/toy-cot-explore/COMMAND.md still run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ict.compare.presets import get_preset
from ict.compare.study import STAGES, run_stage
from ict.errors import ConfigError

PRESET = "toy-cot-explore"
ALIASES = {"kl": "metrics"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=[*STAGES, *ALIASES])
    parser.add_argument(
        "--dest", type=Path, default=Path("docs/reports/toy-cot-explore"), help="report folder"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/toy-cot-explore"))
    parser.add_argument("--block", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        run_stage(get_preset(PRESET), ALIASES.get(args.stage, args.stage), args.out,
                  dest=args.dest, block=args.block)  # fmt: skip
    except ConfigError as err:
        print(f"explore_study: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
