"""The fast path for small models: leaner decoding and forwards, same weights and sampling.

`ict compare` turns it on for presets that train small in-memory models (the toy presets; `ict
compare --no-fast` turns it off). While it is on (`fast_path()`), ict.generation samples with
`ict.fast.generate.decode` and ict.train.logprobs computes hidden states with
`ict.fast.llama.LeanLlama`, for every model they support (`lean_for`); other models keep the
Hugging Face forward. What it changes and by how much: docs/benchmarks.md ("study throughput").

The batched evaluation (`ict.eval`'s default sampler) uses `LeanLlama` whether or not the fast
path is on, with its own sampling: `ict.fast.keyed` (per-sample counter-based random numbers) and
`ict.fast.batched` (thousands of rows per batch, finished rows removed); docs/benchmarks.md
section 7.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_ON: ContextVar[bool] = ContextVar("ict_fast_path", default=False)


@contextmanager
def fast_path(on: bool = True) -> Iterator[None]:
    """Use the fast path inside the block (`on` False: force the Hugging Face path)."""
    token = _ON.set(bool(on))
    try:
        yield
    finally:
        _ON.reset(token)


def is_on() -> bool:
    """Whether the fast path is on here."""
    return _ON.get()


def why_not(model) -> str | None:
    """None when the fast path can run `model` (forward and sampling); else why not."""
    from ict.fast.generate import unsupported_sampling
    from ict.fast.llama import unsupported

    return unsupported(model) or unsupported_sampling(model)


def lean_for(model):
    """A `LeanLlama` of `model` when the fast path is on and supports it (and no autocast is
    active: under autocast the model's own ops choose their precision); else None."""
    import torch

    if not is_on() or torch.is_autocast_enabled("cpu") or why_not(model) is not None:
        return None
    from ict.fast.llama import LeanLlama

    return LeanLlama(model)
