"""The toy task `toy:cot`: multi-digit addition written as a per-digit chain with explicit carries
(an ict.data task family, like `toy:add`).

Prompt "Q:4705+3862\nA:" (operands zero-padded to `digits`), target response, digit by digit from
the right, each step "x+y+carry_in=sum c<carry_out>;", then the answer:

    5+2+0=7 c0;0+6+0=6 c0;7+8+0=15 c1;4+3+1=8 c0;=08567

(52 characters for 4 digits, one token each with the character-level tokenizer, then EOS). The
answer is written with `digits + 1` digits. Score 1 only when the final answer is right, so a
wrong step sum or a dropped carry decides the outcome. `token_categories` labels each response
token (operand copy, carry, step sum, answer digit, formatting, EOS, other) for the report's
token-level evidence. `ict.data.load_task("toy:cot?digits=4")` gives its problems as items
(ict.data.toy). The toy-cot preset's start model (a tiny transformer trained from scratch by
ict.compare.warm_start until about half of its sampled answers are right) is cached under
~/.cache/ict/toy-cot (or $ICT_CACHE/toy-cot), keyed by its settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import numpy as np

_STEP = re.compile(r"(\d)\+(\d)\+(\d)=(\d+) c(\d);")
_ANSWER = re.compile(r";=(\d+)\s*$")
CATEGORIES = ("operand", "carry", "step_sum", "answer", "format", "eos", "other")


class HeldOutPools:
    """The splits of a toy pair task: `_test()` draws the `test_pool` held-out pairs first,
    `_validation()` as many of their own, and `_draws(seed, size, held)` the training pairs (a task
    supplies the three); `split` cycles the pools when asked for more."""

    def split(self, split: str, size: int) -> list[tuple[int, int]]:
        """`size` (a, b) pairs of the split ("train", "validation" or "test"), seeded and
        deterministic: test is the `test_pool` held-out pairs (cycled if `size` is larger),
        validation `test_pool` pairs that are not test pairs (cycled likewise), and train pairs
        (stream [seed, 1]) are neither."""
        if split == "test":
            test = self._test()
            return [test[i % len(test)] for i in range(size)]
        if split == "validation":
            validation = self._validation()
            return [validation[i % len(validation)] for i in range(size)]
        held = set(self._test()) | set(self._validation())
        return self._draws([self.seed, 1], size, held)

    @property
    def test_size(self) -> int:
        """Held-out pairs drawn (the size of an evaluation that asks for all of them)."""
        return self.test_pool

    @property
    def validation_size(self) -> int:
        """Validation pairs drawn (as many as held-out pairs)."""
        return self.test_pool


@dataclass(frozen=True)
class ToyCotTask(HeldOutPools):
    """a + b with a, b uniform in [0, 10**digits); train and held-out pairs are disjoint."""

    digits: int = 4
    seed: int = 0
    test_pool: int = 2000  # held-out pairs drawn first; train pairs never repeat them

    spec_name: ClassVar[str] = "toy:cot"
    name: ClassVar[str] = "toy-cot"  # the warm start's cache folder and log label
    max_positions: ClassVar[int] = 128  # the warm-started model's context

    # splits: HeldOutPools (validation from its own stream [seed, 3]); the warm start's examples
    # (`sft_examples`) leave out only the test pairs

    def _test(self) -> list[tuple[int, int]]:
        test = np.random.default_rng(self.seed).integers(0, 10**self.digits, (self.test_pool, 2))
        return [(int(a), int(b)) for a, b in test]

    def _validation(self) -> list[tuple[int, int]]:
        return self._draws([self.seed, 3], self.test_pool, set(self._test()), distinct=True)

    def _draws(self, seed, size: int, held: set, distinct: bool = False) -> list[tuple[int, int]]:
        """`size` pairs from the stream seeded by `seed`, leaving out `held` (and repeats)."""
        rng, out, seen = np.random.default_rng(seed), [], set()
        while len(out) < size:
            for a, b in rng.integers(0, 10**self.digits, (size, 2)):
                pair = (int(a), int(b))
                if pair in held or (distinct and pair in seen) or len(out) >= size:
                    continue
                out.append(pair)
                seen.add(pair)
        return out

    @property
    def check_tokens(self) -> int:
        """Response budget of the warm start's accuracy check: a full chain and 4 tokens more."""
        return response_tokens(self) + 4

    def prompt(self, a: int, b: int) -> str:
        return prompt(a, b, self.digits)

    def target(self, a: int, b: int) -> str:
        return target(a, b, self.digits)

    def reward_fn(self, a: int, b: int):
        """reward(response) -> 1.0 or 0.0 for the pair (a picklable partial)."""
        return partial(reward, a=a, b=b)

    def sft_examples(self, seed: int, batch_size: int):
        """next() -> (prompt, target) texts of up to `batch_size` fresh random pairs (draws that
        are held-out pairs are dropped), from a stream seeded by [seed, 2] (apart from the splits'
        seeds): the supervised warm start's batches."""
        held = set(self.split("test", self.test_pool))
        rng = np.random.default_rng([seed, 2])
        high = 10**self.digits

        def next_examples() -> list[tuple[str, str]]:
            draws = rng.integers(0, high, (batch_size, 2))
            batch = [(int(a), int(b)) for a, b in draws if (int(a), int(b)) not in held]
            return [(self.prompt(a, b), self.target(a, b)) for a, b in batch]

        return next_examples


def prompt(a: int, b: int, digits: int = 4) -> str:
    return f"Q:{a:0{digits}d}+{b:0{digits}d}\nA:"


def target(a: int, b: int, digits: int = 4) -> str:
    """The chain: one step per digit from the right, then '=' and the sum with digits + 1 digits."""
    steps, carry = [], 0
    for i in range(digits):
        x, y = (a // 10**i) % 10, (b // 10**i) % 10
        s = x + y + carry
        steps.append(f"{x}+{y}+{carry}={s} c{s // 10};")
        carry = s // 10
    return "".join(steps) + f"={a + b:0{digits + 1}d}"


def reward(response: str, a: int, b: int) -> float:
    """1.0 when the response ends with ';=<a + b>' (the chain's final answer), else 0.0."""
    match = _ANSWER.search(response)
    return float(match is not None and int(match.group(1)) == a + b)


def token_categories(tokens: list[str]) -> list[str]:
    """One of CATEGORIES per response token (character-level tokens; longer tokens are special,
    e.g. EOS). Parsed from the response itself, so malformed chains still get labels: digits that
    fit no step or answer are "other"."""
    chars = [t for t in tokens if len(t) == 1]
    text = "".join(chars)
    labels = ["format" if not ch.isdigit() else "other" for ch in text]
    for m in _STEP.finditer(text):
        for group, label in ((1, "operand"), (2, "operand"), (3, "carry"), (5, "carry")):
            labels[m.start(group)] = label
        for i in range(m.start(4), m.end(4)):
            labels[i] = "step_sum"
    answer = _ANSWER.search(text)
    if answer is not None:
        for i in range(answer.start(1), answer.end(1)):
            labels[i] = "answer"
    it = iter(labels)
    return [next(it) if len(t) == 1 else "eos" for t in tokens]


def response_tokens(task: ToyCotTask) -> int:
    """Tokens of a full chain response, EOS included (the response budget needs a few more)."""
    return len(target(10**task.digits - 1, 10**task.digits - 1, task.digits)) + 1
