"""`Item`: one problem of a task or benchmark, with everything needed to prompt and to reward it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ict.rewards import default_verifier


@dataclass
class Item:
    """One problem.

    id: stable identifier, e.g. "gsm8k/17" or "rg:chain_sum/1000000003".
    task: the task or benchmark name it came from.
    question: the problem text as in the source.
    answer: the gold answer as a string (a letter for multiple choice).
    messages: the chat messages to send (template applied; chat template not yet applied).
    verifier: how to judge a response: "math" | "choice" | "rg" | "exact" (see ict.rewards).
    metadata: source-specific fields (reasoning-gym keeps its task name, config and seed here);
        `metadata["verifier_options"]` holds the item's math-verify settings, if any (a dict of
        `ict.rewards.VerifyOptions` fields: precision, extraction, ...; it travels with the
        metadata through mixtures and sample files).
    """

    id: str
    task: str
    question: str
    answer: str
    messages: list[dict]
    verifier: str = "math"
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt(self) -> str:
        """The last user message (the question as the model sees it, without few-shot turns)."""
        return self.messages[-1]["content"]

    def reward(self, response: str, verifier=None):
        """Score a response: a `ict.rewards.Verdict` (default: the shared default verifier)."""
        return (verifier or default_verifier()).judge_one(self, response)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RuleItem(Item):
    """An Item that carries its own rule: `reward(response)` -> its `reward_fn(response)` (a number,
    e.g. the toy tasks' 1.0 / 0.0) instead of a verifier's Verdict; `verifier` and `answer` still
    let ict.rewards read it."""

    reward_fn: Callable[[str], float] | None = field(default=None, repr=False, compare=False)

    def reward(self, response: str, verifier=None):
        if self.reward_fn is None:
            return super().reward(response, verifier)
        return self.reward_fn(response)
