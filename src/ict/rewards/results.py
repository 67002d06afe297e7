"""What a reward function returns, read one way: `unpack_reward` (training) and `as_verdict`
(evaluation), and `ItemJudge`, which judges each response by its item's own rule.

A reward function (an item's `reward(response)`, a user's callable, `Verifier.judge_one`) may
return a `Verdict`, a number, a `(reward, formatted)` pair, a dict with "reward" (and "format" or
"formatted"), or an object with `.reward` (and `.formatted` / `.format_ok`). Training turns it
into a reward with `unpack_reward` (a Verdict's own error or time-out counts as a failure);
evaluation into a `Verdict` with `as_verdict` (correct = reward >= 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ict.rewards.verify import Verdict


def unpack_reward(value: Any) -> tuple[float, bool | None]:
    """A reward function's result -> (reward, formatted or None when it does not say).

    Raises TimeoutError / RuntimeError for a Verdict-like value that timed out or failed, so the
    caller counts it (ict.train.safe_rewards scores it 0)."""
    if isinstance(value, dict):
        fmt = value.get("formatted", value.get("format"))
        return float(value["reward"]), None if fmt is None else bool(fmt)
    if isinstance(value, tuple):
        return float(value[0]), None if value[1] is None else bool(value[1])
    if hasattr(value, "reward"):  # e.g. a Verdict: its own error / time-out flags count
        if getattr(value, "timed_out", False):
            raise TimeoutError("the verifier timed out")
        if getattr(value, "error", None):
            raise RuntimeError(value.error)
        fmt = getattr(value, "formatted", getattr(value, "format_ok", None))
        return float(value.reward), None if fmt is None else bool(fmt)
    return float(value), None


def as_verdict(value: Any) -> Verdict:
    """A reward function's result -> Verdict: a Verdict as it is; anything `unpack_reward` reads
    with reward clipped to [0, 1], correct = reward >= 1 and format_ok None when the function does
    not say (the evaluation's format rate leaves those out). A value that cannot be read is a
    Verdict with reward 0 and the error, as in training."""
    if isinstance(value, Verdict):
        return value
    try:
        reward, formatted = unpack_reward(value)
    except Exception as err:  # noqa: BLE001 - a failing reward function scores 0, as in training
        return Verdict(0.0, False, None, False, f"{type(err).__name__}: {err}"[:500])
    reward = min(max(reward, 0.0), 1.0)
    return Verdict(reward, reward >= 1.0, None, formatted)


class ItemJudge:
    """Judges each (item, response) by `item.reward(response, verifier)`, as training rewards it:
    an item with its own rule (the toy tasks) by that rule, any other by `verifier` (None: the
    item's default, the shared `ict.rewards.default_verifier()`)."""

    def __init__(self, verifier=None):
        self.verifier = verifier

    def judge(self, samples: Sequence[tuple[Any, str]]) -> list[Verdict]:
        """One Verdict per (item, response text), in order."""
        return [as_verdict(item.reward(text, self.verifier)) for item, text in samples]
