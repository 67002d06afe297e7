"""The samples.jsonl record: one response with its per-token statistics and selections.

Written by the native trainer (`log_samples_every`) and by `ict inspect --model`, read by the
token map (`ict.report.tokenmap`) and the reports. One function builds it, so both carry the same
fields (docs/ARCHITECTURE.md, "samples.jsonl").
"""

from __future__ import annotations


def sample_records(
    rows, *, step: int, rollout, prompts, rewards, stats, mask, selections, decode
) -> list[dict]:
    """One record per row in `rows` (ints).

    rollout: ict.generation.Rollout (input_ids [N, T], prompt_index [N], texts); prompts: the
    problem texts by prompt index; rewards: [N] floats or None (not scored); stats: TokenStats
    [N, T] (entropy, renyi2, js, logprob); mask: bool [N, T] response tokens; selections: name ->
    bool [N, T]; decode: token id -> text. Values are rounded for the file's size.
    """
    out = []
    for row in rows:
        cols = mask[row].nonzero().flatten()
        ids = rollout.input_ids[row, cols.cpu()].tolist()
        record = {
            "step": step,
            "prompt": prompts[int(rollout.prompt_index[row])],
            "response": rollout.texts[row],
            "reward": None if rewards is None else float(rewards[row]),
            "tokens": [decode(int(i)) for i in ids],
            "entropy": [round(float(x), 5) for x in stats.entropy[row, cols]],
            "renyi2": [round(float(x), 5) for x in stats.renyi2[row, cols]],
            "js": [round(float(x), 6) for x in stats.js[row, cols]],
            "prob": [round(float(x), 5) for x in stats.logprob[row, cols].exp()],
            "selected": {name: sel[row, cols].int().tolist() for name, sel in selections.items()},
        }
        out.append(record)
    return out
