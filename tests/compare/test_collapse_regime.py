"""scripts/collapse_regime.py: the stage-3 acceptance rule of the long-horizon study."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "collapse_regime", ROOT / "scripts" / "collapse_regime.py"
)
collapse_regime = importlib.util.module_from_spec(spec)
spec.loader.exec_module(collapse_regime)


def _run(tmp: Path, entropy: list[float], start: tuple, end: tuple) -> Path:
    """A run dir: metrics.jsonl with `entropy` per step, the start and end evaluations'
    (pass@1, pass@32)."""
    tmp.mkdir(parents=True)
    (tmp / "metrics.jsonl").write_text(
        "\n".join(json.dumps({"step": i, "valid/entropy": h}) for i, h in enumerate(entropy))
    )

    def result(p1, p32):
        return {"metrics": {"eval/t/pass@1": p1, "eval/t/pass@32": p32}}

    (tmp / "heldout_before.json").write_text(json.dumps(result(*start)))
    (tmp / "eval_steps").mkdir()
    (tmp / "eval_steps" / "step_000150.json").write_text(json.dumps(result(*end)))
    return tmp


@pytest.mark.parametrize(
    "entropy_end, end, accepted",
    [
        (0.1, (0.62, 0.85), True),  # entropy 0.1x, pass@32 -0.15, pass@1 up
        (0.3, (0.62, 0.85), False),  # entropy only 0.3x
        (0.1, (0.62, 0.95), False),  # pass@32 fell by 0.05 only
        (0.1, (0.55, 0.85), False),  # pass@1 fell
    ],
)
def test_the_three_criteria(tmp_path, entropy_end, end, accepted):
    run = _run(tmp_path / "r", [1.0] * 10 + [entropy_end] * 10, (0.60, 1.0), end)
    r = collapse_regime.judge(run)
    assert r["entropy_ratio"] == pytest.approx(entropy_end)
    assert r["pass@32"] == (1.0, end[1]) and r["accepted"] is accepted
