"""What the verdicts need beyond one number per seed, read from the run directories: per-problem
values (the over-problems tests), warm-start blocks and the equivalence margins derived from the
baseline's measured change (ict.report.verdicts.evaluate takes all three).

- Per-problem values of a report key: each run's pass@k per held-out problem (ict.report.
  comparison.unit_values), kept only when every run of the key was evaluated on the same problems
  in the same order (the grid's design); otherwise the key has no over-problems test.
- Blocks: the warm start each run started from, as its grid records it (GRID/warm_start.json,
  GRID = the run directory's grandparent), named by its cache folder ("toy-cot/<key>"); a
  seed's block is its runs' warm start. Blocking applies
  only when the runs come from more than one warm start and every seed's runs agree on theirs.
- Start values: a run's grid evaluated its start model with the final evaluation's settings
  (GRID/start_eval.json); the baseline's change on a key is the mean over its seeds of (final -
  its grid's start). A relative margin is `Endpoints.relative_margin` x |that change|; an absolute
  margin is checked against it and the row says whether it is smaller.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from ict.evidence.endpoints import Endpoints
from ict.evidence.verdict import Key, Margin
from ict.files import read_json
from ict.report.runs import Run
from ict.report.verdicts import pass_key


@lru_cache(maxsize=64)
def _grid_file(grid: Path, name: str) -> dict | None:
    return read_json(grid / name)


def grid_file(run: Run, name: str) -> dict | None:
    """GRID/<name> of the grid that holds `run` (None when the run is not in a grid)."""
    return _grid_file(Path(run.path).resolve().parent.parent, name)


def warm_start_blocks(runs: Sequence[Run], seed_key: Callable[[Run], object]) -> dict | None:
    """{seed: warm-start label} when the runs come from several warm starts and each seed's runs
    agree on one; None otherwise (no blocking)."""
    by_seed: dict = {}
    for run in runs:
        info = grid_file(run, "warm_start.json")
        path = info.get("path") if info else None
        if path is None:
            return None
        label = "/".join(Path(str(path)).parts[-2:])  # "toy-cot/<cache key>": no machine path
        by_seed.setdefault(seed_key(run), set()).add(label)
    if any(len(labels) != 1 for labels in by_seed.values()):
        return None
    blocks = {seed: next(iter(labels)) for seed, labels in by_seed.items()}
    return blocks if len(set(blocks.values())) > 1 else None


def problem_values(
    groups: Mapping[str, Sequence[Run]], key: str, unit_values, seed_key
) -> dict | None:
    """{method: {seed: [P] per-problem values}} of `key`, or None unless every run holds them
    for the same problem ids in the same order."""
    out: dict = {}
    ids = None
    for method, runs in groups.items():
        for run in runs:
            units = unit_values(run, key)
            if units is None or units.ids is None:
                return None
            if ids is None:
                ids = units.ids
            elif units.ids != ids:
                return None
            out.setdefault(method, {})[seed_key(run)] = units.values
    return out or None


def start_value(run: Run, key: str) -> float | None:
    """The run's grid's start model at `key` (GRID/start_eval.json), or None."""
    parsed = pass_key(key)
    result = grid_file(run, "start_eval.json")
    if parsed is None or not result:
        return None
    bench, k = parsed
    value = result.get("benchmarks", {}).get(bench, {}).get(f"pass@{k}")
    return float(value) if isinstance(value, (int, float)) else None


def baseline_change(runs: Sequence[Run], key: str) -> float | None:
    """Mean over the baseline's runs of (final - its grid's start) at `key`; None if any is
    missing."""
    changes = []
    for run in runs:
        start, final = start_value(run, key), run.final(key)
        if start is None or final is None or not math.isfinite(final):
            return None
        changes.append(final - start)
    return float(np.mean(changes)) if changes else None


def derived_margins(
    keys: Sequence[Key], endpoints: Endpoints, baseline: str, baseline_runs: Sequence[Run]
) -> dict[Key, Margin]:
    """{comparison: (margin, how it was derived)} for every pass@k comparison (module docstring)."""
    out: dict[Key, Margin] = {}
    changes: dict[str, float | None] = {}
    for k in keys:
        key = k[2]
        if pass_key(key) is None:
            continue
        if key not in changes:
            changes[key] = baseline_change(baseline_runs, key)
        change = changes[key]
        if change is None:
            source = f"declared, absolute; {baseline}'s change from the start not measured"
            out[k] = (endpoints.margin, source)
        elif endpoints.relative_margin is not None and change != 0.0:
            margin = endpoints.relative_margin * abs(change)
            source = (
                f"{endpoints.relative_margin:g} x |{baseline}'s change from the start| "
                f"({change:+.3f})"
            )
            out[k] = (margin, source)
        else:
            side = "smaller" if endpoints.margin < abs(change) else "NOT smaller"
            source = f"declared, absolute; {side} than {baseline}'s change from the start ({change:+.3f})"
            out[k] = (endpoints.margin, source)
    return out
