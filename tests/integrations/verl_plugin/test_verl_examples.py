"""examples/verl: the shipped config composes with verl's own ppo_trainer defaults (Hydra) and
carries the DAPO-style settings and the ict opt-in."""

from pathlib import Path

import pytest

from ict.methods import get_method

pytest.importorskip("verl")

from ict.integrations.verl.config import LOSS_MODES, from_verl_config  # noqa: E402

pytestmark = pytest.mark.verl

CONFIG_DIR = Path(__file__).resolve().parents[3] / "examples" / "verl" / "config"


def _compose(*overrides):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name="ict_dapo", overrides=list(overrides))


def test_example_config_composes_with_verl_defaults_and_dapo_settings():
    cfg = _compose("actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B")
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, 0.28)
    assert actor.loss_agg_mode == "token-mean" and not actor.use_kl_loss
    assert not cfg.algorithm.use_kl_in_reward and cfg.algorithm.adv_estimator == "grpo"
    assert rollout.temperature == 1.0 and rollout.n == 16
    assert actor.ppo_mini_batch_size == cfg.data.train_batch_size  # one update per rollout batch
    assert cfg.trainer.n_gpus_per_node == 8
    assert "critic" in cfg and "reward" in cfg  # verl's own defaults are underneath
    spec = from_verl_config(cfg)
    m = spec.resolved()  # the paper's ICT, with the batch order group_position needs
    assert (spec.method, spec.selector, m.reference, m.scope, m.loss_agg) == (
        "ict", "js_top", "group_position", "sequence", "seq_mean_token_mean",
    )  # fmt: skip
    assert cfg.trainer.balance_batch is False


@pytest.mark.parametrize("mode", sorted(LOSS_MODES))
def test_every_method_is_one_override(mode):
    """One override names the method; a method that fixes its own clip range (Clip-Cov's
    authors' 1 / 1) also states it as verl's clip ratios (refused otherwise, naming them)."""
    override = f"actor_rollout_ref.actor.policy_loss.loss_mode={mode}"
    method = get_method(LOSS_MODES[mode])
    extra = []
    estimator = method.resolved().advantage
    if estimator not in ("grpo", None):  # a method with its own advantage names it for verl
        extra.append(f"algorithm.adv_estimator={estimator}")
    if method.fixes_clip_range():
        from ict.errors import ConfigError

        low, high = (f"{x:g}" for x in (method.eps_low, method.eps_high))
        with pytest.raises(ConfigError, match=f"clip_ratio_low={low} and clip_ratio_high={high}"):
            from_verl_config(_compose(override, *extra))
        extra += [
            f"actor_rollout_ref.actor.clip_ratio_low={method.eps_low}",
            f"actor_rollout_ref.actor.clip_ratio_high={method.eps_high}",
        ]
    spec = from_verl_config(_compose(override, *extra))
    assert spec.method == LOSS_MODES[mode]
    assert spec.selector == get_method(LOSS_MODES[mode]).selector


def test_launch_scripts_parse():
    import subprocess

    for script in ("run_single_node.sh", "run_multi_node.sh"):
        subprocess.run(["bash", "-n", str(CONFIG_DIR.parent / script)], check=True)
