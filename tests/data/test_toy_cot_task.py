"""The chain task: format, reward_fn, splits and token categories (no model)."""

from ict.data.toy.cot import (
    CATEGORIES,
    ToyCotTask,
    prompt,
    response_tokens,
    reward,
    target,
    token_categories,
)


def test_target_writes_every_digit_with_carries_and_the_answer():
    assert prompt(4705, 3862) == "Q:4705+3862\nA:"
    assert target(4705, 3862) == "5+2+0=7 c0;0+6+0=6 c0;7+8+0=15 c1;4+3+1=8 c0;=08567"
    assert target(9999, 1, digits=4).endswith("9+0+1=10 c1;=10000")
    assert target(7, 5, digits=2) == "7+5+0=12 c1;0+0+1=1 c0;=012"
    assert response_tokens(ToyCotTask()) >= 40  # one token per character, plus EOS


def test_score_needs_the_right_final_answer_after_the_chain():
    right = target(4705, 3862)
    assert reward(right, 4705, 3862) == 1.0
    assert reward(right + " ", 4705, 3862) == 1.0
    assert reward(right[:-1] + "8", 4705, 3862) == 0.0  # wrong last digit
    assert reward("=8567", 4705, 3862) == 0.0  # no chain before the answer
    assert reward("5+2+0=7 c0;=", 4705, 3862) == 0.0  # malformed: no number
    assert reward("", 4705, 3862) == 0.0


def test_splits_are_seeded_and_disjoint():
    task = ToyCotTask(digits=4)
    test, train = task.split("test", 500), task.split("train", 3000)
    assert test == task.split("test", 500) and train == task.split("train", 3000)
    assert not set(test) & set(train)
    assert all(0 <= a < 10**4 and 0 <= b < 10**4 for a, b in train)


def test_token_categories_label_the_chain_and_tolerate_malformed_responses():
    tokens = list("7+5+0=12 c1;0+0+1=1 c0;=012") + ["</s>"]
    labels = token_categories(tokens)
    assert len(labels) == len(tokens) and set(labels) <= set(CATEGORIES)
    assert labels[:12] == [
        "operand", "format", "operand", "format", "carry", "format",
        "step_sum", "step_sum", "format", "format", "carry", "format",
    ]  # fmt: skip
    assert labels[-5:] == ["format", "answer", "answer", "answer", "eos"]
    bad = token_categories(list("7+5=12;3x"))
    assert bad == [
        "other",
        "format",
        "other",
        "format",
        "other",
        "other",
        "format",
        "other",
        "format",
    ]
