"""Adversarial answers: ict's verifier is never more lenient than math-verify, and never raises.

`MATH_ROWS` is (gold, response, math-verify's verdict on the response). math-verify's verdict is
`verify(parse("$gold$"), parse(response))` with its default settings, where each closed
`<answer>X</answer>` is first written as `\\boxed{X}` (math-verify has no answer tags; a box is
its own mark of a final answer). The table's verdicts are checked against math-verify live, so
a wrong entry fails here rather than hiding a lenient verdict. Then:
- `judge_one(item, response)` may be right only where math-verify says right;
- `math_equal(gold, response)` (the response taken as an answer string) may be right only where
  math-verify says right for the same two answer strings;
- nothing raises, every call ends within the time limit, errors are counted and logged once.
"""

import logging
import re
import time
from types import SimpleNamespace

import pytest

from ict.rewards import Verifier

math_verify = pytest.importorskip("math_verify")

TIMEOUT_S = 3.0
BIG = "5" * 5000  # beyond Python's int-string limit (4300 digits)
BINARY = bytes(range(256)).decode("latin-1")
_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_DELIMITERS = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed|\\fbox")

MATH_ROWS = {
    "lists, tuples, sets, intervals": [
        ("1, 3", "13", False),
        ("1, 3", r"\boxed{13}", False),
        ("1, 3", r"\boxed{1, 3}", True),
        ("1, 3", r"\boxed{3, 1}", True),
        ("2, 1", "<answer>21</answer>", False),
        ("(3,4)", "(34)", False),
        ("(3,4)", r"\boxed{(34)}", False),
        ("(3,4)", r"\boxed{(3, 4)}", True),
        ("(3,4)", r"\boxed{(4,3)}", False),
        (r"\{1,2\}", r"\boxed{\{12\}}", False),
        (r"\{1,2\}", r"\boxed{\{2,1\}}", True),
        ("[0,1)", r"\boxed{[0,1)}", True),
        ("[0,1)", r"\boxed{(0,1)}", False),
        ("1", "[0,1)", False),
        ("1", r"\boxed{[0,1)}", False),
        (r"(-\infty, 3]", r"\boxed{(-\infty,3]}", True),
    ],
    "thousands separators": [
        ("1000", r"\boxed{1,000}", True),
        ("1,000", "<answer>1000</answer>", True),
        ("1000", "The total is 1,000.", True),
        ("1000000", r"\boxed{1,000,000}", True),
        ("12345", r"\boxed{12,345}", True),
        ("1", r"\boxed{1,000}", False),
        ("1000", r"\boxed{1,0,0,0}", False),
        ("111", r"\boxed{0,111}", False),
        ("1000", r"\boxed{10,00}", False),
    ],
    "several final answers": [
        ("3", r"\boxed{2} or \boxed{3}", False),
        ("3", r"\boxed{3} or \boxed{2}", False),
        ("3", r"\boxed{3}, and again \boxed{3}", True),
        ("3", "<answer>2</answer> <answer>3</answer>", False),
        ("3", "<answer>2 or 3</answer>", False),
        ("3", r"<answer>\boxed{2} \boxed{3}</answer>", False),
        ("3", r"\boxed{2} <answer>3</answer>", False),
        ("3", r"\boxed{3}. The final answer is 5", False),
        ("2", r"\boxed{1} \boxed{2} \boxed{3} \boxed{4}", False),
    ],
    "partial numbers": [
        ("2", "AZYUK2A", False),
        ("2", r"\frac{1+\sqrt5}{2}", False),
        ("5", r"\frac{1+\sqrt5}{2}", False),
        ("2", r"\boxed{\frac{1+\sqrt5}{2}}", False),
        ("10", r"\boxed{10^{10}}", False),
        ("10", "10^{10}", True),  # math-verify's own reading of untagged text: ict reads no more
        ("1", "0.1", False),
        ("3", "-3", False),
        ("3", r"\boxed{3.5}", False),
        ("2", r"\boxed{2x}", False),
        ("12", r"\boxed{12:00}", False),
        ("12:00", r"\boxed{12:00}", True),
        ("12:00", "<answer>12:00</answer>", True),
        ("12:00", r"\boxed{1:00}", False),
    ],
    "huge and nested": [
        (BIG, r"\boxed{" + BIG + "}", False),
        ("5", r"\boxed{" + BIG + "}", False),
        (BIG, BIG, False),
        ("3", r"\boxed{" + "{" * 400 + "3" + "}" * 400 + "}", False),
        ("3", r"\boxed{" + r"\frac{" * 60 + "3" + "}{1}" * 60 + "}", True),
        ("1", "(" * 500 + "1" + ")" * 500, False),
        ("3", r"\boxed{" + "{" * 3000 + "3" + "}" * 3000 + "}", False),  # a parse time-out
    ],
    "odd unicode": [
        ("3", r"\boxed{３}", False),  # fullwidth digit
        ("-3", "\\boxed{\u22123}", True),  # minus sign
        ("3", "\u200b\\boxed{3}\u200b", True),  # zero-width spaces
        ("3", "\\boxed{3\u0301}", False),  # combining accent
        ("3", "\ud800 \\boxed{3}", True),  # lone surrogate
        ("3", "\u202e\\boxed{3}", True),  # right-to-left override
        ("3", "<answer>３</answer>", False),
        ("3", "\U0001f642" * 200 + r"\boxed{3}", True),
    ],
    "empty and binary-looking": [
        ("3", "", False),
        ("3", " \n\t ", False),
        ("3", "\x00\x01\x02\xff\xfe", False),
        ("3", BINARY, False),
        ("3", r"\boxed{}", False),
        ("3", r"\boxed{", False),
        ("3", "<answer></answer>", False),
        ("3", "<answer>", False),
        ("0", "\x00", False),
    ],
    "plainly right": [
        (r"\frac{1}{2}", "<answer>0.5</answer>", True),
        ("-3", "it falls to -3.", True),
        ("024", "<answer>24</answer>", True),
        ("5", r"\boxed{5\text{ cm}}", True),
    ],
}
ROWS = [
    pytest.param(gold, response, verdict, id=f"{group}-{i}")
    for group, rows in MATH_ROWS.items()
    for i, (gold, response, verdict) in enumerate(rows)
]


