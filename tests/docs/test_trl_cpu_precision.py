"""docs/engines/trl.md's snippet runs on a CPU machine as written: ICTGRPOConfig with `bf16` left
unset follows ict.precision there instead of TRL's bf16 default, which transformers refuses on a
machine without an accelerator ("Your setup doesn't support bf16/gpu")."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")
pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="the rule is about machines without an accelerator"
)


def test_trl_default_is_refused_on_this_machine(tmp_path):
    from trl import GRPOConfig

    with pytest.raises(ValueError, match="bf16"):
        GRPOConfig(output_dir=str(tmp_path))


def test_unset_bf16_follows_ict_precision(tmp_path):
    from ict.integrations.trl import ICTGRPOConfig
    from ict.precision import choose_precision

    assert ICTGRPOConfig(output_dir=str(tmp_path)).bf16 is False  # no use_cpu: float32
    native = choose_precision("auto", "cpu").name == "bf16"
    assert ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True).bf16 is native


def test_explicit_precision_is_kept(tmp_path):
    from ict.integrations.trl import ICTGRPOConfig

    assert ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False).bf16 is False
    assert ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=True).bf16 is True
