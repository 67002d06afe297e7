"""samples.jsonl-like records from a model and prompts, for `ict inspect --model`.

Samples responses, scores every response token (H, H2, JS to the batch-mean reference, METHOD.md)
and marks what the ict, entropy and stapo selectors would pick on this batch. Without a reward
every response is treated as correct (advantage +1), which is the case in which STAPO silences
tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from ict.precision import PrecisionChoice, choose_precision


def records_from_model(
    model,
    tokenizer,
    prompts: Sequence[str],
    *,
    num_samples: int = 1,
    temperature: float = 1.0,
    max_new_tokens: int = 64,
    seed: int = 0,
    chat_template: bool = True,
    stop: list[str] | None = None,
    precision: str | PrecisionChoice = "auto",
) -> list[dict]:
    """One record per sampled response (format of samples.jsonl, docs/ARCHITECTURE.md).

    `precision`: autocast of the scoring pass, a `choose_precision` request ("auto" | "bf16" |
    "fp16" | "off") or an already made `PrecisionChoice`.
    """
    import torch

    from ict.generation import generate
    from ict.models import format_prompt
    from ict.select import select_tokens
    from ict.stats import token_stats

    device = next(model.parameters()).device
    if not isinstance(precision, PrecisionChoice):
        precision = choose_precision(precision, device)
    rendered = [format_prompt(tokenizer, p) if chat_template else p for p in prompts]
    model.eval()
    with torch.no_grad():
        rollout = generate(
            model,
            tokenizer,
            rendered,
            num_samples=num_samples,
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            seed=seed,
            stop=stop,
        )
        ids, attn = rollout.input_ids, rollout.attention_mask
        mask = rollout.response_mask.bool()
        with precision.context(device):
            logits = model(input_ids=ids, attention_mask=attn).logits.float()
        # logits[:, t] must predict tokens[:, t]: shift right by one (position 0 has no prediction)
        shifted = torch.cat([logits[:, :1] * 0, logits[:, :-1]], dim=1)
        stats = token_stats(shifted, ids, mask, temperature=temperature, reference="batch_mean")
        advantages = torch.ones(ids.shape[0])
        selections = {
            name: select_tokens(
                name, mask, stats=stats, advantages=advantages, tokens=ids, seed=seed
            )
            for name in ("ict", "entropy", "stapo")
        }
    records = []
    for row in range(ids.shape[0]):
        cols = mask[row].nonzero().flatten()
        records.append(
            {
                "step": 0,
                "prompt": prompts[int(rollout.prompt_index[row])],
                "response": rollout.texts[row],
                "tokens": [tokenizer.decode([int(i)]) for i in ids[row, cols]],
                "entropy": [round(float(x), 5) for x in stats.entropy[row, cols]],
                "renyi2": [round(float(x), 5) for x in stats.renyi2[row, cols]],
                "js": [round(float(x), 6) for x in stats.js[row, cols]],
                "selected": {
                    name: sel[row, cols].int().tolist() for name, sel in selections.items()
                },
            }
        )
    return records
