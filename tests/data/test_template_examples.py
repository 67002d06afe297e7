"""Every default prompt template's worked examples are instances of its own task: the question
form of the task's own questions, its operators only, its number of terms and digits, and the
right answer. (The default task, additions only, once showed a subtraction as its example.)"""

from __future__ import annotations

import re

import pytest

from ict.data import load_task
from ict.data.rg import DEFAULT_TEMPLATES
from ict.data.specs import parse_spec
from ict.train.config import TrainConfig

NUMBER = re.compile(r"\d+")
OPERATOR = re.compile(r"(?<=\d) ([-+*/]) (?=\d)")


def default_pairs() -> list[tuple[str, str]]:
    """(task spec, template) of every default: the default training task (its spec names its
    template) and each reasoning-gym task with a default template, at its default settings."""
    spec = TrainConfig().task
    return [(spec, parse_spec(spec)[1]["template"])] + [
        (f"rg:{task}", template) for task, template in DEFAULT_TEMPLATES.items()
    ]


def examples(template: str) -> list[tuple[str, str]]:
    """(question, answer) of each worked example of `template` (the earlier chat turns)."""
    from ict.data.prompts import render_messages

    messages = render_messages(template, "QUESTION")
    users = [m["content"] for m in messages if m["role"] == "user"][:-1]
    answers = [
        re.search(r"<answer>(.*)</answer>", m["content"]).group(1)
        for m in messages
        if m["role"] == "assistant"
    ]
    assert users and len(users) == len(answers)
    return [(u.split("\n")[0], a) for u, a in zip(users, answers, strict=True)]


def shape(question: str) -> str:
    """The question with its numbers and operators blanked: its form."""
    return NUMBER.sub("N", OPERATOR.sub(" OP ", question))


def facts(question: str) -> tuple[set[str], int, set[int]]:
    """(operators, number of terms, digit counts) of an arithmetic question."""
    return (
        set(OPERATOR.findall(question)),
        len(NUMBER.findall(question)),
        {len(n) for n in NUMBER.findall(question)},
    )


@pytest.mark.parametrize("spec, template", default_pairs())
def test_default_template_examples_are_instances_of_their_task(spec, template):
    questions = [item.question for item in load_task(spec, split="train", size=300)]
    shapes = {shape(q) for q in questions}
    operators = set().union(*(facts(q)[0] for q in questions))
    terms = {facts(q)[1] for q in questions}
    digits = set().union(*(facts(q)[2] for q in questions))
    for question, answer in examples(template):
        used, count, lengths = facts(question)
        assert shape(question) in shapes, f"{question!r} is not in the form of {spec}'s questions"
        assert used <= operators, f"{question!r} uses {used - operators}, which {spec} never asks"
        assert count in terms and lengths <= digits, f"{question!r}: terms/digits {spec} never has"
        expression = question[question.index(NUMBER.search(question).group()) :]
        assert eval(expression.rstrip(" =.")) == int(answer), f"{question!r}: wrong answer {answer}"


def test_the_check_catches_a_subtraction_in_an_addition_task():
    spec = TrainConfig().task
    questions = [item.question for item in load_task(spec, split="train", size=50)]
    operators = set().union(*(facts(q)[0] for q in questions))
    assert operators == {"+"} and facts("Calculate 58 - 21.")[0] - operators == {"-"}
