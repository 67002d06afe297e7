"""TEMPORARY shim (replaced by the precision branch): autocast choice."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PrecisionChoice:
    autocast_dtype: torch.dtype | None
    name: str
    reason: str

    def context(self, device_type: str):
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(device_type=device_type, dtype=self.autocast_dtype)

    def as_dict(self) -> dict:
        return {"autocast": self.name, "reason": self.reason}


def choose_precision(requested: str = "auto", device="cpu", **_) -> PrecisionChoice:
    if requested == "off":
        return PrecisionChoice(None, "off", "requested")
    if requested == "fp16":
        return PrecisionChoice(torch.float16, "fp16", "requested")
    return PrecisionChoice(torch.bfloat16, "bf16", "requested")
