"""The driver-side wrappers around verl's own RayPPOTrainer methods, with a fake worker group:
statistics requested and kept in the batch, then a global selection sent with the update."""

import types

import pytest
import torch

pytest.importorskip("verl")
from verl_helpers import packed_logits  # noqa: E402

import ict.integrations.verl  # noqa: E402,F401
from ict.integrations.verl import loss as verl_loss  # noqa: E402
from ict.integrations.verl.hooks import _OldPolicyPass, score_micro_batch  # noqa: E402

pytestmark = pytest.mark.verl

V = 9


def _config(loss_mode="ict"):
    from omegaconf import OmegaConf

    return OmegaConf.create({
        "actor_rollout_ref": {
            "actor": {"policy_loss": {"loss_mode": loss_mode}, "strategy": "fsdp", "calculate_entropy": False,
                      "entropy_coeff": 0.0, "ppo_mini_batch_size": 2, "ppo_epochs": 1, "data_loader_seed": 1,
                      "shuffle": False, "calculate_sum_pi_squared": False},
            "rollout": {"n": 2, "temperature": 1.0, "multi_turn": {"enable": False}},
        },
        # batch-mean ICT over the whole batch, no warm-up (the paper's group_position is refused)
        "ict": {"ratio": 0.25, "reference": "batch_mean", "scope": "global", "dense_warmup_steps": 0},
    })  # fmt: skip


class FakeWorkers:
    """Plays the actor workers: the old-policy pass computes the plugin's statistics."""

    def __init__(self, response_logits):
        self.response_logits = response_logits
        self.update_inputs = []
        self.requests = []

    def compute_log_prob(self, td):
        from verl.utils import tensordict_utils as tu

        request = tu.get_non_tensor_data(td, "ict_stats", None)
        self.requests.append(request)
        logits = packed_logits(td, self.response_logits)
        if request["reference"] == "group_position":  # one pass, whole groups (one micro-batch)
            state = _OldPolicyPass(4, "group_position", group_size=request["group_size"])
            out = score_micro_batch(state, logits, td)
        else:
            first = _OldPolicyPass(4)
            out = score_micro_batch(first, logits, td)
            reference = first.prob_sum / first.count
            out.update(score_micro_batch(_OldPolicyPass(4, reference=reference), logits, td))
        offsets = td["input_ids"].offsets()
        nested = {k: torch.nested.nested_tensor_from_jagged(v, offsets) for k, v in out.items()}
        zeros = torch.nested.nested_tensor_from_jagged(torch.zeros(int(offsets[-1])), offsets)
        nested.update(log_probs=zeros, entropy=zeros)
        return tu.get_tensordict(tensor_dict=nested, non_tensor_dict={"metrics": {"mfu": 0.0}})

    def update_actor(self, td):
        from verl.utils import tensordict_utils as tu

        self.update_inputs.append(td)
        return tu.get_tensordict(
            tensor_dict={}, non_tensor_dict={"metrics": {"mfu": 0.5, "pg_loss": [1.0]}}
        )


def _batch():
    from verl import DataProto

    g = torch.Generator().manual_seed(0)
    B, P, R = 4, 2, 4
    prompts = torch.randint(1, V, (B, P), generator=g)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0]])
    responses = torch.randint(1, V, (B, R), generator=g) * mask
    attention = torch.cat([torch.ones(B, P, dtype=torch.long), mask], dim=1)
    return DataProto.from_dict(meta_info={"temperature": 1.0}, tensors={
        "prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], 1),
        "attention_mask": attention, "position_ids": (attention.cumsum(-1) - 1).clamp_min(0),
        "response_mask": mask,
    }), mask.bool()  # fmt: skip


