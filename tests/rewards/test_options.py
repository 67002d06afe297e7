"""Verifier options: an item's math-verify settings reach the child process and change verdicts."""

from types import SimpleNamespace

import pytest

from ict.rewards import Verifier, VerifyOptions


def item(answer, **options):
    metadata = {"verifier_options": options} if options else {}
    return SimpleNamespace(answer=answer, verifier="math", metadata=metadata)


def test_defaults_are_math_verify_defaults():
    assert VerifyOptions() == VerifyOptions(6, ("latex", "expr"), 50, True, False)
    assert VerifyOptions(extraction=["expr"]).to_dict()["extraction"] == ["expr"]


def test_precision(verifier):
    assert not verifier.judge_one(item(r"\frac{1}{3}"), "<answer>0.33</answer>").correct
    assert verifier.judge_one(item(r"\frac{1}{3}", precision=2), "<answer>0.33</answer>").correct
    assert verifier.math_equal(r"\frac{1}{3}", "0.33", VerifyOptions(precision=2))[0]
    assert not verifier.math_equal(r"\frac{1}{3}", "0.33")[0]


def test_strict(verifier):
    assert not verifier.judge_one(item("f(x)"), r"\boxed{f(y)}").correct
    assert verifier.judge_one(item("f(x)", strict=False), r"\boxed{f(y)}").correct


def test_extraction_targets(verifier):
    latex = r"The answer is \(\frac{1}{2}\)"
    assert verifier.judge_one(item("1/2"), latex).correct
    assert not verifier.judge_one(item("1/2", extraction=["expr"]), latex).correct
    plain = "the result is 1/2"
    assert verifier.judge_one(item("0.5"), plain).correct
    assert not verifier.judge_one(item("0.5", extraction=["latex"]), plain).correct


def test_verifier_wide_default_and_item_override(verifier):
    loose = Verifier(timeout_s=3.0, options=VerifyOptions(precision=2))
    assert loose.judge_one(item(r"\frac{1}{3}"), r"\boxed{0.33}").correct
    assert not loose.judge_one(item(r"\frac{1}{3}", precision=6), r"\boxed{0.33}").correct
    loose.close()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"precison": 2}, "unknown verifier option"),
        ({"extraction": ["string"]}, "extraction"),
        ({"precision": -1}, "precision"),
        ({"boxed_priority": -2}, "boxed_priority"),
    ],
)
def test_invalid_options_are_a_set_up_error(verifier, options, message):
    with pytest.raises(ValueError, match=message):
        verifier.judge_one(item("1", **options), r"\boxed{1}")
