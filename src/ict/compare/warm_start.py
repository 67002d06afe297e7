"""The supervised warm start of the toy presets: a tiny transformer trained from scratch on a toy
task's target responses until it is competent but imperfect, then the start of every RL cell.

It teaches any task that gives supervised targets (`SupervisedTask`: the toy tasks `toy:add` and
`toy:cot` of ict.data.toy). Seeded and cached under ~/.cache/ict/<task.name>/<key> (or
$ICT_CACHE), keyed by the task's and the warm start's settings, so every grid cell starts from the
same weights and a second grid skips it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from ict.compare.presets import WarmStart
from ict.data.toy import TOY_TASKS, task_items, toy_task
from ict.errors import ConfigError, DataError
from ict.files import read_json_required, replace_atomic, write_json_atomic
from ict.generation import Sampling
from ict.testing import tiny_model_and_tokenizer

logger = logging.getLogger("ict.compare")


class SupervisedTask(Protocol):
    """A task the warm start can teach (a frozen dataclass: its fields enter the cache key)."""

    name: str  # cache folder and log label ("toy", "toy-cot")
    max_positions: int  # context of the warm-started model
    check_tokens: int  # response budget of the sampled-accuracy check

    def sft_examples(self, seed: int, batch_size: int) -> Callable[[], list[tuple[str, str]]]:
        """A seeded stream of (prompt, target) batches."""
        ...


def supervised_task(task) -> SupervisedTask:
    """A task the warm start can teach: a toy task object as it is, or the task of its spec."""
    if not isinstance(task, str):
        return task
    try:
        return toy_task(task)
    except DataError as err:
        raise ConfigError(
            f"the supervised warm start needs a task with target responses "
            f"({', '.join(TOY_TASKS)}), got {task!r}: {err}"
        ) from err


def cache_dir(task: SupervisedTask, warm: WarmStart) -> Path:
    key = hashlib.sha256(
        json.dumps([asdict(task), asdict(warm), 1], sort_keys=True).encode()
    ).hexdigest()[:16]
    root = Path(os.environ.get("ICT_CACHE", Path.home() / ".cache" / "ict"))
    return root / task.name / key


def sft_batch(tokenizer, examples, device):
    """Right-padded SFT batch of (prompt, target) texts, EOS after each target:
    input_ids, attention_mask, labels [B, T] (labels -100 on prompt and padding)."""
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


def sampled_accuracy(
    model, tokenizer, items, *, max_new_tokens: int, seed: int = 0, temperature: float = 1.0
) -> float:
    """Mean score of one sample per item (`item.prompt`, raw as the warm model learned it;
    `item.reward(text)` -> 0.0 or 1.0), sampled through ict.generation.Sampling."""
    sampling = Sampling(temperature=temperature, max_new_tokens=max_new_tokens, batch_size=256)
    with torch.no_grad():
        rollout = sampling.sample(
            model, tokenizer, [item.prompt for item in items], num_samples=1, seed=seed
        )
    return float(np.mean([item.reward(t) for t, item in zip(rollout.texts, items, strict=True)]))


def new_warm_model(warm: WarmStart, max_positions: int):
    """(model, tokenizer): the untrained tiny Llama a warm start begins from. The tokenizer has
    no chat template: the model learns raw prompts ("Q:...\nA:"), so every evaluation must
    render them raw too (ict.models.format_prompt uses a template whenever one is present)."""
    model, tokenizer = tiny_model_and_tokenizer(
        seed=warm.seed,
        hidden_size=warm.hidden_size,
        num_layers=warm.num_layers,
        num_heads=warm.num_heads,
        intermediate_size=warm.intermediate_size,
        max_positions=max_positions,
    )
    tokenizer.chat_template = None
    return model, tokenizer


def warm_start(task, warm: WarmStart | None = None, *, refresh: bool = False, device=None):
    """(model, tokenizer, info): the model after supervised warm start on `task`, from cache if
    present. `task`: a `SupervisedTask` or its ict.data spec ("toy:add", "toy:cot?digits=2").

    info: {"path", "steps", "accuracy", "seconds", "task", "warm_start", "cached", "device"};
    `warm`: default WarmStart(). `device`: where a new warm start trains (default the CPU); the
    cache key leaves it out (a GPU's sums differ from a CPU's in the last bits: info.json records
    where a cached start was made)."""
    warm = warm or WarmStart()
    task = supervised_task(task)
    path = cache_dir(task, warm)
    cached = None if refresh else load_warm_start(path)
    if cached is not None:
        return cached

    t0 = time.perf_counter()
    model, tokenizer = new_warm_model(warm, max_positions=task.max_positions)
    model.to(device or "cpu")
    check = task_items(task, "train", 200)  # held-out pairs stay unseen until the final evaluation
    next_examples = task.sft_examples(warm.seed, warm.batch_size)
    torch.manual_seed(warm.seed)

    def accuracy_of(step: int) -> float:
        return sampled_accuracy(
            model, tokenizer, check, max_new_tokens=task.check_tokens, seed=step
        )

    step, accuracy = fit_warm_start(
        model,
        warm,
        lambda: sft_batch(tokenizer, next_examples(), model.device),
        accuracy_of,
        label=task.name,
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
        "device": str(model.device),
    }
    tmp = path.with_name(path.name + ".tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    write_json_atomic(tmp / "info.json", info)
    replace_atomic(tmp, path)
    return info


def load_warm_start(path: Path):
    """(model, tokenizer, info with "cached": True) of a saved warm start, or None if absent."""
    if not (path / "info.json").exists():
        return None
    from transformers import AutoTokenizer, LlamaForCausalLM

    info = read_json_required(path / "info.json")
    model = LlamaForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if getattr(tokenizer, "chat_template", None):
        # saved before warm starts dropped the test tokenizer's chat template: the model was
        # trained on raw prompts, so remove it from the saved files too (the cells load them)
        tokenizer.chat_template = None
        for name in ("chat_template.jinja", "chat_template.json"):
            (path / name).unlink(missing_ok=True)
        tokenizer.save_pretrained(path)
    return model, tokenizer, {**info, "path": str(path), "cached": True}
