"""Loading through verl's plugin mechanisms (fresh processes), the version guard, the config."""

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest

pytest.importorskip("verl")

from ict.errors import ConfigError  # noqa: E402
from ict.integrations.verl import SUPPORTED_VERL_VERSIONS, check_verl_version  # noqa: E402
from ict.integrations.verl.config import LOSS_MODES, from_verl_config  # noqa: E402

pytestmark = pytest.mark.verl

PROBE = textwrap.dedent(
    """
    import json, verl
    from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine, FSDPEngineWithLMHead
    patched = [getattr(f, "__ict_patched__", False) for f in (
        FSDPEngineWithLMHead.prepare_model_outputs, FSDPEngine.forward_backward_batch,
        RayPPOTrainer._compute_old_log_prob, RayPPOTrainer._update_actor)]
    print(json.dumps({"losses": sorted(k for k in POLICY_LOSS_REGISTRY if k.startswith("ict")),
                      "patched": patched}))
    """
)


def _run(env_updates, code=PROBE, extra_path=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_USE_EXTERNAL")}
    env.update(OMP_NUM_THREADS="1", **env_updates)
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


def _probe(proc):
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_env_var_loads_the_plugin_in_a_fresh_process():
    out = _probe(_run({"VERL_USE_EXTERNAL_MODULES": "ict.integrations.verl",
                       "VERL_USE_EXTERNAL_PLUGINS": "none"}))  # fmt: skip
    assert out == {"losses": sorted(LOSS_MODES), "patched": [True] * 4}


@pytest.mark.slow
def test_without_the_plugin_nothing_is_registered():
    out = _probe(_run({"VERL_USE_EXTERNAL_PLUGINS": "none"}))
    assert out == {"losses": [], "patched": [False] * 4}


@pytest.mark.slow
def test_entry_point_group_verl_plugins_loads_the_plugin(tmp_path):
    """The `verl.plugins` entry point (what pyproject declares) as a distribution on sys.path."""
    dist = tmp_path / "ict_verl_probe-0.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ict-verl-probe\nVersion: 0.0.0\n")
    (dist / "entry_points.txt").write_text("[verl.plugins]\nict_probe = ict.integrations.verl\n")
    out = _probe(_run({"VERL_USE_EXTERNAL_PLUGINS": "ict_probe"}, extra_path=tmp_path))
    assert out == {"losses": sorted(LOSS_MODES), "patched": [True] * 4}


@pytest.mark.slow
def test_installed_ict_declares_the_verl_plugin_entry_point():
    eps = [ep for ep in entry_points(group="verl.plugins") if ep.value == "ict.integrations.verl"]
    if not eps:
        pytest.skip(
            'pyproject.toml lacks [project.entry-points."verl.plugins"] ict = "ict.integrations.verl"'
        )
    out = _probe(_run({"VERL_USE_EXTERNAL_PLUGINS": eps[0].name}))
    assert out == {"losses": sorted(LOSS_MODES), "patched": [True] * 4}


def test_version_guard_names_the_problem_and_the_fix(monkeypatch):
    assert check_verl_version("0.9.1") == "0.9.1"
    with pytest.raises(
        ConfigError, match=r"supports verl 0\.9\.1 but found verl 0\.8\.0.*verl==0\.9\.1"
    ):
        check_verl_version("0.8.0")
    monkeypatch.setenv("ICT_VERL_SKIP_VERSION_CHECK", "1")
    assert check_verl_version("0.10.0") == "0.10.0"
    assert SUPPORTED_VERL_VERSIONS == ("0.9.1",)


@pytest.mark.slow
def test_fake_verl_version_fails_loudly_in_a_fresh_process():
    code = "import verl; verl.__version__ = '0.10.0'\nimport ict.integrations.verl"
    proc = _run({"VERL_USE_EXTERNAL_PLUGINS": "none"}, code=code)
    assert proc.returncode != 0
    assert "supports verl 0.9.1 but found verl 0.10.0" in proc.stderr
    assert "ict verl plugin not loaded" in proc.stderr  # logged: verl hides plugin errors


