"""Prompt templates: a question (and options) -> chat messages [{"role", "content"}, ...].

Render the messages with `ict.models.format_prompt(tokenizer, messages)` (the chat template).
Every template asks for a final answer the verifiers can find (`<answer>` tags or `\\boxed{}`).

`chain_sum_2shot` is chain_sum's default for the embedded SmolLM2-135M-Instruct: a prompt that
only asks for `<answer>` tags gets no tags from that model, while two worked examples (as earlier
chat turns) that end in `<answer>N</answer>` are followed. `sum_2shot` is the same for the default
task (basic_arithmetic additions: its question form, addition only). `running_total_3shot` is the smollm-cot
preset's: one-digit sums written as running totals, 55-80-token chains from that model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

TAG_INSTRUCTION = (
    "Think step by step, then give only the final answer inside <answer></answer> tags, "
    "for example <answer>42</answer>."
)
BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
CHOICE_INSTRUCTION = (
    "Answer with the letter of the correct option inside <answer></answer> tags, "
    "for example <answer>A</answer>."
)
CHAIN_SUM_EXAMPLES = [
    ("State the final answer to the following arithmetic problem: 23 + 19 =", "23 + 19 = 42", "42"),
    ("State the final answer to the following arithmetic problem: 58 - 21 =", "58 - 21 = 37", "37"),
]
CHAIN_SUM_INSTRUCTION = "Give the final answer inside <answer></answer> tags."
# the default task's (reasoning-gym basic_arithmetic, two 1-2 digit numbers, addition only): its
# own question form and operator, so the examples are instances of the task
SUM_EXAMPLES = [
    ("Calculate 23 + 19.", "23 + 19 = 42", "42"),
    ("Calculate 58 + 7.", "58 + 7 = 65", "65"),
]
STEPS_EXAMPLES = [
    (
        "State the final answer to the following arithmetic problem: 23 + 19 - 7 + 40 =",
        "Step 1: 23 + 19 = 42. Step 2: 42 - 7 = 35. Step 3: 35 + 40 = 75. So the answer is 75.",
        "75",
    ),
    (
        "State the final answer to the following arithmetic problem: 8 + 56 + 31 - 12 + 5 =",
        "Step 1: 8 + 56 = 64. Step 2: 64 + 31 = 95. Step 3: 95 - 12 = 83. Step 4: 83 + 5 = 88. "
        "So the answer is 88.",
        "88",
    ),
]
RUNNING_TOTAL_EXAMPLES = [
    (
        "Calculate 4 + 8 + 5.",
        "Step 1: 4 + 8 = 12. Step 2: 12 + 5 = 17. So the answer is 17.",
        "17",
    ),
    (
        "Calculate 7 + 2 + 9 + 6.",
        "Step 1: 7 + 2 = 9. Step 2: 9 + 9 = 18. Step 3: 18 + 6 = 24. So the answer is 24.",
        "24",
    ),
    (
        "Calculate 3 + 6 + 1 + 8 + 5.",
        "Step 1: 3 + 6 = 9. Step 2: 9 + 1 = 10. Step 3: 10 + 8 = 18. Step 4: 18 + 5 = 23. "
        "So the answer is 23.",
        "23",
    ),
]
STEPS_INSTRUCTION = (
    "Work it out step by step, then give the final answer inside <answer></answer> tags."
)


def user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def assistant(content: str) -> dict[str, str]:
    return {"role": "assistant", "content": content}


def raw(question: str, options: Sequence[str] | None = None) -> list[dict]:
    """The question alone (for data whose prompt already states the answer format)."""
    return [user(question)]


def answer_tags(question: str, options: Sequence[str] | None = None) -> list[dict]:
    """Question + instruction to answer inside `<answer></answer>` tags."""
    return [user(f"{question}\n\n{TAG_INSTRUCTION}")]


def boxed(question: str, options: Sequence[str] | None = None) -> list[dict]:
    """Question + the usual math instruction to put the answer in `\\boxed{}`."""
    return [user(f"{question}\n\n{BOXED_INSTRUCTION}")]


def choice(question: str, options: Sequence[str] | None = None) -> list[dict]:
    """Multiple choice: question, options "A. ...", answer by letter in tags."""
    if not options:
        raise ValueError("the 'choice' template needs the answer options")
    lines = [f"{chr(ord('A') + i)}. {text}" for i, text in enumerate(options)]
    return [user(question + "\n\n" + "\n".join(lines) + f"\n\n{CHOICE_INSTRUCTION}")]


def worked_examples(
    examples: Sequence[tuple[str, str, str]], question: str, instruction: str, separator: str = " "
) -> list[dict]:
    """Few-shot chat: each (question, working, answer) example as a user turn (question +
    instruction) and an assistant turn (working + separator + `<answer>answer</answer>`), then
    the question as the last user turn."""
    messages = []
    for example, working, answer in examples:
        messages.append(user(f"{example}\n{instruction}"))
        messages.append(assistant(f"{working}{separator}<answer>{answer}</answer>"))
    messages.append(user(f"{question}\n{instruction}"))
    return messages


def chain_sum_2shot(question: str, options: Sequence[str] | None = None) -> list[dict]:
    """Two worked chain-sum examples as earlier chat turns, then the question."""
    return worked_examples(CHAIN_SUM_EXAMPLES, question, CHAIN_SUM_INSTRUCTION, separator=". ")


def sum_2shot(question: str, options: Sequence[str] | None = None) -> list[dict]:
    """Two worked two-term additions in basic_arithmetic's question form ("Calculate a + b.") as
    earlier chat turns, then the question: the default task's prompt (`chain_sum_2shot` shows a
    subtraction, which an addition-only task never asks)."""
    return worked_examples(SUM_EXAMPLES, question, CHAIN_SUM_INSTRUCTION, separator=". ")


def steps_2shot(question: str, options: Sequence[str] | None = None) -> list[dict]:
    """Two worked multi-step examples (one running total per step) as earlier chat turns, then the
    question: a written chain of 40-120 tokens from SmolLM2-135M-Instruct (about 4% right on
    3-5-term sums; docs/notes/smollm_cot_candidates.md)."""
    return worked_examples(STEPS_EXAMPLES, question, STEPS_INSTRUCTION)


def running_total_3shot(question: str, options: Sequence[str] | None = None) -> list[dict]:
    """Three worked one-digit sums of 3, 4 and 5 terms, one running total per step (so the number
    of steps follows the question), as earlier chat turns, then the question."""
    return worked_examples(RUNNING_TOTAL_EXAMPLES, question, STEPS_INSTRUCTION)


PROMPT_TEMPLATES: dict[str, Callable[..., list[dict]]] = {
    "raw": raw,
    "answer_tags": answer_tags,
    "boxed": boxed,
    "choice": choice,
    "chain_sum_2shot": chain_sum_2shot,
    "sum_2shot": sum_2shot,
    "steps_2shot": steps_2shot,
    "running_total_3shot": running_total_3shot,
}


def render_messages(
    template: str, question: str, options: Sequence[str] | None = None
) -> list[dict]:
    """Apply the named template; unknown names raise a ValueError listing the known ones."""
    if template not in PROMPT_TEMPLATES:
        raise ValueError(
            f"unknown prompt template {template!r}; known: {', '.join(sorted(PROMPT_TEMPLATES))}"
        )
    return PROMPT_TEMPLATES[template](question, options)
