"""Verifiers: turn (item, response text) into a `Verdict` (reward, extracted answer, flags).

An item is anything with `.answer` (gold, str), `.verifier` ("math" | "choice" | "rg" | "exact")
and `.metadata` (dict; reasoning-gym items keep the task name and config there), e.g.
`ict.data.Item`. A verifier that raises or times out gives reward 0 and sets `error` /
`timed_out`, so the caller can count such cases; it never stops a run.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from ict.rewards.extract import extract_answer
from ict.rewards.sandbox import Sandbox

VERIFIERS = ("math", "choice", "rg", "exact")
_INTEGER = re.compile(r"-?\d+")


@dataclass
class Verdict:
    """The outcome of checking one response."""

    reward: float  # in [0, 1]; 0 when wrong, unparsable, on error or timeout
    correct: bool  # reward == 1
    answer: str | None  # the extracted answer (None when none was found)
    format_ok: bool  # the answer came in the requested format (answer tags or \boxed)
    error: str | None = None  # the verifier raised (message), reward 0
    timed_out: bool = False  # the verifier overran its time limit, reward 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class RewardFunction(Protocol):
    """What the trainer calls: one verdict per (item, response) pair, in order."""

    def score(self, samples: Sequence[tuple[Any, str]]) -> list[Verdict]: ...


def choice_letters(item) -> str:
    """The valid option letters of a multiple-choice item: one per entry of metadata["options"]
    ("ABCD" for four options); "ABCDE" when the item does not list its options."""
    options = (getattr(item, "metadata", None) or {}).get("options")
    if options:
        return "ABCDEFGHIJ"[: len(options)]
    return "ABCDE"


def _normalise(text: str) -> str:
    return re.sub(r"\s+|\$|\\[,!;: ]", "", text).rstrip(".")


@functools.lru_cache(maxsize=64)
def _rg_dataset(name: str, config_json: str):
    import reasoning_gym

    return reasoning_gym.create_dataset(name, **json.loads(config_json))


def rg_score(answer: str | None, item) -> float:
    """Score with the reasoning-gym task's own `score_answer` (task name/config from metadata)."""
    meta = item.metadata
    name = meta.get("source_dataset") or meta["rg_task"]
    config = {k: v for k, v in meta.get("rg_config", {}).items() if k not in ("seed", "size")}
    dataset = _rg_dataset(name, json.dumps(config, sort_keys=True))
    entry = {"question": getattr(item, "question", ""), "answer": item.answer, "metadata": meta}
    return float(dataset.score_answer(answer, entry))


class Verifier:
    """The default `RewardFunction`: extraction + math-verify (sandboxed), letters, reasoning-gym.

    Args:
        timeout_s: hard wall-clock limit per math-verify call (the child process is killed).
        number_fallback: accept the last number of a response that has neither answer tags nor
            a box (math and numeric reasoning-gym answers); it never counts as format_ok.
    """

    def __init__(self, timeout_s: float = 5.0, number_fallback: bool = True):
        self.sandbox = Sandbox(timeout_s)
        self.number_fallback = number_fallback
        self._math_cache: dict[tuple[str, str], tuple[bool, str | None, bool]] = {}

    def score(self, samples: Sequence[tuple[Any, str]]) -> list[Verdict]:
        """Batch API: one `Verdict` per (item, response text), in order."""
        return [self.score_one(item, text) for item, text in samples]

    def __call__(self, item, text: str) -> Verdict:
        return self.score_one(item, text)

    def score_one(self, item, text: str) -> Verdict:
        kind = getattr(item, "verifier", "math")
        if kind not in VERIFIERS:
            raise ValueError(f"unknown verifier {kind!r} on item; use one of {VERIFIERS}")
        gold = str(item.answer)
        if kind == "choice":
            found = extract_answer(text, mode="choice", letters=choice_letters(item))
            ok = found.answer is not None and found.answer == gold.strip().upper()
            return Verdict(float(ok), ok, found.answer, found.format_ok)
        numeric_gold = _INTEGER.fullmatch(gold.strip().replace(",", "")) is not None
        fallback = self.number_fallback and (kind == "math" or numeric_gold)
        found = extract_answer(text, mode="math", number_fallback=fallback)
        if found.answer is None:
            return Verdict(0.0, False, None, False)
        if kind == "rg":
            try:
                reward = min(max(rg_score(found.answer, item), 0.0), 1.0)
            except Exception as err:  # noqa: BLE001 - a failing scorer is reward 0, counted
                return Verdict(
                    0.0, False, found.answer, found.format_ok, f"{type(err).__name__}: {err}"
                )
            return Verdict(reward, reward >= 1.0, found.answer, found.format_ok)
        if kind == "exact":
            ok = _normalise(found.answer) == _normalise(gold)
            return Verdict(float(ok), ok, found.answer, found.format_ok)
        ok, error, timed_out = self.math_equal(gold, found.answer)
        return Verdict(float(ok), ok, found.answer, found.format_ok, error, timed_out)

    def math_equal(self, gold: str, pred: str) -> tuple[bool, str | None, bool]:
        """(equal, error, timed_out): math-verify equivalence under the hard time limit.

        Identical strings and plain integers are decided here without the child process.
        """
        g, p = _normalise(gold).replace(",", ""), _normalise(pred).replace(",", "")
        if g == p:
            return True, None, False
        if _INTEGER.fullmatch(g) and _INTEGER.fullmatch(p):
            return int(g) == int(p), None, False
        key = (gold, pred)
        if key not in self._math_cache:
            value, error, timed_out = self.sandbox.run("math", gold, pred)
            self._math_cache[key] = (bool(value), error, timed_out)
        return self._math_cache[key]

    def close(self) -> None:
        self.sandbox.close()


@functools.lru_cache(maxsize=1)
def default_verifier() -> Verifier:
    """A shared `Verifier` with the default limits (one child process per Python process)."""
    return Verifier()


def score_response(item, text: str) -> Verdict:
    """Score one response with the shared default verifier."""
    return default_verifier().score_one(item, text)
