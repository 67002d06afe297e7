"""Token-level evidence from hand-made samples: divergence position and category shares."""

import math

import pytest

from ict.data import generic_categories
from ict.report.positions import first_divergence, pick_evidence


def rec(tokens, selected, prompt="p", step=1, run="r"):
    return {"run": run, "step": step, "prompt": prompt, "tokens": tokens, "selected": selected}


def test_first_divergence():
    assert first_divergence([list("abc"), list("abd")]) == 2
    assert first_divergence([list("abc"), list("xbc"), list("abc")]) == 0
    assert first_divergence([list("ab"), list("abc")]) == 2  # one response ended
    assert first_divergence([list("abc"), list("abc")]) is None
    assert first_divergence([list("abc")]) is None


def test_category_and_divergence_shares():
    toks_a, toks_b = ["1", "+", "2", "</s>"], ["1", "+", "3", "</s>"]
    records = [
        rec(toks_a, {"ict": [0, 0, 1, 0], "entropy": [1, 1, 0, 0]}),
        rec(toks_b, {"ict": [0, 0, 1, 1], "entropy": [1, 0, 0, 0]}),
        rec(["9"], {"ict": [1], "entropy": [0]}, prompt="alone"),  # a group of one: no divergence
    ]
    ev = pick_evidence(records, generic_categories)
    cats, shares = ev.category_shares()
    assert set(cats) == {"number", "format", "eos"}
    assert shares["all tokens"]["number"] == pytest.approx(5 / 9)
    assert shares["ict"] == pytest.approx({"number": 3 / 4, "format": 0.0, "eos": 1 / 4})
    assert shares["entropy"]["format"] == pytest.approx(1 / 3)
    div = ev.divergence_shares()
    assert ev.groups == 1
    assert div["all tokens"] == (pytest.approx(2 / 8), 8)
    assert div["ict"] == (pytest.approx(2 / 3), 3)  # both responses pick index 2, plus one EOS
    assert div["entropy"] == (0.0, 3)


def test_groups_are_per_run_and_step():
    a = rec(list("ab"), {"ict": [1, 0]}, run="r1")
    b = rec(list("ac"), {"ict": [0, 1]}, run="r2")  # same prompt and step, other run
    ev = pick_evidence([a, b])
    assert ev.groups == 0 and math.isnan(ev.divergence_shares()["all tokens"][0])
