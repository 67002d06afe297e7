"""The error for an unknown task or benchmark name, listing close matches.

Its own module so that `ict.data.benchmarks` and `ict.data.tasks` both use it without importing
each other (benchmarks -> unknown, tasks -> benchmarks, tasks -> unknown; no cycle).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ict.data.rg import rg_task_names
from ict.errors import DataError


def unknown_task_error(name: str, benchmarks: Iterable[str]) -> DataError:
    """A DataError for an unknown task name; `benchmarks`: the registered benchmark names."""
    benchmarks = sorted(benchmarks)
    rg_names = rg_task_names()
    known = benchmarks + ["paper"] + [f"rg:{n}" for n in rg_names] + rg_names
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return DataError(
        f"unknown task or benchmark {name!r}.{hint} Benchmarks: {', '.join(benchmarks)}; "
        "reasoning-gym tasks as rg:<task>; hub datasets as hf:<id>; local files as "
        "path.jsonl/.parquet; mixtures as mix:<spec>@<weight>,<spec>@<weight>."
    )
