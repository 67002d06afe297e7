"""Sampling with `LeanLlama`'s static-cache decoding: what `model.generate` does for ict, leaner.

`decode(lean, ids, attn, num_samples, ...)` returns what `ict.generation` gets from HF
`generate` for one batch of prompts: [U * G, P + R] ids, prompts repeated G times, then the
sampled tokens, pad after a row's EOS, R = the steps until every row ended (or the budget). The
sampling is HF's for ict's settings: logits in float32, divided by the temperature (when it is not
1), top-p filtered as `TopPLogitsWarper` (when top_p < 1), then one `torch.multinomial` draw per
step over the [N, V] probabilities from the global RNG (greedy: argmax). Each prompt's first
P - 1 tokens run once and their keys/values are repeated G times (ict's `share_prompt`).

Model generation settings other than EOS and pad (a repetition penalty, min_new_tokens, ...) are
not applied here: `unsupported_sampling` names them and ict.fast then leaves the model to HF.
"""

from __future__ import annotations

import torch

from ict.fast.keyed import top_p_mask
from ict.fast.llama import LeanLlama

# generation_config fields that add logits processors or stopping rules HF would apply
_NEUTRAL = {
    "min_length": (0, None),
    "min_new_tokens": (0, None),
    "repetition_penalty": (1.0, None),
    "no_repeat_ngram_size": (0, None),
    "encoder_no_repeat_ngram_size": (0, None),
    "bad_words_ids": (None,),
    "suppress_tokens": (None,),
    "begin_suppress_tokens": (None,),
    "forced_bos_token_id": (None,),
    "forced_eos_token_id": (None,),
    "sequence_bias": (None,),
    "exponential_decay_length_penalty": (None,),
    "renormalize_logits": (False, None),
    "epsilon_cutoff": (0.0, None),
    "eta_cutoff": (0.0, None),
    "min_p": (None,),
    "typical_p": (1.0, None),
    "stop_strings": (None,),
    "max_time": (None,),
    "watermarking_config": (None,),
}


def unsupported_sampling(model) -> str | None:
    """None when `decode` samples as HF `generate` would with `model.generation_config`; else
    the generation settings it would not apply."""
    gen = getattr(model, "generation_config", None)
    if gen is None:
        return None
    bad = [k for k, ok in _NEUTRAL.items() if getattr(gen, k, None) not in ok]
    return f"generation_config sets {', '.join(bad)}" if bad else None


def eos_of(model) -> list[int]:
    """The ids that end a row in HF `generate`: the generation config's eos_token_id."""
    eos = getattr(model.generation_config, "eos_token_id", None)
    if eos is None:
        return []
    return list(eos) if isinstance(eos, (list, tuple)) else [int(eos)]


@torch.no_grad()
def decode(
    lean: LeanLlama,
    prompt_ids: torch.Tensor,
    prompt_attn: torch.Tensor,
    num_samples: int,
    *,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    pad_id: int,
    eos_ids: list[int],
    keep_hidden: bool = False,
):
    """Sample `num_samples` continuations of each left-padded prompt in `prompt_ids` [U, P].

    Returns ids [U * G, P + R] (see the module docstring); with `keep_hidden`, (ids, hidden
    [U * G, R, D]): the final hidden state that predicted each sampled token."""
    state = lean.start(prompt_ids, prompt_attn, samples=num_samples, max_new_tokens=max_new_tokens)
    n = prompt_ids.shape[0] * num_samples
    device = prompt_ids.device
    tokens = prompt_ids[:, -1].repeat_interleave(num_samples)
    unfinished = torch.ones(n, dtype=torch.bool, device=device)
    eos = torch.tensor(eos_ids, dtype=torch.long, device=device)
    out, hiddens = [], []
    for _ in range(max_new_tokens):
        logits, hidden = lean.step(state, tokens)
        if keep_hidden:
            hiddens.append(hidden)
        if temperature > 0:
            if temperature != 1.0:
                logits = logits / temperature
            if top_p < 1.0:
                logits = top_p_mask(logits, top_p)
            tokens = torch.multinomial(torch.softmax(logits, dim=-1), num_samples=1).squeeze(1)
        else:
            tokens = torch.argmax(logits, dim=-1)
        if eos.numel():
            alive = unfinished.long()
            tokens = tokens * alive + pad_id * (1 - alive)
        out.append(tokens)
        if eos.numel():
            unfinished = unfinished & ~torch.isin(tokens, eos)
            if not bool(unfinished.any()):
                break
    ids = torch.cat([prompt_ids.repeat_interleave(num_samples, 0), torch.stack(out, 1)], dim=1)
    if keep_hidden:
        return ids, torch.stack(hiddens, 1)
    return ids
