"""The toy task `toy:paths`: addition with two solution strategies of unequal base probability and
unequal coverage, the narrowing testbed of issue 46 (an ict.data task family, like `toy:cot`).

Prompt "Q:471+326\nA:" (operands zero-padded to `digits`). Two responses are taught, chosen by the
first response token:

    short  "1+6=7;7+2=9;4+3=7;=0797"                 per digit, (x + y) mod 10: carries dropped
    long   "1+6+0=7 c0;7+2+0=9 c0;4+3+0=7 c0;=0797"  toy:cot's per-digit chain with carries

Both copy the digits from the right; the path shows at the fourth token ('=' or '+'). The short
path is right exactly on the problems without a carry (a share `100 - carry_pct` percent
of every split); the long path is right on every problem but is longer, so a partly trained model
executes it less reliably. The warm start (ict.compare.warm_start) teaches the long path on
`long_pct` percent of its examples, whatever the problem, so a start model picks it rarely and on
carry problems as often as on the others. Score 1 only when the response ends with the right sum
(`digits + 1` digits, after the start or a ';').

This is the mechanism Yue et al. (arXiv 2504.13837) describe for RLVR narrowing pass@k: the short
path is rewarded more often, so sharpening onto it moves probability away from the rarer long
path, the only route to the carry problems. `strategy(response)` says which path a response took
(`"short"`, `"long"` or `"other"`), and the items' metadata carry `carry` for per-problem readings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import numpy as np

from ict.data.toy import cot

_SHORT_STEP = re.compile(r"(\d)\+(\d)=(\d);")
_LONG = re.compile(r"^(\d\+\d\+\d=\d+ c\d;)+=\d+\s*$")
_SHORT = re.compile(r"^(\d\+\d=\d;)+=\d+\s*$")


@dataclass(frozen=True)
class ToyPathsTask(cot.HeldOutPools):
    """a + b with `digits`-digit operands; `carry_pct`% of the problems of every split need a carry
    (the short path fails on them). Train, validation and held-out pairs are disjoint."""

    digits: int = 3
    carry_pct: int = 20  # percent of problems with at least one carry (short path wrong)
    long_pct: int = 15  # percent of warm-start examples that show the long path
    # percent of carry problems among the warm start's examples (None: carry_pct, as the splits);
    # more carries teach the long path's carry steps without changing how often it is shown
    sft_carry_pct: int | None = None
    seed: int = 0
    test_pool: int = 2000  # held-out pairs drawn first; validation and train never repeat them

    spec_name: ClassVar[str] = "toy:paths"
    name: ClassVar[str] = "toy-paths"  # the warm start's cache folder and log label
    max_positions: ClassVar[int] = 128  # the warm-started model's context

    def __post_init__(self):
        from ict.errors import DataError

        pcts = {"carry_pct": self.carry_pct, "long_pct": self.long_pct}
        if self.sft_carry_pct is not None:
            pcts["sft_carry_pct"] = self.sft_carry_pct
        if any(not 0 <= v <= 100 for v in pcts.values()):
            raise DataError(
                "toy:paths: carry_pct, long_pct and sft_carry_pct are percents in [0, 100], got "
                + ", ".join(f"{k}={v}" for k, v in pcts.items())
            )
        if self.digits < 1:
            raise DataError(f"toy:paths: digits must be at least 1, got {self.digits}")

    # splits: cot.HeldOutPools (every pool drawn with the task's carry share)

    def _test(self) -> list[tuple[int, int]]:
        return self._draws([self.seed, 0], self.test_pool, set(), distinct=True)

    def _validation(self) -> list[tuple[int, int]]:
        return self._draws([self.seed, 3], self.test_pool, set(self._test()), distinct=True)

    def _draws(
        self, seed, size: int, held: set, distinct: bool = False, carry_pct: int | None = None
    ) -> list[tuple[int, int]]:
        """`size` pairs from the stream seeded by `seed`, each a carry problem with probability
        carry_pct / 100 (default the task's; drawn by rejection), leaving out `held` (and repeats
        when distinct)."""
        rng, out, seen = np.random.default_rng(seed), [], set()
        high = 10**self.digits
        share = (self.carry_pct if carry_pct is None else carry_pct) / 100
        while len(out) < size:
            want_carry = rng.random() < share
            while True:
                a, b = (int(x) for x in rng.integers(0, high, 2))
                if has_carry(a, b, self.digits) == want_carry:
                    break
            pair = (a, b)
            if pair in held or (distinct and pair in seen):
                continue
            out.append(pair)
            seen.add(pair)
        return out

    @property
    def check_tokens(self) -> int:
        """Response budget of the warm start's accuracy check: a full long chain and 4 more."""
        return response_tokens(self) + 4

    def prompt(self, a: int, b: int) -> str:
        return cot.prompt(a, b, self.digits)

    def target(self, a: int, b: int) -> str:
        """The long path (right on every problem): what the items' metadata call the target."""
        return cot.target(a, b, self.digits)

    def short_target(self, a: int, b: int) -> str:
        return short_target(a, b, self.digits)

    def reward_fn(self, a: int, b: int):
        """reward(response) -> 1.0 or 0.0 for the pair (a picklable partial)."""
        return partial(reward, a=a, b=b, digits=self.digits)

    def sft_examples(self, seed: int, batch_size: int):
        """next() -> (prompt, target) texts of `batch_size` training pairs (sft_carry_pct percent
        carry problems, default the task's mix), each shown with the long path with probability
        long_pct / 100, else the short path, from a stream seeded by [seed, 2]: the supervised
        warm start's batches."""
        held = set(self._test())
        rng = np.random.default_rng([seed, 2])
        pool = self._draws([self.seed, 5, seed], 20_000, held, carry_pct=self.sft_carry_pct)

        def next_examples() -> list[tuple[str, str]]:
            idx = rng.integers(0, len(pool), batch_size)
            longs = rng.random(batch_size) < self.long_pct / 100
            out = []
            for i, use_long in zip(idx, longs, strict=True):
                a, b = pool[int(i)]
                text = self.target(a, b) if use_long else self.short_target(a, b)
                out.append((self.prompt(a, b), text))
            return out

        return next_examples


