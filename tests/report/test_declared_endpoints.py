"""Declared endpoints: every preset's, the docs table of them, and the CLI flags."""

import argparse
import re
from pathlib import Path

import pytest

from ict.cli.compare import add_parser, endpoints_from
from ict.compare.presets import PRESETS, get_preset
from ict.errors import ConfigError
from ict.evidence.endpoints import parse_endpoint

DOCS = Path(__file__).resolve().parents[2] / "docs" / "compare.md"


def parse(argv):
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(), "compare")
    return parser.parse_args(["compare", *argv])


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_declares_endpoints_its_grid_can_test(name):
    preset = get_preset(name)
    if len(preset.methods) == 1:  # a one-method screen (toy-paths-screen) has nothing to compare
        assert not preset.primary
        return
    assert preset.primary and 0 < preset.alpha < 0.5 and preset.equivalence_margin > 0
    for spec in preset.primary:
        e = parse_endpoint(spec)
        assert e.a in preset.methods and e.b in preset.methods, (name, spec)
        k = int(e.metric.removeprefix("pass@"))
        assert k in preset.eval.ks, (name, spec)


def test_the_docs_table_is_the_presets():
    text = DOCS.read_text()
    table = text[text.index("<!-- preset endpoints") :]
    rows = re.findall(r"^\| `([\w-]+)` \| ([^|]+) \| ([\d.]+) \| ([\d.]+) \|", table, flags=re.M)
    documented = {
        n: ([] if p.startswith("none") else p.strip().split(", "), float(a), float(m))
        for n, p, a, m in rows
    }
    assert set(documented) == set(PRESETS)
    for name in PRESETS:
        preset = get_preset(name)
        assert documented[name] == (preset.primary, preset.alpha, preset.equivalence_margin)


def test_flags_replace_the_preset_and_none_declares_none():
    preset = get_preset("toy-cot")
    e = endpoints_from(parse([]), preset)
    assert [p.spec for p in e.primary] == preset.primary and "toy-cot" in e.source
    e = endpoints_from(parse(["--primary", "ict-grpo@pass@1", "--alpha", "0.01"]), preset)
    assert [p.spec for p in e.primary] == ["ict-grpo@pass@1"] and e.alpha == 0.01
    assert e.margin == preset.equivalence_margin
    assert endpoints_from(parse(["--primary", "none"]), preset).primary == ()
    bare = endpoints_from(parse(["--margin", "0.05"]))
    assert bare.primary == () and bare.margin == 0.05 and "exploratory" in bare.source
    with pytest.raises(ConfigError, match="METHOD-BASELINE@METRIC"):
        endpoints_from(parse(["--primary", "ict"]))


def test_a_preset_declares_the_warm_start_as_its_unit():
    import dataclasses

    preset = get_preset("toy-cot")
    assert preset.unit == "seed" and endpoints_from(parse([]), preset).unit == "seed"
    unit = dataclasses.replace(preset, unit="warm start")
    assert endpoints_from(parse([]), unit).unit == "warm start"
    with pytest.raises(ConfigError, match="unknown unit 'prompt'"):
        endpoints_from(parse([]), dataclasses.replace(preset, unit="prompt"))
