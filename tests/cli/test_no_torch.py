"""`ict --help` and every `ict <command> --help` build their parsers without torch/transformers."""

import subprocess
import sys

import pytest

from ict.cli import SUBCOMMANDS

CHECK = """\
import sys
from ict.cli import main
try:
    main({argv!r})
except SystemExit as exit:
    assert exit.code in (0, None), exit.code
heavy = sorted(name for name in ("torch", "transformers") if name in sys.modules)
assert not heavy, f"--help imported {{heavy}}"
"""


@pytest.mark.parametrize(
    "argv",
    [["--help"], *([name, "--help"] for name, _ in SUBCOMMANDS)],
    ids=lambda argv: " ".join(["ict", *argv]),
)
def test_help_imports_no_torch(argv):
    done = subprocess.run(
        [sys.executable, "-c", CHECK.format(argv=argv)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ict"), done.stdout[:200]
