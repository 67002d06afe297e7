"""ICTGRPOConfig refuses dynamic sampling in one line (TRL samples one fixed batch per step)."""

import pytest

pytest.importorskip("trl")

from ict.errors import ConfigError  # noqa: E402
from ict.integrations.trl import ICTGRPOConfig  # noqa: E402

pytestmark = pytest.mark.trl


def test_dynamic_sampling_is_refused_at_config_resolution(tmp_path):
    with pytest.raises(ConfigError, match=r"^dynamic_sampling .* not available on TRL: use `ict"):
        ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], dynamic_sampling=True)
    assert not ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[]).dynamic_sampling
