"""verl 0.9.1's own driver, end to end, with the plugin: `python -m verl.trainer.main_ppo` through
examples/verl/run_single_node.sh (its CPU twin: e2e_fixtures/launch.py), Ray in local mode, one
process per role, a tiny offline Llama, 2 GRPO steps of 2 prompts x 4 samples x <= 8 tokens.

Four runs (two at a time): ICT (`loss_mode=ict`), Clip-Cov (`ict_clip_cov`), GRPO through the plugin
(`ict_grpo`) and verl's own `vanilla` loss; and verl's default v1 trainer, refused at start-up.
The CPU platform, the HF-sampler rollout and the Ray settings are test fixtures (e2e_fixtures/).
"""

from __future__ import annotations

import math
import os
import subprocess
import time

import pytest

pytest.importorskip("verl")

from e2e_fixtures import launch  # noqa: E402

from ict.integrations.verl.config import V1_REFUSAL  # noqa: E402

pytestmark = pytest.mark.verl

RESPONSES = launch.PROMPTS_PER_STEP * launch.ROLLOUT_N  # rollouts per step
ICT_RATIO = 0.10  # the paper's ICT keeps ceil(10% of each response's length) tokens
RUNS = {
    "ict": ("ict",),
    # a covariance window every token falls in, so Clip-Cov has candidates to cut on this model
    "clip_cov": ("ict_clip_cov", "+ict.clip_cov_lb=-1000"),
    # the shipped config aggregates token-mean; ict_grpo would default to ict's seq_mean_token_mean
    "grpo": ("ict_grpo", "+ict.loss_agg=token_mean"),
    "vanilla": ("vanilla",),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    # two at a time (~4 GB of memory each); ICT_VERL_E2E_JOBS=4 where memory allows
    jobs = int(os.environ.get("ICT_VERL_E2E_JOBS", "2"))
    return launch.run_all(tmp_path_factory.mktemp("verl-e2e"), RUNS, jobs=jobs)


def _common_checks(steps):
    """Two steps, each with a finite non-zero gradient, and the rollout's log-probs equal to the
    actor's recomputed ones (float32 on both sides: verl's own comparison metrics)."""
    assert [s["training/global_step"] for s in steps] == [1, 2]
    for s in steps:
        assert math.isfinite(s["actor/grad_norm"]) and s["actor/grad_norm"] > 0
        assert math.isfinite(s["actor/pg_loss"])
        assert s["training/rollout_probs_diff_valid"] == 1
        assert s["training/rollout_probs_diff_max"] < 1e-6
        assert abs(s["rollout_corr/kl"]) < 1e-6
        # every rollout has 1..8 response tokens (verl's counts) and the plugin saw all of them
        assert 1 <= s["response_length/min"] <= s["response_length/max"] <= launch.RESPONSE_LENGTH
        assert s["ict/valid_tokens"] == pytest.approx(s["response_length/mean"] * RESPONSES)
        for key, value in s.items():
            if key.startswith(("ict/", "actor/ict/")):
                assert math.isfinite(value), key


@pytest.mark.slow
def test_ict_dense_warmup_then_sparse_selection(runs):
    step1, step2 = steps = runs["ict"]["steps"]
    _common_checks(steps)
    # every metric group of the plugin is logged
    for group in ("ict/valid/", "ict/selected/", "ict/by_selector/", "ict/paper/", "ict/overlap/"):
        assert any(k.startswith(group) for k in step2), group
    # step 1: the dense warm-up (the method's 10 steps, capped at half of a 2-step run)
    assert step1["ict/dense_warmup"] == 1.0
    assert step1["ict/selected_fraction"] == 1.0 and step1["actor/ict/selected_fraction"] == 1.0
    # step 2: ceil(0.1 * L) tokens of each response, i.e. one, since 1 <= L <= 8
    assert step2["ict/dense_warmup"] == 0.0
    lengths_ok = 1 <= step2["response_length/min"] and step2["response_length/max"] <= 10
    assert lengths_ok and math.ceil(ICT_RATIO * step2["response_length/max"]) == 1
    expected = RESPONSES / step2["ict/valid_tokens"]
    assert step2["ict/selected_fraction"] == pytest.approx(expected)
    # what the loss in the worker received is the driver's selection
    assert step2["actor/ict/selected_fraction"] == pytest.approx(expected)
    assert step2["ict/selected/js"] > step2["ict/valid/js"] > 0  # the top-JS tokens


@pytest.mark.slow
def test_clip_cov_cuts_one_token_per_update(runs):
    steps = runs["clip_cov"]["steps"]
    _common_checks(steps)
    for s in steps:  # GRPO on every valid token, no warm-up, with the Clip-Cov loss mode
        assert s["ict/dense_warmup"] == 0.0 and s["ict/selected_fraction"] == 1.0
        # Clip-Cov cuts max(1, int(2e-4 * N)) = 1 of the N tokens of the update's one micro-batch
        # (the step keys every engine logs: ict.integrations.verl.metrics)
        assert s["loss_mode/changed_tokens"] == 1 and s["loss_mode/nominal_rate"] == 2e-4
        assert s["loss_mode/changed_rate"] == pytest.approx(1 / s["ict/valid_tokens"])


@pytest.mark.slow
def test_grpo_through_the_plugin_equals_verls_vanilla_loss(runs):
    ours, verls = runs["grpo"]["steps"], runs["vanilla"]["steps"]
    _common_checks(ours)
    assert not any(k.startswith("ict/") for k in verls[0])  # the plugin stays out of vanilla
    for mine, theirs in zip(ours, verls, strict=True):
        assert mine["ict/selected_fraction"] == 1.0
        for key in (
            "response_length/mean", "critic/score/mean", "critic/advantages/mean",
            "critic/advantages/max", "actor/entropy", "actor/grad_norm", "actor/pg_loss",
            "actor/pg_clipfrac", "actor/ppo_kl",
        ):  # fmt: skip
            assert mine[key] == pytest.approx(theirs[key], rel=1e-5, abs=1e-7), key


@pytest.mark.slow
def test_verls_default_v1_trainer_is_refused_in_one_line_before_any_worker(tmp_path):
    model, data = launch.write_inputs(tmp_path)
    overrides = launch.cpu_overrides(model, data, tmp_path / "metrics.jsonl")
    cmd = ["bash", str(launch.SCRIPT), "0.5b", "ict", *overrides, "trainer.use_v1=true"]
    began = time.monotonic()
    proc = subprocess.run(
        cmd, env=launch.environment(tmp_path / "m.jsonl"), cwd=tmp_path, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0
    lines = [line for line in log.splitlines() if "trainer.use_v1=false" in line]
    assert len(lines) == 1 and lines[0].endswith(V1_REFUSAL), log[-3000:]
    assert "ray init kwargs" not in log and "TaskRunner" not in log  # Ray never started
    assert time.monotonic() - began < 240


def test_verls_start_up_check_carries_the_plugins_config_checks():
    """verl's own validate_config (main_ppo's start-up check) refuses the v1 trainer and bad ict
    settings once the plugin is loaded; the shipped config passes it."""
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    import ict.integrations.verl  # noqa: F401  (the patches)
    from ict.errors import ConfigError

    config_dir = str(launch.SCRIPT.parent / "config")

    def check(*overrides):
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            cfg = compose(config_name="ict_dapo", overrides=list(overrides))
        validate_config(cfg, need_reference_policy(cfg), need_critic(cfg))

    check()  # the shipped config: legacy trainer, every requirement met
    with pytest.raises(ConfigError, match="set trainer.use_v1=false"):
        check("trainer.use_v1=true")
    with pytest.raises(ConfigError, match="use_fused_kernels=False"):
        check("actor_rollout_ref.model.use_fused_kernels=true")
    check("trainer.use_v1=true", "actor_rollout_ref.actor.policy_loss.loss_mode=vanilla")
