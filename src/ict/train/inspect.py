"""`ict inspect --model`: samples.jsonl records from a model and prompts, scored by a training
step's own statistics and selection (it lives with training: it re-enacts a step).

Samples responses and runs on them exactly what a training step runs before its update: the
old-policy pass (`ict.train.old_policy.old_policy_pass`: H, H2 and the method's score, the paper's
position-aligned group mean for `ict`) and the step's selection (`ict.step.select_step`), so a
method's marks here are the tokens the same method would train on. Without a reward every
response is treated as correct (advantage +1), which is the case in which STAPO silences tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from ict.precision import PrecisionChoice
from ict.report.samples import sample_records
from ict.train.config import TrainConfig
from ict.train.plan import RunPlan
from ict.train.step import PolicyContext, TrainingStep


def inspect_plan(
    method: str,
    num_samples: int,
    temperature: float,
    seed: int,
    *,
    device="cpu",
    precision: str | PrecisionChoice = "auto",
    max_new_tokens: int = 64,
    chat_template: bool = True,
    stop: list[str] | None = None,
) -> RunPlan:
    """The RunPlan whose sampling, statistics and selection `ict inspect --model` uses: the
    method's (its selection past the warm-up), G = num_samples rollouts per prompt (grpo
    advantages with two or more). `precision`: a `choose_precision` request ("auto" | "bf16" |
    "fp16" | "off") or an already made PrecisionChoice."""
    config = TrainConfig(
        method=method, num_generations=num_samples, temperature=temperature, seed=seed,
        advantage="grpo" if num_samples >= 2 else "dr_grpo", heldout_eval=False,
        device=str(device), autocast=precision if isinstance(precision, str) else "off",
        max_new_tokens=max_new_tokens, generation_batch_size=32, chat_template=chat_template,
        stop=list(stop or []),
    )  # fmt: skip
    plan = RunPlan.from_config(config)
    if isinstance(precision, PrecisionChoice):
        plan = dataclasses.replace(plan, precision=precision)
    return plan


def records_from_rollout(model, tokenizer, rollout, prompts, plan: RunPlan, advantages=None):
    """Records of an existing rollout scored as a training step scores it (no update).

    rollout: ict.generation.Rollout; prompts: texts by prompt index; plan: the RunPlan (method,
    temperature, chunking, precision); advantages: [N] (default +1). The selection is the one of
    the first step past the method's dense warm-up."""
    plan = dataclasses.replace(plan, device=next(model.parameters()).device)
    policy = PolicyContext.of(plan, model)
    model.eval()
    if advantages is None:
        advantages = torch.ones(rollout.input_ids.shape[0], device=policy.device)
    step = plan.method.dense_warmup_steps + 1
    scored = TrainingStep(plan, policy).select_on_rollout(rollout, advantages, step=step)
    return sample_records(
        range(scored.mask.shape[0]), step=0, rollout=rollout, prompts=prompts, rewards=None,
        stats=scored.stats, mask=scored.mask, selections=scored.selection.selections,
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
    plan = inspect_plan(
        method, num_samples, temperature, seed, device=next(model.parameters()).device,
        precision=precision, max_new_tokens=max_new_tokens, chat_template=chat_template,
        stop=stop,
    )  # fmt: skip
    rendered = plan.sampling.render(tokenizer, list(prompts))
    model.eval()
    with torch.no_grad():
        rollout = plan.sampling.sample(
            model, tokenizer, rendered, num_samples=num_samples, seed=plan.seeds.run
        )
        return records_from_rollout(model, tokenizer, rollout, list(prompts), plan)