def _parse(text: str):
    return math_verify.parse(text, parsing_timeout=2)  # a time-out reads nothing, as at 5 s


def mathverify_on_response(gold: str, response: str) -> bool:
    boxed = _TAG.sub(lambda m: "\\boxed{" + m.group(1) + "}", response)
    return bool(math_verify.verify(_parse(f"${gold}$"), _parse(boxed)))


def mathverify_on_answers(gold: str, pred: str) -> bool:
    def as_latex(text):
        return text if _DELIMITERS.search(text) else f"${text}$"

    return bool(math_verify.verify(_parse(as_latex(gold)), _parse(as_latex(pred))))


def math_item(gold: str):
    return SimpleNamespace(answer=gold, verifier="math", metadata={}, question="q")


@pytest.fixture(scope="module")
def timed_verifier():
    """A verifier with the table's time limit, its child started outside the timed calls."""
    v = Verifier(timeout_s=TIMEOUT_S)
    v.sandbox.run("_sleep", 0)  # start the child outside the timed calls
    yield v
    v.close()


@pytest.mark.parametrize("gold, response, verdict", ROWS)
def test_table_holds_mathverify_verdicts(gold, response, verdict):
    assert mathverify_on_response(gold, response) is verdict


@pytest.mark.parametrize("gold, response, verdict", ROWS)
def test_judge_one_never_more_lenient(timed_verifier, gold, response, verdict):
    start = time.monotonic()
    result = timed_verifier.judge_one(math_item(gold), response)
    assert time.monotonic() - start < TIMEOUT_S + 2.0
    assert result.reward in (0.0, 1.0) and result.correct is (result.reward == 1.0)
    if not verdict:
        assert not result.correct, "ict is more lenient than math-verify"
    if result.error is not None or result.timed_out:
        assert result.reward == 0.0


