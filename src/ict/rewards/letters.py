"""The option letter of a multiple-choice response (`extract_choice_letter`): str -> letter | None.

Rules (docs/eval.md, "How answers are verified"):
- Final answers are the contents of every `<answer>...</answer>` pair and every `\\boxed{}`
  outside them. When there are any, each must name the same single letter: a bare letter ("B",
  "(b)", "B."), else one explicit "answer is B", else the only letter named in it. Two different
  letters (a hedge "A or B", two tags "A" then "B") give None.
- Without tags or box: the last explicit statement ("the answer is (B)", "Answer: B"; a later
  one corrects an earlier one, it is still one answer). Without any: "(B)" or a lone capital "B"
  when the text names exactly one letter.
- A letter is a capital A-J standing alone: not inside a word ("Bob", "B2", "A's"). A lone "I" is
  the pronoun unless the item offers nine or more options.
- A letter outside the item's options ("E" for A-D) gives None.
"""

from __future__ import annotations

import re

ALL_LETTERS = "ABCDEFGHIJ"
_ALONE_AFTER = r"(?![\w'’])"
_STATED = re.compile(r"(?i:\banswer\s*(?:is\s*:?|:)?\s*(?:option\s*)?)\(?([A-J])\)?" + _ALONE_AFTER)
_PAREN = re.compile(r"\(([A-J])\)")
_LONE = re.compile(r"(?<![\w'’])([A-J])" + _ALONE_AFTER)


def _named(found: list[str], letters: str) -> set[str]:
    """The letters that count as named: any of A-J, without the pronoun I unless it is offered."""
    return {m for m in found if m != "I" or "I" in letters}


def letter_in(text: str, letters: str, *, strict: bool) -> str | None:
    """The last explicit "answer is X" of `text`, else the one letter it names (None when it
    names none or several).

    strict: count every capital A-J (inside a final answer, where a stray letter is a hedge);
    otherwise only the offered `letters` count for a lone letter in free prose.
    """
    stated = [m for m in _STATED.findall(text) if m != "I" or "I" in letters]
    if stated:
        return stated[-1]
    for pattern in (_PAREN, _LONE):
        found = _named(pattern.findall(text), letters)
        if not strict:
            found &= set(letters)
        if found:
            return found.pop() if len(found) == 1 else None
    return None


def read_final_answer(content: str, letters: str) -> str | None:
    """The letter of one tag or box content: a bare letter (any case), else `letter_in`."""
    bare = content.strip().strip("().:*").strip().upper()
    if len(bare) == 1 and bare in ALL_LETTERS:
        return bare
    return letter_in(content, letters, strict=True)


def choose_letter(finals: list[str], text: str, letters: str = "ABCDE") -> str | None:
    """The answer letter given the response's final answers (tag / box contents) and its text."""
    if finals:
        read = {read_final_answer(content, letters) for content in finals}
        letter = read.pop() if len(read) == 1 else None
    else:
        letter = letter_in(text, letters, strict=False)
    return letter if letter is not None and letter in letters else None
