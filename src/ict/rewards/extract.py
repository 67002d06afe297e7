"""Answer extraction from model responses: `<answer>` tags, `\\boxed{...}`, a final number, a letter.

All functions are pure: `str -> str | None` (None when nothing is found). The `extract_answer`
dispatcher also says whether the response followed the requested format (tags or boxed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_OPEN_TAG = re.compile(r"<answer>", re.IGNORECASE)
# A number: optional sign, digits with optional thousands commas, optional decimals, or a fraction.
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")
_LETTER_PATTERNS = [
    # "answer is (B)", "Answer: B", "answer is: option B"; the letter itself must be a capital.
    re.compile(r"(?i:answer\s*(?:is\s*:?|:)?\s*(?:option\s*)?)\(?([A-J])\)?(?![A-Za-z])"),
    re.compile(r"\(([A-J])\)"),
    re.compile(r"(?<![A-Za-z])([A-J])(?![A-Za-z])"),
]


def extract_answer_tag(text: str) -> str | None:
    """Content of the last `<answer>...</answer>` pair, stripped; None when there is none."""
    found = _TAG.findall(text)
    return found[-1].strip() if found else None


def extract_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (or `\\fbox{...}`), with nested braces balanced."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    brace = text.find("{", start)
    if brace < 0:
        # `\boxed 5` form: the next whitespace-delimited token.
        rest = text[start + len("\\boxed") :].strip().split()
        return rest[0].rstrip("$.") if rest else None
    depth = 0
    for i in range(brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[brace + 1 : i].strip()
    return None  # unbalanced: the box was never closed


def extract_last_number(text: str) -> str | None:
    """The last number in the text with thousands commas removed ("1,000" -> "1000"); or None."""
    found = _NUMBER.findall(text)
    if not found:
        return None
    number = found[-1].replace(",", "")
    return number.rstrip(".") or None


def extract_gsm8k_gold(solution: str) -> str:
    """GSM8K gold answer: the text after the final `####`, commas removed ("#### 1,000" -> "1000")."""
    if "####" not in solution:
        raise ValueError(f"GSM8K solution has no '####' answer marker: {solution[-80:]!r}")
    return solution.rsplit("####", 1)[1].strip().replace(",", "")


def extract_choice_letter(text: str, letters: str = "ABCDE") -> str | None:
    """An option letter among `letters`, or None when there is none or it is ambiguous.

    Inside answer tags / a box: a bare letter ("B", "(B)", "B.") wins; else an explicit
    "answer is B"; else the one letter named there (two different letters, a hedge such as
    "A or B", give None). Without tags or box: the last explicit "answer is (B)" / "Answer: B";
    else the letter of "(B)" or a lone "B" when the text names exactly one such letter (a list of
    options "A. .. B. .." names several and gives None).
    """
    inner = extract_answer_tag(text)
    if inner is None:
        inner = extract_boxed(text)
    if inner is not None:
        bare = inner.strip().strip("().:*").strip().upper()
        if len(bare) == 1 and bare in letters:
            return bare
        return _letter_in(inner, letters)
    return _letter_in(text, letters)


def _letter_in(text: str, letters: str) -> str | None:
    stated = [m.upper() for m in _LETTER_PATTERNS[0].findall(text) if m.upper() in letters]
    if stated:
        return stated[-1]
    for pattern in _LETTER_PATTERNS[1:]:
        found = {m.upper() for m in pattern.findall(text) if m.upper() in letters}
        if len(found) == 1:
            return found.pop()
        if len(found) > 1:
            return None
    return None


@dataclass
class Extraction:
    """What was found in a response: the answer text, which rule found it, and the format flag."""

    answer: str | None
    source: str  # "tag" | "boxed" | "number" | "letter" | "none"
    format_ok: bool  # True when the answer came in the requested format (tags or boxed)


def extract_answer(
    text: str, *, mode: str = "math", number_fallback: bool = True, letters: str = "ABCDE"
) -> Extraction:
    """Find the final answer in a response.

    Args:
        text: the decoded response.
        mode: "math" (tags, then boxed, then optionally the last number), "choice" (option letter),
            "tag" (tags, then boxed, then optionally the last number; for reasoning-gym answers).
        number_fallback: allow the last number when neither tags nor a box is present; such an
            answer counts for the reward but not for the format rate.
    """
    if mode == "choice":
        tagged = extract_answer_tag(text) is not None or extract_boxed(text) is not None
        letter = extract_choice_letter(text, letters)
        return Extraction(letter, "letter" if letter else "none", tagged and letter is not None)
    if mode not in ("math", "tag"):
        raise ValueError(f"unknown extraction mode {mode!r}; use 'math', 'tag' or 'choice'")
    tag = extract_answer_tag(text)
    if tag is not None:
        boxed_inside = extract_boxed(tag)
        return Extraction(boxed_inside if boxed_inside is not None else tag, "tag", True)
    boxed = extract_boxed(text)
    if boxed is not None:
        return Extraction(boxed, "boxed", True)
    if number_fallback:
        number = extract_last_number(text)
        if number is not None:
            return Extraction(number, "number", False)
    return Extraction(None, "none", False)
