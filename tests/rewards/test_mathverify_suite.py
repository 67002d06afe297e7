"""scripts/mathverify_suite.py on a subset of math-verify's own test cases (offline, cached sdist).

The sdist is fetched by running the script once (`python scripts/mathverify_suite.py`); without
that cache this test is skipped, and the adversarial table (test_adversarial.py) still runs.
"""

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mathverify_suite.py"


def _cached() -> bool:
    try:
        version = importlib.metadata.version("math-verify")
    except importlib.metadata.PackageNotFoundError:
        return False
    return any((ROOT / ".cache" / "mathverify" / version).glob("math_verify-*"))


@pytest.mark.skipif(
    not _cached(),
    reason="math-verify's sdist is not cached under .cache/mathverify/ (no network in tests); "
    "run `python scripts/mathverify_suite.py` once to fetch it",
)
def test_suite_subset_has_no_lenient_disagreement():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--no-download", "--limit", "60", "--timeout", "5"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ict right & math-verify wrong 0" in done.stdout
    assert "checked 60 distinct pairs" in done.stdout
