"""Shared by the update tests: a gradient-recording optimizer, a no-op schedule, the tiny model's
rollout batch and the plans they run under."""

import torch

from ict.train import TrainConfig
from ict.train.plan import RunPlan


class GradRecorder:
    """An optimizer stand-in that records the gradient of every step (and changes nothing)."""

    def __init__(self, params):
        self.params = list(params)
        self.grads = []

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None

    def step(self):
        self.grads.append(
            torch.cat(
                [
                    (p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
                    for p in self.params
                ]
            )
        )


class NoScheduler:
    def set(self, step, k, n):
        return 0.0


REWARDS = [1.0, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1]  # make_batch's, 2 constant groups


def make_batch():
    """A 4-prompt x 4-sample rollout of the tiny model, ragged responses, rewards with 2 constant
    groups (advantage exactly 0) and 2 mixed ones."""
    from ict.generation import generate
    from ict.loss import compute_advantages
    from ict.testing import tiny_model_and_tokenizer

    torch.manual_seed(0)
    model, tok = tiny_model_and_tokenizer(seed=0)
    prompts = ["Q: 1+2", "Q: 33+4", "Q: 5", "Q: 7+8+9"]
    rollout = generate(model, tok, prompts, num_samples=4, max_new_tokens=9, seed=3)
    rewards = torch.tensor(REWARDS)
    advantages, _ = compute_advantages(rewards, rollout.prompt_index)
    assert (advantages[:4] == 0).all() and (advantages[8:12] == 0).all()
    return model, rollout, advantages


def config_for(**changes) -> RunPlan:
    base = dict(
        num_generations=4,
        prompts_per_step=4,
        micro_batch_size=4,
        autocast="off",
        max_grad_norm=0.0,
        max_new_tokens=9,
        stats_chunk_size=7,
    )
    return RunPlan.from_config(TrainConfig(**{**base, **changes}))
