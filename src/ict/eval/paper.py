"""The paper's results table: pass@1 and pass@4 on its seven benchmarks and their average,
as the mean over seeds with a Student-t 95% interval over seeds (arXiv 2606.19771, Table 1).

`--benchmarks paper` expands to `PAPER_BENCHMARKS`; `paper_table` takes one evaluation result per
seed (ict.eval.runner's schema, or anything with {"benchmarks": {label: {"pass@k"}}})
and returns the numbers; `paper_markdown` prints them. Values are fractions in [0, 1] in the
data and percentages in the Markdown. The average of a seed is the unweighted mean of its seven
benchmark values (the paper's "Avg."), so the interval of the average is over seeds too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ict.data import PAPER_BENCHMARKS
from ict.errors import ConfigError
from ict.files import read_json_required, write_atomic, write_json_atomic

PAPER_KS = (1, 4)
PAPER_NAMES = {
    "math500": "MATH-500",
    "gsm8k": "GSM8K",
    "mmlu_stem": "MMLU-STEM",
    "gpqa": "GPQA",
    "aime23": "AIME 2023",
    "aime24": "AIME 2024",
    "aime25": "AIME 2025",
}


def expand_benchmarks(specs: Sequence[str]) -> list[str]:
    """Replace the word `paper` by the seven paper benchmarks; drop repeats, keep the order."""
    out: list[str] = []
    for spec in specs:
        for name in PAPER_BENCHMARKS if spec.strip() == "paper" else [spec]:
            if name not in out:
                out.append(name)
    return out


def wants_paper_table(specs: Sequence[str]) -> bool:
    """True when every paper benchmark is among `specs` (after expansion)."""
    expanded = expand_benchmarks(specs)
    return all(name in expanded for name in PAPER_BENCHMARKS)


def check_paper_settings(n: int, ks: Sequence[int]) -> None:
    """The paper table needs pass@1 and pass@4: k must include 1 and 4 (so n >= 4)."""
    missing = [k for k in PAPER_KS if k not in ks]
    if missing or n < max(PAPER_KS):
        raise ConfigError(
            f"the paper table needs pass@1 and pass@4: use --n 4 or more (got {n}) and a --k "
            f"that includes 1 and 4 (got {list(ks)}), e.g. --n 16 --k 1,4"
        )


def _interval(values: list[float]) -> dict[str, Any]:
    from ict.evidence.intervals import t_interval

    iv = t_interval(values)
    return {
        "mean": iv.mean,
        "ci95": [iv.low, iv.high] if iv.defined else None,
        "per_seed": list(values),
    }


def paper_table(
    summaries: Sequence[dict[str, Any]], benchmarks: Sequence[str] = PAPER_BENCHMARKS
) -> dict[str, Any]:
    """{"seeds": S, "rows": {bench: {"pass@1": {mean, ci95, per_seed}, "pass@4": ...}},
    "average": {"pass@1": ..., "pass@4": ...}} from one summary per seed.

    ci95 is None with one seed. A benchmark or pass@k missing from a summary is a ConfigError.
    """
    if not summaries:
        raise ConfigError("the paper table needs at least one evaluation summary")
    per_seed: dict[str, dict[str, list[float]]] = {}
    for bench in benchmarks:
        per_seed[bench] = {}
        for k in PAPER_KS:
            values = []
            for index, summary in enumerate(summaries):
                metrics = summary["benchmarks"].get(bench)
                if metrics is None or f"pass@{k}" not in metrics:
                    raise ConfigError(
                        f"summary {index} has no pass@{k} for {bench}; evaluate with "
                        "--benchmarks paper --n 4 (or more) --k 1,4"
                    )
                values.append(float(metrics[f"pass@{k}"]))
            per_seed[bench][f"pass@{k}"] = values
    rows = {
        bench: {key: _interval(values) for key, values in cols.items()}
        for bench, cols in per_seed.items()
    }
    average = {
        f"pass@{k}": _interval(
            [
                sum(per_seed[b][f"pass@{k}"][s] for b in benchmarks) / len(benchmarks)
                for s in range(len(summaries))
            ]
        )
        for k in PAPER_KS
    }
    return {"seeds": len(summaries), "rows": rows, "average": average}


def _cell(entry: dict[str, Any]) -> str:
    text = f"{100 * entry['mean']:.2f}"
    if entry["ci95"] is not None and all(math.isfinite(v) for v in entry["ci95"]):
        low, high = entry["ci95"]
        text += f" [{100 * low:.2f}, {100 * high:.2f}]"
    return text


def paper_markdown(table: dict[str, Any], label: str = "") -> str:
    """The table in the paper's layout: one row, P@1 and P@4 per benchmark, then the average
    (transposed here to one line per benchmark for readability)."""
    seeds = table["seeds"]
    note = (
        f"mean over {seeds} seeds [95% t interval over seeds]"
        if seeds > 1
        else "one seed (no interval; use --seeds 5 as in the paper)"
    )
    lines = [
        f"{label + ': ' if label else ''}pass@k in %, {note}",
        "",
        "| benchmark | P@1 | P@4 |",
        "|---|---|---|",
    ]
    for bench, row in table["rows"].items():
        name = PAPER_NAMES.get(bench, bench)
        lines.append(f"| {name} | {_cell(row['pass@1'])} | {_cell(row['pass@4'])} |")
    avg = table["average"]
    lines.append(f"| **Avg.** | {_cell(avg['pass@1'])} | {_cell(avg['pass@4'])} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The comparison grid (`ict compare --preset paper`): one table row per method, over seeds
# ---------------------------------------------------------------------------------------------
def grid_paper_tables(run_dirs, benchmarks: Sequence[str] = PAPER_BENCHMARKS) -> dict[str, dict]:
    """{method: paper_table over its seeds} from cell dirs `<method>_seed<s>` holding
    final_eval.json; methods in first-seen order. ConfigError naming a cell without results."""
    by_method: dict[str, list[dict]] = {}
    for run_dir in map(Path, run_dirs):
        method = run_dir.name.rsplit("_seed", 1)[0]
        path = run_dir / "final_eval.json"
        if not path.is_file():
            raise ConfigError(f"{run_dir} has no final_eval.json: finish the grid first")
        by_method.setdefault(method, []).append(read_json_required(path))
    return {m: paper_table(summaries, benchmarks) for m, summaries in by_method.items()}


def grid_paper_markdown(tables: dict[str, dict], title: str = "") -> str:
    """The paper's Table 1 layout: one row per method, P@1 / P@4 per benchmark, then Avg."""
    if not tables:
        raise ConfigError("no methods to tabulate")
    first = next(iter(tables.values()))
    benches = list(first["rows"])
    head = ["method"]
    for bench in benches + ["Avg."]:
        name = PAPER_NAMES.get(bench, bench)
        head += [f"{name} P@1", f"{name} P@4"]
    seeds = {t["seeds"] for t in tables.values()}
    lines = [
        (f"{title}\n\n" if title else "")
        + f"pass@k in %, mean over {'/'.join(map(str, sorted(seeds)))} seeds"
        + (" [95% t interval over seeds]" if max(seeds) > 1 else ""),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for method, table in tables.items():
        cells = [method]
        for bench in benches:
            cells += [_cell(table["rows"][bench]["pass@1"]), _cell(table["rows"][bench]["pass@4"])]
        cells += [_cell(table["average"]["pass@1"]), _cell(table["average"]["pass@4"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_grid_paper_table(run_dirs, out_dir) -> str:
    """Write OUT/paper_table.md and OUT/paper_table.json for a finished grid; returns the text."""
    tables = grid_paper_tables(run_dirs)
    text = grid_paper_markdown(tables)
    write_json_atomic(Path(out_dir) / "paper_table.json", tables)
    write_atomic(Path(out_dir) / "paper_table.md", text + "\n")
    return text
