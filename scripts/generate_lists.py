#!/usr/bin/env python3
"""Write the lists of methods, selectors and presets from the registries, so none is typed by hand.

    python scripts/generate_lists.py            # rewrite every generated block and the catalog
    python scripts/generate_lists.py --check    # exit 1 naming each file that drifted (no writes)

Sources: `ict.methods.METHODS`, `ict.select.SELECTORS`, `ict.compare.presets.PRESETS`, the
study registries (`ict.compare.study.STAGES`, `ict.compare.pilot.PILOT_RULES`,
`ict.compare.grid_metrics.GRID_METRICS`, `ict.report.sections.SECTIONS`),
`ict.methods.MethodOptions` (the method options every engine shares) and the committed reports'
report.json (STUDIES: each study's primary verdicts).
Targets:
- Markdown (README.md, docs/**/*.md): every block between `<!-- generated: NAME -->` and
  `<!-- /generated -->` (each marker on a line of its own) is replaced by `render(NAME)`; NAMES
  lists the blocks there are.
- `src/ict/cli/catalog.py`: the method and selector registries as plain tuples, which
  `ict --help` and `ict train --help` read (the registries import torch; `--help` must not).
  The preset list in `ict compare --help` reads PRESETS itself (torch-free).
`make test` runs tests/docs/test_generated_lists.py, which fails when any target drifts.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "src" / "ict" / "cli" / "catalog.py"
COMMAND = "python scripts/generate_lists.py"
BLOCK = re.compile(
    r"(?P<open>^<!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(?P<close>^<!-- /generated -->$)",
    re.M | re.S,
)


def _sentence(text: str) -> str:
    """The first sentence of a docstring, on one line."""
    flat = " ".join((text or "").split())
    match = re.match(r"(.+?\.)(?=\s+[A-Z(`]|$)", flat)  # not at "i.e. the" or "i.i.d. uniform"
    return match.group(1) if match else flat


def methods() -> list[tuple[str, str, str]]:
    """(name, selector, description) of every registered method, in registry order."""
    from ict.methods import METHODS

    return [(m.name, m.selector, m.description) for m in METHODS.values()]


def method_settings() -> list[tuple[str, ...]]:
    """(name, selector, reference, kept, loss, warm-up, description) of every registered method,
    resolved (the selector's facts and the common defaults filled in), in registry order."""
    from ict.loss import LossConfig
    from ict.methods import METHODS
    from ict.select.core import selector_facts

    rows = []
    for method in METHODS.values():
        m = method.resolved()
        scores = any(n in ("js", "kl") for n in selector_facts(m.selector)["needs"])
        loss = [f"{m.loss_agg} / {m.normalize_by}"]
        if m.loss_mode != "vanilla":
            loss.append(f"loss mode `{m.loss_mode}`")
        if m.entropy_coef:
            loss.append(f"minus {m.entropy_coef:g} x entropy")
        if (m.eps_low, m.eps_high) != (LossConfig.eps_low, LossConfig.eps_high):
            loss.append(f"clip range {m.eps_low:g} / {m.eps_high:g}")
        kept = "every valid token" if m.selector == "every" else _kept(m.ratio, m.scope)
        rows.append((m.name, m.selector, m.reference if scores else "-", kept, ", ".join(loss),
                     str(m.dense_warmup_steps), m.description))  # fmt: skip
    return rows


def selectors() -> list[tuple[str, float | None, str, str]]:
    """(name, default ratio or None for a mask selector, default scope, first docstring sentence)."""
    from ict.select import SELECTORS

    return [
        (s.name, s.default_ratio, s.default_scope, _sentence(s.fn.__doc__))
        for s in SELECTORS.values()
    ]


def presets() -> list[tuple[str, str, list[str], int, int | None]]:
    """(name, summary, methods, seeds, RL steps) of every registered preset."""
    from ict.compare.presets import PRESETS

    rows = []
    for name, entry in PRESETS.items():
        preset = entry.build()
        rows.append(
            (name, entry.summary, list(preset.methods), preset.seeds, preset.train.get("max_steps"))
        )
    return rows


def options() -> list[tuple[str, str]]:
    """(field, help) of every MethodOptions field: the options ict train, TRL and verl share."""
    from dataclasses import fields

    from ict.methods import MethodOptions

    return [(f.name, f.metadata.get("help", "")) for f in fields(MethodOptions)]


# The committed studies the README's table shows, the newest first: (report folder under
# docs/reports, the model in words); seeds and the primary verdicts come from its report.json.
STUDIES = (
    ("toy-cot-explore", "3-layer toy transformer, 52-token chains, temperature 1.5, shared lr"),
    ("toy-cot-long-tuned", "3-layer toy transformer, 52-token chains, 150 steps, tuned lr"),
    ("toy-cot-long", "3-layer toy transformer, 52-token chains, 150 steps, one lr"),
    ("toy-cot", "3-layer toy transformer, 52-token chains, 40 steps"),
    ("toy", "2-layer toy transformer, 2-digit addition, 60 steps"),
    ("smollm-cot", "SmolLM2-135M-Instruct, running-total chains, 12 steps"),
    ("smollm-paper-ict", "SmolLM2-135M-Instruct, default task, 12 steps"),
)


def _verdict(c: dict) -> str:
    """'ict - grpo at pass@4: **lower** (-0.799; Holm p <0.001; MDE 0.151)'; an equivalence
    gives its TOST p, an MDE above 1 reads '> 1' (the report's p_text / mde_text)."""
    from ict.report.verdicts import mde_text, p_text  # the report's own number formats

    test = (
        f"TOST p {p_text(c['p_tost'])}"
        if c["verdict"] == "equivalent"
        else f"Holm p {p_text(c['p_holm'])}"
    )
    mde = mde_text(c["mde"])
    metric = c["key"].rpartition("/pass@")[2]
    return (
        f"{c['a']} - {c['b']} at pass@{metric}: **{c['verdict']}** "
        f"({c['difference']:+.3f}; {test}; MDE {mde})"
    )


def studies() -> list[tuple[str, str, int, list[str]]]:
    """(folder, model, seeds, ["ict - grpo at pass@4: lower (-0.80, Holm p <0.001)", ...]) of each
    committed study in STUDIES whose report.json exists."""
    import json

    rows = []
    for folder, model in STUDIES:
        path = ROOT / "docs" / "reports" / folder / "report.json"
        if not path.exists():
            continue
        comparisons = json.loads(path.read_text())["verdicts"]["comparisons"]
        primary = [c for c in comparisons if c["primary"]]
        seeds = max((c["seeds"] for c in comparisons), default=0)
        verdicts = [_verdict(c) for c in primary]
        title = (path.parent / "report.md").read_text().partition("\n")[0]
        if "PARTIAL" in title:  # the protocol draws no verdict from a partial design
            verdicts = [
                f"partial ({title.partition('PARTIAL, ')[2].split(' (')[0]}): no verdict yet"
            ]
        rows.append((folder, model, seeds, verdicts or ["none declared (exploratory only)"]))
    return rows


def study_parts() -> list[tuple[str, str, str]]:
    """(kind, name, text) of every registered study stage, pilot rule, grid metric and report
    section (ict.compare.study.STAGES, ict.compare.pilot.PILOT_RULES,
    ict.compare.grid_metrics.GRID_METRICS, ict.report.sections.SECTIONS)."""
    from ict.compare.grid_metrics import GRID_METRICS
    from ict.compare.pilot import PILOT_RULES
    from ict.compare.study import STAGES
    from ict.report.sections import SECTIONS

    rows = [("stage", n, s.text) for n, s in STAGES.items()]
    rows += [("pilot rule", n, r.text) for n, r in PILOT_RULES.items()]
    rows += [("grid metric", n, f"{m.heading}: " + m.text.format(**m.settings(None),
             how="the `metrics` stage")) for n, m in GRID_METRICS.items()]  # fmt: skip
    rows += [("report section", n, s.text) for n, s in SECTIONS.items()]
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _kept(ratio, scope) -> str:
    return "a mask (no ratio)" if ratio is None else f"{ratio:.0%} ({scope})"


def render(name: str) -> str:
    """The Markdown body of block `name` (ends with a newline)."""
    if name == "methods":
        lines = ["| method | selector | what it runs |", "| --- | --- | --- |"]
        lines += [f"| `{n}` | `{s}` | {_cell(d)} |" for n, s, d in methods()]
        lines += [
            "",
            "Any selector below, or a composition `a+b` (e.g. `ict+stapo`), is also a method.",
        ]
    elif name == "selectors":
        lines = [
            "| selector | keeps by default (scope) | what it scores or keeps |",
            "| --- | --- | --- |",
        ]
        lines += [f"| `{n}` | {_kept(r, sc)} | {_cell(d)} |" for n, r, sc, d in selectors()]
    elif name == "presets":
        lines = [
            "| preset | what it trains | methods | seeds | RL steps |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| `{n}` | {_cell(summary)} | {', '.join(f'`{m}`' for m in ms)} | {seeds} | {steps} |"
            for n, summary, ms, seeds, steps in presets()
        ]
    elif name == "options":
        lines = [
            "| `ict train` flag | TRL: `ICTGRPOConfig(...)` | verl: the `ict:` section | meaning |",
            "| --- | --- | --- | --- |",
        ]
        lines += [
            f"| `--{f.replace('_', '-')}` | `{f}=` | `ict.{f}` | {_cell(h)} |" for f, h in options()
        ]
        lines += [
            "",
            "Everything else (learning rate, group size, lengths, KL) is each engine's own option "
            "under its own name: docs/engines/trl.md and docs/engines/verl.md map them.",
        ]
    elif name == "studies":
        lines = [
            "| study | model | seeds | primary comparisons (Holm; from the toy-cot-explore study on, seed-level and over-problems tests) | report |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| `{folder}` | {model} | {seeds} | {'; '.join(verdicts)} | "
            f"[report](docs/reports/{folder}/report.md) |"
            for folder, model, seeds, verdicts in studies()
        ]
    elif name == "selector-names":
        rows = selectors()
        ratios = ", ".join(f"{n} {r:.2f}" for n, r, _, _ in rows if r is not None)
        lines = [
            f"Names: {', '.join(f'`{n}`' for n, *_ in rows)}, and `a+b` compositions "
            "(`js_top+not_spurious`: the top by JS minus STAPO's spurious tokens). Default ratios: "
            f"{ratios}."
        ]
    elif name == "method-settings":
        lines = [
            "| method | selector | reference | keeps | loss (aggregation / normaliser) | warm-up | what it is |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        lines += [f"| `{n}` | {sel} | {ref} | {kept} | {loss} | {w} | {_cell(d)} |"
                  for n, sel, ref, kept, loss, w, d in method_settings()]  # fmt: skip
    elif name == "study-parts":
        lines = ["| kind | name | what it does |", "| --- | --- | --- |"]
        lines += [f"| {kind} | `{n}` | {_cell(text)} |" for kind, n, text in study_parts()]
    elif name == "method-names":
        lines = [f"Built in: {', '.join(f'`{n}`' for n, _, _ in methods())}."]
    else:
        raise KeyError(f"no generated block {name!r}; known: {', '.join(NAMES)}")
    return "\n".join(lines) + "\n"


NAMES = (
    "methods", "method-settings", "selectors", "presets", "options", "studies", "selector-names",
    "method-names", "study-parts",
)  # fmt: skip


def catalog() -> str:
    """The text of src/ict/cli/catalog.py."""
    method_rows = "\n".join(f"    {row!r}," for row in methods())
    selector_rows = "\n".join(f"    {row!r}," for row in selectors())
    return f'''"""The method and selector registries as `ict --help` shows them, without importing torch.

GENERATED by `{COMMAND}` from ict.methods.METHODS and ict.select.SELECTORS; do not edit.
tests/docs/test_generated_lists.py fails when this file and the registries differ.
"""

# fmt: off
# (name, selector, description), in the registry's order
METHODS: tuple[tuple[str, str, str], ...] = (
{method_rows}
)

# (name, default ratio (None: a mask selector), default scope, what it does)
SELECTORS: tuple[tuple[str, float | None, str, str], ...] = (
{selector_rows}
)
# fmt: on
'''


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def rewrite(text: str, where: str = "") -> str:
    """`text` with every generated block's body replaced by its render."""
    return BLOCK.sub(lambda m: m["open"] + render(m["name"]) + m["close"], text)


def unclosed(text: str) -> list[str]:
    """Opening markers without their closing marker."""
    opened = re.findall(r"^<!-- generated: ([a-z-]+) -->$", text, re.M)
    closed = [m["name"] for m in BLOCK.finditer(text)]
    return [
        name for name in opened if name not in closed or opened.count(name) > closed.count(name)
    ]


def targets() -> dict[Path, tuple[str, str]]:
    """{path: (current text, generated text)} of every target."""
    out = {CATALOG: (CATALOG.read_text() if CATALOG.exists() else "", catalog())}
    for path in markdown_files():
        text = path.read_text(encoding="utf-8")
        if "<!-- generated:" in text:
            broken = unclosed(text)
            if broken:
                raise SystemExit(f"{path}: block(s) {broken} have no `<!-- /generated -->` line")
            out[path] = (text, rewrite(text))
    return out


def drifted() -> list[Path]:
    """Targets whose text differs from what the registries give."""
    return [path for path, (now, want) in targets().items() if now != want]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a file drifted"
    )
    args = parser.parse_args(argv)
    stale = drifted()
    if args.check:
        for path in stale:
            print(f"drifted from the registries: {path.relative_to(ROOT)}")
        if stale:
            print(f"regenerate: {COMMAND}")
        return 1 if stale else 0
    for path, (now, want) in targets().items():
        if now != want:
            path.write_text(want, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    sys.exit(main())
