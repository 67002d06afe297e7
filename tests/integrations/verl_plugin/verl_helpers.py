"""Helpers for the verl tests: verl-shaped batches built offline, on CPU.

Every test module here starts with `pytest.importorskip("verl")` so that collecting it in the main
environment (no verl) skips instead of failing; `make test-verl` runs them in .venv-verl.
"""

from __future__ import annotations

import pytest
import torch

verl = pytest.importorskip("verl")


def verl_batch(prompt_lens, tokens, mask, *, vocab, seed=0):
    """A left/right padded verl batch turned into verl's no-padding TensorDict.

    prompt_lens: list[int] (>= 1) prompt length of each row; tokens: LongTensor[B, R] response
    tokens; mask: bool[B, R], a prefix of each row (the generated tokens). Returns the TensorDict
    that verl's `left_right_2_no_padding` makes (nested input_ids, padded response_mask, ...).
    """
    from tensordict import TensorDict
    from verl.workers.utils.padding import left_right_2_no_padding

    g = torch.Generator().manual_seed(seed)
    B, R = tokens.shape
    P = max(prompt_lens)
    prompts = torch.zeros(B, P, dtype=torch.long)
    prompt_mask = torch.zeros(B, P, dtype=torch.long)
    for b, n in enumerate(prompt_lens):  # left padding
        prompts[b, P - n :] = torch.randint(0, vocab, (n,), generator=g)
        prompt_mask[b, P - n :] = 1
    responses = torch.where(mask, tokens, 0)
    attention_mask = torch.cat([prompt_mask, mask.long()], dim=1)
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
