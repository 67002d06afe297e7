"""Shared helpers for the TRL tests: a tiny offline GRPO set-up and a trainer that records its steps."""

from __future__ import annotations

import torch


def toy_reward(completions, **kwargs):
    """A deterministic hash of the completion in [0, 1): differs inside a group, so A != 0."""
    return [(sum(map(ord, c)) % 7) / 7 for c in completions]


def binary_reward(completions, **kwargs):
    """A deterministic 0/1 reward (the parity of the completion's characters), for the
    estimators defined on correct / incorrect (psr, nsr, w_reinforce)."""
    return [float(sum(map(ord, c)) % 2) for c in completions]


def toy_dataset(n: int = 16, seed: int = 0):
    """`n` prompts of one fixed length (no left padding), e.g. '3+4='."""
    from datasets import Dataset

    g = torch.Generator().manual_seed(seed)
    ab = torch.randint(0, 10, (n, 2), generator=g).tolist()
    return Dataset.from_list([{"prompt": f"{a}+{b}="} for a, b in ab])


def tiny_config(output_dir, **overrides):
    from ict.integrations.trl import ICTGRPOConfig

    kwargs = dict(
        output_dir=str(output_dir), per_device_train_batch_size=4, num_generations=4,
        max_completion_length=8, max_steps=2, learning_rate=1e-2, logging_steps=1, report_to=[],
        use_cpu=True, save_strategy="no", seed=0, bf16=False, dataloader_num_workers=0,
    )  # fmt: skip
    kwargs.update(overrides)
    return ICTGRPOConfig(**kwargs)


class Recorder:
    """Mixin for a GRPOTrainer class: records, per micro-batch, the inputs (the micro-batch dict
    itself, so with what the loss adds to it: the statistics and selection of the one-forward
    path), the per-token log-probs, their gradient, TRL's own (fused-head) entropies, and the
    loss, in `self.records`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.records = []

    def _compute_loss(self, model, inputs):
        self._current = {"inputs": inputs}
        loss = super()._compute_loss(model, inputs)
        self._current["loss"] = loss.detach().clone()
        self.records.append(self._current)
        return loss

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        logps, entropies, aux = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if logps.requires_grad:
            rec = self._current
            rec["logps"] = logps.detach().clone()
            rec["entropies"] = None if entropies is None else entropies.detach().clone()
            logps.register_hook(lambda g: rec.__setitem__("grad", g.detach().clone()))
        return logps, entropies, aux


def recording_trainer_class(base=None):
    """`base` (default ICTGRPOTrainer) with the Recorder mixin."""
    if base is None:
        from ict.integrations.trl import ICTGRPOTrainer as base
    return type(f"Recording{base.__name__}", (Recorder, base), {})


def run_tiny(output_dir, trainer_class=None, seed=0, reward_funcs=toy_reward, **config):
    """Train a tiny offline model for `max_steps` steps; returns the trainer."""
    from ict.testing import tiny_model_and_tokenizer

    model, tokenizer = tiny_model_and_tokenizer(seed=seed)
    cls = trainer_class or recording_trainer_class()
    trainer = cls(
        model=model, reward_funcs=reward_funcs, args=tiny_config(output_dir, **config),
        train_dataset=toy_dataset(), processing_class=tokenizer,
    )  # fmt: skip
    trainer.train()
    return trainer
