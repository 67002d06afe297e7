"""Answer extraction on hand-written responses."""

import pytest

from ict.rewards import (
    extract_answer,
    extract_answer_tag,
    extract_answer_tags,
    extract_boxed,
    extract_boxes,
    extract_choice_letter,
    extract_gsm8k_gold,
    extract_last_number,
    final_answers,
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


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"\boxed{1} then \boxed{2}", ["1", "2"]),
        (r"\boxed{\boxed{3}} and \fbox{4}", [r"\boxed{3}", "4"]),  # a box in a box is one answer
        (r"\boxed{2} and \boxed{3", ["2"]),  # an unclosed box is no answer
        (r"\boxed 5 and \boxed{6}", ["5", "6"]),
        ("no box", []),
    ],
)
def test_every_box(text, expected):
    assert extract_boxes(text) == expected


def test_final_answers_are_tags_their_boxes_and_boxes_outside():
    text = r"\boxed{1} <answer>2</answer> <answer>so \boxed{3}</answer> <answer>"
    assert final_answers(text) == ["2", "3", "1"]
    assert extract_answer_tags("<answer> a </answer><answer>b</answer>") == ["a", "b"]


@pytest.mark.parametrize(
    "text, answer, answers",
    [
        (r"\boxed{2} or \boxed{3}", "3", ("2", "3")),
        ("<answer>2</answer> <answer>3</answer>", "3", ("2", "3")),
        (r"\boxed{2} <answer>3</answer>", "3", ("3", "2")),
        (r"\boxed{3} and again \boxed{ 3 }", "3", ("3",)),  # the same answer twice is one answer
        (r"<answer>\boxed{3}</answer> \boxed{3}", "3", ("3",)),
    ],
)
def test_several_final_answers_are_listed(text, answer, answers):
    found = extract_answer(text)
    assert (found.answer, found.answers, found.several) == (answer, answers, len(answers) > 1)


@pytest.mark.parametrize(
    "text",
    ["[0,1)", "AZYUK2A", r"\frac{1+\sqrt5}{2}", "12:00", "x_2", "10^{10}", "(3,4)", "v2.0.1"],
)
def test_last_number_is_never_a_fragment(text):
    assert extract_last_number(text) is None


@pytest.mark.parametrize(
    "text, expected",
    [("1, 3", "3"), ("0,111", None), ("a total of 12,345,678.", "12345678"), ("1,22", None)],
)
def test_last_number_thousands_only_in_groups_of_three(text, expected):
    assert extract_last_number(text) == expected


def test_gsm8k_gold_keeps_a_comma_that_is_no_thousands_separator():
    assert extract_gsm8k_gold("#### 1,000,000") == "1000000"
    assert extract_gsm8k_gold("#### 1,5") == "1,5"
