"""Multiple-choice benchmark rows: MMLU-STEM (cais/mmlu) and GPQA (Idavidrein/gpqa).

Each reader takes one source row (the hub's own columns) and returns what the registry needs:
the question, the option texts in presentation order, the gold letter, and metadata to record.

- MMLU (cais/mmlu): `question`, `subject`, `choices` (4 strings), `answer` (int 0-3; a letter
  "A".."D" is accepted too). MMLU-STEM keeps the 18 subjects of MMLU's STEM category
  (`MMLU_STEM_SUBJECTS`; the category map of the MMLU authors' `categories.py`: physics, chemistry,
  biology, computer science, math, engineering). lm-evaluation-harness also counts `anatomy` as
  STEM (19 subjects); the 18-subject set has 3,018 test questions, the size math-reasoning papers
  report for MMLU-STEM.
- GPQA (Idavidrein/gpqa, config gpqa_diamond, 198 questions): `Question`, `Correct Answer`,
  `Incorrect Answer 1`, `Incorrect Answer 2`, `Incorrect Answer 3`. The source always lists the
  correct answer first, so the four options are shuffled per question with a seeded permutation:
  seed = first 8 bytes of sha256("<GPQA_SHUFFLE_SEED>|<question>"), recorded with the item
  (`options_seed`, `options_order`) so that any prompt can be rebuilt.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

LETTERS = "ABCDEFGHIJ"
GPQA_SHUFFLE_SEED = 0
GPQA_COLUMNS = (
    "Question",
    "Correct Answer",
    "Incorrect Answer 1",
    "Incorrect Answer 2",
    "Incorrect Answer 3",
)
MMLU_STEM_SUBJECTS = (
    "abstract_algebra",
    "astronomy",
    "college_biology",
    "college_chemistry",
    "college_computer_science",
    "college_mathematics",
    "college_physics",
    "computer_security",
    "conceptual_physics",
    "electrical_engineering",
    "elementary_mathematics",
    "high_school_biology",
    "high_school_chemistry",
    "high_school_computer_science",
    "high_school_mathematics",
    "high_school_physics",
    "high_school_statistics",
    "machine_learning",
)


def letter(index: int) -> str:
    """0 -> "A", 3 -> "D"."""
    return LETTERS[index]


def is_mmlu_stem(row: dict[str, Any]) -> bool:
    """True for an MMLU row whose `subject` is in the STEM category (KeyError without `subject`)."""
    return str(row["subject"]).strip() in MMLU_STEM_SUBJECTS


def mmlu_options(row: dict[str, Any]) -> list[str]:
    """The `choices` column as a list of option strings (ValueError unless 2-10 options)."""
    choices = row["choices"]
    if isinstance(choices, str) or not 2 <= len(choices) <= len(LETTERS):
        raise ValueError(f"'choices' must be a list of 2-10 options, got {choices!r}")
    return [str(c) for c in choices]


def mmlu_answer(row: dict[str, Any]) -> str:
    """The gold letter: `answer` is an index 0..len(choices)-1 (or already a letter)."""
    value, count = row["answer"], len(mmlu_options(row))
    if isinstance(value, str) and value.strip().upper() in LETTERS[:count]:
        return value.strip().upper()
    index = int(value)
    if not 0 <= index < count:
        raise ValueError(f"'answer' {value!r} is not an option index 0..{count - 1}")
    return letter(index)


def gpqa_options_seed(question: str, base_seed: int = GPQA_SHUFFLE_SEED) -> int:
    """The per-question shuffle seed (a 63-bit integer) from the base seed and the question text."""
    digest = hashlib.sha256(f"{base_seed}|{question.strip()}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def gpqa_shuffled(row: dict[str, Any], base_seed: int = GPQA_SHUFFLE_SEED) -> dict[str, Any]:
    """{"options": 4 texts in shown order, "answer": gold letter, "options_seed", "options_order"}.

    `options_order[i]` is the source position of shown option i (0 = the correct answer,
    1..3 = Incorrect Answer 1..3).
    """
    source = [str(row[column]).strip() for column in GPQA_COLUMNS[1:]]
    seed = gpqa_options_seed(str(row["Question"]), base_seed)
    order = list(range(len(source)))
    random.Random(seed).shuffle(order)
    return {
        "options": [source[i] for i in order],
        "answer": letter(order.index(0)),
        "options_seed": seed,
        "options_order": order,
    }
