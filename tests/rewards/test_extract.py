"""Answer extraction on hand-written responses."""

import pytest

from ict.rewards import (
    extract_answer,
    extract_answer_tag,
    extract_boxed,
    extract_choice_letter,
    extract_gsm8k_gold,
    extract_last_number,
)


def test_answer_tag_last_pair_stripped():
    assert extract_answer_tag("<answer> 3 </answer> then <answer>\n-7\n</answer>") == "-7"
    assert extract_answer_tag("<ANSWER>x</ANSWER>") == "x"
    assert extract_answer_tag("<answer>unclosed") is None
    assert extract_answer_tag("no tags") is None


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"so \boxed{42}.", "42"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{\frac{\sqrt{3}}{2}} and more", r"\frac{\sqrt{3}}{2}"),
        (r"first \boxed{1} last \boxed{{a}+{b}}", "{a}+{b}"),
        (r"\fbox{7}", "7"),
        (r"\boxed 5$.", "5"),
        (r"\boxed{unclosed {", None),
        ("nothing", None),
    ],
)
def test_boxed_nested_braces(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a 3 then 1,234.", "1234"),
        ("it is -12", "-12"),
        ("x = 0.25", "0.25"),
        ("ratio 3/4", "3/4"),
        ("none", None),
    ],
)
def test_last_number(text, expected):
    assert extract_last_number(text) == expected


def test_gsm8k_gold():
    assert extract_gsm8k_gold("3 + 4 = 7\n#### 1,007") == "1007"
    with pytest.raises(ValueError, match="####"):
        extract_gsm8k_gold("no marker")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<answer>b</answer>", "B"),
        ("The answer is (C).", "C"),
        ("I think D", "D"),
        (r"\boxed{E}", "E"),
        ("Answer: A because B is wrong", "A"),
        ("no letter here", None),
        ("<answer>Z</answer>", None),
        ("<answer>A or B</answer>", None),  # a hedge is no answer
        ("<answer>A, B, C, D</answer>", None),
        ("A. red\nB. blue\nC. green", None),  # listing the options names no answer
        ("The answer is a secret", None),  # lower-case article, not an option
        ("answer is: B", "B"),
        ("The answer is A. No wait, the answer is C.", "C"),
        ("<answer>(B) because of x</answer>", "B"),
    ],
)
def test_choice_letter(text, expected):
    assert extract_choice_letter(text) == expected


def test_choice_letter_respects_option_count():
    assert extract_choice_letter("<answer>E</answer>", "ABCD") is None
    assert extract_choice_letter("<answer>D</answer>", "ABCD") == "D"


def test_extract_answer_priority_and_format_flag():
    tag = extract_answer(r"\boxed{1} <answer>2</answer>")
    assert (tag.answer, tag.source, tag.format_ok) == ("2", "tag", True)
    boxed_in_tag = extract_answer(r"<answer>\boxed{3}</answer>")
    assert boxed_in_tag.answer == "3"
    boxed = extract_answer(r"so \boxed{-5}")
    assert (boxed.answer, boxed.source, boxed.format_ok) == ("-5", "boxed", True)
    number = extract_answer("the sum is 12")
    assert (number.answer, number.source, number.format_ok) == ("12", "number", False)
    strict = extract_answer("the sum is 12", number_fallback=False)
    assert (strict.answer, strict.format_ok) == (None, False)
    with pytest.raises(ValueError, match="mode"):
        extract_answer("x", mode="nope")
