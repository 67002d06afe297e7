"""Re-render a comparison report's verdicts from its report.json, without the run directories.

`ict compare --rerender REPORT_DIR` (the committed reports in docs/reports were re-rendered this
way): report.json holds every method's value per seed at every key, so the seed-level tests, the
Holm adjustment over the declared primary comparisons, TOST, the MDE and the verdicts
(ict.report.verdicts) are rebuilt exactly as a live report would build them. The descriptions
(bootstrap intervals) are the stored ones. report.md is read back into its blocks
(`parse_markdown`, the inverse of ict.report.document.Document.markdown) and these parts are
replaced: the intervals paragraph, the declared endpoints (inserted first, before any number), the
final results' tables, the entropy-health section (the runs' metrics are not in report.json: the
old per-step flags are withdrawn as verdicts and the stored window ratios are shown), a loss-mode
note, and the exploration section's differences and change sentences. Everything else (the scope,
kept first; plots, overlap, positions, settings) is kept as it was. report.html is rewritten from the same blocks
when it exists; report.json gains "endpoints", "verdicts", "health" and "rerendered".
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from ict.errors import DataError
from ict.evidence.endpoints import Endpoints
from ict.evidence.health import HealthCriterion
from ict.evidence.intervals import Interval, format_interval
from ict.evidence.verdict import Judgement
from ict.files import read_json, write_atomic
from ict.report.answer import write_answer_section
from ict.report.comparison import (
    INTERVAL_METHOD,
    MethodResult,
    _json_safe,
    interval_method_text,
    write_endpoints_section,
    write_results,
)
from ict.report.document import Document
from ict.report.exploration import (
    CHANGE_PARA,
    DIFFERENCE_PARA,
    EXPLORATION_TEXT,
    HEALTH,
    KCurves,
    difference_table,
    k_verdicts,
)
from ict.report.health import write_loss_mode_section
from ict.report.scope import HEADING as SCOPE
from ict.report.verdicts import evaluate, judgement_json, values_of

RERENDER_NOTE = (
    "**Re-rendered** from this report's report.json (`ict compare --rerender`, the command in "
    'report.json\'s "rerendered"): the runs were not repeated; the verdicts are rebuilt from the '
    "stored per-seed values by the seed-level rule below, the intervals are the stored "
    "descriptions. "
)
DECLARED_LATE = (
    "The endpoints were declared at re-rendering, after these runs were made: the paper's two "
    "claims (ICT - GRPO at pass@4, ICT - random_sequence at pass@1) where their methods ran, not "
    "a choice made from the results."
)


OLD_RULE = " A difference whose interval contains 0 is reported as *no significant difference*."
VERDICTS_FROM = (
    "Intervals describe; **verdicts** come from the seed-level tests under the declared "
    "endpoints below."
)


# ---- markdown -> Document ----------------------------------------------------------------------
def _cells(line: str) -> list[str]:
    inner = line.strip()[2:-2]  # "| a | b |" -> "a | b"
    return [c.replace("\\|", "|") for c in re.split(r"(?<!\\) \| ", inner)]


def parse_markdown(text: str, base: Path) -> Document:
    """The Document whose markdown(base) is `text` (the subset Document writes: headings,
    one-line paragraphs, tables, images with their caption line, fenced pre blocks)."""
    lines = text.split("\n")
    if not lines or not lines[0].startswith("# "):
        raise DataError("not a report.md written by ict (no '# title' first line)")
    doc = Document(lines[0][2:])
    i = 1
    while i < len(lines):
        line = lines[i]
        if not line:
            i += 1
        elif re.match(r"#{2,6} ", line):
            level = len(line) - len(line.lstrip("#"))
            doc.heading(line[level + 1 :], level)
            i += 1
        elif line.startswith("| "):
            header = _cells(line)
            rows = []
            i += 2  # header, separator
            while i < len(lines) and lines[i].startswith("| "):
                rows.append(_cells(lines[i]))
                i += 1
            doc.blocks.append(("table", header, rows))  # as written: no re-layout
        elif line.startswith("!["):
            match = re.fullmatch(r"!\[(.*)\]\((.+)\)", line)
            if match is None:
                raise DataError(f"report.md line {i + 1}: unreadable image link {line!r}")
            doc.image(base / match.group(2), match.group(1))
            i += 4  # the link, a blank line, the *caption* line, a blank line
        elif line == "```":
            end = lines.index("```", i + 1)
            doc.pre("\n".join(lines[i + 1 : end]))
            i = end + 1
        else:
            doc.para(line)
            i += 1
    return doc


# ---- report.json -> the report's numbers -------------------------------------------------------
def _interval(entry: dict | None, default_method: str) -> Interval | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("mean"), (int, float)):
        return None

    def num(key):
        value = entry.get(key)
        return float(value) if isinstance(value, (int, float)) else math.nan

    return Interval(
        float(entry["mean"]), num("low"), num("high"), int(entry.get("n") or 0),
        str(entry.get("method") or default_method), 0.95,
    )  # fmt: skip


def _seed(key: str):
    return int(key) if key.lstrip("-").isdigit() else key


def _seed_text(seed, value: float, triple) -> str:
    """'s0 0.770 [0.718, 0.820]' from a stored [mean, low, high], else 's0 0.770' (a run name
    instead of 's0' when the run had no seed), as the live report writes it."""
    name = f"s{seed}" if isinstance(seed, int) else str(seed)
    numbers = isinstance(triple, list) and len(triple) == 3
    if numbers and all(isinstance(x, (int, float)) for x in triple):
        return f"{name} {format_interval(Interval(triple[0], triple[1], triple[2], 1, ''))}"
    return f"{name} {value:.3f}"


def stored_results(raw: dict, baseline: str) -> dict[str, dict[str, MethodResult]]:
    """{report key: {method: MethodResult}} from report.json's "metrics"."""
    out: dict[str, dict[str, MethodResult]] = {}
    for key, by_method in raw.get("metrics", {}).items():
        out[key] = {}
        for method, entry in by_method.items():
            values = {
                _seed(s): float(v)
                for s, v in (entry.get("values") or {}).items()
                if isinstance(v, (int, float))
            }
            if not values:
                continue
            per_seed = entry.get("per_seed") or {}
            text = "; ".join(_seed_text(s, v, per_seed.get(str(s))) for s, v in values.items())
            diff = None if method == baseline else _interval(entry.get("difference"), "t")
            mean = _interval(entry, "t") or Interval(math.nan, math.nan, math.nan, 0, "t")
            out[key][method] = MethodResult(values, mean, text, per_seed, diff)
    return {k: v for k, v in out.items() if v}


