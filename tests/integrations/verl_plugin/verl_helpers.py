"""Helpers for the verl tests: verl-shaped batches built offline, on CPU.

Every test module here starts with `pytest.importorskip("verl")` so that collecting it in the main
environment (no verl) skips instead of failing; `make test-verl` runs them in .venv-verl.
"""

from __future__ import annotations

import pytest
import torch

verl = pytest.importorskip("verl")


def padded_inputs(prompt_lens, tokens, mask, *, vocab, seed=0):
    """(prompts [B, P] left-padded with random ids < vocab, input_ids [B, P + R] (responses 0
    where mask is False), attention_mask [B, P + R]): the padded layout `verl_batch` packs."""
    g = torch.Generator().manual_seed(seed)
    B, R = tokens.shape
    P = max(prompt_lens)
    prompts = torch.zeros(B, P, dtype=torch.long)
    prompt_mask = torch.zeros(B, P, dtype=torch.long)
    for b, n in enumerate(prompt_lens):  # left padding
        prompts[b, P - n :] = torch.randint(0, vocab, (n,), generator=g)
        prompt_mask[b, P - n :] = 1
    responses = torch.where(mask, tokens, 0)
    input_ids = torch.cat([prompts, responses], dim=1)
    return prompts, input_ids, torch.cat([prompt_mask, mask.long()], dim=1)


def verl_batch(prompt_lens, tokens, mask, *, vocab, seed=0):
    """A left/right padded verl batch turned into verl's no-padding TensorDict.

    prompt_lens: list[int] (>= 1) prompt length of each row; tokens: LongTensor[B, R] response
    tokens; mask: bool[B, R], a prefix of each row (the generated tokens). Returns the TensorDict
    that verl's `left_right_2_no_padding` makes (nested input_ids, padded response_mask, ...).
    """
    from tensordict import TensorDict
    from verl.workers.utils.padding import left_right_2_no_padding

    B, R = tokens.shape
    prompts, _, attention_mask = padded_inputs(prompt_lens, tokens, mask, vocab=vocab, seed=seed)
    responses = torch.where(mask, tokens, 0)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp_min(0)
    td = TensorDict(
        {
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "response_mask": mask.long(),
        },
        batch_size=[B],
    )
    return left_right_2_no_padding(td)


def packed_logits(td, response_logits, *, seed=0, padded=False):
    """Logits in verl's layout whose rows predicting response token j of row b equal
    response_logits[b, j]; every other row is random. [1, nnz, V] packed, or [B, L, V] padded."""
    g = torch.Generator().manual_seed(seed + 1)
    seq_lens = td["input_ids"].offsets().diff()
    resp_lens = td["response_mask"].sum(-1)
    B, R, V = response_logits.shape
    L = int(seq_lens.max())
    out = torch.randn(B, L, V, generator=g) * 3
    for b in range(B):
        first = int(seq_lens[b] - resp_lens[b] - 1)
        n = int(resp_lens[b])
        out[b, first : first + n] = response_logits[b, :n]
    if padded:
        return out
    rows = [out[b, : int(seq_lens[b])] for b in range(B)]
    return torch.cat(rows, dim=0).unsqueeze(0)


def actor_config(**overrides):
    """verl's own ActorConfig for the FSDP actor (clip 0.2/0.28, dual clip c = 3)."""
    from verl.workers.config import FSDPActorConfig

    kwargs = dict(
        strategy="fsdp", ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=2, rollout_n=1,
        clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0,
    )  # fmt: skip
    kwargs.update(overrides)
    return FSDPActorConfig(**kwargs)


def bare_engine(monkeypatch, module):
    """verl's FSDPEngineWithLMHead without FSDP or a GPU around `module` (a token -> logits table
    or a tiny Hugging Face model): verl's own forward_backward_batch, prepare_model_inputs /
    outputs, train_batch and optimizer_step run on it (SGD, grad clip 1e9: no clipping)."""
    import types

    from verl.workers.engine.fsdp import transformer_impl

    monkeypatch.setattr(transformer_impl, "get_device_id", lambda: "cpu")
    monkeypatch.setattr(transformer_impl, "get_device_name", lambda: "cpu")
    engine = object.__new__(transformer_impl.FSDPEngineWithLMHead)
    engine.module = module
    engine.engine_config = types.SimpleNamespace(
        entropy_checkpointing=False, entropy_from_logits_with_chunking=False,
        use_no_sync_for_gradient_accumulation=False,
    )  # fmt: skip
    engine.compute_entropy_from_logits = transformer_impl.verl_F.entropy_from_logits
    engine.use_ulysses_sp, engine.ulysses_sequence_parallel_size = False, 1
    engine.ulysses_device_mesh = None
    engine.pad_to_length, engine._autocast_dtype, engine.scaler = False, torch.float32, None
    engine.get_data_parallel_group = lambda: None
    engine.get_data_parallel_size = lambda: 1
    engine.optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    engine.optimizer_config = types.SimpleNamespace(clip_grad=1e9)
    engine._qat_enabled = False
    return engine


