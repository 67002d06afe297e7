"""Scoring an evaluation's responses as training scores them: each item's own scorer.

The toy tasks' items (ict.compare.tasks.ScoredItem) carry their own `score`; plain items score
with the shared verifier. An evaluation that called the verifier directly would judge a toy
chain ("...;=08567") by the math verifier instead of the task's rule.
"""

from __future__ import annotations


def as_verdict(value):
    """A scoring result -> ict.rewards.Verdict: a Verdict as it is; a number, (reward, formatted)
    or dict (the toy tasks' scorers) with `correct` = reward >= 1 and `format_ok` None when the
    scorer does not say (summarise leaves those out of the format rate)."""
    from ict.rewards import Verdict
    from ict.train.safe_rewards import _unpack

    if isinstance(value, Verdict):
        return value
    try:
        reward, formatted = _unpack(value)
    except Exception as err:  # noqa: BLE001 - a failing scorer scores 0, as in training
        return Verdict(0.0, False, None, False, f"{type(err).__name__}: {err}"[:500])
    reward = min(max(float(reward), 0.0), 1.0)
    return Verdict(reward, reward >= 1.0, None, formatted)


class ItemScorer:
    """The eval runner's verifier that scores each (item, response) with `item.score(response,
    verifier)`, as the trainer's rewards do (ScoredItem: its own scorer; Item: `verifier`)."""

    def __init__(self, verifier):
        self.verifier = verifier

    def score(self, samples) -> list:
        """One Verdict per (item, response text), in order."""
        return [as_verdict(item.score(text, self.verifier)) for item, text in samples]
