"""The toy-cot preset's task: multi-digit addition written as a per-digit chain with explicit carries.

Prompt "Q:4705+3862\nA:" (operands zero-padded to `digits`), target response, digit by digit from
the right, each step "x+y+carry_in=sum c<carry_out>;", then the answer:

    5+2+0=7 c0;0+6+0=6 c0;7+8+0=15 c1;4+3+1=8 c0;=08567

(52 characters for 4 digits, one token each with the character-level tokenizer, then EOS). The
answer is written with `digits + 1` digits. Score 1 only when the final answer is right, so a
wrong step sum or a dropped carry decides the outcome. `token_categories` labels each response
token (operand copy, carry, step sum, answer digit, formatting, EOS, other) for the report's
token-level evidence. The warm start (a tiny transformer trained from scratch by supervised
learning until about half of its sampled answers are right) is cached like the toy preset's,
under ~/.cache/ict/toy-cot (or $ICT_CACHE/toy-cot), keyed by its settings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import numpy as np

from ict.compare.toy import (
    WarmStart,
    accuracy_of_samples,
    fit_warm_start,
    load_warm_start,
    new_warm_model,
    save_warm_start,
    sft_batch,
)

logger = logging.getLogger("ict.compare")

_STEP = re.compile(r"(\d)\+(\d)\+(\d)=(\d+) c(\d);")
_ANSWER = re.compile(r";=(\d+)\s*$")
CATEGORIES = ("operand", "carry", "step_sum", "answer", "format", "eos", "other")


@dataclass(frozen=True)
class ToyCotTask:
    """a + b with a, b uniform in [0, 10**digits); train and held-out pairs are disjoint."""

    digits: int = 4
    seed: int = 0
    test_pool: int = 2000  # held-out pairs drawn first; train pairs never repeat them

    def split(self, split: str, size: int) -> list[tuple[int, int]]:
        """`size` (a, b) pairs of the split ("train" or "test"), seeded and deterministic."""
        high = 10**self.digits
        test = np.random.default_rng(self.seed).integers(0, high, (self.test_pool, 2))
        if split == "test":
            return [(int(a), int(b)) for a, b in test[np.arange(size) % len(test)]]
        held = {(int(a), int(b)) for a, b in test}
        rng = np.random.default_rng([self.seed, 1])
        out: list[tuple[int, int]] = []
        while len(out) < size:
            for a, b in rng.integers(0, high, (size, 2)):
                if (int(a), int(b)) not in held and len(out) < size:
                    out.append((int(a), int(b)))
        return out


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


def score(response: str, a: int, b: int) -> float:
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


def problems(task: ToyCotTask, split: str, size: int):
    """Trainer problems: [ict.train.Problem(prompt, score)] (the scorer a picklable partial)."""
    from ict.train.problems import Problem

    return [
        Problem(prompt(a, b, task.digits), partial(score, a=a, b=b))
        for a, b in task.split(split, size)
    ]


def response_tokens(task: ToyCotTask) -> int:
    """Tokens of a full chain response, EOS included (the response budget needs a few more)."""
    return len(target(10**task.digits - 1, 10**task.digits - 1, task.digits)) + 1


def cache_dir(task: ToyCotTask, warm: WarmStart) -> Path:
    key = hashlib.sha256(
        json.dumps([asdict(task), asdict(warm), 1], sort_keys=True).encode()
    ).hexdigest()[:16]
    root = Path(os.environ.get("ICT_CACHE", Path.home() / ".cache" / "ict"))
    return root / "toy-cot" / key


def _batch(tokenizer, task: ToyCotTask, pairs, device):
    """Right-padded SFT batch of (a, b) pairs (ict.compare.toy.sft_batch)."""
    examples = [(prompt(a, b, task.digits), target(a, b, task.digits)) for a, b in pairs]
    return sft_batch(tokenizer, examples, device)


def sampled_accuracy(model, tokenizer, task: ToyCotTask, pairs, *, seed: int = 0) -> float:
    """Fraction of pairs answered correctly by one sample each (temperature 1)."""
    prompts = [prompt(a, b, task.digits) for a, b in pairs]
    budget = response_tokens(task) + 4
    return accuracy_of_samples(
        model, tokenizer, prompts, pairs, score, max_new_tokens=budget, seed=seed
    )


def warm_start(task: ToyCotTask, warm: WarmStart, *, refresh: bool = False):
    """(model, tokenizer, info): the model after supervised warm start, from cache if present.

    info: {"path", "steps", "accuracy", "seconds", "cached", ...}."""
    import torch

    path = cache_dir(task, warm)
    cached = None if refresh else load_warm_start(path)
    if cached is not None:
        return cached

    t0 = time.perf_counter()
    model, tokenizer = new_warm_model(warm, max_positions=128)
    check_pairs = task.split("train", 200)
    held = set(task.split("test", task.test_pool))
    rng = np.random.default_rng([warm.seed, 2])  # a stream apart from the splits' seeds
    torch.manual_seed(warm.seed)
    high = 10**task.digits

    def next_batch():
        draws = rng.integers(0, high, (warm.batch_size, 2))
        batch = [(int(a), int(b)) for a, b in draws if (int(a), int(b)) not in held]
        return _batch(tokenizer, task, batch, model.device)

    step, accuracy = fit_warm_start(
        model,
        warm,
        next_batch,
        lambda step: sampled_accuracy(model, tokenizer, task, check_pairs, seed=step),
        label="toy-cot",
    )
    info = save_warm_start(
        path, model, tokenizer, task=task, warm=warm, steps=step, accuracy=accuracy, t0=t0
    )
    return model, tokenizer, {**info, "cached": False}