def test_config_section_is_read_and_checked():
    from omegaconf import OmegaConf

    base = {
        "actor_rollout_ref": {
            "actor": {"policy_loss": {"loss_mode": "ict_stapo"}, "strategy": "fsdp2"}
        }
    }
    spec = from_verl_config(
        OmegaConf.create({**base, "ict": {"selector_options": {"prob_below": 0.02}}})
    )
    assert spec.method == "stapo" and spec.selector == "not_spurious"
    assert spec.selector_options == {"prob_below": 0.02}
    assert spec.ratio is None and spec.resolved().normalize_by == "selected" and not spec.needs_js
    assert (
        from_verl_config(OmegaConf.create({"actor_rollout_ref": {"actor": {}}})) is None
    )  # vanilla
    ict = from_verl_config(
        OmegaConf.create(
            {**base, "ict": {"method": "ict+stapo", "ratio": 0.2, "reference": "batch_mean"}}
        )
    )
    want = {"reference": "batch_mean", "chunk_size": 1024, "divergence": "js"}
    assert ict.needs_js and ict.stats_request() == want
    # the earlier key `selector` still names the method
    old = {"selector": "ict+stapo", "reference": "batch_mean"}
    assert from_verl_config(OmegaConf.create({**base, "ict": old})).method == "ict+stapo"
    # ict.method=ict is the paper's ICT (ict.methods): group_position, per response, Sparse-GRPO
    paper = {**base, "actor_rollout_ref": {"actor": {"policy_loss": {"loss_mode": "ict"}}}}
    spec = from_verl_config(OmegaConf.create(paper))
    m = spec.resolved()
    assert (m.reference, m.scope, m.loss_agg, m.dense_warmup_steps, m.ratio) == (
        "group_position", "sequence", "seq_mean_token_mean", 10, 0.10,
    )  # fmt: skip
    assert spec.stats_request()["reference"] == "group_position"
    kl = from_verl_config(OmegaConf.create({**paper, "ict": {"method": "ict_kl"}}))
    assert kl.stats_request()["divergence"] == "kl"
    with pytest.raises(
        ConfigError, match="ict.reference='sequence_mean'.* is not supported on verl"
    ):
        from_verl_config(OmegaConf.create({**paper, "ict": {"reference": "sequence_mean"}}))
    with pytest.raises(ConfigError, match="ict.scope='rank' is unknown"):
        from_verl_config(OmegaConf.create({**base, "ict": {"scope": "rank"}}))
    with pytest.raises(ConfigError, match="keeps no top fraction"):
        from_verl_config(OmegaConf.create({**base, "ict": {"ratio": 0.2}}))
    with pytest.raises(ConfigError, match="unknown key"):
        from_verl_config(OmegaConf.create({**base, "ict": {"ration": 0.1}}))
    with pytest.raises(ConfigError, match="ratio"):
        from_verl_config(OmegaConf.create({**base, "ict": {"ratio": 1.5}}))
    fused = OmegaConf.create(
        {
            **base,
            "actor_rollout_ref": {
                **base["actor_rollout_ref"],
                "model": {"use_fused_kernels": True},
            },
        }
    )
    with pytest.raises(ConfigError, match="use_fused_kernels=False"):
        from_verl_config(fused)
    sp = OmegaConf.create(base)
    sp.actor_rollout_ref.actor.fsdp_config = {"ulysses_sequence_parallel_size": 2}
    with pytest.raises(ConfigError, match="ulysses_sequence_parallel_size=1"):
        from_verl_config(sp)


def test_the_verl_section_is_the_shared_method_options():
    import dataclasses

    from ict.errors import ConfigError
    from ict.integrations.verl.config import IctVerlConfig, validate
    from ict.methods import MethodOptions, resolve_method
    from ict.train import TrainConfig

    assert issubclass(IctVerlConfig, MethodOptions)
    shared = {f.name for f in dataclasses.fields(MethodOptions)}
    assert shared <= {f.name for f in dataclasses.fields(IctVerlConfig)}
    with pytest.raises(ConfigError, match=r"^ict.ratio=1.5 must be in \(0, 1\]"):
        validate(IctVerlConfig(ratio=1.5))
    assert resolve_method(IctVerlConfig(method="random_sequence")) == resolve_method(
        TrainConfig(method="random_sequence")
    )
    # a method's own warm-up takes at most half of verl's total_training_steps
    assert IctVerlConfig(method="ict").run_method(8).dense_warmup_steps == 4
    assert IctVerlConfig(method="ict", dense_warmup_steps=8).run_method(8).dense_warmup_steps == 8


