"""The toy task `toy:add`: two-number addition with its own reward_fn (the toy task family).

Prompt "Q:47+35\nA:", target response "47+35=82" then EOS. The copied operands are easy
(low-entropy tokens); the sum digits are the branching points. `ict.data.load_task("toy:add")`
gives its problems as items (ict.data.toy); the toy presets start from a tiny transformer trained
on the targets by ict.compare.warm_start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import numpy as np

_ANSWER = re.compile(r"=\s*(-?\d+)")


@dataclass(frozen=True)
class ToyAddTask:
    """Addition a + b with a in [0, max_a], b in [0, max_b]; train and held-out pairs are disjoint.

    The fields are the options of the `toy:add` spec (`toy:add?max_a=9&max_b=9`) and, with the
    warm start's settings, the key of the cached warm start."""

    max_a: int = 99
    max_b: int = 99
    seed: int = 0

    spec_name: ClassVar[str] = "toy:add"
    name: ClassVar[str] = "toy"  # the warm start's cache folder and log label
    max_positions: ClassVar[int] = 64  # the warm-started model's context
    check_tokens: ClassVar[int] = 12  # response budget of the warm start's accuracy check

    def split(self, split: str, size: int) -> list[tuple[int, int]]:
        """`size` (a, b) pairs of the split ("train", "validation" or "test"), cycled if `size`
        is larger than it: in one seeded permutation of all pairs, test is the first 20%,
        validation the last 10% and train the pairs in between, so the three are disjoint (the
        supervised warm start's examples, `sft_examples`, still draw from every non-test pair)."""
        pairs = np.array([(a, b) for a in range(self.max_a + 1) for b in range(self.max_b + 1)])
        order = np.random.default_rng(self.seed).permutation(len(pairs))
        cut, held = max(1, len(pairs) // 5), max(1, len(pairs) // 10)
        pools = {"test": order[:cut], "validation": order[-held:], "train": order[cut:-held]}
        pool = pools[split]
        idx = pool[np.arange(size) % len(pool)]
        return [(int(a), int(b)) for a, b in pairs[idx]]

    @property
    def test_size(self) -> int:
        """Distinct held-out pairs (the size of an evaluation that asks for all of them)."""
        return max(1, (self.max_a + 1) * (self.max_b + 1) // 5)

    @property
    def validation_size(self) -> int:
        """Distinct validation pairs."""
        return max(1, (self.max_a + 1) * (self.max_b + 1) // 10)

    def prompt(self, a: int, b: int) -> str:
        return prompt(a, b)

    def target(self, a: int, b: int) -> str:
        return target(a, b)

    def reward_fn(self, a: int, b: int):
        """reward(response) -> 1.0 or 0.0 for the pair (a picklable partial)."""
        return partial(reward, a=a, b=b)

    def sft_examples(self, seed: int, batch_size: int):
        """next() -> `batch_size` (prompt, target) texts drawn with replacement from the training
        pairs, from a stream seeded by `seed` (the supervised warm start's batches)."""
        # every non-test pair, as before the validation split existed (cached warm starts stay)
        pairs = np.array([(a, b) for a in range(self.max_a + 1) for b in range(self.max_b + 1)])
        order = np.random.default_rng(self.seed).permutation(len(pairs))
        pool = order[max(1, len(pairs) // 5) :]
        idx = pool[np.arange(len(pairs)) % len(pool)]
        train_pairs = [(int(a), int(b)) for a, b in pairs[idx]]
        rng = np.random.default_rng(seed)

        def next_examples() -> list[tuple[str, str]]:
            batch = [train_pairs[i] for i in rng.integers(0, len(train_pairs), batch_size)]
            return [(prompt(a, b), target(a, b)) for a, b in batch]

        return next_examples


def prompt(a: int, b: int) -> str:
    return f"Q:{a}+{b}\nA:"


def target(a: int, b: int) -> str:
    return f"{a}+{b}={a + b}"


def reward(response: str, a: int, b: int) -> float:
    """1.0 when the number after the first '=' is a + b, else 0.0."""
    match = _ANSWER.search(response)
    return float(match is not None and int(match.group(1)) == a + b)
