"""The seed rules: every seed a run uses is derived from its base seed, each stream its own way.

    derive_seed(seed, index) = seed * 1_000_003 + index
    stream_seed(seed, stream, index) = 63 bits of BLAKE2b("<stream>:<seed>:<index>")
    rank_seed(seed, rank) = stream_seed(seed, "rank", rank)

`derive_seed` is the rollouts' rule (per step, then per generation batch, and per refill round of
a step: ict.step.SeedStreams.refill): 1_000_003 is a prime larger than any index ict uses, so runs
with neighbouring base seeds never share a derived seed. `stream_seed` gives each other named
stream (ict.step.SeedStreams: the step's selection, the mini-batch shuffle) its own numbers, so two streams never seed two generators alike, and
`rank_seed` gives each process its own draw from a step's selection seed (the `uniform`
selector): (run seed s, rank 1) and (run seed s + 1, rank 0) draw different selections, which
an offset by rank (the rule before issue 41: rank * 1_000_003 + step seed) did not promise.

What changed with issue 41 (committed results are not re-run): the rollouts' seeds are as
before; the random controls' selection (methods random, random_sequence: the `uniform`
selector) and the shuffle of mini-batches (mini_batch_size set or num_epochs > 1) now draw from
their own streams, so a run of those re-run today draws other tokens / another order than the
committed reports' runs, also in one process (docs/ARCHITECTURE.md, "Seeds").
"""

from __future__ import annotations

import hashlib

SEED_STRIDE = 1_000_003
_SEED_BITS = 63  # a non-negative int64: what torch.Generator.manual_seed and numpy accept


def derive_seed(seed: int, index: int) -> int:
    """The seed of `index` (a step, a generation batch) under base seed `seed`: the rollouts'."""
    return int(seed) * SEED_STRIDE + int(index)


def stream_seed(seed: int, stream: str, index: int) -> int:
    """The seed of `index` in the named `stream` under base seed `seed`: an int in [0, 2**63),
    a hash of all three, so different streams, seeds or indices give unrelated seeds."""
    text = f"{stream}:{int(seed)}:{int(index)}".encode()
    digest = hashlib.blake2b(text, digest_size=8).digest()
    return int.from_bytes(digest, "little") >> (64 - _SEED_BITS)


def rank_seed(seed: int, rank: int) -> int:
    """Process `rank`'s seed of a draw seeded `seed` (a step's selection seed)."""
    return stream_seed(seed, "rank", rank)


__all__ = ["SEED_STRIDE", "derive_seed", "rank_seed", "stream_seed"]