def has_carry(a: int, b: int, digits: int) -> bool:
    """True when some digit position of a + b carries (so the digit-wise sum is wrong)."""
    return digitwise_sum(a, b, digits) != a + b


def digitwise_sum(a: int, b: int, digits: int) -> int:
    """Sum of the digits position by position, each mod 10 (no carries)."""
    return sum(((a // 10**i) % 10 + (b // 10**i) % 10) % 10 * 10**i for i in range(digits))


def short_target(a: int, b: int, digits: int = 3) -> str:
    """The short path: per digit from the right 'x+y=d;' with d = (x + y) mod 10 (the carry
    dropped), then '=' and the digit-wise sum with digits + 1 digits."""
    steps = []
    for i in range(digits):
        x, y = (a // 10**i) % 10, (b // 10**i) % 10
        steps.append(f"{x}+{y}={(x + y) % 10};")
    return "".join(steps) + f"={digitwise_sum(a, b, digits):0{digits + 1}d}"


def reward(response: str, a: int, b: int, digits: int = 3) -> float:
    """1.0 when the response ends with '=<a + b>' written with digits + 1 digits, right after the
    response's start or a ';' (so a truncated chain's step sum never counts), else 0.0."""
    match = re.search(rf"(?:^|;)=(\d{{{digits + 1}}})\s*$", response)
    return float(match is not None and int(match.group(1)) == a + b)


def strategy(response: str) -> str:
    """Which path a response took: "short" (steps 'x+y=d;'), "long" (toy:cot's chain with
    carries) or "other" (neither, e.g. a broken or truncated chain)."""
    text = response.strip()
    if _SHORT.match(text):
        return "short"
    if _LONG.match(text):
        return "long"
    return "other"


def token_categories(tokens: list[str]) -> list[str]:
    """toy:cot's chain categories; in a short step 'x+y=d;' the digits x, y are operands and d a
    step sum."""
    labels = cot.token_categories(tokens)
    chars = [t for t in tokens if len(t) == 1]
    text = "".join(chars)
    char_labels = [label for t, label in zip(tokens, labels, strict=True) if len(t) == 1]
    for m in _SHORT_STEP.finditer(text):
        char_labels[m.start(1)] = char_labels[m.start(2)] = "operand"
        char_labels[m.start(3)] = "step_sum"
    it = iter(char_labels)
    return [next(it) if len(t) == 1 else "eos" for t in tokens]


def response_tokens(task: ToyPathsTask) -> int:
    """Tokens of a full long response, EOS included."""
    return cot.response_tokens(cot.ToyCotTask(digits=task.digits))