class _RecordingSGD(torch.optim.SGD):
    """SGD that keeps each step's parameter gradients (verl's train mode zeroes them on exit)."""

    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.step_grads = []

    def step(self, closure=None):
        self.step_grads.append([
            torch.zeros_like(p) if p.grad is None else p.grad.detach().clone()
            for group in self.param_groups for p in group["params"]
        ])  # fmt: skip
        return super().step(closure)


class VerlStep:
    """One GRPO step of verl's own actor code on one CPU process, around a tiny model: the driver's
    `RayPPOTrainer._compute_old_log_prob` and `_update_actor` (the plugin's wrappers when
    `loss_mode` is an ict one), calling the actor worker's own `ActorRolloutRefWorker.
    compute_log_prob` / `update_actor`, which run verl's `TrainingWorker.infer_batch` /
    `train_mini_batch` (mini-batches, epochs, its train/eval modes) on `bare_engine(model)`.
    Left out: FSDP itself (bare_engine), the Ray dispatch (one rank: the identity), the profiler
    and the MFU estimate (it needs a GPU's peak).

    config: the trainer's config (OmegaConf: `actor_rollout_ref`, `ict`); actor: verl's
    ActorConfig the worker's loss uses; micro-batch sizes per GPU for the update and the
    old-log-prob pass. `forwards` counts calls of the model's forward in each worker call:
    {"compute_log_prob": n, "update_actor": m}; `calls` the worker calls, `inputs` the last
    batch (TensorDict) each received.
    """

    def __init__(self, monkeypatch, model, config, actor, *, micro_batch, log_prob_micro_batch):
        import functools
        import types

        from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker
        from verl.workers.utils.losses import ppo_loss

        engine = bare_engine(monkeypatch, model)
        engine.optimizer = _RecordingSGD(model.parameters(), lr=0.1)
        engine.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(engine.optimizer, lambda _: 1.0)
        engine.ulysses_parallel_group = None
        # a real worker's data-parallel group (here of one rank): verl gathers metrics over it
        engine.get_data_parallel_group = lambda: torch.distributed.group.WORLD
        engine._is_offload_param = engine._is_offload_optimizer = False
        engine.engine_config.fsdp_size, engine.engine_config.forward_only = 1, False
        training = object.__new__(TrainingWorker)
        training.engine, training.device_name = engine, "cpu"
        training.profiler = types.SimpleNamespace(  # verl's DistProfiler, disabled
            rank=0, step=lambda: None, check_enable=lambda: False
        )
        training.model_config = {"use_remove_padding": False}
        training.engine_config = types.SimpleNamespace(
            use_dynamic_bsz=False, max_token_len_per_gpu=None, infer_max_token_len_per_gpu=None,
            micro_batch_size_per_gpu=micro_batch, infer_micro_batch_size_per_gpu=log_prob_micro_batch,
            use_fused_kernels=False, forward_only=False,
        )  # fmt: skip
        training.loss_fn = functools.partial(ppo_loss, config=actor)
        # verl's MFU needs a GPU's peak FLOP/s: 0 here (the driver only logs it)
        training.flops_counter = types.SimpleNamespace(estimate_flops=lambda *a, **k: (0.0, 1.0))
        worker = object.__new__(ActorRolloutRefWorker)
        worker.actor, worker.enable_routing_replay, worker.profiler = training, False, None
        self.engine, self.model, self.forwards, self.inputs = engine, model, {}, {}
        self.calls = {"compute_log_prob": 0, "update_actor": 0}
        counted = {"n": 0}
        model.register_forward_pre_hook(lambda *_: counted.__setitem__("n", counted["n"] + 1))

        def counting(name):
            method = getattr(ActorRolloutRefWorker, name)

            def call(td):
                before = counted["n"]
                self.calls[name] += 1
                self.inputs[name] = td
                out = method(worker, td)
                self.forwards[name] = self.forwards.get(name, 0) + counted["n"] - before
                return out

            return call

        group = types.SimpleNamespace(world_size=1)
        group.compute_log_prob = counting("compute_log_prob")
        group.update_actor = counting("update_actor")
        self.trainer = types.SimpleNamespace(config=config, actor_rollout_wg=group, global_steps=1)

    @property
    def update_grads(self):
        """The parameter gradients of each optimizer step (update) of the step, in order."""
        return self.engine.optimizer.step_grads

    def run(self, batch, advantages, *, step):
        """The step's actor phases on `batch` (verl's DataProto, with `uid`): the old-log-prob pass,
        then the update with `advantages` [B, R] (the driver computes them in between). Returns
        (the old-log-prob output, a DataProto with old_log_probs and the plugin's statistics;
        the update's metrics)."""
        from verl.trainer.ppo.ray_trainer import RayPPOTrainer

        self.trainer.global_steps = step
        old, _ = RayPPOTrainer._compute_old_log_prob(self.trainer, batch)
        batch = batch.union(old)
        batch.batch["advantages"] = advantages
        out = RayPPOTrainer._update_actor(self.trainer, batch)
        return old, out.meta_info["metrics"]


