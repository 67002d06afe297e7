"""Child process of `ict.rewards.sandbox.Sandbox`: JSON requests on stdin, JSON replies on stdout.

Requests ({"kind", "args", "timeout_s"}; `options` is a `VerifyOptions.to_dict()` or null):
    {"kind": "math", "args": [gold, pred, options]}            -> value: bool
    {"kind": "math_response", "args": [gold, answer, text, options]}
                                                -> value: {"equal": bool, "answer": str | null}
Reply: {"status": "ok", "value": ...} | {"status": "error"|"timeout", "error": "..."}
The first line written is {"status": "ready"} once the imports are done.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import sys
import time

_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_DELIMITERS = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed|\\fbox")  # math of its own ($, not \$)


@functools.lru_cache(maxsize=32)
def _targets(extraction: tuple[str, ...], boxed_priority: int) -> tuple:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    return tuple(
        LatexExtractionConfig(boxed_match_priority=boxed_priority)
        if target == "latex"
        else ExprExtractionConfig()
        for target in extraction
    )


class _Reader:
    """math-verify's parse and verify under one item's options and the time limit."""

    def __init__(self, options: dict | None, timeout_s: float):
        options = options or {}
        self.extraction = tuple(options.get("extraction", ("latex", "expr")))
        self.targets = _targets(self.extraction, int(options.get("boxed_priority", 50)))
        self.precision = int(options.get("precision", 6))
        self.strict = bool(options.get("strict", True))
        self.set_relation = bool(options.get("allow_set_relation_comp", False))
        self.limit = max(1, math.ceil(timeout_s) - 1)  # fires before the parent kills the child

    def text(self, text: str) -> list:
        """math-verify's reading of a text as it stands (a response, or an answer with $)."""
        from math_verify import parse

        return parse(text, self.targets, parsing_timeout=self.limit, raise_on_error=True)

    def answer(self, text: str) -> list:
        """An answer string: read as `$...$` LaTeX when LaTeX is extracted and it has no math
        delimiters of its own, else as it stands."""
        bare = "latex" in self.extraction and _DELIMITERS.search(text) is None
        return self.text(f"${text}$" if bare else text)

    def equal(self, gold: list, pred: list) -> bool:
        """math-verify's verdict: True when any (gold, prediction) reading pair is equal, as in
        `verify`. A pair that fails to compare counts as unequal, as there; only when every pair
        fails is the failure raised (an error), and a time-out is always raised."""
        from math_verify import verify
        from math_verify.errors import TimeoutException

        kwargs = dict(
            float_rounding=self.precision,
            strict=self.strict,
            allow_set_relation_comp=self.set_relation,
            timeout_seconds=self.limit,
            raise_on_error=True,
        )
        failures = []
        for g, p in itertools.product(gold, pred):
            try:
                if verify(g, p, **kwargs):
                    return True
            except TimeoutException:
                raise
            except Exception as err:  # noqa: BLE001 - math-verify's own rule: this pair is unequal
                failures.append(err)
        if failures and len(failures) == len(gold) * len(pred):
            raise failures[0]
        return False

    def gold(self, gold: str) -> list:
        parsed = self.answer(gold)
        if not parsed:
            raise ValueError(f"math-verify cannot parse the gold answer {gold[:200]!r}")
        return parsed


def math_equal_unsafe(gold: str, pred: str, timeout_s: float, options: dict | None = None) -> bool:
    """math-verify equivalence of two answer strings (LaTeX or plain); may be slow or raise.

    A gold answer that cannot be parsed raises (it is a data problem); an unparsable prediction
    is simply wrong.
    """
    reader = _Reader(options, timeout_s)
    return reader.equal(reader.gold(gold), reader.answer(pred))


def as_boxes(text: str) -> str:
    """A response with each closed `<answer>X</answer>` written as `\\boxed{X}`: math-verify's
    own notation for a marked final answer."""
    return _TAG.sub(lambda m: "\\boxed{" + m.group(1) + "}", text)


def math_response_unsafe(
    gold: str, answer: str | None, text: str, timeout_s: float, options: dict | None = None
) -> dict:
    """Whether a response is right: its extracted `answer` (when given) must equal the gold, and
    math-verify's own reading of the whole response (tags as boxes) must too; with no `answer`,
    math-verify's reading alone decides (and names the answer it read)."""
    reader = _Reader(options, timeout_s)
    gold_parsed = reader.gold(gold)
    if answer is not None and not reader.equal(gold_parsed, reader.answer(answer)):
        return {"equal": False, "answer": answer}
    read = reader.text(as_boxes(text))
    if answer is None and read:
        answer = read[-1] if isinstance(read[-1], str) else str(read[0])
    return {"equal": reader.equal(gold_parsed, read), "answer": answer}


def _handle(request: dict) -> dict:
    kind, args = request["kind"], request["args"]
    try:
        if kind == "math":
            value = math_equal_unsafe(args[0], args[1], request["timeout_s"], *args[2:])
        elif kind == "math_response":
            value = math_response_unsafe(*args[:3], request["timeout_s"], *args[3:])
        elif kind == "_sleep":
            time.sleep(args[0])
            value = True
        else:
            raise ValueError(f"unknown sandbox call {kind!r}")
        return {"status": "ok", "value": value}
    except BaseException as err:  # noqa: BLE001 - report every failure, keep serving
        name = type(err).__name__
        status = "timeout" if "Timeout" in name else "error"
        return {"status": status, "error": f"{name}: {str(err)[:300]}"}


def main() -> None:
    import logging

    import math_verify  # noqa: F401 - import once, before the first timed call

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # the parent logs instead
    out, sys.stdout = sys.stdout, sys.stderr  # stray library prints must not corrupt replies
    out.write(json.dumps({"status": "ready"}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        out.write(json.dumps(_handle(json.loads(line))) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
