"""Verifiers: turn (item, response text) into a `Verdict` (reward, extracted answer, flags).

An item is anything with `.answer` (gold, str), `.verifier` ("math" | "choice" | "rg" | "exact")
and `.metadata` (dict; reasoning-gym items keep the task name and config there, any item may set
`metadata["verifier_options"]`, see `ict.rewards.options`), e.g. `ict.data.Item`.

`Verifier.judge_one` never raises for a response: a verifier that raises or times out gives
reward 0 and sets `error` / `timed_out` (counted in `Verifier.errors` / `Verifier.timeouts`,
each kind of error logged once on the `ict.rewards` logger), so it never stops a run. Only set-up
errors raise: an unknown verifier name, invalid options, no math-verify. The rules of what counts
as right are in docs/eval.md, "How answers are verified".
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from ict.rewards.equal import MathJudge
from ict.rewards.extract import extract_answer, normalise_answer
from ict.rewards.numbers import is_integer_answer
from ict.rewards.options import VerifyOptions, options_of
from ict.rewards.sandbox import Sandbox, VerifierUnavailable

VERIFIERS = ("math", "choice", "rg", "exact")
logger = logging.getLogger("ict.rewards")


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

    def judge(self, samples: Sequence[tuple[Any, str]]) -> list[Verdict]: ...


def choice_letters(item) -> str:
    """The valid option letters of a multiple-choice item: one per entry of metadata["options"]
    ("ABCD" for four options); "ABCDE" when the item does not list its options."""
    options = (getattr(item, "metadata", None) or {}).get("options")
    if options:
        return "ABCDEFGHIJ"[: len(options)]
    return "ABCDE"


@functools.lru_cache(maxsize=64)
def _rg_dataset(name: str, config_json: str):
    import reasoning_gym

    return reasoning_gym.create_dataset(name, **json.loads(config_json))


def rg_reward(answer: str | None, item) -> float:
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
        number_fallback: read an answer from a response with neither answer tags nor a box: for
            math items math-verify's own reading of the response, for numeric reasoning-gym
            answers the last standalone number; it never counts as format_ok.
        options: the math-verify settings of items that set none (`VerifyOptions`).
    """

    def __init__(
        self,
        timeout_s: float = 5.0,
        number_fallback: bool = True,
        options: VerifyOptions | None = None,
    ):
        self.sandbox = Sandbox(timeout_s)
        self.number_fallback = number_fallback
        self.options = options or VerifyOptions()
        self.math = MathJudge(self.sandbox)
        self.errors = 0  # verdicts with an error (time-outs included)
        self.timeouts = 0
        self._logged: set[str] = set()

    def judge(self, samples: Sequence[tuple[Any, str]]) -> list[Verdict]:
        """Batch API: one `Verdict` per (item, response text), in order."""
        return [self.judge_one(item, text) for item, text in samples]

    def __call__(self, item, text: str) -> Verdict:
        return self.judge_one(item, text)

    def judge_one(self, item, text: str) -> Verdict:
        """The verdict on one response; never raises for any response text (see module doc)."""
        kind = getattr(item, "verifier", "math")
        if kind not in VERIFIERS:
            raise ValueError(f"unknown verifier {kind!r} on item; use one of {VERIFIERS}")
        options = options_of(item, self.options)
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        try:
            verdict = self._judge(kind, item, "" if text is None else str(text), options)
        except VerifierUnavailable:
            raise
        except Exception as err:  # noqa: BLE001 - a failing verifier is reward 0, counted
            verdict = Verdict(0.0, False, None, False, f"{type(err).__name__}: {err}"[:500])
        if verdict.error is not None:
            self._count(verdict, item)
        return verdict

    def _judge(self, kind: str, item, text: str, options: VerifyOptions) -> Verdict:
        gold = str(item.answer)
        if kind == "choice":
            found = extract_answer(text, mode="choice", letters=choice_letters(item))
            ok = found.answer is not None and found.answer == gold.strip().upper()
            return Verdict(float(ok), ok, found.answer, found.format_ok)
        fallback = self.number_fallback and (kind == "math" or is_integer_answer(gold))
        found = extract_answer(text, mode="math", number_fallback=fallback)
        if found.several:  # a hedge: several different final answers
            return Verdict(0.0, False, found.answer, found.format_ok)
        if kind == "math":
            return self._judge_math(gold, found, text, options, fallback)
        if found.answer is None:
            return Verdict(0.0, False, None, False)
        if kind == "rg":
            try:
                reward = min(max(rg_reward(found.answer, item), 0.0), 1.0)
            except Exception as err:  # noqa: BLE001 - a failing reward_fn is reward 0, counted
                return Verdict(
                    0.0, False, found.answer, found.format_ok, f"{type(err).__name__}: {err}"
                )
            return Verdict(reward, reward >= 1.0, found.answer, found.format_ok)
        ok = normalise_answer(found.answer) == normalise_answer(gold)  # "exact"
        return Verdict(float(ok), ok, found.answer, found.format_ok)

    def _judge_math(self, gold, found, text, options, fallback) -> Verdict:
        if found.source in ("tag", "boxed"):
            answer = found.answer
        elif fallback:
            answer = None  # math-verify reads the response itself
        else:
            return Verdict(0.0, False, None, False)
        ok, answer, error, timed_out = self.math.response(gold, answer, text, options)
        return Verdict(float(ok), ok, answer, found.format_ok, error, timed_out)

    def math_equal(
        self, gold: str, pred: str, options: VerifyOptions | None = None
    ) -> tuple[bool, str | None, bool]:
        """(equal, error, timed_out): math-verify equivalence of two answer strings under the
        hard time limit (`options`: this verifier's by default). Plain integers are decided
        here without the child process; never raises for any `pred`."""
        try:
            return self.math.answers(str(gold), str(pred), self.options.merged(options))
        except VerifierUnavailable:
            raise
        except Exception as err:  # noqa: BLE001 - same contract as judge_one
            return False, f"{type(err).__name__}: {err}"[:500], False

    def _count(self, verdict: Verdict, item) -> None:
        """Count an errored verdict; log the first of each kind at WARNING, the rest at DEBUG."""
        self.errors += 1
        self.timeouts += verdict.timed_out
        kind = "timeout" if verdict.timed_out else verdict.error.split(":", 1)[0]
        level = logging.DEBUG if kind in self._logged else logging.WARNING
        self._logged.add(kind)
        logger.log(
            level,
            "verifier %s on gold %r (reward 0; counted in Verdict.error): %s",
            kind,
            str(getattr(item, "answer", ""))[:80],
            verdict.error,
        )

    def close(self) -> None:
        self.sandbox.close()


@functools.lru_cache(maxsize=1)
def default_verifier() -> Verifier:
    """A shared `Verifier` with the default limits (one child process per Python process)."""
    return Verifier()


def judge_response(item, text: str) -> Verdict:
    """Score one response with the shared default verifier."""
    return default_verifier().judge_one(item, text)
