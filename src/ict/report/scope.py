"""The scope of a report's verdicts, stated before them, and the check that a text states it.

A "higher", "lower" or "equivalent" is about the initialisations the runs started from and the
learning rate they trained at, and it means only as much as the rule that chose that rate (a rate
chosen on one arm's stability edge, or on pass@1 alone, favours some arms). The convention, one
for reports and prose alike: one line per field in FIELDS, `**Scope - FIELD**: text` (a bullet
`- ` before it in prose), before the first verdict (in report.md, the section "Scope", first;
no table, so that a report's first table stays its answer's).

- `scope_rows`: the rows from the run directories (warm starts or start models, each method's
  learning rate) and what chose the rate (the grid's tuning record, the caller's words, or "fixed
  before the runs").
- `scope_problems`: what a text that states a verdict lacks (no scope, a field missing or empty
  or without its number, the scope after the first verdict); empty when the text states no verdict or states its scope.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ict.report.document import Document
from ict.report.problems import grid_file
from ict.report.runs import Run, flat_config
from ict.report.tuning import rule_text

HEADING = "Scope"
INITIALISATIONS, LEARNING_RATE, CHOSEN_BY = FIELDS = (
    "initialisations",
    "learning rate",
    "learning rate chosen by",
)
NUMBERED = (INITIALISATIONS, LEARNING_RATE)  # fields that must say how many / which value
UNSTATED = {"", "-", "n/a", "?", "unknown", "not recorded"}
FIXED = (
    "fixed before the runs (the preset's or the caller's value); no rule in this grid chose it, "
    "so every verdict holds at this rate only"
)
INTRO = (
    "What every verdict below is about: the initialisations the runs started from and the "
    "learning rate they trained at, with the rule that chose it (ict.report.scope)."
)

# a scope line: "**Scope - learning rate**: 6.3e-05 for every method", in prose also as a bullet
SCOPE_LINE = re.compile(r"^(?:- )?\*\*Scope - ([a-z ]+)\*\*: (.*)$")
# a verdict as reports and prose state it: "**lower**", "**lower (primary)**", "lower (exploratory)"
VERDICT = re.compile(
    r"\*\*(?:higher|lower|equivalent)\b[^*\n]*\*\*"
    r"|\b(?:higher|lower|equivalent) \((?:primary|exploratory|exp\.)\)"
)
RULE_LINES = ("**Verdict rule**",)  # the rule's own text names the verdicts without stating one


def _seeds_text(seeds) -> str:
    """Seeds as text, consecutive integers as ranges: {0, ..., 9, 12} -> "0-9, 12"."""
    ints = sorted(s for s in seeds if isinstance(s, int))
    parts, start = [], None
    for i, s in enumerate(ints):
        start = s if start is None else start
        if i + 1 == len(ints) or ints[i + 1] != s + 1:
            parts.append(str(s) if s == start else f"{start}-{s}")
            start = None
    return ", ".join(parts + [str(s) for s in seeds if not isinstance(s, int)])


def _lr_text(value: float) -> str:
    return f"{float(value):.3g}"


def _initialisations(runs: Sequence[Run]) -> str:
    """The initialisations in words: "2 supervised warm starts (toy-cot/<key> for seeds 0-9;
    ...): ..." or "1 start model (NAME): ..."."""
    warm: dict[str, set] = {}
    for run in runs:
        info = grid_file(run, "warm_start.json")
        if not info or info.get("path") is None:
            warm = {}
            break
        label = "/".join(Path(str(info["path"])).parts[-2:])  # the cache folder, no machine path
        warm.setdefault(label, set()).add(run.seed)
    if warm:
        n = len(warm)
        parts = [
            f"{label} for seed{'s' * (len(s) != 1)} {_seeds_text(s)}" for label, s in warm.items()
        ]
        what = "this initialisation" if n == 1 else f"these {n} initialisations"
        return (
            f"{n} supervised warm start{'s' * (n != 1)} ({'; '.join(parts)}): every verdict is "
            f"about {what}, not about the method over initialisations"
        )
    models = sorted({str(flat_config(r.config).get("model") or "") for r in runs} - {""})
    if not models and runs and all(flat_config(r.config).get("model", "") is None for r in runs):
        models = ["`ict train`'s default model (config model: null)"]
    if not models:
        return "not recorded"
    n = len(models)
    what = "this initialisation" if n == 1 else f"these {n} initialisations"
    return (
        f"{n} start model{'s' * (n != 1)} ({', '.join(models)}): every verdict is about {what}, "
        "not about the method over initialisations"
    )


