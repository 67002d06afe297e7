"""Where a block of logits comes from: a materialised [B, T, V] tensor, or hidden states and an LM head.

A source fills `out[:n]` (float32, or float64 for float64 inputs) with the temperature-scaled logits
z = logits / T of n positions given as (row, position) index pairs. It never builds logits for more
than those n positions, so the caller bounds the memory by bounding n.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 accumulation for bf16/fp16/fp32 inputs, float64 kept for float64 inputs."""
    return torch.float64 if dtype == torch.float64 else torch.float32


class LogitsSource:
    """Blocks of `logits` [B, T, V] (any float dtype, any strides), divided by `temperature`."""

    gathers_rows = True  # cheap per row: the driver fills one small block at a time
    temp_row_bytes = 0  # no chunk-sized temporary besides the output

    def __init__(self, logits: Tensor, temperature: float):
        self.logits = logits
        self.temperature = temperature
        self.vocab = logits.shape[-1]
        self.dtype = compute_dtype(logits.dtype)
        self.device = logits.device
        B, T = logits.shape[:2]
        # A flat [B*T, V] view exists when the (B, T) dims merge without a copy.
        mergeable = logits.stride(0) == T * logits.stride(1) and logits.stride(2) == 1
        self.flat = logits.view(B * T, -1) if mergeable else None
        self.T = T

    def fill(self, rows: Tensor, positions: Tensor, out: Tensor) -> Tensor:
        z = out[: rows.numel()]
        if self.flat is not None and self.flat.dtype == z.dtype:
            torch.index_select(self.flat, 0, rows * self.T + positions, out=z)
        elif self.flat is not None:
            z.copy_(self.flat.index_select(0, rows * self.T + positions))
        else:
            z.copy_(self.logits[rows, positions])
        if self.temperature != 1.0:
            z.div_(self.temperature)
        return z


class HiddenSource:
    """Blocks of hidden [B, T, D] @ weight[V, D].T (+ bias [V]), divided by `temperature`.

    The matmul runs in the inputs' dtype (as the model's own LM head would) and is cast to the
    compute dtype; only the requested rows are multiplied.
    """

    gathers_rows = False  # one matmul per chunk: the driver fills chunk_size rows at once

    def __init__(self, hidden: Tensor, weight: Tensor, bias: Tensor | None, temperature: float):
        self.hidden = hidden
        self.weight = weight
        self.bias = bias
        self.temperature = temperature
        self.vocab = weight.shape[0]
        self.dtype = compute_dtype(weight.dtype)
        self.device = hidden.device
        same = hidden.dtype == weight.dtype == self.dtype
        # a bf16/fp16 matmul returns its own [n, V] tensor before the cast into the output
        self.temp_row_bytes = 0 if same else self.vocab * weight.element_size()

    def fill(self, rows: Tensor, positions: Tensor, out: Tensor) -> Tensor:
        z = out[: rows.numel()]
        h = self.hidden[rows, positions]
        if h.dtype == z.dtype and self.weight.dtype == z.dtype:
            if self.bias is None:
                torch.mm(h, self.weight.t(), out=z)
            else:
                torch.addmm(self.bias.to(z.dtype), h, self.weight.t(), out=z)
        else:
            z.copy_(F.linear(h.to(self.weight.dtype), self.weight, self.bias))
        if self.temperature != 1.0:
            z.div_(self.temperature)
        return z