@pytest.mark.parametrize("gold, response, verdict", ROWS)
def test_math_equal_never_more_lenient(timed_verifier, gold, response, verdict):
    start = time.monotonic()
    equal, error, timed_out = timed_verifier.math_equal(gold, response)
    assert time.monotonic() - start < TIMEOUT_S + 2.0
    if equal:
        assert error is None and not timed_out
        assert mathverify_on_answers(gold, response), "ict is more lenient than math-verify"


@pytest.mark.parametrize(
    "gold, pred",
    [("1, 3", "13"), ("(3,4)", "(34)"), (r"\{1,2\}", r"\{12\}"), ("1", "[0,1)"), ("0,111", "111")],
)
def test_math_equal_keeps_commas_that_are_no_thousands_separators(timed_verifier, gold, pred):
    assert timed_verifier.math_equal(gold, pred)[0] is False
    assert timed_verifier.math_equal("1,000", "1000") == (True, None, False)


def test_weird_inputs_counted_and_logged_once(caplog):
    v = Verifier(timeout_s=TIMEOUT_S)
    with caplog.at_level(logging.DEBUG, logger="ict.rewards"):
        verdicts = [
            v.judge_one(math_item(BIG), r"\boxed{" + BIG + "}"),
            v.judge_one(math_item(BIG), BIG),
            v.judge_one(math_item("5"), r"\boxed{" + BIG + "}"),
            v.judge_one(math_item("3"), r"\boxed{" + "{" * 3000 + "3" + "}" * 3000 + "}"),
        ]
    v.close()
    assert all(d.reward == 0.0 and d.error is not None for d in verdicts)
    assert verdicts[-1].timed_out and not any(d.timed_out for d in verdicts[:-1])
    assert (v.errors, v.timeouts) == (4, 1)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    kinds = {d.error.split(":")[0] for d in verdicts[:-1]}
    assert len(warnings) == len(kinds) + 1  # the first of each kind of error, and one time-out
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG]) == 4 - len(warnings)


@pytest.mark.parametrize(
    "response, right", [(None, False), (b"\\boxed{3}", True), (b"\xff\xfe\x00", False), (3, True)]
)
def test_non_text_responses_give_a_verdict(timed_verifier, response, right):
    verdict = timed_verifier.judge_one(math_item("3"), response)
    assert verdict.correct is right and verdict.error is None


def choice_item(gold: str, count: int = 4):
    options = [f"option {i}" for i in range(count)]
    return SimpleNamespace(answer=gold, verifier="choice", metadata={"options": options})


CHOICE_ROWS = [  # (gold, response, right?) for four options A-D
    ("B", "<answer>B</answer>", True),
    ("B", "<answer>(b)</answer>", True),
    ("B", r"\boxed{\text{B}}", True),
    ("B", "<answer>B</answer> and again <answer>B</answer>", True),
    ("B", "I think B", True),
    ("B", "The answer is A. Wait, no: the answer is B.", True),  # one corrected statement
    ("A", "A's are fine, but the answer is (A)", True),
    # a letter outside the offered options
    ("B", "<answer>E</answer>", False),
    ("B", "<answer>B or E</answer>", False),
    ("B", "The answer is E", False),
    # several letters
    ("B", "<answer>A</answer> <answer>B</answer>", False),
    ("B", r"\boxed{A} \boxed{B}", False),
    ("B", r"<answer>B</answer> \boxed{C}", False),
    ("B", "<answer>A or B</answer>", False),
    ("B", "<answer>A, B, C, D</answer>", False),
    ("B", "A B C D", False),
    # a letter inside a word
    ("B", "The answer is Bob", False),
    ("B", "<answer>Because</answer>", False),
    ("B", "answer is B2", False),
    ("A", "Apples", False),
    # nothing usable
    ("B", "", False),
    ("B", "\x00\xff", False),
    ("B", BINARY, False),
]


@pytest.mark.parametrize("gold, response, right", CHOICE_ROWS)
def test_choice_verdicts(timed_verifier, gold, response, right):
    verdict = timed_verifier.judge_one(choice_item(gold), response)
    assert verdict.correct is right and verdict.error is None


def test_choice_letter_beyond_three_options(timed_verifier):
    assert not timed_verifier.judge_one(choice_item("D", count=3), "The answer is D").correct
    assert timed_verifier.judge_one(choice_item("C", count=3), "The answer is C").correct
