"""Plain numbers in answers: thousands separators and the integer fast path.

A comma is a thousands separator only in `[1-9]ddd,ddd,...` form (groups of exactly three digits
after a non-zero leading group of one to three): "1,000" and "12,345,678" lose their commas;
"1, 3", "(3,4)", "0,111" (a decimal comma) and "1,22" keep theirs, so a list, a tuple or a
decimal comma is never turned into another number.
"""

from __future__ import annotations

import re

THOUSANDS = re.compile(r"-?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?")
_INTEGER = re.compile(r"-?\d+")
MAX_FAST_DIGITS = 300  # longer integers go to math-verify (far below Python's int-string limit)


def strip_thousands(text: str) -> str:
    """`text` stripped, without its commas if it is one number with thousands separators
    ("1,000" -> "1000", "-12,345.5" -> "-12345.5"); any other text is returned stripped only."""
    text = text.strip()
    return text.replace(",", "") if THOUSANDS.fullmatch(text) else text


def canonical_integer(text: str) -> str | None:
    """The integer written by `text` as a canonical digit string ("024" -> "24", "-0" -> "0",
    "1,000" -> "1000"), or None unless `text` is a plain integer of at most `MAX_FAST_DIGITS`
    digits (optional minus sign, optional thousands separators). Never converts to `int`."""
    text = strip_thousands(text)
    if len(text) > MAX_FAST_DIGITS + 1 or not _INTEGER.fullmatch(text):
        return None
    negative, digits = text.startswith("-"), text.lstrip("-").lstrip("0") or "0"
    return f"-{digits}" if negative and digits != "0" else digits


def integer_verdict(gold: str, pred: str) -> bool | None:
    """Equality of two plain integers (see `canonical_integer`), or None when either is not one.

    math-verify compares integers exactly, so this can only agree with it.
    """
    g, p = canonical_integer(gold), canonical_integer(pred)
    if g is None or p is None:
        return None
    return g == p


def is_integer_answer(text: str) -> bool:
    """True when `text` is a plain integer (thousands separators allowed), of any length."""
    return _INTEGER.fullmatch(strip_thousands(text)) is not None
