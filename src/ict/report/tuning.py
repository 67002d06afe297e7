"""The report's tuning section: the rule, each arm's score against the tuned value (a figure with
every tuning seed's point), the method x value table and any choice at the grid's edge.

Reads the record `ict compare` writes to OUT/tuning/tuning.json (ict.compare.tuning.tuning_record:
the declared rule with its text, each method's validation score per value and tuning seed, the
selection, the edges still reached when growth ran out; in shared mode also the table the one
choice was made on) and shows every cell's score, so a reader sees the effort each method got and
where its choice sits. A record written before the rules had names (issue 30's) reads as the rule
it describes.
"""

from __future__ import annotations

import math
from pathlib import Path

from ict.report.document import Document
from ict.report.plots import _pyplot, method_color, save_figure

SHARED = "shared"  # the panel of the shared table (mean over methods) in shared mode


def rule_text(rule: dict) -> str:
    """The rule in words: the record's own text (ict.compare.tuning.Rule.text), or, for a record
    that has none, the issue-30 rule it describes."""
    head = (
        f"Each method's `{rule['param']}` was chosen before the test cells ran, on the validation "
        "split (disjoint from training and test problems) with tuning seeds "
        f"{', '.join(map(str, rule['seeds']))} (disjoint from the test seeds), by a rule fixed in "
        f"advance ({rule['mode'].replace('_', ' ')}"
    )
    if "text" in rule:
        return (
            f"{head}; rule `{rule['name']}`, metric {' and '.join(rule['metric'])}): {rule['text']}"
        )
    return (
        f"{head}): a cell's score is the mean of {' and '.join(rule['metric'])} averaged over its "
        "checkpoints after RL, then over the tuning seeds; the smallest value within "
        f"{rule['tie_margin']:g} of the best wins; a choice at the grid's edge grows the grid by "
        f"one point (at most {rule['grow']} per method)."
    )


def _edges(m: dict) -> list[str]:
    """The edges a method's best region still reaches with no growth left ("low", "high")."""
    if "at_edge" in m:
        return list(m["at_edge"])
    return ["an"] if m.get("at_edge_not_grown") else []  # issue-30 records


def write_tuning_section(
    doc: Document, record: dict | None, plots: Path | None = None
) -> dict | None:
    """The "Tuning" section from a tuning record (None: no section); with `plots` (a folder) it
    opens with the score-against-value figure (`plot_tuning`). Returns the record for
    report.json."""
    if not record:
        return None
    rule, methods = record["rule"], record["methods"]
    doc.heading("Tuning (validation problems, tuning seeds)")
    doc.para(rule_text(rule) + " Every method had the same number of cells per grid point.")
    if plots is not None:
        path = plot_tuning(record, Path(plots) / "tuning.png")
        doc.image(
            path,
            f"Validation score ({' and '.join(rule['metric'])}) against {rule['param']} (log "
            "scale): one point per tuning seed, the line through the seed means; star: the "
            "selected value; shaded: the values tied with the best (within 1 SE of the paired "
            "difference); a red title: the best region reaches the grid's edge.",
        )
    values = sorted({float(v) for m in methods.values() for v in m["scores"]})
    header = ["method", *[f"{v:.3g}" for v in values], "selected"]
    rows = []
    for name, m in methods.items():
        cells = []
        for v in values:
            key = f"{v:.3g}"
            if key not in m["scores"]:
                cells.append("-")
                continue
            seeds = ", ".join(f"{s:.3f}" for s in m["per_seed"][key].values())
            mark = "**" if abs(v - m["selected"]) <= 1e-12 * max(1.0, v) else ""
            cells.append(f"{mark}{m['scores'][key]:.3f}{mark} ({seeds})")
        edge = _edges(m)
        rows.append([name, *cells, f"{m['selected']:.3g}" + (" (at edge)" if edge else "")])
    doc.table(header, rows)
    shared = (
        " The selection is shared: it was made on the mean over methods."
        if "shared" in record
        else ""
    )
    doc.para(
        "Each cell: the mean validation score over tuning seeds (each seed's in brackets); bold: "
        f"the selected value.{shared}"
    )
    edged = {n: _edges(m) for n, m in methods.items() if _edges(m)}
    if edged:
        doc.para(
            "**At the grid's edge after its last growth:** "
            + "; ".join(f"{n} ({' and '.join(e)} edge)" for n, e in edged.items())
            + ". The best value may lie beyond the grid: the choice is not bracketed."
        )
    return record


def _panels(record: dict) -> list[tuple[str, dict]]:
    """(title, table) per panel: each method, then the shared table in shared mode."""
    panels = list(record["methods"].items())
    if "shared" in record:
        panels.append((f"{SHARED} (mean over methods)", record["shared"]))
    return panels


def plot_tuning(record: dict, path: Path) -> Path:
    """One panel per method (and the shared table): each tuning seed's score at each value
    (points), the seed means (line), the selection (star), the tied plateau (shaded) when the
    rule records one; the panel's title in red when its best region reaches the grid's edge.
    Returns the PNG's path."""
    plt = _pyplot()
    panels = _panels(record)
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, (title, m) in zip(axes.flat, panels, strict=False):
        color = "black" if title.startswith(SHARED) else method_color(title)
        values = sorted(float(v) for v in m["scores"])
        for v in values:
            seeds = list(m["per_seed"][f"{v:.3g}"].values())
            ax.scatter([v] * len(seeds), seeds, color=color, alpha=0.45, s=14, lw=0)
        ax.plot(values, [m["scores"][f"{v:.3g}"] for v in values], color=color, marker="o", ms=3)
        if "plateau" in m:
            low, high = m["plateau"]
            ax.axvspan(low / 2**0.25, high * 2**0.25, color=color, alpha=0.1, lw=0)
        ax.plot([m["selected"]], [m["scores"][f"{m['selected']:.3g}"]], marker="*", ms=14,
                color=color, markeredgecolor="black", lw=0)  # fmt: skip
        edge = _edges(m)
        label = f"{title}: {m['selected']:.3g}" + (
            f" (at {' and '.join(edge)} edge)" if edge else ""
        )
        ax.set_title(label, fontsize=9, color="#b00020" if edge else "black")
        ax.set_xscale("log", base=2)
        ax.set_xticks(values, [f"{v:.3g}" for v in values], rotation=45, fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel(record["rule"]["param"])
        ax.set_ylabel(" and ".join(record["rule"]["metric"]))
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    return save_figure(fig, path)
