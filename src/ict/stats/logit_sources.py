"""Where a block of logits comes from: a materialised [B, T, V] tensor, or hidden states and an LM head.

A source fills `out[:n]` (float32, or float64 for float64 inputs) with the temperature-scaled logits
z = logits / T of n positions given as (row, position) index pairs. It never builds logits for more
than those n positions, so the caller bounds the memory by bounding n.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ict.head import LogitHead


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
    """Blocks of softcap(scale * (hidden [B, T, D] @ weight[V, D].T + bias [V])) / temperature.

    The matmul accumulates in the compute dtype (float32, float64 for a float64 weight): a bf16/fp16
    weight (and bias) is cast once, here (one [V, D] float32 copy for the whole call), and each
    chunk's [n, D] hidden rows are cast before the matmul, which writes straight into the output.
    scale / softcap: the model's own logit transform (ict.head.logit_head); only the requested
    rows are multiplied.
    """

    gathers_rows = False  # one matmul per chunk: the driver fills chunk_size rows at once

    def __init__(
        self,
        hidden: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        temperature: float,
        scale: float = 1.0,
        softcap: float | None = None,
    ):
        self.hidden = hidden
        self.head = LogitHead(weight, bias, scale, softcap).cast()
        self.temperature = temperature
        self.vocab = weight.shape[0]
        self.dtype = self.head.dtype
        self.device = hidden.device
        # per row besides the [n, V] output: the gathered [n, D] hidden rows and their cast copy
        D = hidden.shape[-1]
        cast = 0 if hidden.dtype == self.dtype else D * torch.finfo(self.dtype).bits // 8
        self.temp_row_bytes = D * hidden.element_size() + cast

    def fill(self, rows: Tensor, positions: Tensor, out: Tensor) -> Tensor:
        return self.head.logits(self.hidden[rows, positions], self.temperature, out=out)
