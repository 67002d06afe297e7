"""Steps 1-3 of a training step: B prompts, G sampled responses each, one reward per response."""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch

from ict.train.problems import Problem
from ict.train.safe_rewards import reward_responses


@dataclass
class RolloutBatch:
    """One step's samples. rollout: ict.generation.Rollout ([N, P+R] tensors, N = B x G rows, rows
    of prompt i at i*G .. i*G+G-1); rewards: [N] float32; prompts: the B rendered prompt strings."""

    rollout: object
    rewards: torch.Tensor
    prompts: list[str]


def collect_rollout(
    model, tokenizer, problems: list[Problem], plan, *, step: int
) -> tuple[RolloutBatch, dict]:
    """Sample `num_generations` responses to each problem with the plan's sampling settings and
    score them.

    plan: the RunPlan (sampling; the rollout autocasts with its precision only with
    `rollout_autocast`). The sampling seed is the plan's sampling stream at `step`, so a resumed
    run samples the same responses. Returns (batch, metrics: reward/accuracy/format/length/time
    and throughput).
    """
    cfg = plan.config
    prompts = plan.sampling.render(tokenizer, [p.prompt for p in problems])
    model.eval()
    t0 = time.perf_counter()
    amp = plan.autocast() if cfg.rollout_autocast else nullcontext()
    with torch.no_grad(), amp:
        rollout = plan.sampling.sample(
            model, tokenizer, prompts, num_samples=cfg.num_generations,
            seed=plan.seeds.sampling(step),
        )  # fmt: skip
    rollout_s = time.perf_counter() - t0
    prompt_index = rollout.prompt_index.tolist()
    scored = reward_responses(
        [problems[i].reward for i in prompt_index],
        list(rollout.texts),
        timeout_s=cfg.reward_timeout_s,
        guarded=[problems[i].own_time_limit for i in prompt_index],
    )
    rewards = torch.tensor(scored.rewards, dtype=torch.float32)
    formats = [f for f in scored.formatted if f is not None]
    new_tokens = int(rollout.response_mask.sum())
    metrics = {
        "reward/mean": float(rewards.mean()),
        "reward/std": float(rewards.std()) if rewards.numel() > 1 else 0.0,
        "accuracy": float((rewards > 0.5).float().mean()),
        "format_rate": float(np.mean(formats)) if formats else None,
        "reward/errors": scored.errors,
        "reward/timeouts": scored.timeouts,
        "response_length/mean": new_tokens / max(1, len(prompt_index)),
        "time/rollout_s": rollout_s,
        "throughput/rollout_tok_s": new_tokens / max(rollout_s, 1e-9),
    }
    return RolloutBatch(rollout, rewards, prompts), metrics