def test_a_methods_clip_range_and_verls_kl_term_are_checked():
    """A method that fixes its clip range (Clip-Cov's authors' 1/1) needs verl's actor clip ratios
    to say so; verl's own KL loss must aggregate as the method's loss does. One line each."""
    from omegaconf import OmegaConf

    def cfg(loss_mode, **actor):
        policy = {"policy_loss": {"loss_mode": loss_mode}, "strategy": "fsdp", **actor}
        return OmegaConf.create({"actor_rollout_ref": {"actor": policy}})

    with pytest.raises(
        ConfigError, match=r"clip range 1 / 1.*clip_ratio_low=1 and clip_ratio_high=1"
    ):
        from_verl_config(cfg("ict_clip_cov"))  # verl's default 0.2 / 0.2
    spec = from_verl_config(cfg("ict_clip_cov", clip_ratio_low=1.0, clip_ratio_high=1.0))
    assert (spec.resolved().eps_low, spec.resolved().eps_high) == (1.0, 1.0)
    from_verl_config(cfg("ict_kl_cov", clip_ratio_high=0.28))  # KL-Cov: no ratio clip, no range
    from_verl_config(cfg("ict", clip_ratio_high=0.28))  # a method without its own range: verl's
    with pytest.raises(ConfigError, match="loss_agg_mode=seq-mean-token-mean"):
        from_verl_config(cfg("ict", use_kl_loss=True))  # ICT's Sparse-GRPO vs verl's token-mean
    from_verl_config(cfg("ict", use_kl_loss=True, loss_agg_mode="seq-mean-token-mean"))
    from_verl_config(cfg("ict_kl_cov", use_kl_loss=True))  # KL-Cov: token mean, as verl's default


def test_icts_advantage_estimators_run_through_verls_compute_advantage():
    """verl's driver step (`compute_advantage`) with `adv_estimator=w_reinforce` / nsr / psr /
    dr_grpo runs ict's estimator (ict.loss.compute_advantages) on the summed token rewards, per
    prompt uid, on the response tokens; verl's own grpo stays verl's."""
    import numpy as np
    import torch
    from verl import DataProto
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from ict.integrations.verl.advantages import register_advantages, verl_advantages
    from ict.loss import compute_advantages

    assert register_advantages() == ["dr_grpo", "psr", "nsr", "w_reinforce", "passk"]
    assert ADV_ESTIMATOR_REGISTRY["grpo"] is not verl_advantages
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]] * 2, dtype=torch.float32)
    correct = torch.tensor([1.0, 0, 0, 1, 0, 0, 0, 0])  # the second prompt: all wrong
    rewards = torch.zeros(8, 3)
    rewards[torch.arange(8), mask.sum(-1).long() - 1] = correct  # on the last response token
    uids = np.array(["a"] * 4 + ["b"] * 4, dtype=object)
    for name in ("w_reinforce", "nsr", "psr", "dr_grpo", "passk"):
        data = DataProto.from_dict(
            tensors={"token_level_rewards": rewards, "response_mask": mask},
            non_tensors={"uid": uids},
        )
        out = compute_advantage(data, adv_estimator=name, num_repeat=4)
        want, _ = compute_advantages(correct, torch.arange(8) // 4, mode=name)
        torch.testing.assert_close(out.batch["advantages"], want[:, None] * mask)
    by_hand = {"w_reinforce": [0.1, -1, -1, 0.1], "nsr": [0, -1, -1, 0], "psr": [1, 0, 0, 1]}
    for name, first in by_hand.items():
        got, _ = ADV_ESTIMATOR_REGISTRY[name](
            token_level_rewards=rewards, response_mask=mask, index=uids, config=None
        )
        assert got[:4, 0].tolist() == pytest.approx(first)


def test_a_methods_advantage_must_be_verls_adv_estimator():
    from omegaconf import OmegaConf

    def cfg(loss_mode, estimator, **ict):
        actor = {"policy_loss": {"loss_mode": loss_mode}, "strategy": "fsdp"}
        return OmegaConf.create({"actor_rollout_ref": {"actor": actor}, "ict": ict,
                                 "algorithm": {"adv_estimator": estimator}})  # fmt: skip

    with pytest.raises(ConfigError, match="set algorithm.adv_estimator=w_reinforce"):
        from_verl_config(cfg("ict_w_reinforce", "grpo"))
    assert from_verl_config(cfg("ict_nsr", "nsr")).resolved().advantage == "nsr"
    with pytest.raises(ConfigError, match="set algorithm.adv_estimator=psr"):
        from_verl_config(cfg("ict_grpo", "grpo", advantage="psr"))
    from_verl_config(cfg("ict", "grpo_passk"))  # a grpo method leaves verl's estimator free
    # verl's own grpo_passk, exposed as it is (not rewritten): named by ict.advantage, run by verl
    assert from_verl_config(cfg("ict_grpo", "grpo_passk", advantage="grpo_passk"))
    with pytest.raises(ConfigError, match="set algorithm.adv_estimator=grpo_passk"):
        from_verl_config(cfg("ict_grpo", "grpo", advantage="grpo_passk"))
    with pytest.raises(ConfigError, match="set algorithm.adv_estimator=passk"):
        from_verl_config(cfg("ict", "grpo_passk", method="passk"))