def step_batch(prompt_lens, tokens, mask, *, vocab, group_size, temperature, seed=0):
    """The DataProto verl's driver holds before the old-log-prob pass (left-padded prompts,
    right-padded responses, position ids, response_mask, each prompt's `uid` on G consecutive
    rows, the meta-data `fit` sets)."""
    import numpy as np
    from verl import DataProto

    prompts, input_ids, attention_mask = padded_inputs(
        prompt_lens, tokens, mask, vocab=vocab, seed=seed
    )
    B = tokens.shape[0]
    batch = DataProto.from_dict(
        tensors={
            "prompts": prompts, "responses": torch.where(mask, tokens, 0), "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": (attention_mask.cumsum(-1) - 1).clamp_min(0),
            "response_mask": mask.long(),
        },
        meta_info={"temperature": temperature,
                   "global_token_num": attention_mask.sum(-1).tolist()},
    )  # fmt: skip
    batch.non_tensor_batch["uid"] = np.array(
        [f"p{b // group_size}" for b in range(B)], dtype=object
    )
    return batch


def _estimator(loss_mode, ict) -> str:
    """verl's adv_estimator for the run's method: its own (ict.methods), which the plugin checks."""
    from ict.integrations.verl.config import LOSS_MODES
    from ict.methods import get_method

    ict = dict(ict or {})
    if loss_mode not in LOSS_MODES:  # verl's own loss: verl's estimator
        return "grpo"
    name = ict.get("method") or LOSS_MODES[loss_mode]
    return ict.get("advantage") or get_method(name).resolved().advantage


def step_config(loss_mode, ict=None, *, n, mini_batch, temperature=1.0, clip=(0.2, 0.28),
                dual_clip=3.0, epochs=1):  # fmt: skip
    """(the trainer's OmegaConf config, verl's ActorConfig) of a one-node GRPO run: `loss_mode`,
    the `ict:` section, rollout.n, ppo_mini_batch_size (prompts), ppo_epochs, the clip range."""
    from omegaconf import OmegaConf
    from verl.workers.config import PolicyLossConfig

    actor = {"policy_loss": {"loss_mode": loss_mode}, "strategy": "fsdp",
             "calculate_entropy": False, "entropy_coeff": 0.0, "ppo_mini_batch_size": mini_batch,
             "ppo_epochs": epochs, "data_loader_seed": 1, "shuffle": False,
             "calculate_sum_pi_squared": False, "clip_ratio_low": clip[0],
             "clip_ratio_high": clip[1], "clip_ratio_c": dual_clip}  # fmt: skip
    config = OmegaConf.create({
        "actor_rollout_ref": {
            "actor": actor,
            "rollout": {"n": n, "temperature": temperature, "multi_turn": {"enable": False}},
        },
        "trainer": {"use_v1": False, "balance_batch": False},
        "algorithm": {"adv_estimator": _estimator(loss_mode, ict)},
        **({"ict": ict} if ict is not None else {}),
    })  # fmt: skip
    verl_actor = actor_config(
        ppo_mini_batch_size=mini_batch * n, rollout_n=n, clip_ratio_low=clip[0],
        clip_ratio_high=clip[1], clip_ratio_c=dual_clip, ppo_epochs=epochs,
        policy_loss=PolicyLossConfig(loss_mode=loss_mode),
    )  # fmt: skip
    return config, verl_actor
