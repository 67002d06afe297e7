"""Answer extraction from model responses: `<answer>` tags, `\\boxed{...}`, a final number, a letter.

All functions are pure: `str -> str | None` (None when nothing is found), or a list of strings.
The `extract_answer` dispatcher also lists every distinct final answer of the response (several
different ones are a hedge, scored as wrong by `ict.rewards.Verifier`) and says whether the
response followed the requested format (tags or boxed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ict.rewards.letters import choose_letter
from ict.rewards.numbers import strip_thousands

_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_BOX = re.compile(r"\\(?:boxed|fbox)")
# A standalone number: not part of a word, a formula, a list or an interval ("AZYUK2A", "[0,1)",
# "\frac{1+\sqrt5}{2}", "12:00" hold none); thousands commas only in groups of three.
_NUMBER = re.compile(
    r"(?<![\w.,/^_{}\\\[(|:-])(-?(?:[1-9]\d{0,2}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?|-?\.\d+)"
    r"(?![\w^_{}\\(\[]|[.,/:]\d)"
)


def normalise_answer(text: str) -> str:
    """An answer without whitespace, `$`, LaTeX spacing commands or a trailing full stop."""
    return re.sub(r"\s+|\$|\\[,!;: ]", "", text).rstrip(".")


def extract_answer_tags(text: str) -> list[str]:
    """The stripped contents of every closed `<answer>...</answer>` pair, in order."""
    return [found.strip() for found in _TAG.findall(text)]


def extract_answer_tag(text: str) -> str | None:
    """Content of the last `<answer>...</answer>` pair, stripped; None when there is none."""
    found = extract_answer_tags(text)
    return found[-1] if found else None


def _box_at(text: str, start: int) -> tuple[str | None, int]:
    """The content of the box whose command starts at `start` and the index after it."""
    end = start + (len("\\boxed") if text.startswith("\\boxed", start) else len("\\fbox"))
    rest = text[end:]
    if not rest.lstrip().startswith("{"):
        # `\boxed 5` form: the next whitespace-delimited token.
        token = rest.strip().split(maxsplit=1)
        return (token[0].rstrip("$.") or None) if token else None, end
    depth, brace = 0, end + rest.index("{")
    for i in range(brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[brace + 1 : i].strip(), i + 1
    return None, len(text)  # unbalanced: the box was never closed


def extract_boxes(text: str) -> list[str]:
    """The contents of every outermost closed `\\boxed{...}` / `\\fbox{...}` (nested braces
    balanced; a box inside a box belongs to the outer one), in order."""
    found, position = [], 0
    while (match := _BOX.search(text, position)) is not None:
        content, position = _box_at(text, match.start())
        if content is not None:
            found.append(content)
    return found


def extract_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (or `\\fbox{...}`), with nested braces balanced; None
    when there is none or the last one is never closed."""
    starts = [m.start() for m in _BOX.finditer(text)]
    return _box_at(text, starts[-1])[0] if starts else None


def final_answers(text: str) -> list[str]:
    """Every final answer a response gives: each tag's content (or the boxes inside it), then
    each box outside the tags."""
    finals = []
    for content in extract_answer_tags(text):
        finals.extend(extract_boxes(content) or [content])
    finals.extend(extract_boxes(_TAG.sub(" ", text)))
    return finals


def extract_last_number(text: str) -> str | None:
    """The last standalone number in the text (see `_NUMBER`), thousands commas removed
    ("1,000" -> "1000"); None when there is none."""
    found = _NUMBER.findall(text)
    return strip_thousands(found[-1]) if found else None


def extract_gsm8k_gold(solution: str) -> str:
    """GSM8K gold answer: the text after the final `####`, thousands commas removed
    ("#### 1,000" -> "1000")."""
    if "####" not in solution:
        raise ValueError(f"GSM8K solution has no '####' answer marker: {solution[-80:]!r}")
    return strip_thousands(solution.rsplit("####", 1)[1])


def extract_choice_letter(text: str, letters: str = "ABCDE") -> str | None:
    """An option letter among `letters`, or None when there is none or it is ambiguous.

    The rules are those of `ict.rewards.letters`: every final answer (tag, box) must name the
    same one letter; without them a single explicit "answer is B", else the one letter named.
    """
    return choose_letter(final_answers(text), text, letters)


@dataclass
class Extraction:
    """What was found in a response: the answer text, which rule found it, the format flag, and
    every distinct final answer (`several`: more than one, i.e. a hedge)."""

    answer: str | None
    source: str  # "tag" | "boxed" | "number" | "letter" | "none"
    format_ok: bool  # True when the answer came in the requested format (tags or boxed)
    answers: tuple[str, ...] = ()

    @property
    def several(self) -> bool:
        return len(self.answers) > 1


def _distinct(answers: list[str]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for answer in answers:
        seen.setdefault(normalise_answer(answer), answer)
    return tuple(seen.values())


def extract_answer(
    text: str, *, mode: str = "math", number_fallback: bool = True, letters: str = "ABCDE"
) -> Extraction:
    """Find the final answer in a response.

    Args:
        text: the decoded response.
        mode: "math" (tags, then boxed, then optionally the last number), "choice" (option letter),
            "tag" (tags, then boxed, then optionally the last number; for reasoning-gym answers).
        number_fallback: allow the last standalone number when neither tags nor a box is present;
            such an answer counts for the reward but not for the format rate.
    Returns:
        `Extraction`; `answer` is the last tag's content (the last closed box inside it, if
        any), else the last closed box, else the number; `answers` lists every distinct final
        answer (tags, boxes inside and outside them).
    """
    finals = final_answers(text)
    if mode == "choice":
        letter = choose_letter(finals, text, letters)
        source = "letter" if letter else "none"
        return Extraction(letter, source, bool(finals) and letter is not None, _distinct(finals))
    if mode not in ("math", "tag"):
        raise ValueError(f"unknown extraction mode {mode!r}; use 'math', 'tag' or 'choice'")
    tag = extract_answer_tag(text)
    if tag is not None:
        inside = extract_boxes(tag)
        return Extraction(inside[-1] if inside else tag, "tag", True, _distinct(finals))
    if finals:
        return Extraction(finals[-1], "boxed", True, _distinct(finals))
    if number_fallback:
        number = extract_last_number(text)
        if number is not None:
            return Extraction(number, "number", False, (number,))
    return Extraction(None, "none", False)
