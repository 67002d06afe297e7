"""Token statistics: Shannon and Rényi-2 entropy, sampled-token log-probability and the ICT score
(JS divergence to a reference distribution), chunked so the [tokens x V] tensor is never built.

    stats = token_stats(logits, tokens, mask, temperature=1.0, reference="batch_mean")
    head = logit_head(model)  # the model's own logits: its LM head, soft cap / logit scale
    stats = token_stats_from_hidden(hidden, head, tokens, mask)
    stats.entropy, stats.renyi2, stats.logprob, stats.js, stats.prob   # [B, T] float32
    token_stats(logits, tokens, mask, reference="group_position", group_ids=g)  # the paper's score
    token_stats(..., reference="group_position", group_ids=g, divergence="kl").kl  # KL ablation

See docs/METHOD.md for the math and docs/ARCHITECTURE.md for the tensor layout.
"""

from ict.head import LogitHead, logit_head
from ict.stats.compute import token_stats, token_stats_from_hidden
from ict.stats.result import (
    DIVERGENCES,
    GROUP_REFERENCES,
    REFERENCES,
    STAT_FIELDS,
    TokenStats,
    masked_mean,
)

__all__ = [
    "DIVERGENCES",
    "GROUP_REFERENCES",
    "REFERENCES",
    "STAT_FIELDS",
    "LogitHead",
    "TokenStats",
    "logit_head",
    "masked_mean",
    "token_stats",
    "token_stats_from_hidden",
]