# ---- the sections -------------------------------------------------------------------------------
def _section(doc: Document, title: str) -> tuple[int, int] | None:
    """(start, end) block indices of the level-2 section `title` (heading included)."""
    for i, block in enumerate(doc.blocks):
        if block[0] == "h" and block[1] == 2 and block[2] == title:
            end = next(
                (j for j in range(i + 1, len(doc.blocks)) if doc.blocks[j][:2] == ("h", 2)),
                len(doc.blocks),
            )
            return i, end
    return None


def _blocks(write, *args) -> list[tuple]:
    tmp = Document("")
    write(tmp, *args)
    return tmp.blocks


def _intro(doc: Document, baseline: str, pct: int) -> None:
    """Replace the intervals paragraphs ("**Intervals**" / "**Per seed**" / an older
    "Intervals: ..." one) with today's text."""
    first = _section(doc, "Final results")
    stop = first[0] if first else len(doc.blocks)
    keep, placed = [], False
    for block in doc.blocks[:stop]:
        text = block[1] if block[0] == "p" else ""
        if text.startswith("Intervals:"):  # an older report (Student t): keep what it used
            text = text.replace(OLD_RULE, "")
            keep.append(("p", text if text.endswith(VERDICTS_FROM) else f"{text} {VERDICTS_FROM}"))
            continue
        if text.startswith(("**Intervals**", "**Per seed**")):
            if not placed:
                keep += [("p", p) for p in interval_method_text(baseline, pct)]
                placed = True
            continue
        keep.append(block)
    doc.blocks[:stop] = keep


def _endpoints(doc: Document, judgement: Judgement) -> None:
    blocks = _blocks(write_endpoints_section, judgement)
    late = DECLARED_LATE if judgement.endpoints.primary else "No primary comparison is declared."
    blocks.insert(1, ("p", RERENDER_NOTE + late))
    old = _section(doc, "Declared endpoints")
    if old is not None:
        del doc.blocks[old[0] : old[1]]
    if ("h", 2, "Runs") not in doc.blocks:
        doc.blocks.insert(0, ("h", 2, "Runs"))
    scope = _section(doc, SCOPE)  # the scope stays first, as a live report has it
    at = scope[1] if scope is not None and scope[0] == 0 else 0
    doc.blocks[at:at] = blocks  # before the runs and any number, as a live report has it


