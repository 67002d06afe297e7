"""The report's tuning section: the method x value table of a grid's tuning stage.

Reads the record `ict compare` writes to OUT/tuning/tuning.json (ict.compare.tuning.tuning_record:
the declared rule, each method's validation score per value and tuning seed, the selection) and
shows every cell's score, so a reader sees the effort each method got and where its choice sits.
"""

from __future__ import annotations

from ict.report.document import Document


def write_tuning_section(doc: Document, record: dict | None) -> dict | None:
    """The "Tuning" section from a tuning record (None: no section); returns the record for
    report.json."""
    if not record:
        return None
    rule, methods = record["rule"], record["methods"]
    metric = " and ".join(rule["metric"])
    doc.heading("Tuning (validation problems, tuning seeds)")
    doc.para(
        f"Each method's `{rule['param']}` was chosen before the test cells ran, by a rule fixed in "
        f"advance ({rule['mode'].replace('_', ' ')}): a cell's score is the mean of {metric} on "
        "the validation split (disjoint from training and test problems), averaged over its "
        f"checkpoints after RL, then over the tuning seeds {', '.join(map(str, rule['seeds']))} "
        f"(disjoint from the test seeds); the smallest value within {rule['tie_margin']:g} of "
        f"the best wins; a choice at the grid's edge grows the grid by one point "
        f"(at most {rule['grow']} per method). Every method had the same number of cells."
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
        rows.append([name, *cells, f"{m['selected']:.3g}"])
    doc.table(header, rows)
    doc.para(
        "Each cell: the mean validation score over tuning seeds (each seed's in brackets); bold: "
        "the selected value."
    )
    edge = [n for n, m in methods.items() if m.get("at_edge_not_grown")]
    if edge:
        doc.para(
            f"Still at an edge of its grid after growing: {', '.join(edge)} (the best value may "
            "lie beyond the grid)."
        )
    return record
