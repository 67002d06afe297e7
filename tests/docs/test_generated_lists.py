"""The lists of methods, selectors and presets in `--help`, the README, the docs and the examples
come from the registries (scripts/generate_lists.py); this test fails when a list drifts."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from ict.compare.presets import PRESETS
from ict.methods import METHODS, Method, register_method
from ict.select import SELECTORS

from .snippets import ROOT

spec = importlib.util.spec_from_file_location(
    "generate_lists", ROOT / "scripts" / "generate_lists.py"
)
generate_lists = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generate_lists)


def test_no_generated_file_drifted_from_the_registries():
    stale = [str(p.relative_to(ROOT)) for p in generate_lists.drifted()]
    assert not stale, (
        f"{stale} differ from ict.methods.METHODS / ict.select.SELECTORS / the compare presets; "
        f"regenerate with: {generate_lists.COMMAND}"
    )


@pytest.mark.parametrize(
    "path, names",
    [
        ("README.md", ["methods", "presets", "options", "studies"]),
        ("docs/engines/trl.md", ["methods"]),
        ("docs/training.md", ["methods", "selectors"]),
    ],
)
def test_the_docs_hold_generated_lists(path, names):
    text = (ROOT / path).read_text()
    found = [m["name"] for m in generate_lists.BLOCK.finditer(text)]
    assert sorted(found) == sorted(names)


def test_a_new_method_makes_the_check_fail():
    """Registering a method changes what the catalog and every methods block must say."""
    register_method(Method("doc_drift_probe", "every", "A probe method."))
    try:
        stale = {p.relative_to(ROOT).as_posix() for p in generate_lists.drifted()}
        assert {"src/ict/cli/catalog.py", "README.md", "docs/engines/trl.md"} <= stale
        assert "| `doc_drift_probe` | `every` | A probe method. |" in generate_lists.render(
            "methods"
        )
    finally:
        del METHODS["doc_drift_probe"]
    assert not generate_lists.drifted()


def test_catalog_is_the_registry():
    from ict.cli.catalog import METHODS as CATALOG_METHODS
    from ict.cli.catalog import SELECTORS as CATALOG_SELECTORS

    assert [m[0] for m in CATALOG_METHODS] == list(METHODS)
    assert [(n, s) for n, s, _ in CATALOG_METHODS] == [
        (m.name, m.selector) for m in METHODS.values()
    ]
    assert [(n, r, sc) for n, r, sc, _ in CATALOG_SELECTORS] == [
        (s.name, s.default_ratio, s.default_scope) for s in SELECTORS.values()
    ]


def _help(*argv) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ict", *argv, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "400"},  # argparse wraps at hyphens otherwise
    )
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())


def test_train_help_lists_every_method_and_selector():
    text = _help("train")
    flag = re.search(r"--method STR (.*?)\(default: ict\)", text)[1]
    for name in METHODS:  # clip_cov, kl_cov, entropy_bonus included
        assert re.search(rf"(^|[\s|]){name}([\s|]|$)", flag), name
        assert re.search(rf"\s{name}\s+{re.escape(METHODS[name].description.split()[0])}", text), (
            name
        )
    for name in SELECTORS:
        assert name in text


def test_top_and_compare_help_use_the_registries():
    top = _help()
    assert f"one of {len(METHODS) - 1} other methods" in top
    toy = PRESETS["toy"].build()
    assert f"--preset toy # {len(toy.methods)} methods x {toy.seeds} seeds" in top
    text = _help("compare")
    for name, entry in PRESETS.items():
        preset = entry.build()
        grid = f"[{len(preset.methods)} methods x {preset.seeds} seeds"
        assert f"{name} {entry.summary} {grid}" in text, name
        assert f"{name} {preset.seeds}" in text  # --seeds' default, per preset
    assert "chain_sum" not in text  # the default preset's task comes from its summary


def test_the_options_table_names_real_flags_and_fields():
    """Every row of the options block is an `ict train` flag and an ICTGRPOConfig field (verl's
    IctVerlConfig is a MethodOptions subclass, tested in the verl suite)."""
    import argparse
    from dataclasses import fields

    from ict.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    train = commands.choices["train"]
    flags = {s for a in train._actions for s in a.option_strings}
    rows = generate_lists.options()
    assert len(rows) >= 10
    for name, _ in rows:
        assert "--" + name.replace("_", "-") in flags
    trl = pytest.importorskip("ict.integrations.trl")
    trl_fields = {f.name for f in fields(trl.ICTGRPOConfig)}
    assert all(name in trl_fields for name, _ in rows)


def test_the_studies_table_reads_each_report():
    """The studies block: one row per committed report, its primary verdicts from report.json."""
    import json

    rows = generate_lists.studies()
    assert rows
    for folder, _, seeds, verdicts in rows:
        raw = json.loads((ROOT / "docs" / "reports" / folder / "report.json").read_text())
        primary = [c for c in raw["verdicts"]["comparisons"] if c["primary"]]
        title = (ROOT / "docs" / "reports" / folder / "report.md").read_text().partition("\n")[0]
        if "PARTIAL" in title:  # a study still running draws no verdict: the row says so
            assert verdicts == [f"partial ({seeds} of 20 seeds): no verdict yet"]
            continue
        assert len(verdicts) == max(1, len(primary)) and seeds >= 1
        for c, text in zip(primary, verdicts, strict=False):
            assert f"**{c['verdict']}**" in text and f"{c['difference']:+.3f}" in text
