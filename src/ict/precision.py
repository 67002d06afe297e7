"""Numeric precision from the hardware: autocast `auto` means bf16 only where bf16 is fast.

On a CPU without native bf16 instructions a bf16 matmul is emulated and about 50x slower than
float32 (512x576 @ 576x1536, one thread, AVX2 Zen 3: 0.83 s vs 0.017 s), so `auto` picks:

- CUDA: bf16 autocast when the device supports bf16 natively (Ampere and newer); else float32.
  fp16 is not picked automatically: without loss scaling (the trainer has no GradScaler) fp16
  gradients can underflow, while float32 is only slower. `fp16` stays available on request.
- CPU: bf16 autocast when the CPU has native bf16 (AVX512_BF16 or AMX-BF16); else float32.
- Any other device (mps, xpu, ...): float32.

An explicit `bf16` where it is emulated is honoured but warns with the expected cost.
Benchmark of this decision: `benchmarks/precision.py`; see docs/training.md "Precision".
"""

from __future__ import annotations

import functools
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ict.errors import ConfigError

if TYPE_CHECKING:  # torch is imported where it is used: `ict train --help` reads CHOICES only
    import torch

CHOICES = ("auto", "bf16", "fp16", "off")
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
NATIVE_FP16_FLAGS = ("avx512_fp16", "amx_fp16")
EMULATED_BF16_COST = (
    "bf16 matmuls are emulated on this CPU, about 50x slower than float32 "
    "(benchmarks/precision.py measures it)"
)


@dataclass(frozen=True)
class PrecisionChoice:
    """The autocast dtype of the model passes (None = plain float32) and why it was chosen."""

    autocast_dtype: torch.dtype | None
    name: str  # "bf16" | "fp16" | "off"
    reason: str
    requested: str = "auto"

    def context(self, device_type: str | torch.device):
        """`torch.autocast(device_type, dtype)` for bf16/fp16, a no-op context for "off"."""
        if self.autocast_dtype is None:
            return nullcontext()
        import torch

        kind = device_type.type if isinstance(device_type, torch.device) else device_type
        return torch.autocast(device_type=kind, dtype=self.autocast_dtype)

    def as_dict(self) -> dict[str, str | None]:
        """JSON/YAML-friendly form for a run's config and summary files."""
        dtype = str(self.autocast_dtype).removeprefix("torch.") if self.autocast_dtype else None
        return {
            "requested": self.requested,
            "autocast": self.name,
            "dtype": dtype,
            "reason": self.reason,
        }

    def describe(self) -> str:
        """One line for the start of a run: `precision: bf16 autocast; auto: <reason>`."""
        what = "float32 (no autocast)" if self.autocast_dtype is None else f"{self.name} autocast"
        return f"precision: {what}; {self.requested}: {self.reason}"


@functools.cache
def detect_cpu_flags() -> str:
    """This CPU's feature flags as one space-separated lowercase string ("" if unknown).

    Prefers torch's own cpuinfo probe (`torch.cpu.get_capabilities()`, torch >= 2.8; works on
    Linux, Windows and macOS and is what oneDNN dispatches on); falls back to /proc/cpuinfo.
    """
    import torch

    get_capabilities = getattr(torch.cpu, "get_capabilities", None)
    if get_capabilities is not None:
        try:
            return " ".join(sorted(k for k, v in get_capabilities().items() if v is True))
        except Exception:  # noqa: BLE001 - any probe failure falls back to /proc/cpuinfo
            pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line.split(":", 1)[1].strip().lower()
    except OSError:
        pass
    return ""


def cpu_has_native_bf16(capability: str, cpu_flags: str | None = None) -> bool:
    """Whether the CPU computes bf16 natively (AVX512_BF16 or AMX-BF16), so bf16 autocast is fast.

    `capability` is `torch.backends.cpu.get_cpu_capability()`: its values ("DEFAULT", "AVX2",
    "AVX512", "ZVECTOR", "SVE256", ...) name the vector ISA torch's kernels dispatch to and do not
    say whether bf16 is native: an AVX512_BF16 Zen 4 reports plain "AVX512". So the CPU flags
    decide (`cpu_flags`, e.g. /proc/cpuinfo's `flags` line); a capability string that itself names
    bf16 or AMX counts as native too. aarch64 `bf16` is not trusted yet (unmeasured): float32.
    """
    cap = capability.upper()
    if "BF16" in cap or "AMX" in cap:
        return True
    flags = set((cpu_flags or "").lower().replace(",", " ").split())
    return any(flag in flags for flag in NATIVE_BF16_FLAGS)


def _device_type(device: torch.device | str) -> str:
    import torch

    if isinstance(device, torch.device):
        return device.type
    try:
        return torch.device(device).type
    except RuntimeError as err:
        raise ConfigError(
            f"unknown device {device!r} for the precision choice; resolve 'auto' first "
            "(e.g. 'cpu' or 'cuda')"
        ) from err


