"""Direct, loop-per-position reference implementation of docs/METHOD.md's token statistics,
in float64 NumPy/SciPy, written independently of ict.stats (no chunking, no in-place tricks)."""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import jensenshannon
from scipy.special import softmax
from scipy.stats import entropy


def reference_stats(
    logits,
    tokens,
    mask,
    *,
    temperature=1.0,
    reference="batch_mean",
    group_ids=None,
    reference_logits=None,
):
    """Returns dict of [B, T] float64 arrays: entropy, renyi2, logprob, js and kl (0 where mask is
    False; kl only for group_position)."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    tokens = np.asarray(tokens)
    mask = np.asarray(mask, dtype=bool)
    B, T, V = z.shape
    P = softmax(z, axis=-1)
    valid = [(b, t) for b in range(B) for t in range(T) if mask[b, t]]

    def mean_over(positions):
        return np.mean([P[b, t] for b, t in positions], axis=0)

    out = {k: np.zeros((B, T)) for k in ("entropy", "renyi2", "logprob", "js", "kl")}
    # group_position: the k-th valid position of each row, found by walking the row
    kth = {(b, t): int(mask[b, :t].sum()) for b, t in valid}
    for b, t in valid:
        p = P[b, t]
        if reference == "batch_mean":
            r = mean_over(valid)
        elif reference == "group_mean":
            r = mean_over([(bb, tt) for bb, tt in valid if group_ids[bb] == group_ids[b]])
        elif reference == "sequence_mean":
            r = mean_over([(bb, tt) for bb, tt in valid if bb == b])
        elif reference == "previous_token":
            r = p if t == 0 else P[b, t - 1]
        elif reference == "group_position":
            same = [(bb, tt) for bb, tt in valid if group_ids[bb] == group_ids[b]]
            r = mean_over([(bb, tt) for bb, tt in same if kth[bb, tt] == kth[b, t]])
            out["kl"][b, t] = entropy(p, r)  # KL(p || r), natural log
        elif reference == "reference_policy":
            r = softmax(np.asarray(reference_logits, dtype=np.float64)[b, t] / temperature)
        else:
            raise ValueError(reference)
        out["entropy"][b, t] = entropy(p)  # natural log; 0 log 0 = 0
        out["renyi2"][b, t] = -np.log(np.sum(p**2))
        out["logprob"][b, t] = np.log(p[tokens[b, t]]) if p[tokens[b, t]] > 0 else -np.inf
        out["js"][b, t] = jensenshannon(p, r) ** 2  # scipy returns sqrt(JS), base e by default
    return out
