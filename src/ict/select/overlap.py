"""Overlap between two selections (e.g. ICT vs 20-Entropy on the same batch)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ict.errors import DataError


def jaccard(a: Tensor | Sequence[int], b: Tensor | Sequence[int]) -> float:
    """|a & b| / |a | b| for two bool masks (tensors or 0/1 sequences) of the same shape.

    Two empty selections are the same set, so their overlap is 1.0 (not NaN). The one convention
    for the trainer, the integrations and the token map.
    """
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    if a.shape != b.shape:
        raise DataError(
            f"jaccard needs two masks of the same shape, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    a, b = a.bool(), b.bool()
    union = int((a | b).sum())
    return 1.0 if union == 0 else int((a & b).sum()) / union