def test_old_log_prob_then_update_carry_stats_and_a_global_selection():
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from ict.stats import token_stats

    batch, mask = _batch()
    logits = torch.randn(4, 4, V, generator=torch.Generator().manual_seed(1))
    workers = FakeWorkers(logits)
    trainer = types.SimpleNamespace(config=_config(), actor_rollout_wg=workers, global_steps=3)

    old, _ = RayPPOTrainer._compute_old_log_prob(trainer, batch)
    assert workers.requests == [{"reference": "batch_mean", "chunk_size": 1024, "divergence": "js"}]
    want = token_stats(logits, batch.batch["responses"], mask, reference="batch_mean")
    torch.testing.assert_close(old.batch["ict_js"], want.js, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(old.batch["ict_entropy"], want.entropy, atol=1e-5, rtol=1e-5)
    assert "ict_stats" not in batch.meta_info and workers.compute_log_prob.__self__ is workers

    batch = batch.union(old)
    batch.batch["advantages"] = torch.linspace(-1, 1, 4)[:, None] * mask
    out = RayPPOTrainer._update_actor(trainer, batch)
    (td,) = workers.update_inputs
    from verl.utils import tensordict_utils as tu

    selected = td[verl_loss.SELECTED_KEY].bool()
    k = -(-int(mask.sum()) // 4)  # ceil(0.25 * N): global top-k by JS
    assert int(selected.sum()) == k
    assert torch.equal(
        selected, (want.js * mask >= (want.js * mask).flatten().topk(k).values[-1]) & mask
    )
    assert tu.get_non_tensor_data(td, verl_loss.NORMALIZE_KEY, None) == "selected"
    # the loss aggregates as the method says (ict: Sparse-GRPO), not verl's loss_agg_mode
    assert tu.get_non_tensor_data(td, verl_loss.LOSS_AGG_KEY, None) == "seq_mean_token_mean"
    assert "ict_js" not in td.keys()  # statistics stay on the driver
    metrics = out.meta_info["metrics"]
    assert metrics["ict/selected_fraction_batch"] == pytest.approx(k / int(mask.sum()))
    assert metrics["ict/selected/js"] > metrics["ict/valid/js"]
    assert metrics["ict/dense_warmup"] == 0.0 and "ict/overlap/ict_entropy_jaccard" in metrics


def test_the_ict_sections_loss_settings_reach_the_update():
    """`ict.*` loss-mode settings (and the method's loss mode / bonus from the loss name) travel
    from the verl config to the workers' update batch, and from there into the loss's
    MicroBatchSelection (what the engine hook builds); verl's own entropy_coeff is refused."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.utils import tensordict_utils as tu

    from ict.errors import ConfigError
    from ict.integrations.verl.config import from_verl_config
    from ict.loss import CovarianceOptions

    cfg = _config("ict_kl_cov")
    cfg.ict = {
        "kl_cov_ratio": 0.1,
        "kl_cov_coef": 2.0,
        "entropy_coef": 0.05,
        "clip_cov_ub": 4.0,
        "entropy_advantage": 0.3,
    }
    batch, mask = _batch()
    workers = FakeWorkers(torch.randn(4, 4, V, generator=torch.Generator().manual_seed(1)))
    trainer = types.SimpleNamespace(config=cfg, actor_rollout_wg=workers, global_steps=3)
    old, _ = RayPPOTrainer._compute_old_log_prob(trainer, batch)
    batch = batch.union(old)
    batch.batch["advantages"] = torch.linspace(-1, 1, 4)[:, None] * mask
    RayPPOTrainer._update_actor(trainer, batch)
    (td,) = workers.update_inputs
    settings = tu.get_non_tensor_data(td, verl_loss.LOSS_SETTINGS_KEY, None)
    assert settings == {"loss_mode": "kl_cov", "entropy_coef": 0.05, "clip_cov_ratio": 2e-4,
                        "clip_cov_lb": 1.0, "clip_cov_ub": 4.0, "kl_cov_ratio": 0.1,
                        "kl_cov_coef": 2.0, "entropy_advantage": 0.3}  # fmt: skip
    assert torch.equal(td[verl_loss.SELECTED_KEY].bool(), mask)  # kl_cov: every valid token
    assert verl_loss.LOSS_SETTINGS_KEY not in batch.meta_info  # sent, not left behind
    fields = verl_loss.settings_fields(settings)
    assert fields == {"loss_mode": "kl_cov", "entropy_coef": 0.05, "entropy_advantage": 0.3,
                      "covariance": CovarianceOptions(2e-4, 1.0, 4.0, 0.1, 2.0)}  # fmt: skip
    # the method's own settings from the loss name alone
    for name, want in (("ict_clip_cov", ("clip_cov", 0.0)), ("ict_entropy_bonus", ("vanilla", 0.01)),
                       ("ict", ("vanilla", 0.0))):  # fmt: skip
        cfg = _config(name)
        cfg.ict = {}
        if name == "ict_clip_cov":  # its authors' clip range, which verl's config must state
            cfg.actor_rollout_ref.actor.clip_ratio_low = (
                cfg.actor_rollout_ref.actor.clip_ratio_high
            ) = 1.0
        got = from_verl_config(cfg).loss_settings()
        assert (got["loss_mode"], got["entropy_coef"]) == want
    cfg = _config("ict_entropy_bonus")
    cfg.ict = {}
    cfg.actor_rollout_ref.actor.entropy_coeff = 0.01
    with pytest.raises(ConfigError, match="entropy_coeff=0.01 is verl's own entropy bonus"):
        from_verl_config(cfg)


def test_non_ict_loss_modes_leave_verl_untouched():
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    batch, _ = _batch()
    calls = []

    class Workers:
        def compute_log_prob(self, td):
            from verl.utils import tensordict_utils as tu

            calls.append(tu.get_non_tensor_data(td, "ict_stats", None))
            n = int(td["input_ids"].offsets()[-1])
            z = torch.nested.nested_tensor_from_jagged(torch.zeros(n), td["input_ids"].offsets())
            return tu.get_tensordict(
                tensor_dict={"log_probs": z, "entropy": z}, non_tensor_dict={"metrics": {"mfu": 0}}
            )

    trainer = types.SimpleNamespace(
        config=_config("vanilla"), actor_rollout_wg=Workers(), global_steps=1
    )
    old, _ = RayPPOTrainer._compute_old_log_prob(trainer, batch)
    assert calls == [None] and set(old.batch.keys()) == {"old_log_probs", "entropys"}


def _paper_config():
    cfg = _config()
    cfg.ict = {}  # ict.method from loss_mode=ict: the paper's ICT (group_position, per response)
    return cfg


def test_paper_ict_scores_group_position_on_whole_groups_then_warms_up_dense():
    import numpy as np
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from ict.stats import token_stats

    batch, mask = _batch()
    batch.non_tensor_batch["uid"] = np.array(["p", "p", "q", "q"], dtype=object)  # n = 2
    logits = torch.randn(4, 4, V, generator=torch.Generator().manual_seed(2))
    workers = FakeWorkers(logits)
    trainer = types.SimpleNamespace(
        config=_paper_config(), actor_rollout_wg=workers, global_steps=1
    )
    old, _ = RayPPOTrainer._compute_old_log_prob(trainer, batch)
    assert workers.requests[0]["reference"] == "group_position"
    assert workers.requests[0]["group_size"] == 2 and "ict_group" not in batch.batch.keys()
    groups = torch.tensor([0, 0, 1, 1])
    responses = batch.batch["responses"]
    want = token_stats(logits, responses, mask, reference="group_position", group_ids=groups)
    torch.testing.assert_close(old.batch["ict_js"], want.js, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(old.batch["ict_renyi2"], want.renyi2, atol=1e-5, rtol=1e-5)
    assert (want.js[mask] > 0).any()  # not vacuous
    # step 1 <= dense_warmup_steps (10): every valid token is updated, the ICT selection is logged
    batch = batch.union(old)
    batch.batch["advantages"] = torch.linspace(-1, 1, 4)[:, None] * mask
    out = RayPPOTrainer._update_actor(trainer, batch)
    (td,) = workers.update_inputs
    assert torch.equal(td[verl_loss.SELECTED_KEY].bool(), mask)
    metrics = out.meta_info["metrics"]
    assert metrics["ict/dense_warmup"] == 1.0 and metrics["ict/by_selector/ict/fraction"] < 1.0


def test_group_split_or_reordered_batch_is_refused_naming_the_setting():
    import numpy as np
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from ict.errors import ConfigError
    from ict.integrations.verl.hooks import whole_group_ids

    batch, _ = _batch()
    batch.non_tensor_batch["uid"] = np.array(["p", "q", "p", "q"], dtype=object)  # reordered
    workers = FakeWorkers(torch.zeros(4, 4, V))
    trainer = types.SimpleNamespace(
        config=_paper_config(), actor_rollout_wg=workers, global_steps=1
    )
    with pytest.raises(ConfigError, match="trainer.balance_batch=False"):
        RayPPOTrainer._compute_old_log_prob(trainer, batch)
    assert workers.requests == []  # refused on the driver, before any worker call
    assert torch.equal(whole_group_ids(["p", "p", "q", "q"], 2, 2), torch.tensor([0, 0, 1, 1]))
    with pytest.raises(ConfigError, match="data.train_batch_size"):
        whole_group_ids(["p", "p", "q", "q"], 2, 4)  # 4 ranks of one row each split the groups


def test_fixed_micro_batches_must_hold_whole_groups():
    from verl.utils import tensordict_utils as tu

    from ict.errors import ConfigError
    from ict.integrations.verl.hooks import _keep_groups_in_micro_batches

    batch, _ = _batch()
    td = batch.to_tensordict()
    tu.assign_non_tensor(td, use_dynamic_bsz=False, micro_batch_size_per_gpu=3)
    with pytest.raises(
        ConfigError, match="log_prob_micro_batch_size_per_gpu = 3 is not a multiple"
    ):
        _keep_groups_in_micro_batches(td, 2)
    tu.assign_non_tensor(td, use_dynamic_bsz=True)
    _keep_groups_in_micro_batches(td, 2)  # verl's own force_group_size keeps groups whole
    assert tu.get_non_tensor_data(td, "force_group_size", None) == 2


def test_the_step_metrics_reach_verls_log_under_every_engines_keys():
    """driver_metrics on what `_update_actor` returns: the worker's step keys without verl's
    "actor/" prefix, `grad_norm` the mean of verl's pre-clip `actor/grad_norm` over the step's
    updates, `zero_variance_share` from the batch's rewards and uids (groups p: 1, 1 equal; q:
    0, 1 mixed -> 1 of 2)."""
    import numpy as np
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    batch, mask = _batch()
    workers = FakeWorkers(torch.randn(4, 4, V, generator=torch.Generator().manual_seed(1)))
    trainer = types.SimpleNamespace(config=_config(), actor_rollout_wg=workers, global_steps=3)
    old, _ = RayPPOTrainer._compute_old_log_prob(trainer, batch)
    batch = batch.union(old)
    batch.batch["advantages"] = torch.linspace(-1, 1, 4)[:, None] * mask
    batch.non_tensor_batch["uid"] = np.array(["p", "p", "q", "q"], dtype=object)
    rewards = torch.zeros(4, 4)
    rewards[[0, 1, 3], 0] = 1.0  # per response: 1, 1, 0, 1
    batch.batch["token_level_rewards"] = rewards

    def update_actor(td):
        from verl.utils import tensordict_utils as tu

        step = {"mfu": 0.5, "grad_norm": [2.0, 4.0], "update/param_change_rel": [1e-3],
                "clip_fraction": [0.125],
                "loss_mode/changed_tokens": [7], "loss_mode/changed_rate": [0.25],
                "loss_mode/nominal_rate": [2e-3]}  # fmt: skip
        return tu.get_tensordict(tensor_dict={}, non_tensor_dict={"metrics": step})

    workers.update_actor = update_actor
    metrics = RayPPOTrainer._update_actor(trainer, batch).meta_info["metrics"]
    assert metrics["grad_norm"] == 3.0 and metrics["actor/grad_norm"] == [2.0, 4.0]
    assert metrics["update/param_change_rel"] == 1e-3 and metrics["loss_mode/changed_tokens"] == 7
    assert metrics["clip_fraction"] == 0.125
    assert metrics["loss_mode/changed_rate"] == 0.25 and metrics["loss_mode/nominal_rate"] == 2e-3
    assert not any(k.startswith("actor/loss_mode/") for k in metrics)
    assert metrics["zero_variance_share"] == 0.5
