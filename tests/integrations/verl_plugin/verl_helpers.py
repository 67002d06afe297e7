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
