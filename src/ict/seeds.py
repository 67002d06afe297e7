"""One seed rule: a base seed and an index (a step, a batch, a rank) give the seed of that index.

    derive_seed(seed, index) = seed * 1_000_003 + index

1_000_003 is a prime larger than any index ict uses, so runs with neighbouring base seeds never
share a derived seed. Used for the rollouts' sampling (per step, then per generation batch), the
step's selection (the random controls' draws) and the mini-batch order (ict.train.plan.SeedStreams),
and the random selectors' per-rank draws.
"""

from __future__ import annotations

SEED_STRIDE = 1_000_003


def derive_seed(seed: int, index: int) -> int:
    """The seed of `index` (step, batch, rank) under base seed `seed`."""
    return int(seed) * SEED_STRIDE + int(index)
