"""The step-by-step two-shot template: worked examples that are right, in alternating chat turns."""

import re

from ict.data.prompts import RUNNING_TOTAL_EXAMPLES, STEPS_EXAMPLES, render_messages


def test_steps_examples_are_correct_running_totals():
    for question, working, answer in STEPS_EXAMPLES + RUNNING_TOTAL_EXAMPLES:
        terms = re.findall(r"[+-]?\s*\d+", question.split(":")[-1].replace(" ", ""))
        assert sum(int(t) for t in terms) == int(answer)
        total = None
        for left, op, right, result in re.findall(r"(\d+) ([+-]) (\d+) = (\d+)", working):
            if total is not None:
                assert int(left) == total  # each step starts from the previous total
            total = int(left) + int(right) if op == "+" else int(left) - int(right)
            assert total == int(result)
        assert total == int(answer) and f"the answer is {answer}" in working


def test_steps_2shot_messages():
    messages = render_messages("steps_2shot", "Calculate 2 + 3 + 4.")
    assert [m["role"] for m in messages] == ["user", "assistant"] * 2 + ["user"]
    assert messages[1]["content"].endswith("<answer>75</answer>")
    assert messages[-1]["content"].startswith("Calculate 2 + 3 + 4.")