def _answer(doc: Document, judgement: Judgement, results, confidence, baseline, plots) -> None:
    """The answer (question and forest plot) rebuilt, right after the declared endpoints."""
    blocks = _blocks(
        write_answer_section, judgement, values_of(results), confidence, baseline, plots
    )
    old = _section(doc, "Answer")
    if old is not None:
        del doc.blocks[old[0] : old[1]]
    at = _section(doc, "Declared endpoints")
    doc.blocks[at[1] : at[1]] = blocks


def _results(doc, results, baseline, confidence, judgement) -> dict:
    start, end = _section(doc, "Final results")
    first_sub = next(
        (j for j in range(start + 1, end) if doc.blocks[j][:2] == ("h", 3)), end
    )  # the evaluation settings stay; the tables are rebuilt
    tmp = Document("")
    metrics = write_results(tmp, results, baseline, confidence, judgement)
    doc.blocks[first_sub:end] = tmp.blocks
    return metrics


def _health(doc: Document, raw: dict) -> dict:
    """The health section from what report.json holds: the old per-step flags withdrawn as
    verdicts, and the exploration section's window ratios per method where they were stored."""
    flags = raw.get("health_flags") or raw.get("health", {}).get("step_flag_rows") or []
    change = (raw.get("exploration") or {}).get("change") or {}
    blocks: list[tuple] = [("h", 2, "Entropy health")]
    text = (
        "This report's run directories are not in the repository, so the window criterion "
        "(ict.evidence.health: the last W steps' mean entropy against the first W's) cannot be "
        "applied per run here."
    )
    if flags:
        text += (
            f" The {len(flags)} per-run flags it printed before came from a per-step check (one "
            "step below 0.3x the mean of the first 3 steps, or above 3x): a per-step dip is a "
            "warning, not a verdict, so they are **withdrawn**."
        )
    blocks.append(("p", text))
    rows = []
    for method, c in change.items():
        ratio, window = c.get("entropy_ratio"), c.get("entropy_window") or 5
        if not isinstance(ratio, (int, float)):
            continue
        word = "COLLAPSE" if ratio < HEALTH.collapse_fraction else "-"
        crit = HealthCriterion(window=window)
        rows.append(
            [
                method, str(c.get("seeds", "")), word, f"{c.get('seeds_below', 0)} of {c.get('seeds', '')}",
                f"last-{window} mean H {ratio:.2f}x first-{window} (collapse < "
                f"{crit.collapse_fraction:g}x, explosion > {crit.explosion_multiple:g}x)",
            ]
        )  # fmt: skip
    if rows:
        blocks.append(
            (
                "p",
                "Per method, from the stored window means (mean over seeds of each run's first "
                "and last windows of logged steps):",
            )
        )
        blocks.append(("table", ["method", "seeds", "flag", "seeds below", "criterion"], rows))
    old = _section(doc, "Entropy health")
    if old is not None:
        doc.blocks[old[0] : old[1]] = blocks
    return {"step_flag_rows": flags, "window_from_exploration": bool(rows), "judged_per_run": False}


def _loss_modes(doc: Document, methods: list[str]) -> dict | None:
    old = _section(doc, "Loss modes: realised token rates")
    tmp = Document("")
    out = write_loss_mode_section(tmp, {m: [] for m in methods})
    if out is None:
        return None
    if old is not None:
        doc.blocks[old[0] : old[1]] = tmp.blocks
    else:
        at = _section(doc, "Entropy health")[1]
        doc.blocks[at:at] = tmp.blocks
    return out


