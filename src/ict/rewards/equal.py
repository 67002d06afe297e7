"""`MathJudge`: math-verify verdicts through the sandbox, with the integer fast path and caches.

In: a gold answer string, an extracted answer string and/or a whole response, `VerifyOptions`.
Out: `(equal, error, timed_out)` (answers) or `(equal, answer read, error, timed_out)` (responses).
The fast path decides only a pair of plain integers, where math-verify compares exactly, so it
can only agree with math-verify; everything else goes to math-verify in the child process.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ict.rewards.numbers import integer_verdict
from ict.rewards.options import VerifyOptions
from ict.rewards.sandbox import Sandbox


class _LRU(OrderedDict):
    """A dict that forgets its least recently used entries beyond `size`."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def get_or(self, key, compute):
        if key in self:
            self.move_to_end(key)
            return self[key]
        value = self[key] = compute()
        if len(self) > self.size:
            self.popitem(last=False)
        return value


class MathJudge:
    """math-verify equivalence under a hard time limit (one `Sandbox`), cached per input."""

    def __init__(self, sandbox: Sandbox, cache_size: int = 65_536):
        self.sandbox = sandbox
        self._answers = _LRU(cache_size)
        self._responses = _LRU(cache_size // 4)

    def answers(
        self, gold: str, pred: str, options: VerifyOptions
    ) -> tuple[bool, str | None, bool]:
        """(equal, error, timed_out) for two answer strings."""
        fast = integer_verdict(gold, pred)
        if fast is not None:
            return fast, None, False
        key = (gold, pred, options)
        return self._answers.get_or(key, lambda: self._run("math", gold, pred, options))

    def response(
        self, gold: str, answer: str | None, text: str, options: VerifyOptions
    ) -> tuple[bool, str | None, str | None, bool]:
        """(equal, answer, error, timed_out) for a response: its extracted `answer` (None: let
        math-verify read the response) must equal the gold, and so must math-verify's reading of
        the whole response (see `_child.math_response_unsafe`)."""
        if answer is not None and integer_verdict(gold, answer) is False:
            return False, answer, None, False
        key = (gold, answer, text, options)
        value, error, timed_out = self._responses.get_or(
            key, lambda: self._run("math_response", gold, answer, text, options)
        )
        if not isinstance(value, dict):
            return False, answer, error, timed_out
        return bool(value.get("equal")), value.get("answer"), error, timed_out

    def _run(self, kind: str, *args: Any) -> tuple[Any, str | None, bool]:
        *inputs, options = args
        value, error, timed_out = self.sandbox.run(kind, *inputs, options.to_dict())
        if kind == "math":
            value = bool(value)
        return value, error, timed_out
