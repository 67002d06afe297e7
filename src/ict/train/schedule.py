"""The optimizer (`make_optimizer`, the one AdamW set-up) and the learning-rate schedule, from the
updates a run actually takes.

A step (one rollout batch) takes as many optimizer updates as its mini-batches, which is not known
in advance when `mini_batch_size` is not a multiple of G or zero-variance groups are dropped. So
the decay is measured in rollout batches: the k-th of a step's n updates (0-based) sits at
progress p = (step - 1 + k / n) / max_steps, which runs from 0 at the first update to just under 1
at the last one, whatever each step's n. The factor is

    warm(u) * decay(p),  warm(u) = min(1, (u + 1) / (warmup_steps + 1)) for the u-th update of
    the run (linear warm-up in optimizer updates), decay = 1 (constant), 1 - p (linear) or
    (1 + cos(pi p)) / 2 (cosine).
"""

from __future__ import annotations

import math

import torch


def make_optimizer(model, config) -> torch.optim.AdamW:
    """AdamW over `model`'s trainable parameters with the config's learning_rate, adam_beta1,
    adam_beta2, adam_epsilon and weight_decay (any object with those fields: a TrainConfig)."""
    return torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=config.learning_rate,
        betas=(config.adam_beta1, config.adam_beta2),
        eps=config.adam_epsilon,
        weight_decay=config.weight_decay,
    )


class LRSchedule:
    """Sets each param group's lr before every optimizer update (`set`); `state_dict` for resume."""

    def __init__(self, optimizer, *, warmup_steps: int, kind: str, max_steps: int):
        self.optimizer = optimizer
        self.warmup_steps = int(warmup_steps)
        self.kind = kind
        self.max_steps = max(1, int(max_steps))
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.updates = 0  # optimizer updates taken so far in the run

    def factor(self, step: int, k: int, n: int) -> float:
        """The lr factor of the k-th of the n updates of step `step` (1-based)."""
        warm = min(1.0, (self.updates + 1) / (self.warmup_steps + 1))
        p = min(1.0, (step - 1 + k / max(1, n)) / self.max_steps)
        if self.kind == "linear":
            decay = 1.0 - p
        elif self.kind == "cosine":
            decay = 0.5 * (1.0 + math.cos(math.pi * p))
        else:
            decay = 1.0
        return warm * decay

    def set(self, step: int, k: int, n: int) -> float:
        """Set the lr for the next update (the k-th of n in step `step`) and count it; returns
        the first param group's lr."""
        f = self.factor(step, k, n)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base * f
        self.updates += 1
        return self.optimizer.param_groups[0]["lr"]

    def state_dict(self) -> dict:
        return {"updates": self.updates, "base_lrs": list(self.base_lrs)}

    def load_state_dict(self, state: dict) -> None:
        """Restore; also reads a torch LambdaLR state (checkpoints written before this class)."""
        if "updates" in state:
            self.updates = int(state["updates"])
            self.base_lrs = list(state.get("base_lrs", self.base_lrs))
        else:
            self.updates = int(state.get("last_epoch", 0))
            self.base_lrs = list(state.get("base_lrs", self.base_lrs))