def choose_precision(
    requested: str = "auto",
    device: torch.device | str = "cpu",
    *,
    capability: str | None = None,
    cuda_bf16: bool | None = None,
    cpu_flags: str | None = None,
) -> PrecisionChoice:
    """The autocast precision for `device` given the user's `requested` value.

    Args:
        requested: "auto" (bf16 where fast, else float32) | "bf16" | "fp16" | "off" (float32).
        device: the (resolved) device the model runs on.
        capability: torch's CPU capability; default `torch.backends.cpu.get_cpu_capability()`.
        cuda_bf16: whether the CUDA device has native bf16; default
            `torch.cuda.is_bf16_supported(including_emulation=False)`.
        cpu_flags: the CPU's feature flags; default detected (`detect_cpu_flags`) when
            `capability` is detected too, none when `capability` is given (so mocks are exact).
    Raises:
        ConfigError: `requested` is not one of CHOICES, or `device` is not a device.
    """
    if requested not in CHOICES:
        raise ConfigError(f"autocast must be one of {', '.join(CHOICES)}; got {requested!r}")
    import torch

    kind = _device_type(device)
    if requested == "off":
        return PrecisionChoice(None, "off", "float32, as requested", requested)
    if requested == "fp16":
        return _fp16(kind, capability, cpu_flags)

    if kind == "cuda":
        if cuda_bf16 is None:
            cuda_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
        if cuda_bf16:
            return PrecisionChoice(
                torch.bfloat16, "bf16", "CUDA device with native bf16", requested
            )
        if requested == "bf16":
            warnings.warn(
                "autocast bf16 on a CUDA device without native bf16 (pre-Ampere): bf16 is emulated "
                "or unsupported there; use --autocast auto (float32) or fp16",
                UserWarning,
                stacklevel=2,
            )
            return PrecisionChoice(torch.bfloat16, "bf16", "requested; no native bf16", requested)
        return PrecisionChoice(
            None,
            "off",
            "CUDA device without native bf16; fp16 is not picked automatically (no loss "
            "scaling), pass --autocast fp16 to opt in",
            requested,
        )

    if kind == "cpu":
        if capability is None:
            capability = torch.backends.cpu.get_cpu_capability()
            cpu_flags = detect_cpu_flags() if cpu_flags is None else cpu_flags
        native = cpu_has_native_bf16(capability, cpu_flags)
        where = f"torch CPU capability {capability}"
        if native:
            return PrecisionChoice(
                torch.bfloat16,
                "bf16",
                f"CPU with native bf16 ({where}, {_bf16_flag(capability, cpu_flags)})",
                requested,
            )
        if requested == "bf16":
            warnings.warn(
                f"autocast bf16 on a CPU without native bf16 ({where}, no avx512_bf16/amx_bf16 "
                f"flag): {EMULATED_BF16_COST}; use --autocast auto or off for float32",
                UserWarning,
                stacklevel=2,
            )
            return PrecisionChoice(
                torch.bfloat16, "bf16", f"requested; CPU without native bf16 ({where})", requested
            )
        return PrecisionChoice(
            None,
            "off",
            f"CPU without native bf16 ({where}, no avx512_bf16/amx_bf16 flag): float32, "
            "since emulated bf16 matmuls are about 50x slower",
            requested,
        )

    if requested == "bf16":
        return PrecisionChoice(
            torch.bfloat16, "bf16", f"bf16 autocast on {kind}, as requested", requested
        )
    return PrecisionChoice(
        None,
        "off",
        f"auto picks bf16 only on CUDA and on CPUs with native bf16; {kind}: float32",
        requested,
    )


def _bf16_flag(capability: str, cpu_flags: str | None) -> str:
    """Which evidence said "native bf16", for the reason string."""
    flags = set((cpu_flags or "").lower().replace(",", " ").split())
    found = [flag for flag in NATIVE_BF16_FLAGS if flag in flags]
    return f"cpu flag {'+'.join(found)}" if found else "capability names it"


def _fp16(kind: str, capability: str | None, cpu_flags: str | None) -> PrecisionChoice:
    """An explicit fp16 request; warns on a CPU without native fp16 (34x slower matmuls on Zen 4)."""
    import torch

    choice = PrecisionChoice(torch.float16, "fp16", "fp16 autocast, as requested", "fp16")
    if kind != "cpu":
        return choice
    if capability is None:
        capability = torch.backends.cpu.get_cpu_capability()
        cpu_flags = detect_cpu_flags() if cpu_flags is None else cpu_flags
    flags = set((cpu_flags or "").lower().replace(",", " ").split())
    if "FP16" in capability.upper() or any(flag in flags for flag in NATIVE_FP16_FLAGS):
        return choice
    warnings.warn(
        f"autocast fp16 on a CPU without native fp16 (torch CPU capability {capability}, no "
        "avx512_fp16/amx_fp16 flag): fp16 matmuls are emulated, about 30x slower than float32 "
        "(benchmarks/precision.py); use --autocast auto or off",
        UserWarning,
        stacklevel=3,
    )
    return choice
