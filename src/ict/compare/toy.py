"""The toy preset's task and model: two-number addition with a verifier, and a tiny transformer
that ict trains from scratch by supervised learning until it is competent but imperfect.

Prompt "Q:47+35\nA:", target response "47+35=82" then EOS. The copied operands are easy
(low-entropy tokens); the sum digits are the branching points. The warm start is seeded and cached
under ~/.cache/ict/toy (or $ICT_CACHE) keyed by its settings, so every grid cell starts from the same
weights and a second grid skips it.
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

logger = logging.getLogger("ict.compare")

_ANSWER = re.compile(r"=\s*(-?\d+)")


@dataclass(frozen=True)
class ToyTask:
    """Addition a + b with a in [0, max_a], b in [0, max_b]; train and held-out pairs are disjoint."""

    max_a: int = 99
    max_b: int = 99
    seed: int = 0

    def split(self, split: str, size: int) -> list[tuple[int, int]]:
        """`size` distinct (a, b) pairs of the split ("train" or "test"); the test split is the
        first 20% of one seeded permutation of all pairs, train the rest (cycled if size is larger)."""
        pairs = np.array([(a, b) for a in range(self.max_a + 1) for b in range(self.max_b + 1)])
        order = np.random.default_rng(self.seed).permutation(len(pairs))
        cut = max(1, len(pairs) // 5)
        pool = order[:cut] if split == "test" else order[cut:]
        idx = pool[np.arange(size) % len(pool)]
        return [(int(a), int(b)) for a, b in pairs[idx]]


def prompt(a: int, b: int) -> str:
    return f"Q:{a}+{b}\nA:"


def target(a: int, b: int) -> str:
    return f"{a}+{b}={a + b}"


def score(response: str, a: int, b: int) -> float:
    """1.0 when the number after the first '=' is a + b, else 0.0."""
    match = _ANSWER.search(response)
    return float(match is not None and int(match.group(1)) == a + b)


def problems(task: ToyTask, split: str, size: int):
    """Trainer problems: [ict.train.Problem(prompt, score)] (the scorer a picklable partial)."""
    from ict.train.problems import Problem

    return [Problem(prompt(a, b), partial(score, a=a, b=b)) for a, b in task.split(split, size)]


@dataclass(frozen=True)
class WarmStart:
    """Supervised warm start of the toy model (all fields enter the cache key)."""

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 128
    max_steps: int = 1500
    batch_size: int = 64
    learning_rate: float = 3e-3
    target_accuracy: float = (
        0.5  # stop once sampled (T = 1) accuracy on 200 training pairs reaches this
    )
    check_every: int = 50
    seed: int = 0


def cache_dir(task: ToyTask, warm: WarmStart) -> Path:
    key = hashlib.sha256(
        json.dumps([asdict(task), asdict(warm), 1], sort_keys=True).encode()
    ).hexdigest()[:16]
    root = Path(os.environ.get("ICT_CACHE", Path.home() / ".cache" / "ict"))
    return root / "toy" / key


def _batch(tokenizer, pairs, device):
    """Right-padded SFT batch of (a, b) pairs (see `sft_batch`)."""
    return sft_batch(tokenizer, [(prompt(a, b), target(a, b)) for a, b in pairs], device)


def sft_batch(tokenizer, examples, device):
    """Right-padded SFT batch of (prompt, target) texts, EOS after each target:
    input_ids, attention_mask, labels [B, T] (labels -100 on prompt and padding)."""
    import torch

    rows, labels = [], []
    for prompt_text, target_text in examples:
        p = tokenizer(prompt_text)["input_ids"]
        r = tokenizer(target_text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append(p + r)
        labels.append([-100] * len(p) + r)
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    lab = torch.full((len(rows), width), -100)
    att = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (r, lb) in enumerate(zip(rows, labels, strict=True)):
        ids[i, : len(r)] = torch.tensor(r)
        lab[i, : len(lb)] = torch.tensor(lb)
        att[i, : len(r)] = 1
    return ids.to(device), att.to(device), lab.to(device)


def sampled_accuracy(model, tokenizer, pairs, *, seed: int = 0, temperature: float = 1.0) -> float:
    """Fraction of held-out pairs answered correctly by one sample each."""
    prompts = [prompt(a, b) for a, b in pairs]
    return accuracy_of_samples(
        model,
        tokenizer,
        prompts,
        pairs,
        score,
        max_new_tokens=12,
        seed=seed,
        temperature=temperature,
    )


def accuracy_of_samples(
    model, tokenizer, prompts, pairs, score_fn, *, max_new_tokens, seed=0, temperature=1.0
) -> float:
    """Mean of score_fn(text, a, b) over one sample per prompt (prompts[i] asks pairs[i])."""
    import torch

    from ict.generation import generate

    with torch.no_grad():
        rollout = generate(
            model,
            tokenizer,
            prompts,
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            batch_size=256,
            seed=seed,
        )
    texts = rollout.texts
    return float(np.mean([score_fn(t, a, b) for t, (a, b) in zip(texts, pairs, strict=True)]))


def new_warm_model(warm: WarmStart, max_positions: int):
    """(model, tokenizer): the untrained tiny Llama a warm start begins from."""
    from ict.testing import tiny_model_and_tokenizer

    return tiny_model_and_tokenizer(
        seed=warm.seed,
        hidden_size=warm.hidden_size,
        num_layers=warm.num_layers,
        num_heads=warm.num_heads,
        intermediate_size=warm.intermediate_size,
        max_positions=max_positions,
    )


def warm_start(task: ToyTask = ToyTask(), warm: WarmStart = WarmStart(), *, refresh: bool = False):
    """(model, tokenizer, info): the toy model after supervised warm start, from cache if present.

    info: {"path", "steps", "accuracy", "seconds", "cached"}."""
    import torch

    path = cache_dir(task, warm)
    cached = None if refresh else load_warm_start(path)
    if cached is not None:
        return cached

    t0 = time.perf_counter()
    model, tokenizer = new_warm_model(warm, max_positions=64)
    train_pairs = task.split("train", (task.max_a + 1) * (task.max_b + 1))
    check_pairs = task.split("train", 200)  # held-out pairs stay unseen until the final evaluation
    rng = np.random.default_rng(warm.seed)
    torch.manual_seed(warm.seed)

    def next_batch():
        batch = [train_pairs[i] for i in rng.integers(0, len(train_pairs), warm.batch_size)]
        return _batch(tokenizer, batch, model.device)

    step, accuracy = fit_warm_start(
        model,
        warm,
        next_batch,
        lambda step: sampled_accuracy(model, tokenizer, check_pairs, seed=step),
        label="toy",
    )
    info = save_warm_start(
        path, model, tokenizer, task=task, warm=warm, steps=step, accuracy=accuracy, t0=t0
    )
    return model, tokenizer, {**info, "cached": False}


def fit_warm_start(model, warm: WarmStart, next_batch, accuracy_of, *, label: str):
    """Supervised training of `model` (AdamW, clip 1.0) on `next_batch()` -> (input_ids,
    attention_mask, labels) until `accuracy_of(step)` (sampled accuracy, checked every
    `warm.check_every` steps) reaches `warm.target_accuracy` or `warm.max_steps` pass.
    Returns (steps taken, last accuracy); the model is left in eval mode. Seed torch before."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=warm.learning_rate, weight_decay=0.0)
    accuracy, step = 0.0, 0
    for step in range(1, warm.max_steps + 1):
        model.train()
        ids, att, lab = next_batch()
        loss = model(input_ids=ids, attention_mask=att, labels=lab).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % warm.check_every == 0 or step == warm.max_steps:
            model.eval()
            accuracy = accuracy_of(step)
            logger.info(
                "%s warm start: step %d loss %.3f sampled accuracy %.2f",
                label,
                step,
                loss.item(),
                accuracy,
            )
            if accuracy >= warm.target_accuracy:
                break
    model.eval()
    return step, accuracy


def save_warm_start(path: Path, model, tokenizer, *, task, warm, steps, accuracy, t0) -> dict:
    """Write the model, tokenizer and info.json to `path` atomically (a temp dir, then a rename).

    task, warm: dataclasses recorded in the info; steps, accuracy: what `fit_warm_start` returned;
    t0: `time.perf_counter()` when training started. Returns the info dict."""
    info = {
        "path": str(path),
        "steps": steps,
        "accuracy": accuracy,
        "seconds": round(time.perf_counter() - t0, 1),
        "task": asdict(task),
        "warm_start": asdict(warm),
    }
    tmp = path.with_name(path.name + ".tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "info.json").write_text(json.dumps(info, indent=2))
    if path.exists():
        import shutil

        shutil.rmtree(path)
    tmp.rename(path)
    return info


def load_warm_start(path: Path):
    """(model, tokenizer, info with "cached": True) of a saved warm start, or None if absent."""
    if not (path / "info.json").exists():
        return None
    from transformers import AutoTokenizer, LlamaForCausalLM

    info = json.loads((path / "info.json").read_text())
    model = LlamaForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    return model, tokenizer, {**info, "path": str(path), "cached": True}
