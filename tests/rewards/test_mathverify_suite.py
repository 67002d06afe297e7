"""math-verify's own test suite, run against ict's verifier (scripts/mathverify_suite.py).

`make test` fetches math-verify's sdist for the installed version into .cache/mathverify/ first
(`make mathverify-sdist`: a package download, since tests run offline); without that cache this
test is skipped with the command to fetch it. Every (gold, prediction) pair math-verify's tests
compare goes through `Verifier.math_equal` and `Verifier.judge_one` with that test's settings:
ict must never call right what math-verify calls wrong (it may be stricter: docs/eval.md lists
the cases).
"""

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mathverify_suite.py"
FETCH = "make mathverify-sdist (or: python scripts/mathverify_suite.py, which downloads it)"


def _cached() -> bool:
    try:
        version = importlib.metadata.version("math-verify")
    except importlib.metadata.PackageNotFoundError:
        return False
    return any((ROOT / ".cache" / "mathverify" / version).glob("math_verify-*"))


@pytest.mark.skipif(
    not _cached(),
    reason=f"math-verify's sdist is not in .cache/mathverify/ (tests run offline); fetch it: {FETCH}",
)
def test_whole_suite_has_no_lenient_disagreement():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--no-download", "--timeout", "5"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    header = re.search(r"(\d+) test calls .* (\d+) compared pairs, (\d+) distinct", out)
    assert header, out[-2000:]
    calls, distinct = int(header[1]), int(header[3])
    assert calls > 0 and distinct > 0
    # every distinct pair was checked, none skipped as inexpressible in ict's options
    assert f"checked {distinct} distinct pairs, {distinct} expressible" in out
    for api in ("math_equal", "judge_one"):
        line = re.search(
            rf"^{api}: agree (\d+), ict right & math-verify wrong (\d+), ict wrong & math-verify right (\d+)$",
            out,
            re.M,
        )
        assert line, f"no {api} line in:\n{out[-2000:]}"
        agree, lenient, strict = map(int, line.groups())
        assert lenient == 0, f"{api}: {lenient} pair(s) ict calls right and math-verify wrong"
        assert agree + lenient + strict == distinct
