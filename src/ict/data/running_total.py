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
"""

from __future__ import annotations

import re

CATEGORIES = ("step_label", "operand", "step_sum", "answer", "format", "eos")
_PRIORITY = {"answer": 4, "step_sum": 3, "operand": 2, "step_label": 1, "format": 0}
_STEP_LABEL = re.compile(r"Step\s*\d+\s*:")
_STEP = re.compile(r"(-?\d+)\s*([+-])\s*(-?\d+)\s*=\s*(-?\d+)")
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