def _exploration(doc, raw: dict, judgement: Judgement, baseline: str, pct: int) -> None:
    section = _section(doc, "Exploration")
    exploration = raw.get("exploration") or {}
    if section is None or not exploration:
        return
    start, end = section
    blocks = doc.blocks
    for bench, block in (exploration.get("pass_at_k") or {}).items():
        ks = block.get("ks") or []
        diffs = {
            m: {k: _interval(by_k.get(str(k)), "paired hierarchical bootstrap") for k in ks}
            for m, by_k in (block.get("difference") or {}).items()
        }
        stored = block.get("values") or {}
        values = {
            m: {k: {_seed(s): x for s, x in (by_k.get(str(k)) or {}).items()} for k in ks}
            for m, by_k in stored.items()
        }
        if all(m in values for m in diffs) and baseline in values:
            curves = KCurves(bench, ks, {}, diffs, None, values)
            verdicts = k_verdicts(curves, baseline, judgement)
        else:  # an older report.json: verdicts only at the final results' keys
            verdicts = {
                m: {k: judgement.get(m, baseline, f"eval/{bench}/pass@{k}") for k in ks}
                for m in diffs
            }
        for m, by_k in verdicts.items():
            for k, v in by_k.items():
                block["difference"][m][str(k)] = {
                    **{x: block["difference"][m][str(k)].get(x) for x in ("mean", "low", "high", "n", "method")},
                    **(v.as_dict() if v is not None else {"verdict": "inconclusive", "note": "no per-seed values at this k"}),
                }  # fmt: skip
        heading = next(
            (j for j in range(start, end) if blocks[j] == ("h", 3, f"pass@k against k: {bench}")),
            None,
        )
        if heading is None:
            continue
        para = next(
            j for j in range(heading, end) if blocks[j][0] == "p" and blocks[j][1].startswith("Difference to **")
        )  # fmt: skip
        header, rows = difference_table(diffs, verdicts, ks)
        blocks[para] = ("p", DIFFERENCE_PARA.format(baseline=baseline, pct=pct))
        blocks[para + 1] = ("table", header, rows)
    for j in range(start, end):
        if blocks[j][0] != "p":
            continue
        text = blocks[j][1]
        if text.startswith("Does a method raise pass@1"):
            blocks[j] = ("p", EXPLORATION_TEXT.format(pct=pct))
        elif text.startswith("Change from the first"):
            windows = {
                c.get("entropy_window") or 5 for c in (exploration.get("change") or {}).values()
            }
            text = "W = " + ", ".join(str(w) for w in sorted(windows)) + " in these runs' report"
            blocks[j] = ("p", CHANGE_PARA.format(window=text))
        else:
            for method, c in (exploration.get("change") or {}).items():
                if text.startswith(f"**{method}** ("):
                    blocks[j] = ("p", _change_sentence(method, c, raw))


def _change_sentence(method: str, c: dict, raw: dict) -> str:
    """A change sentence from report.json's stored change: intervals as descriptions; the
    per-seed values of the evaluated steps are not stored, so no seed-level test."""
    seeds = c.get("seeds", 0)
    parts = [f"**{method}** ({seeds} seed{'s' * (seeds != 1)})"]
    n = ((raw.get("exploration") or {}).get("steps", {}).get(method) or {}).get("n")
    p1, pn = _interval(c.get("pass@1"), ""), _interval(c.get("pass@n"), "")
    if p1 is not None:
        parts.append(
            f"pass@1 from step {c.get('first_step')} to {c.get('last_step')} "
            f"{format_interval(p1, signed=True)}; pass@{n or 'n'} "
            f"{format_interval(pn, signed=True) if pn else 'n/a'} (descriptions: the per-seed "
            "values of the evaluated steps are not in report.json, so no seed-level test)"
        )
    ratio = c.get("entropy_ratio")
    start, end = _interval(c.get("entropy_start"), ""), _interval(c.get("entropy_end"), "")
    if isinstance(ratio, (int, float)) and start and end:
        w = c.get("entropy_window") or 5
        word = "collapse" if ratio < HEALTH.collapse_fraction else "no collapse"
        parts.append(
            f"mean entropy {start.mean:.3f} -> {end.mean:.3f} nats (last-{w} mean H "
            f"{ratio:.2f}x first-{w}: {word}, criterion < {HEALTH.collapse_fraction:g}x; "
            f"{c.get('seeds_below', 0)} of {seeds} seeds below)"
        )
    return parts[0] + ": " + "; ".join(parts[1:]) + "."


# ---- the command --------------------------------------------------------------------------------
def rerender(report_dir: str | Path, endpoints: Endpoints, *, command: str = "") -> Path:
    """Rebuild REPORT_DIR's verdicts from its report.json under `endpoints` and rewrite
    report.md (and report.html when present) and report.json in place; returns report.md."""
    out = Path(report_dir)
    raw, md_path, baseline, confidence = stored_report(out)
    pct = int(round(confidence * 100))
    doc = parse_markdown(md_path.read_text(encoding="utf-8"), out)
    results = stored_results(raw, baseline)
    judgement = evaluate(values_of(results), baseline, endpoints, **stored_problem_inputs(raw))
    _intro(doc, baseline, pct)
    _endpoints(doc, judgement)
    _answer(doc, judgement, results, confidence, baseline, out / "plots")
    raw["metrics"] = _results(doc, results, baseline, confidence, judgement)
    raw["health"] = _health(doc, raw)
    raw.pop("health_flags", None)
    methods = sorted({m for by in results.values() for m in by})
    loss_modes = _loss_modes(doc, methods)
    if loss_modes is not None:
        raw["loss_modes"] = loss_modes
    _exploration(doc, raw, judgement, baseline, pct)
    raw["interval"] = INTERVAL_METHOD
    raw["endpoints"] = endpoints.as_dict()
    raw["verdicts"] = judgement_json(judgement)  # problem_units and blocks stay as stored
    raw["rerendered"] = {
        "from": "report.json per-seed values (ict.report.rerender)",
        "command": command or f"ict compare --rerender {out}",
    }
    write_atomic(md_path, doc.markdown(out))
    if (out / "report.html").exists():
        write_atomic(out / "report.html", doc.html())
    write_atomic(out / "report.json", json.dumps(_json_safe(raw), indent=2))
    return md_path


