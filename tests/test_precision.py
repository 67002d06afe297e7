"""The precision decision (ict.precision) with mocked CPU capabilities, flags and CUDA support."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from ict.errors import ConfigError
from ict.precision import (
    CHOICES,
    PrecisionChoice,
    choose_precision,
    cpu_has_native_bf16,
    detect_cpu_flags,
)

ZEN3_FLAGS = "fpu sse sse2 avx avx2 fma bmi2 sha_ni"  # AVX2, no native bf16
ZEN4_FLAGS = "avx2 avx512f avx512bw avx512vl avx512_bf16 avx512_vnni"


@pytest.fixture(autouse=True)
def _no_stray_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unexpected warning fails the test
        yield


def test_avx2_cpu_auto_is_float32_and_names_the_capability():
    choice = choose_precision("auto", "cpu", capability="AVX2", cpu_flags=ZEN3_FLAGS)
    assert choice.autocast_dtype is None and choice.name == "off"
    assert "AVX2" in choice.reason and "50x" in choice.reason


def test_avx512_without_bf16_flag_is_float32():
    choice = choose_precision("auto", "cpu", capability="AVX512", cpu_flags="avx2 avx512f")
    assert choice.autocast_dtype is None


def test_avx512_capability_with_avx512_bf16_flag_is_bf16():
    # torch reports plain "AVX512" on a Zen 4: the flag decides
    choice = choose_precision("auto", "cpu", capability="AVX512", cpu_flags=ZEN4_FLAGS)
    assert choice.autocast_dtype is torch.bfloat16 and choice.name == "bf16"
    assert "avx512_bf16" in choice.reason


@pytest.mark.parametrize("capability", ["AVX512_BF16", "AMX", "avx512_amx"])
def test_capability_naming_bf16_or_amx_is_bf16(capability):
    choice = choose_precision("auto", "cpu", capability=capability)
    assert choice.autocast_dtype is torch.bfloat16


def test_amx_bf16_flag_is_bf16():
    assert (
        choose_precision("auto", "cpu", capability="AVX512", cpu_flags="amx_bf16 amx_tile").name
        == "bf16"
    )


def test_mocked_capability_ignores_this_machines_flags():
    # a given capability without cpu_flags means "no flags": the mock decides alone
    assert choose_precision("auto", "cpu", capability="AVX2").name == "off"


def test_cpu_has_native_bf16_parses_flag_lists():
    assert cpu_has_native_bf16("AVX2", "avx2,avx512_bf16")
    assert cpu_has_native_bf16("DEFAULT", "AMX_BF16")
    assert not cpu_has_native_bf16("AVX2", ZEN3_FLAGS)
    assert not cpu_has_native_bf16("AVX2", None)
    assert not cpu_has_native_bf16("NO AVX", "avx512_bf16x")  # whole flags only


def test_cuda_with_bf16_is_bf16():
    choice = choose_precision("auto", "cuda", cuda_bf16=True)
    assert choice.autocast_dtype is torch.bfloat16 and "CUDA" in choice.reason


def test_cuda_without_bf16_is_float32_not_fp16():
    choice = choose_precision("auto", torch.device("cuda", 0), cuda_bf16=False)
    assert choice.autocast_dtype is None and "fp16" in choice.reason


def test_explicit_bf16_on_avx2_warns_with_the_cost():
    with pytest.warns(UserWarning, match=r"50x slower.*--autocast auto or off"):
        choice = choose_precision("bf16", "cpu", capability="AVX2", cpu_flags=ZEN3_FLAGS)
    assert choice.autocast_dtype is torch.bfloat16 and choice.requested == "bf16"


def test_explicit_bf16_on_cuda_without_bf16_warns():
    with pytest.warns(UserWarning, match="without native bf16"):
        choice = choose_precision("bf16", "cuda", cuda_bf16=False)
    assert choice.autocast_dtype is torch.bfloat16


def test_explicit_bf16_where_native_does_not_warn():
    choice = choose_precision("bf16", "cpu", capability="AVX512", cpu_flags=ZEN4_FLAGS)
    assert choice.autocast_dtype is torch.bfloat16


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_explicit_off_is_honoured(device):
    off = choose_precision("off", device, capability="AVX512_BF16", cuda_bf16=True)
    assert off.autocast_dtype is None and off.name == "off"


def test_explicit_fp16_on_cuda_and_on_a_native_fp16_cpu_does_not_warn():
    assert choose_precision("fp16", "cuda", cuda_bf16=False).autocast_dtype is torch.float16
    cpu = choose_precision("fp16", "cpu", capability="AVX512", cpu_flags="avx512_fp16")
    assert cpu.autocast_dtype is torch.float16 and cpu.name == "fp16"


def test_explicit_fp16_on_a_cpu_without_native_fp16_warns():
    with pytest.warns(UserWarning, match=r"30x slower.*--autocast auto or off"):
        choice = choose_precision("fp16", "cpu", capability="AVX512", cpu_flags=ZEN4_FLAGS)
    assert choice.autocast_dtype is torch.float16


def test_other_devices_auto_is_float32():
    assert choose_precision("auto", "mps").autocast_dtype is None


def test_unknown_requested_value_lists_the_choices():
    with pytest.raises(ConfigError, match="auto, bf16, fp16, off"):
        choose_precision("bfloat16", "cpu")
    assert CHOICES == ("auto", "bf16", "fp16", "off")


def test_unresolved_device_is_a_config_error():
    with pytest.raises(ConfigError, match="resolve 'auto'"):
        choose_precision("auto", "auto")


def test_context_autocasts_cpu_matmuls_to_the_chosen_dtype():
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    bf16 = choose_precision("auto", "cpu", capability="AMX")
    with bf16.context("cpu"):
        assert (a @ b).dtype is torch.bfloat16
    with choose_precision("auto", "cpu", capability="AVX2").context(torch.device("cpu")):
        assert (a @ b).dtype is torch.float32


def test_as_dict_is_serialisable_and_complete():
    choice = choose_precision("auto", "cpu", capability="AVX512", cpu_flags=ZEN4_FLAGS)
    d = json.loads(json.dumps(choice.as_dict()))
    assert d["requested"] == "auto" and d["autocast"] == "bf16" and d["dtype"] == "bfloat16"
    assert d["reason"] == choice.reason
    off = choose_precision("off").as_dict()
    assert off["dtype"] is None and off["autocast"] == "off"
    assert "float32" in choose_precision("off").describe()


def test_choice_is_frozen():
    choice = PrecisionChoice(None, "off", "x")
    with pytest.raises(AttributeError):
        choice.name = "bf16"  # type: ignore[misc]


def test_detected_defaults_agree_with_this_machine():
    capability = torch.backends.cpu.get_cpu_capability()
    native = cpu_has_native_bf16(capability, detect_cpu_flags())
    choice = choose_precision("auto", "cpu")
    assert (choice.autocast_dtype is torch.bfloat16) == native
    assert capability in choice.reason


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="needs Linux /proc/cpuinfo")
def test_detect_cpu_flags_falls_back_to_proc_cpuinfo(monkeypatch):
    monkeypatch.delattr(torch.cpu, "get_capabilities", raising=False)
    detect_cpu_flags.cache_clear()
    try:
        flags = detect_cpu_flags()
    finally:
        detect_cpu_flags.cache_clear()
    text = Path("/proc/cpuinfo").read_text()
    assert flags and all(word in text for word in flags.split()[:5])


# --- wiring: ict inspect / ict.train.inspect score under the chosen autocast ---------------------


def _autocast_seen_by_forward(model):
    """Record (autocast enabled, dtype) on CPU at each forward call of `model`."""
    seen = []

    def hook(module, args, kwargs):
        seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))

    model.register_forward_pre_hook(hook, with_kwargs=True)
    if model.base_model is not model:  # the statistics pass runs the backbone (no LM head)
        model.base_model.register_forward_pre_hook(hook, with_kwargs=True)
    return seen


@pytest.mark.parametrize(
    ("precision", "expected"),
    [
        ("off", (False, None)),
        (PrecisionChoice(torch.bfloat16, "bf16", "mock"), (True, torch.bfloat16)),
    ],
)
def test_records_from_model_scores_under_the_chosen_autocast(precision, expected):
    from ict.testing import tiny_model_and_tokenizer
    from ict.train.inspect import records_from_model

    model, tok = tiny_model_and_tokenizer(seed=0)
    seen = _autocast_seen_by_forward(model)
    records = records_from_model(model, tok, ["1+2="], max_new_tokens=4, precision=precision)
    assert records and len(seen) >= 2
    # generation steps run in the model's dtype (as training rollouts); the last call is scoring
    enabled, dtype = seen[-1]
    assert enabled == expected[0] and (not enabled or dtype is expected[1])


def test_inspect_model_prints_the_precision_choice(tmp_path, capsys):
    from ict.cli import main
    from ict.testing import save_tiny_model

    save_tiny_model(tmp_path / "m")
    argv = ["inspect", "--model", str(tmp_path / "m"), "--prompt", "1+2=", "--max-new-tokens", "3"]
    assert main([*argv, "--no-html", "--no-color", "--autocast", "off"]) == 0
    assert "precision: float32 (no autocast); off: float32, as requested" in capsys.readouterr().err


def test_trl_example_sets_trl_precision_from_the_rule():
    pytest.importorskip("trl")
    import runpy

    script = Path(__file__).parents[1] / "examples" / "trl" / "train_ict.py"
    precision_kwargs = runpy.run_path(str(script))["precision_kwargs"]
    assert precision_kwargs("off", "cpu") == {"bf16": False, "fp16": False}
    assert precision_kwargs("fp16", "cuda") == {"bf16": False, "fp16": True}
    native = choose_precision("auto", "cpu").name == "bf16"
    assert precision_kwargs("auto", "cpu") == {"bf16": native, "fp16": False}
