"""Token categories: how a task labels its responses' tokens, for the report's token-level
evidence (where each selector's picks fall, ict.report.positions).

A `Categorize` maps decoded response tokens (`tokenizer.decode([id])` each) to one label each. A
task carries its own (`ict.data.task_categorizer(spec)`): its family's (toy:cot's chain labels),
else its prompt template's (the running-total chains), else `generic_categories`.
"""

from __future__ import annotations

from collections.abc import Callable

from ict.data import running_total

Categorize = Callable[[list[str]], list[str]]


def generic_categories(tokens: list[str]) -> list[str]:
    """A task-free labelling: "number" (any digit), "word" (letters), "eos" (special tokens such
    as </s> or <|im_end|>), "format" (whitespace and punctuation)."""
    out = []
    for tok in tokens:
        stripped = tok.strip()
        if stripped.startswith("<") and stripped.endswith(">") and len(stripped) > 2:
            out.append("eos")
        elif any(ch.isdigit() for ch in tok):
            out.append("number")
        elif any(ch.isalpha() for ch in tok):
            out.append("word")
        else:
            out.append("format")
    return out


# prompt templates (ict.data.prompts) whose responses have a labelling of their own
TEMPLATE_CATEGORIES: dict[str, Categorize] = {
    "running_total_3shot": running_total.token_categories,
}