def _learning_rates(runs: Sequence[Run]) -> str:
    """Each method's rate: "6.3e-05 for every method" or "grpo 2e-05; ict 6.35e-06"."""
    by_method: dict[str, set] = {}
    for run in runs:
        lr = flat_config(run.config).get("learning_rate")
        if lr is not None:
            by_method.setdefault(run.method, set()).add(float(lr))
    if not by_method:
        return "not recorded"
    values = {v for vs in by_method.values() for v in vs}
    if len(values) == 1:
        return f"{_lr_text(next(iter(values)))} for every method"
    return "; ".join(
        f"{m} {', '.join(_lr_text(v) for v in sorted(vs))}" for m, vs in by_method.items()
    )


def scope_rows(
    runs: Sequence[Run], *, tuning: dict | None = None, lr_choice: str | None = None
) -> list[list[str]]:
    """[[field, text]] for FIELDS, in order, from the runs' grid files and configs. How the rate
    was chosen: `lr_choice` (the caller's words) when given, else the tuning record's rule, else
    FIXED."""
    if lr_choice:
        chosen = lr_choice
    elif tuning and tuning.get("rule"):
        chosen = f"the grid's tuning stage: {rule_text(tuning['rule'])}"
    else:
        chosen = FIXED
    return [
        [INITIALISATIONS, _initialisations(runs)],
        [LEARNING_RATE, _learning_rates(runs)],
        [CHOSEN_BY, chosen],
    ]


def scope_line(field: str, text: str) -> str:
    """'**Scope - learning rate**: 6.3e-05 for every method' (SCOPE_LINE reads it back)."""
    return f"**Scope - {field}**: {text}"


def write_scope_section(doc: Document, rows: list[list[str]]) -> dict:
    """The "Scope" section (heading, INTRO, one line per field); returns {field: text} for
    report.json."""
    doc.heading(HEADING)
    doc.para(INTRO)
    for field, text in rows:
        doc.para(scope_line(field, text))
    return {field: text for field, text in rows}


# ---- the check --------------------------------------------------------------------------------
def stated_scope(text: str) -> tuple[int, dict[str, str]] | None:
    """(line index of the first scope line, {field: text}) of the SCOPE_LINE lines in `text`;
    None when there is none."""
    first, rows = None, {}
    for i, line in enumerate(text.split("\n")):
        match = SCOPE_LINE.match(line.strip())
        if match is not None:
            first = i if first is None else first
            rows.setdefault(match.group(1).lower(), match.group(2).strip())
    return None if first is None else (first, rows)


def first_verdict(text: str) -> tuple[int, str] | None:
    """(line index, the line) of the first line that states a verdict (VERDICT), skipping the
    verdict rule's own paragraph; None when no line does."""
    for i, line in enumerate(text.split("\n")):
        if line.startswith(RULE_LINES):
            continue
        if VERDICT.search(line):
            return i, line
    return None


def scope_problems(text: str) -> list[str]:
    """What `text` lacks: [] when it states no verdict, or states one after a complete scope;
    else one line per problem, naming the fix."""
    verdict = first_verdict(text)
    if verdict is None:
        return []
    line_no, line = verdict
    quoted = line.strip()[:80]
    scope = stated_scope(text)
    if scope is None:
        return [
            f"states a verdict (line {line_no + 1}: {quoted!r}) but no scope: add before it one "
            f"line per field, '**Scope - FIELD**: ...', for {', '.join(FIELDS)}"
        ]
    at, rows = scope
    problems = []
    for field in FIELDS:
        value = rows.get(field, "").strip()
        if value.lower() in UNSTATED:
            problems.append(f"the scope (line {at + 1}) does not state {field!r}")
        elif field in NUMBERED and not re.search(r"\d", value):
            problems.append(
                f"the scope's {field!r} names no number (how many initialisations, which rate): "
                f"{value[:60]!r}"
            )
    if at > line_no:
        problems.append(
            f"the scope (line {at + 1}) comes after the first verdict (line {line_no + 1}); "
            "state it before any verdict"
        )
    return problems
