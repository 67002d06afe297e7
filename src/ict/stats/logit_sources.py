"""Where a block of logits comes from: a materialised [B, T, V] tensor, or hidden states and an LM head.

A source fills `out[:n]` (float32, or float64 for float64 inputs) with the temperature-scaled logits
z = logits / T of n positions given as (row, position) index pairs. It never builds logits for more
than those n positions, so the caller bounds the memory by bounding n.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import Tensor

from ict.head import LogitHead

_MATMUL_THREADS: list[int] = []  # the caller's intra-op thread count while blocks run on one


@contextmanager
def elementwise_on_one_thread(device: torch.device):
    """On CPU, run the enclosed statistics on one intra-op thread, except the LM-head matmuls
    (`HiddenSource.fill`), which get the caller's thread count back.

    Why: a cache-sized block ([~6-21, V] floats) takes a dozen elementwise ops, each an OpenMP
    parallel region too small to split profitably. When the cores are shared with other processes,
    every region waits at its barrier for a time slice: at OMP_NUM_THREADS=2 with one core busy,
    the paper's score took 4.9x its floor (SmolLM2 head, ~1000 positions) against 1.1x with one
    thread (benchmarks/stats_in_step.py). Off CPU, or with one thread already, a no-op.
    """
    n = torch.get_num_threads()
    if device.type != "cpu" or n == 1:
        yield
        return
    _MATMUL_THREADS.append(n)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        _MATMUL_THREADS.pop()
        torch.set_num_threads(n)


@contextmanager
def _matmul_threads():
    """Inside `elementwise_on_one_thread`: the caller's thread count for one matmul."""
    if not _MATMUL_THREADS or torch.get_num_threads() == _MATMUL_THREADS[-1]:
        yield
        return
    torch.set_num_threads(_MATMUL_THREADS[-1])
    try:
        yield
    finally:
        torch.set_num_threads(1)


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
    head: the model's own LogitHead (ict.head.logit_head: weight, bias, scale, soft cap); only
    the requested rows are multiplied.
    """

    gathers_rows = False  # one matmul per chunk: the driver fills chunk_size rows at once

    def __init__(self, hidden: Tensor, head: LogitHead, temperature: float):
        self.hidden = hidden
        self.head = head.cast()
        self.temperature = temperature
        self.vocab = head.weight.shape[0]
        self.dtype = self.head.dtype
        self.device = hidden.device
        # per row besides the [n, V] output: the gathered [n, D] hidden rows and their cast copy
        D = hidden.shape[-1]
        cast = 0 if hidden.dtype == self.dtype else D * torch.finfo(self.dtype).bits // 8
        self.temp_row_bytes = D * hidden.element_size() + cast

    def fill(self, rows: Tensor, positions: Tensor, out: Tensor) -> Tensor:
        with _matmul_threads():
            return self.head.logits(self.hidden[rows, positions], self.temperature, out=out)
