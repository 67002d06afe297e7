"""`ict inspect --model`: samples.jsonl records from a model and prompts, scored by a training
step's own statistics and selection (it lives with training: it re-enacts a step).

Samples responses and runs on them exactly what a training step runs before its update: the
old-policy pass (`ict.train.old_policy.old_policy_pass`: H, H2 and the method's score, the paper's
position-aligned group mean for `ict`) and the step's selection (`ict.methods.select_step`), so a
method's marks here are the tokens the same method would train on. Without a reward every
response is treated as correct (advantage +1), which is the case in which STAPO silences tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ict.generation import generate
from ict.methods import StepInputs, select_step
from ict.models import format_prompt
from ict.precision import PrecisionChoice, choose_precision
from ict.report.samples import sample_records
from ict.train.config import TrainConfig
from ict.train.logprobs import batch_plan
from ict.train.old_policy import old_policy_pass


def inspect_config(method: str, num_samples: int, temperature: float, seed: int):
    """The TrainConfig whose statistics and selection settings `records_from_model` uses."""
    return TrainConfig(
        method=method, num_generations=num_samples, temperature=temperature, seed=seed,
        advantage="grpo" if num_samples >= 2 else "dr_grpo", heldout_eval=False,
    )  # fmt: skip


def records_from_rollout(model, tokenizer, rollout, prompts, config, precision, advantages=None):
    """Records of an existing rollout scored as a training step scores it (no update).

    rollout: ict.generation.Rollout; prompts: texts by prompt index; config: a TrainConfig
    (method, temperature, chunking); precision: a PrecisionChoice; advantages: [N] (default +1).
    """
    device = next(model.parameters()).device
    method = config.method_settings()
    model.eval()
    stats, _, _ = old_policy_pass(
        model, None, rollout, config, method, device, lambda: precision.context(device.type)
    )
    mask = rollout.response_mask.to(device).bool()
    if advantages is None:
        advantages = torch.ones(mask.shape[0], device=device)
    selection = select_step(
        method, config, StepInputs(mask, stats, advantages, rollout.input_ids.to(device)),
        step=method.dense_warmup_steps + 1, seed=config.seed,
        micro_batch_size=batch_plan(mask.shape[0], config)[1],
    )  # fmt: skip
    return sample_records(
        range(mask.shape[0]), step=0, rollout=rollout, prompts=prompts, rewards=None,
        stats=stats, mask=mask, selections=selection.selections,
        decode=lambda i: tokenizer.decode([i]),
    )  # fmt: skip


def records_from_model(
    model,
    tokenizer,
    prompts: Sequence[str],
    *,
    num_samples: int = 4,
    temperature: float = 1.0,
    max_new_tokens: int = 64,
    seed: int = 0,
    chat_template: bool = True,
    stop: list[str] | None = None,
    precision: str | PrecisionChoice = "auto",
    method: str = "ict",
) -> list[dict]:
    """One record per sampled response (format of samples.jsonl, docs/ARCHITECTURE.md).

    num_samples: G responses per prompt (the paper's score compares a prompt's rollouts: with one
    sample every score is 0). `precision`: autocast of the scoring pass, a `choose_precision`
    request ("auto" | "bf16" | "fp16" | "off") or an already made `PrecisionChoice`. method: the
    method whose selection is marked under its name (with the ict, entropy and stapo diagnostics).
    """
    device = next(model.parameters()).device
    if not isinstance(precision, PrecisionChoice):
        precision = choose_precision(precision, device)
    config = inspect_config(method, num_samples, temperature, seed)
    rendered = [format_prompt(tokenizer, p) if chat_template else p for p in prompts]
    model.eval()
    with torch.no_grad():
        rollout = generate(
            model, tokenizer, rendered, num_samples=num_samples, temperature=temperature,
            max_new_tokens=max_new_tokens, seed=seed, stop=stop,
        )  # fmt: skip
        return records_from_rollout(model, tokenizer, rollout, list(prompts), config, precision)