def stored_report(out: Path) -> tuple[dict, Path, str, float]:
    """(report.json, report.md's path, baseline, confidence) of a report directory `ict compare`
    wrote; DataError naming what is missing."""
    raw, md_path = read_json(out / "report.json"), out / "report.md"
    if not isinstance(raw, dict) or "metrics" not in raw or not md_path.exists():
        raise DataError(
            f"{out} needs report.json (with per-seed 'metrics') and report.md written by "
            "`ict compare`; pass the report directory itself"
        )
    return raw, md_path, str(raw.get("baseline") or "grpo"), float(raw.get("confidence") or 0.95)


def stored_problem_inputs(raw: dict) -> dict:
    """evaluate()'s per-problem inputs as a report.json stored them (none in reports written
    before they were): each comparison's over-problems test and derived margin, and the
    warm-start blocks of the seed-level tests."""
    from ict.evidence.problem_tests import ProblemTest

    def seed(s):
        return int(s) if str(s).lstrip("-").isdigit() else s

    stored, margins = {}, {}
    for c in (raw.get("verdicts") or {}).get("comparisons", []):
        k = (c["a"], c["b"], c["key"])
        pt = c.get("problem_test")
        if pt:
            stored[k] = ProblemTest(
                pt["test"], pt["seeds"], pt["problems"], pt["difference"], pt["se"],
                pt["se_seeds"], pt["se_problems"], pt["df"], pt["p"], pt.get("reason", ""),
            )  # fmt: skip
        if c.get("margin_source") and c.get("margin") is not None:
            margins[k] = (float(c["margin"]), str(c["margin_source"]))
    blocks = {seed(s): b for s, b in (raw.get("blocks") or {}).items()} or None
    return {"stored": stored, "blocks": blocks, "margins": margins}


def stored_endpoints(raw: dict) -> Endpoints:
    """The endpoints a report.json declares ("endpoints"), as ict.evidence.endpoints.declare
    builds them."""
    from ict.evidence.endpoints import declare

    e = raw.get("endpoints") or {}
    defaults = Endpoints()
    return declare(
        e.get("primary", ()),
        alpha=float(e.get("alpha", defaults.alpha)),
        margin=float(e.get("margin", defaults.margin)),
        source=str(e.get("source", "")),
        notes=tuple(e.get("notes", ())),
        relative_margin=e.get("relative_margin"),
        unit=str(e.get("unit", defaults.unit)),
    )


def rerender_figures(report_dir: str | Path) -> list[Path]:
    """Redraw REPORT_DIR's answer figures (plots/answer_forest.png, every comparison; and
    plots/answer_declared.png, the declared ones in one panel) from its report.json under the
    endpoints it declares, and rewrite report.html (its images are embedded) from report.md.
    report.md and report.json are not touched: the verdicts are recomputed first and must equal
    the stored ones (a DataError otherwise), so no number changes. Returns the figures written.
    The per-step curves (reward, entropy, ...) need the run directories and are not redrawn."""
    from ict.report.answer import DECLARED_STEM, FOREST_STEM

    out = Path(report_dir)
    raw, md_path, baseline, confidence = stored_report(out)
    results = stored_results(raw, baseline)
    judgement = evaluate(
        values_of(results), baseline, stored_endpoints(raw), **stored_problem_inputs(raw)
    )
    if "verdicts" in raw and _json_safe(judgement_json(judgement)) != raw["verdicts"]:
        raise DataError(
            f"{out}: the verdicts recomputed from report.json differ from the stored ones; "
            "re-render the whole report (ict compare --rerender) instead"
        )
    scratch = Document("")  # the answer section's text stays report.md's: only the figures
    write_answer_section(
        scratch, judgement, values_of(results), confidence, baseline, out / "plots"
    )
    written = [out / "plots" / f"{stem}.png" for stem in (FOREST_STEM, DECLARED_STEM)]
    if (out / "report.html").exists():
        doc = parse_markdown(md_path.read_text(encoding="utf-8"), out)
        write_atomic(out / "report.html", doc.html())
    return [p for p in written if p.exists()]
