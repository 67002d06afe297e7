"""Steps 1-3 of a training step: B prompts, G sampled responses each, one reward per response."""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
import torch

from ict.train.problems import Problem
from ict.train.safe_rewards import reward_responses


@dataclass
class RolloutBatch:
    """One step's samples. rollout: ict.generation.Rollout ([N, P+R] tensors, N = B x G rows, rows
    of prompt i at i*G .. i*G+G-1); rewards: [N] float32; prompts: the B rendered prompt strings;
    formatted: [N] per row True / False / None (the reward's format verdict, None: not judged);
    errors, timeouts: reward calls that failed / ran out of time; seconds: time spent sampling."""

    rollout: object
    rewards: torch.Tensor
    prompts: list[str]
    formatted: list = field(default_factory=list)
    errors: int = 0
    timeouts: int = 0
    seconds: float = 0.0


def collect_rollout(
    model, tokenizer, problems: list[Problem], plan, *, step: int, seed: int | None = None
) -> tuple[RolloutBatch, dict]:
    """Sample `num_generations` responses to each problem with the plan's sampling settings and
    score them.

    plan: the RunPlan (sampling; the rollout autocasts with its precision only with
    `rollout_autocast`). The sampling seed is the plan's sampling stream at `step` (or `seed`:
    dynamic sampling's later rounds, ict.train.refill), so a resumed run samples the same
    responses. Returns (batch, metrics: `rollout_metrics([batch])`).
    """
    cfg = plan.config
    prompts = plan.sampling.render(tokenizer, [p.prompt for p in problems])
    model.eval()
    t0 = time.perf_counter()
    amp = plan.autocast() if cfg.rollout_autocast else nullcontext()
    with torch.no_grad(), amp:
        rollout = plan.sampling.sample(
            model, tokenizer, prompts, num_samples=cfg.num_generations,
            seed=plan.seeds.sampling(step) if seed is None else seed,
        )  # fmt: skip
    rollout_s = time.perf_counter() - t0
    prompt_index = rollout.prompt_index.tolist()
    scored = reward_responses(
        [problems[i].reward for i in prompt_index],
        list(rollout.texts),
        timeout_s=cfg.reward_timeout_s,
        guarded=[problems[i].own_time_limit for i in prompt_index],
    )
    batch = RolloutBatch(
        rollout, torch.tensor(scored.rewards, dtype=torch.float32), prompts,
        list(scored.formatted), scored.errors, scored.timeouts, rollout_s,
    )  # fmt: skip
    return batch, rollout_metrics([batch])


def rollout_metrics(batches: list[RolloutBatch]) -> dict:
    """The sampling metrics over every response of `batches` (one step's generation rounds):
    reward/accuracy/format/length, reward errors and time-outs, time and throughput, and
    `rollout/sequences` (responses generated: the step's sampling cost)."""
    rewards = torch.cat([b.rewards for b in batches])
    formats = [f for b in batches for f in b.formatted if f is not None]
    new_tokens = sum(int(b.rollout.response_mask.sum()) for b in batches)
    rollout_s = sum(b.seconds for b in batches)
    return {
        "reward/mean": float(rewards.mean()),
        "reward/std": float(rewards.std()) if rewards.numel() > 1 else 0.0,
        "accuracy": float((rewards > 0.5).float().mean()),
        "format_rate": float(np.mean(formats)) if formats else None,
        "reward/errors": sum(b.errors for b in batches),
        "reward/timeouts": sum(b.timeouts for b in batches),
        "response_length/mean": new_tokens / max(1, rewards.numel()),
        "rollout/sequences": int(rewards.numel()),
        "time/rollout_s": rollout_s,
        "throughput/rollout_tok_s": new_tokens / max(rollout_s, 1e-9),
    }
