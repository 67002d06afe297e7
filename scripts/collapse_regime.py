#!/usr/bin/env python3
"""Is a run in the collapse regime the long-horizon study looks for (issue 30, stage 3)?

    python scripts/collapse_regime.py RUN_DIR [RUN_DIR ...]

A run is accepted when (all three, docs/reports/toy-cot-long-tuned/PROTOCOL.md):
- its mean valid-token entropy over the last 10 steps is below 0.2x that over the first 10;
- its held-out pass@32 at the end is at least 0.1 below the start's (the same problems and samples);
- its held-out pass@1 at the end is not below the start's.
The start is heldout_before.json (or eval_steps/step_000000.json), the end the last
eval_steps/step_N.json (or heldout_after.json). Prints one line per run; exit 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

WINDOW, RATIO, DROP, K = 10, 0.2, 0.1, 32


def _pass(result: dict, k: int) -> float | None:
    """pass@k of the one benchmark of an evaluation result (ict.eval's schema)."""
    values = [v for key, v in result.get("metrics", {}).items() if key.endswith(f"/pass@{k}")]
    return values[0] if values else None


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def judge(run: Path) -> dict:
    """The three criteria of `run` and whether all hold."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
    entropy = [r["valid/entropy"] for r in rows if "valid/entropy" in r]
    first = sum(entropy[:WINDOW]) / min(WINDOW, len(entropy))
    last = sum(entropy[-WINDOW:]) / min(WINDOW, len(entropy))
    steps = sorted((run / "eval_steps").glob("step_*.json"))
    start = _load(run / "heldout_before.json") or (_load(steps[0]) if steps else None)
    end = _load(steps[-1]) if steps else _load(run / "heldout_after.json")
    out = {"run": str(run), "entropy_ratio": last / first if first else float("nan")}
    for k in (1, K):
        out[f"pass@{k}"] = (_pass(start, k), _pass(end, k)) if start and end else (None, None)
    p1, pk = out["pass@1"], out[f"pass@{K}"]
    out["accepted"] = (
        out["entropy_ratio"] < RATIO
        and None not in pk
        and pk[1] <= pk[0] - DROP
        and None not in p1
        and p1[1] >= p1[0]
    )
    return out


def _fmt(pair) -> str:
    a, b = pair
    return "n/a" if a is None or b is None else f"{a:.3f} -> {b:.3f} ({b - a:+.3f})"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    for arg in argv:
        r = judge(Path(arg))
        print(
            f"{r['run']}: entropy last/first {WINDOW} steps {r['entropy_ratio']:.2f} "
            f"(< {RATIO}?); pass@1 {_fmt(r['pass@1'])}; pass@{K} {_fmt(r[f'pass@{K}'])}; "
            f"{'ACCEPTED' if r['accepted'] else 'not the collapse regime'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
