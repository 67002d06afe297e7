"""Where running-total chains first go wrong (the smollm-cot task), counted over sample files.

    python scripts/chain_errors.py [--from-step S] FILE [FILE ...]

FILE: an `ict eval` samples file (OUT/samples/*.jsonl: one problem per line with its samples) or a
training run's samples.jsonl (one response per line). The question is the last "Calculate a + b
+ ... ." in the prompt. Prints, for wrong responses, how many first go wrong at each place
(ict.data.running_total.first_error), and how many right answers came from a wrong chain.
--from-step S keeps a training file's responses from step S on (e.g. the sparse phase).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter

from ict.data.running_total import ERRORS, first_error

_QUESTION = re.compile(r"Calculate ([\d\s+]+)\.")


def responses(path: str, from_step: int = 0):
    """(terms, response text, correct) for each response in the file (training records from
    `from_step` on)."""
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            questions = _QUESTION.findall(rec.get("question") or rec.get("prompt") or "")
            if not questions:
                continue
            terms = [int(t) for t in questions[-1].split("+")]
            if "samples" in rec:  # ict eval: one problem, n samples
                for sample in rec["samples"]:
                    yield terms, sample["text"], bool(sample["correct"])
            elif rec.get("step", 0) >= from_step:  # training samples.jsonl: one response
                yield terms, rec["response"], rec["reward"] > 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", help="ict eval samples files or training samples.jsonl")
    parser.add_argument("--from-step", type=int, default=0, help="first training step counted")
    args = parser.parse_args(argv)
    wrong, lucky, total = Counter(), 0, 0
    for path in args.files:
        for terms, text, correct in responses(path, args.from_step):
            total += 1
            error = first_error(terms, text)
            if not correct:
                wrong[error or "answer"] += 1
            elif error is not None:
                lucky += 1
    n_wrong = sum(wrong.values())
    print(f"{total} responses, {n_wrong} wrong; where the wrong ones first go wrong:")
    for name in ERRORS:
        print(f"  {name:13s} {wrong[name]:4d}  ({wrong[name] / max(n_wrong, 1):.0%})")
    print(f"right answers from a chain with an error: {lucky}")


if __name__ == "__main__":
    main()
