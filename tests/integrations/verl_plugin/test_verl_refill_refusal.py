"""verl's `algorithm.filter_groups` (DAPO's dynamic sampling) with the ict losses: refused in one
line, since verl 0.9 reads it only in its v1 trainer, which the ict losses cannot use (the
driver's config check, on a plain mapping)."""

import pytest

pytest.importorskip("verl")

from ict.errors import ConfigError  # noqa: E402
from ict.integrations.verl.config import FILTER_GROUPS_REFUSAL, from_verl_config  # noqa: E402

pytestmark = pytest.mark.verl

BASE = {
    "actor_rollout_ref": {"actor": {"policy_loss": {"loss_mode": "ict"}, "strategy": "fsdp"}},
    "trainer": {"use_v1": False},
}


def test_filter_groups_is_refused_with_the_ict_losses_and_left_alone_without():
    assert from_verl_config({**BASE, "algorithm": {"filter_groups": {"enable": False}}})
    on = {**BASE, "algorithm": {"filter_groups": {"enable": True, "max_num_gen_batches": 10}}}
    with pytest.raises(ConfigError) as err:
        from_verl_config(on)
    assert str(err.value) == FILTER_GROUPS_REFUSAL and "\n" not in FILTER_GROUPS_REFUSAL
    assert "ict train --dynamic-sampling" in FILTER_GROUPS_REFUSAL
    vanilla = {**on, "actor_rollout_ref": {"actor": {"policy_loss": {"loss_mode": "vanilla"}}}}
    assert from_verl_config(vanilla) is None  # not an ict run: verl's own business
