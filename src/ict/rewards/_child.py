"""Child process of `ict.rewards.sandbox.Sandbox`: JSON requests on stdin, JSON replies on stdout.

Request: {"kind": "math", "args": [gold, pred], "timeout_s": 5.0}
Reply:   {"status": "ok", "value": true} | {"status": "error"|"timeout", "error": "..."}
The first line written is {"status": "ready"} once the imports are done.
"""

from __future__ import annotations

import json
import math
import sys
import time


def math_equal_unsafe(gold: str, pred: str, timeout_s: float) -> bool:
    """math-verify equivalence of two answer strings (LaTeX or plain); may be slow or raise.

    Each string is parsed as `$...$` LaTeX first, then as plain text. A gold answer that cannot be
    parsed raises (it is a data problem); an unparsable prediction is simply wrong.
    """
    from math_verify import parse, verify

    limit = max(1, math.ceil(timeout_s) - 1)  # fires before the parent kills the child

    def parsed(text: str):
        for candidate in (text if "$" in text else f"${text}$", text):
            result = parse(candidate, parsing_timeout=limit, raise_on_error=True)
            if result:
                return result
        return []

    gold_parsed = parsed(gold)
    if not gold_parsed:
        raise ValueError(f"math-verify cannot parse the gold answer {gold!r}")
    pred_parsed = parsed(pred)
    if not pred_parsed:
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=limit, raise_on_error=True))


def _handle(request: dict) -> dict:
    kind, args = request["kind"], request["args"]
    try:
        if kind == "math":
            value = math_equal_unsafe(*args, request["timeout_s"])
        elif kind == "_sleep":
            time.sleep(args[0])
            value = True
        else:
            raise ValueError(f"unknown sandbox call {kind!r}")
        return {"status": "ok", "value": value}
    except BaseException as err:  # noqa: BLE001 - report every failure, keep serving
        name = type(err).__name__
        status = "timeout" if "Timeout" in name else "error"
        return {"status": status, "error": f"{name}: {err}"}


def main() -> None:
    import math_verify  # noqa: F401 - import once, before the first timed call

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
