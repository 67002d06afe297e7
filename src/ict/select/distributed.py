"""Gathering variable-length 1-D tensors across data-parallel ranks (for `scope="global"`).

Every rank gets the concatenation in rank order, so a selection computed on it is identical on all
ranks and equals what one process computes on the concatenated batch (rows of rank 0, then rank 1...).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor


def resolve_group(process_group):
    """The process group to gather over, or None when running in one process.

    None means the world group when torch.distributed is initialised with more than one rank.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return None
    group = process_group if process_group is not None else dist.group.WORLD
    return group if dist.get_world_size(group) > 1 else None


def gather_concat(values: Tensor, group) -> tuple[Tensor, int]:
    """All-gather a 1-D tensor whose length differs per rank (padded to the longest).

    values: [n_rank] on the device the backend communicates on.
    Returns (concatenation over ranks in rank order [sum n], offset of this rank's slice).
    """
    world = dist.get_world_size(group)
    n = torch.tensor([values.numel()], dtype=torch.long, device=values.device)
    counts = [torch.zeros_like(n) for _ in range(world)]
    dist.all_gather(counts, n, group=group)
    counts = [int(c) for c in counts]
    padded = torch.zeros(max(counts), dtype=values.dtype, device=values.device)
    padded[: values.numel()] = values
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded, group=group)
    rank = dist.get_rank(group)
    full = torch.cat([p[:c] for p, c in zip(parts, counts, strict=True)])
    return full, sum(counts[:rank])
