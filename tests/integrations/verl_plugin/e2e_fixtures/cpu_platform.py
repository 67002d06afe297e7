"""A CPU platform for verl 0.9.1, registered through verl's own platform registry (test fixture).

verl ships CUDA, NPU and ROCm platforms only and falls back to NVIDIA (NCCL) without a GPU. This
one names the device `cpu` and the collective backend `gloo`, selected by VERL_PLATFORM=cpu.
verl's resource pools still request one Ray "GPU" per worker and count the cluster's GPUs by that
name, so the test declares a logical one (`ray_kwargs.ray_init.num_gpus=1`: a scheduling slot,
no device). The module also registers verl's own FSDP engine for the `cpu` device (verl registers
it for cuda/npu only), and, since verl's trainer workers join `cpu:gloo,<device>:<backend>`, which
torch rejects for device cpu ("Duplicate device type cpu"), passes verl's own `backend` argument
of that call, gloo (`_gloo_process_group`).
"""

from __future__ import annotations

import contextlib
import types

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

# verl calls these through `get_torch_device()`; torch.cpu has the stream/device ones only
_DEVICE_MODULE = types.SimpleNamespace(
    **{name: getattr(torch.cpu, name) for name in dir(torch.cpu) if not name.startswith("_")},
)
for _name in ("empty_cache", "ipc_collect", "set_per_process_memory_fraction", "set_device"):
    setattr(_DEVICE_MODULE, _name, lambda *a, **k: None)
for _name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
    setattr(_DEVICE_MODULE, _name, lambda *a, **k: 0)
_DEVICE_MODULE.mem_get_info = lambda *a, **k: (0, 0)
_DEVICE_MODULE.get_device_name = lambda *a, **k: "CPU"
_DEVICE_MODULE.get_rng_state = lambda *a, **k: torch.get_rng_state()
_DEVICE_MODULE.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
_DEVICE_MODULE.manual_seed = _DEVICE_MODULE.manual_seed_all = torch.manual_seed
_DEVICE_MODULE.current_device = lambda: "cpu"


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    device_name = "cpu"
    vendor_name = "cpu"
    device_module = _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check=False) -> bool:
        return False  # never auto-detected: VERL_PLATFORM=cpu selects it

    def current_device(self):
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index) -> None:
        pass

    def synchronize(self, device_index=None) -> None:
        pass

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def get_device_capability(self, device_index=0):
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "ICT_TEST_VISIBLE_CPU_SLOTS"

    @contextlib.contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        pass

    def profiler_stop(self) -> None:
        pass

    def ray_resource_name(self) -> str:
        return "GPU"  # the logical slot verl schedules and counts by this name

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self):
        return None


def _register_fsdp_engine_for_cpu() -> None:
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    engines = EngineRegistry._engines["language_model"]
    for backend in ("fsdp", "fsdp2"):
        if "cpu" not in engines.get(backend, {}):
            EngineRegistry.register("language_model", backend, device="cpu")(FSDPEngineWithLMHead)


def _gloo_process_group() -> None:
    from verl.utils import distributed
    from verl.workers import engine_workers

    original = distributed.initialize_global_process_group_ray
    if getattr(original, "__ict_test_gloo__", False):
        return

    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        return original(timeout_second=timeout_second, backend=backend or "gloo")

    initialize_global_process_group_ray.__ict_test_gloo__ = True
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray
    engine_workers.initialize_global_process_group_ray = initialize_global_process_group_ray


_register_fsdp_engine_for_cpu()
_gloo_process_group()
