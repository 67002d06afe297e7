"""Token labels for running-total chains (the `running_total_3shot` prompt, smollm-cot preset).

A response looks like
    "Step 1: 4 + 7 = 11. Step 2: 11 + 8 = 19. So the answer is 19. <answer>19</answer>"
and each of its tokens gets one of CATEGORIES, parsed from the text itself so that malformed
chains still get labels:
- "step_label": "Step k:" (the decision to write another step, or to stop);
- "operand": the two numbers a step adds (copying the previous total and the next term);
- "step_sum": the running total a step writes (where an arithmetic error decides the outcome);
- "answer": the final number, after "the answer is" and inside the answer tags;
- "format": everything else (words, "+", "=", tags, spaces); "eos": special tokens.
A token that spans characters of several categories takes the most decisive one
(answer > step_sum > operand > step_label > format).

`first_error` says where a chain first goes wrong, for the error analysis of a model's samples.
"""

from __future__ import annotations

import re

CATEGORIES = ("step_label", "operand", "step_sum", "answer", "format", "eos")
_PRIORITY = {"answer": 4, "step_sum": 3, "operand": 2, "step_label": 1, "format": 0}
_STEP_LABEL = re.compile(r"Step\s*\d+\s*:")
_STEP = re.compile(r"(-?\d+)\s*([+-])\s*(-?\d+)\s*=\s*(-?\d+)")
_EXPRESSION = re.compile(r"(-?\d+(?:\s*[+-]\s*-?\d+)+)\s*=\s*(-?\d+)")  # "a + b (+ c ...) = s"
_ANSWER = re.compile(r"(?:answer is\s*|<answer>\s*)(-?\d+)")


def _is_special(token: str) -> bool:
    stripped = token.strip()
    return len(stripped) > 2 and stripped.startswith("<") and stripped.endswith(">")


def token_categories(tokens: list[str]) -> list[str]:
    """One of CATEGORIES per decoded response token (tokens as `tokenizer.decode([id])`)."""
    text = "".join(tokens)
    chars = ["format"] * len(text)

    def mark(start: int, end: int, label: str) -> None:
        for i in range(start, end):
            if _PRIORITY[label] > _PRIORITY[chars[i]]:
                chars[i] = label

    for m in _STEP_LABEL.finditer(text):
        mark(m.start(), m.end(), "step_label")
    for m in _STEP.finditer(text):
        mark(m.start(1), m.end(1), "operand")
        mark(m.start(3), m.end(3), "operand")
        mark(m.start(4), m.end(4), "step_sum")
    for m in _ANSWER.finditer(text):
        mark(m.start(1), m.end(1), "answer")

    labels, offset = [], 0
    for token in tokens:
        span = chars[offset : offset + len(token)]
        offset += len(token)
        if _is_special(token):
            labels.append("eos")
        elif not span:
            labels.append("format")
        else:
            labels.append(max(span, key=_PRIORITY.__getitem__))
    return labels


ERRORS = (
    "lumped_step",
    "total_copy",
    "term_copy",
    "step_sum",
    "extra_step",
    "missing_step",
    "answer",
    "no_chain",
)


def first_error(terms: list[int], response: str) -> str | None:
    """Where a running-total chain for the sum of `terms` first goes wrong, one of ERRORS, or None
    for a right chain with the right final answer.

    Step k (from 1) must add the running total (terms[0] for step 1) and terms[k] and write their
    sum: a step that adds three or more numbers at once is "lumped_step", a wrong number on the left is "total_copy" (the running total carried over wrongly), on
    the right "term_copy" (a term skipped, repeated or misread), a wrong sum "step_sum"; a step after
    the last term is "extra_step", a chain that stops early "missing_step"; a final answer other
    than the last total (or none) is "answer"; a response without any step is "no_chain"."""
    steps = _EXPRESSION.findall(response)
    if not steps:
        return "no_chain"
    total = terms[0]
    for k, (expression, result_text) in enumerate(steps, start=1):
        if k >= len(terms):
            return "extra_step"
        numbers = re.findall(r"-?\d+", expression.replace(" ", ""))
        if len(numbers) > 2:
            return "lumped_step"
        left, right, result = int(numbers[0]), int(numbers[1]), int(result_text)
        op = "+" if "+" in expression else "-"
        if left != total:
            return "total_copy"
        if op != "+" or right != terms[k]:
            return "term_copy"
        total += terms[k]
        if result != total:
            return "step_sum"
    if len(steps) < len(terms) - 1:
        return "missing_step"
    answers = _ANSWER.findall(response)
    if not answers or int(answers[-1]) != total:
        return "answer"
    return None
