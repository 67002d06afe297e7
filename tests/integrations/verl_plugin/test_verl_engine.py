"""verl's own FSDPEngineWithLMHead code path, with the plugin's wrappers, on CPU.

A bare engine (no FSDP, no GPU: a one-layer token -> logits table stands in for the model) runs
verl's real forward_backward_batch / prepare_model_inputs / prepare_model_outputs / ppo_loss in a
one-process gloo group. Checked: the old-policy pass returns the two-pass statistics equal to
ict.stats (batch_mean); the update pass back-propagates exactly ict.loss's gradient. And one
whole step of verl's driver and actor-worker code around a tiny Hugging Face model
(verl_helpers.VerlStep): an ICT step runs as many model forwards as a GRPO step.
"""

import functools
import types

import pytest
import torch

pytest.importorskip("verl")
from verl_helpers import VerlStep, actor_config, bare_engine, verl_batch  # noqa: E402

import ict.integrations.verl  # noqa: E402,F401  (registers + patches)
from ict.integrations.verl import loss as verl_loss  # noqa: E402
from ict.loss import row_counts  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.slow]

V, T_SAMPLE = 13, 0.9


class TokenTable(torch.nn.Module):
    """logits at a position depend on that position's input token only."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(
            torch.randn(V, V, generator=torch.Generator().manual_seed(0)) * 2
        )

    def forward(self, input_ids, attention_mask=None, position_ids=None, use_cache=False, **_):
        return types.SimpleNamespace(logits=self.table[input_ids])


def _engine(monkeypatch):
    return bare_engine(monkeypatch, TokenTable())


def _data(remove_padding):
    from verl.utils import tensordict_utils as tu

    g = torch.Generator().manual_seed(1)
    B, R = 6, 5
    tokens = torch.randint(0, V, (B, R), generator=g)
    lengths = torch.tensor([5, 2, 4, 1, 5, 3])
    mask = torch.arange(R)[None, :] < lengths[:, None]
    td = verl_batch([2, 1, 3, 2, 1, 2], tokens, mask, vocab=V)
    tu.assign_non_tensor(td, use_remove_padding=remove_padding, use_dynamic_bsz=False,
                         micro_batch_size_per_gpu=2, temperature=T_SAMPLE, use_fused_kernels=False)  # fmt: skip
    return td, tokens, mask


def _response_logits(engine, td, mask):
    """[B, R, V] logits that predict each response token (input token at the previous position)."""
    seq = td["input_ids"]
    prompt_lens = seq.offsets().diff() - mask.sum(-1)
    out = torch.zeros(*mask.shape, V)
    for b, ids in enumerate(seq.unbind()):
        for j in range(int(mask[b].sum())):
            out[b, j] = engine.module.table[ids[prompt_lens[b] - 1 + j]].detach()
    return out


@pytest.mark.parametrize("remove_padding", [True, False])
def test_old_policy_pass_and_update_through_verls_engine(monkeypatch, gloo, remove_padding):
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.losses import ppo_loss
    from verl.workers.utils.padding import no_padding_2_padding

    from ict.loss import policy_loss
    from ict.stats import token_stats

    engine = _engine(monkeypatch)
    td, tokens, mask = _data(remove_padding)

    # old-policy pass, as compute_log_prob runs it
    tu.assign_non_tensor(
        td, calculate_entropy=True, ict_stats={"reference": "batch_mean", "chunk_size": 4}
    )
    out = engine.infer_batch(td)
    got = {
        k: no_padding_2_padding(out["model_output"][k], td)
        for k in ("ict_entropy", "ict_renyi2", "ict_js")
    }
    old_log_probs = no_padding_2_padding(out["model_output"]["log_probs"], td).detach()
    want = token_stats(_response_logits(engine, td, mask), tokens, mask, temperature=T_SAMPLE)
    torch.testing.assert_close(got["ict_entropy"], want.entropy, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got["ict_renyi2"], want.renyi2, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got["ict_js"], want.js, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(old_log_probs, want.logprob, atol=1e-5, rtol=1e-5)

    # update pass: perturb the policy, select the top-JS third, train one mini-batch
    with torch.no_grad():
        engine.module.table.add_(
            0.3 * torch.randn(V, V, generator=torch.Generator().manual_seed(2))
        )
    selected = torch.zeros_like(mask)
    flat = torch.where(mask, want.js, -1.0).flatten()
    selected.view(-1)[flat.topk(int(mask.sum()) // 3).indices] = True
    adv = torch.linspace(-1, 1, mask.shape[0])[:, None] * mask
    train, _, _ = _data(remove_padding)
    train["old_log_probs"], train["advantages"] = old_log_probs, adv
    train[verl_loss.SELECTED_KEY] = selected
    train[verl_loss.ROW_COUNTS_KEY] = verl_loss.counts_column(row_counts(mask, selected))
    tu.assign_non_tensor(train, calculate_entropy=False, global_batch_size=mask.shape[0],
                         **{verl_loss.NORMALIZE_KEY: "selected"})  # fmt: skip
    from verl.workers.config import PolicyLossConfig

    config = actor_config(policy_loss=PolicyLossConfig(loss_mode="ict"))
    engine.module.zero_grad()
    engine.forward_backward_batch(
        train, functools.partial(ppo_loss, config=config), forward_only=False
    )
    got_grad = engine.module.table.grad.clone()

    engine.module.zero_grad()
    logp = torch.log_softmax(_response_logits_grad(engine, td, mask) / T_SAMPLE, -1)
    logp = logp.gather(-1, tokens[..., None]).squeeze(-1)
    loss, _ = policy_loss(
        logp, old_log_probs, adv, mask, selected, dual_clip=3.0, loss_agg="token_mean"
    )
    loss.backward()
    torch.testing.assert_close(got_grad, engine.module.table.grad, atol=1e-6, rtol=1e-5)
    assert got_grad.abs().sum() > 0


@pytest.mark.parametrize("remove_padding", [True, False])
def test_loss_mode_and_entropy_bonus_through_verls_engine(monkeypatch, gloo, remove_padding):
    """The update pass with the driver's loss settings (`ict_loss_settings`: KL-Cov with the
    `ict:` section's ratio and coefficient, an entropy bonus): the hook turns on verl's entropy
    and hands it to the loss; the gradient equals ict.loss.policy_loss's over verl's 3
    micro-batches (the covariance is per loss call, as natively), with the mini-batch normaliser."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.config import PolicyLossConfig
    from verl.workers.utils.losses import ppo_loss

    from ict.integrations.verl.config import IctVerlConfig
    from ict.loss import LossConfig, policy_loss

    engine = _engine(monkeypatch)
    td, tokens, mask = _data(remove_padding)
    logits = _response_logits(engine, td, mask)
    old_log_probs = torch.log_softmax(logits / T_SAMPLE, -1).gather(-1, tokens[..., None])[..., 0]
    old_log_probs = old_log_probs * mask
    with torch.no_grad():
        engine.module.table.add_(
            0.3 * torch.randn(V, V, generator=torch.Generator().manual_seed(2))
        )
    spec = IctVerlConfig(method="kl_cov", kl_cov_ratio=0.25, kl_cov_coef=2.0, entropy_coef=0.05)
    settings = spec.loss_settings()
    assert settings["loss_mode"] == "kl_cov" and settings["kl_cov_ratio"] == 0.25
    adv = torch.linspace(-1, 1, mask.shape[0])[:, None] * mask
    train, _, _ = _data(remove_padding)
    train["old_log_probs"], train["advantages"] = old_log_probs, adv
    train[verl_loss.SELECTED_KEY] = mask.clone()  # kl_cov updates every valid token
    train[verl_loss.ROW_COUNTS_KEY] = verl_loss.counts_column(row_counts(mask, mask))
    tu.assign_non_tensor(train, calculate_entropy=False, global_batch_size=mask.shape[0],
                         **{verl_loss.NORMALIZE_KEY: "selected", verl_loss.LOSS_AGG_KEY: "token_mean",
                            verl_loss.LOSS_SETTINGS_KEY: settings})  # fmt: skip
    config = actor_config(policy_loss=PolicyLossConfig(loss_mode="ict_kl_cov"))
    assert config.entropy_coeff == 0  # verl's own bonus stays off: the loss computes ict's
    engine.module.zero_grad()
    engine.forward_backward_batch(
        train, functools.partial(ppo_loss, config=config), forward_only=False
    )
    got_grad = engine.module.table.grad.clone()

    engine.module.zero_grad()
    logp_all = torch.log_softmax(_response_logits_grad(engine, td, mask) / T_SAMPLE, -1)
    logp = logp_all.gather(-1, tokens[..., None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    # no dual clip: verl's clip_ratio_c is the vanilla loss's only (KL-Cov has none)
    lc = LossConfig(loss_agg="token_mean", loss_mode="kl_cov", kl_cov_ratio=0.25,
                    kl_cov_coef=2.0, entropy_coef=0.05)  # fmt: skip
    total, changed = 0.0, 0.0
    for rows in torch.arange(mask.shape[0]).split(2):  # verl's micro-batches of 2 rows
        part, metrics = policy_loss(
            logp[rows], old_log_probs[rows], adv[rows], mask[rows], mask[rows], lc,
            entropy=entropy[rows], denominator=lc.denominator(mask),
        )  # fmt: skip
        total, changed = total + part, changed + metrics["loss_mode/changed_tokens"]
    total.backward()
    assert changed > 0  # KL-Cov penalised tokens (not vacuous)
    torch.testing.assert_close(got_grad, engine.module.table.grad, atol=1e-6, rtol=1e-5)
    # the bonus is in it: without it the gradient differs
    engine.module.zero_grad()
    logp_all = torch.log_softmax(_response_logits_grad(engine, td, mask) / T_SAMPLE, -1)
    logp = logp_all.gather(-1, tokens[..., None]).squeeze(-1)
    plain = sum(
        policy_loss(logp[r], old_log_probs[r], adv[r], mask[r], mask[r], lc, entropy_coef=0.0,
                    denominator=lc.denominator(mask))[0]
        for r in torch.arange(mask.shape[0]).split(2)
    )  # fmt: skip
    plain.backward()
    assert not torch.allclose(got_grad, engine.module.table.grad)


def _response_logits_grad(engine, td, mask):
    seq = td["input_ids"]
    prompt_lens = seq.offsets().diff() - mask.sum(-1)
    index = torch.zeros(mask.shape, dtype=torch.long)
    for b, ids in enumerate(seq.unbind()):
        n = int(mask[b].sum())
        index[b, :n] = ids[prompt_lens[b] - 1 : prompt_lens[b] - 1 + n]
    return engine.module.table[index]


@pytest.mark.parametrize("remove_padding", [True, False])
def test_group_position_pass_through_verls_engine(monkeypatch, gloo, remove_padding):
    """The paper's score in one old-policy pass through verl's own micro-batching (2 rows per
    micro-batch = whole groups of rollout.n = 2): equal to ict.stats on the whole batch."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import no_padding_2_padding

    from ict.errors import ConfigError
    from ict.stats import token_stats

    engine = _engine(monkeypatch)
    td, tokens, mask = _data(remove_padding)
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    td["ict_group"] = groups
    request = {"reference": "group_position", "chunk_size": 4, "group_size": 2, "divergence": "kl"}
    tu.assign_non_tensor(td, calculate_entropy=True, ict_stats=request)
    out = engine.infer_batch(td)
    keys = ("ict_entropy", "ict_renyi2", "ict_js", "ict_kl")
    got = {k: no_padding_2_padding(out["model_output"][k], td) for k in keys}
    want = token_stats(_response_logits(engine, td, mask), tokens, mask, temperature=T_SAMPLE,
                       reference="group_position", group_ids=groups, divergence="kl")  # fmt: skip
    for key, field in zip(keys, ("entropy", "renyi2", "js", "kl"), strict=True):
        torch.testing.assert_close(got[key], getattr(want, field), atol=1e-5, rtol=1e-5)
    assert (want.js[mask] > 0).any()

    # 3 rows per micro-batch would split a group: refused, naming the setting
    td, _, _ = _data(remove_padding)
    td["ict_group"] = groups
    tu.assign_non_tensor(td, calculate_entropy=True, ict_stats=request, micro_batch_size_per_gpu=3)
    with pytest.raises(ConfigError, match="log_prob_micro_batch_size_per_gpu = 3"):
        engine.infer_batch(td)


def test_step_metrics_through_verls_train_batch(monkeypatch, gloo):
    """Two updates of one step through verl's own `train_batch` (forward_backward_batch, then
    its optimizer_step): the plugin's wrapper adds, on the step's last update (verl's
    `update_lr_scheduler`), `update/param_change_rel` over both updates (checked against a copy
    taken by hand) and KL-Cov's `loss_mode/*` counts over the step's 6 loss calls (3 micro-batches
    per update, each max(1, int(0.25 |M|)) tokens)."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.config import PolicyLossConfig
    from verl.workers.utils.losses import ppo_loss

    from ict.integrations.verl import metrics
    from ict.integrations.verl.config import IctVerlConfig
    from ict.loss.modes import mode_count

    engine = _engine(monkeypatch)
    td, tokens, mask = _data(remove_padding=True)
    logits = _response_logits(engine, td, mask)
    old = torch.log_softmax(logits / T_SAMPLE, -1).gather(-1, tokens[..., None])[..., 0] * mask
    spec = IctVerlConfig(method="kl_cov", kl_cov_ratio=0.25)
    config = actor_config(policy_loss=PolicyLossConfig(loss_mode="ict_kl_cov"))
    before = engine.module.table.detach().clone()
    outputs = []
    for last in (False, True):
        train, _, _ = _data(remove_padding=True)
        train["old_log_probs"] = old
        train["advantages"] = torch.linspace(-1, 1, mask.shape[0])[:, None] * mask
        train[verl_loss.SELECTED_KEY] = mask.clone()
        train[verl_loss.ROW_COUNTS_KEY] = verl_loss.counts_column(row_counts(mask, mask))
        tu.assign_non_tensor(train, calculate_entropy=False, global_batch_size=mask.shape[0],
                             update_lr_scheduler=last,
                             **{verl_loss.NORMALIZE_KEY: "selected",
                                verl_loss.LOSS_AGG_KEY: "token_mean",
                                verl_loss.LOSS_SETTINGS_KEY: spec.loss_settings()})  # fmt: skip
        outputs.append(engine.train_batch(train, functools.partial(ppo_loss, config=config)))
    first, second = (o["metrics"] for o in outputs)
    assert "update/param_change_rel" not in first and "loss_mode/changed_tokens" not in first
    step = {k: v for k, v in second.items() if k in metrics.STEP_KEYS}
    # one-element lists, as verl's micro-batch metrics (its worker flattens lists of lists)
    assert all(isinstance(v, list) and len(v) == 1 for v in step.values()), step
    step = {k: v[0] for k, v in step.items()}
    after = engine.module.table.detach()
    want = float((after - before).double().norm() / before.double().norm())
    assert step["update/param_change_rel"] == pytest.approx(want, rel=1e-9) and want > 0
    calls = [int(mask[rows].sum()) for rows in torch.arange(mask.shape[0]).split(2)] * 2
    changed = sum(mode_count(0.25, n) for n in calls)
    assert step["loss_mode/changed_tokens"] == changed
    assert step["loss_mode/changed_rate"] == pytest.approx(changed / sum(calls))
    assert step["loss_mode/nominal_rate"] == 0.25
    assert 0.0 <= step["clip_fraction"] <= 1.0  # checked against native: test_verl_loss.py
    assert "grad_norm" in second  # verl's own: the total norm before clipping


def test_the_steps_first_update_is_on_policy_through_verls_train_batch(monkeypatch, gloo):
    """The step's first update (verl's train_batch, through the plugin's wrapper) uses the update
    pass's own log-probs as the old ones: its gradient does not depend on the old_log_probs the
    batch carries (here 0.3 nats below or 0.2 above the current ones: verl's separate
    old-log-prob pass differs from the update pass by rounding only, which this exaggerates),
    while the plain forward_backward_batch (a later update) does use them."""
    import copy

    from verl.utils import tensordict_utils as tu
    from verl.workers.config import PolicyLossConfig
    from verl.workers.utils.losses import ppo_loss

    from ict.integrations.verl.config import IctVerlConfig

    start = _engine(monkeypatch).module
    td, tokens, mask = _data(remove_padding=True)
    logits = _response_logits(_engine(monkeypatch), td, mask)
    current = torch.log_softmax(logits / T_SAMPLE, -1).gather(-1, tokens[..., None])[..., 0] * mask
    spec = IctVerlConfig(method="kl_cov", kl_cov_ratio=0.25)
    config = actor_config(policy_loss=PolicyLossConfig(loss_mode="ict_kl_cov"))
    loss_fn = functools.partial(ppo_loss, config=config)

    def batch(old):
        train, _, _ = _data(remove_padding=True)
        train["old_log_probs"] = old * mask
        train["advantages"] = torch.linspace(-1, 1, mask.shape[0])[:, None] * mask
        train[verl_loss.SELECTED_KEY] = mask.clone()
        train[verl_loss.ROW_COUNTS_KEY] = verl_loss.counts_column(row_counts(mask, mask))
        tu.assign_non_tensor(train, calculate_entropy=False, global_batch_size=mask.shape[0],
                             update_lr_scheduler=True,
                             **{verl_loss.NORMALIZE_KEY: "selected",
                                verl_loss.LOSS_AGG_KEY: "token_mean",
                                verl_loss.LOSS_SETTINGS_KEY: spec.loss_settings()})  # fmt: skip
        return train

    def gradient(old, first_update):
        engine = bare_engine(monkeypatch, copy.deepcopy(start))
        if first_update:
            engine.train_batch(batch(old), loss_fn)  # the step's first (and last) update
        else:
            engine.forward_backward_batch(batch(old), loss_fn, forward_only=False)
        return engine.module.table.grad.clone()

    first = [gradient(current + shift, True) for shift in (-0.3, 0.2)]
    assert torch.equal(first[0], first[1])
    later = [gradient(current + shift, False) for shift in (-0.3, 0.2)]
    assert not torch.allclose(later[0], later[1]) and not torch.allclose(first[0], later[0])


# (loss_mode, `ict:` section): verl's own GRPO loss (the plugin stands aside), GRPO, the paper's
# ICT and 20-Entropy through the plugin, and ICT with the batch-mean reference (its second pass)
STEP_METHODS = {
    "verl_vanilla": ("vanilla", None),
    "ict_grpo": ("ict_grpo", {}),
    "ict": ("ict", {}),
    "ict_entropy": ("ict_entropy", {}),
    "ict_batch_mean": ("ict", {"reference": "batch_mean", "scope": "global"}),
}


@pytest.mark.parametrize("updates", [(1, 1), (2, 2)], ids=["on_policy", "2_mini_batches_2_epochs"])
def test_an_ict_step_runs_as_many_model_forwards_as_a_grpo_step(monkeypatch, gloo, updates):
    """Forwards of the actor model in one step of verl's own driver and worker code
    (verl_helpers.VerlStep), counted by a forward hook on the model: the plugin's statistics
    come from verl's old-log-prob forward, so GRPO (verl's own loss, or through the plugin), the
    paper's ICT and 20-Entropy all run the same forwards: one per old-log-prob micro-batch, one
    per update micro-batch; only ICT's batch_mean reference runs the old-log-prob pass twice (its
    JS needs the batch-mean distribution first). The statistics the plugin attaches equal
    ict.stats.token_stats_from_hidden on the model's own hidden states, and the old log-probs
    its log-probabilities."""
    import copy

    from verl_helpers import padded_inputs, step_batch, step_config

    from ict.head import logit_head
    from ict.stats import token_stats_from_hidden
    from ict.testing import tiny_model_and_tokenizer

    mini_batches, epochs = updates
    base = tiny_model_and_tokenizer(seed=0)[0].float()
    g = torch.Generator().manual_seed(3)
    B, R, G, vocab = 8, 6, 4, base.config.vocab_size
    tokens = torch.randint(0, vocab, (B, R), generator=g)
    mask = torch.arange(R)[None, :] < torch.randint(1, R + 1, (B,), generator=g)[:, None]
    prompt_lens = [2, 1, 3, 2, 1, 2, 3, 1]
    advantages = torch.randn(B, generator=g)[:, None] * mask
    groups = torch.arange(B) // G

    # the model's own statistics, independently of verl: its final hidden states before the
    # response positions, through its logit head
    _, input_ids, attention_mask = padded_inputs(prompt_lens, tokens, mask, vocab=vocab)
    with torch.no_grad():
        hidden = base(input_ids=input_ids, attention_mask=attention_mask,
                      position_ids=(attention_mask.cumsum(-1) - 1).clamp_min(0),
                      output_hidden_states=True).hidden_states[-1][:, -R - 1 : -1]  # fmt: skip
    want = {
        reference: token_stats_from_hidden(
            hidden,
            logit_head(base),
            tokens,
            mask,
            temperature=T_SAMPLE,
            reference=reference,
            group_ids=groups,
        )  # fmt: skip
        for reference in ("group_position", "batch_mean")
    }

    log_prob_micro, micro = G, 2  # micro-batch rows per GPU: old-log-prob pass, update
    forwards, calls = {}, {}
    for name, (loss_mode, section) in STEP_METHODS.items():
        config, actor = step_config(loss_mode, section, n=G, mini_batch=B // G // mini_batches,
                                    temperature=T_SAMPLE, epochs=epochs)  # fmt: skip
        step = VerlStep(monkeypatch, copy.deepcopy(base), config, actor, micro_batch=micro,
                        log_prob_micro_batch=log_prob_micro)  # fmt: skip
        batch = step_batch(prompt_lens, tokens, mask, vocab=vocab, group_size=G,
                           temperature=T_SAMPLE)  # fmt: skip
        old, _ = step.run(batch, advantages, step=11)
        forwards[name], calls[name] = dict(step.forwards), dict(step.calls)
        assert len(step.update_grads) == mini_batches * epochs  # verl's own mini-batch loop
        torch.testing.assert_close(old.batch["old_log_probs"], want["batch_mean"].logprob * mask,
                                   atol=1e-5, rtol=1e-5)  # fmt: skip
        if section is not None:
            reference = "batch_mean" if section.get("reference") else "group_position"
            stats = want[reference]
            keys = ("entropy", "renyi2") + (("js",) if "ict_js" in old.batch.keys() else ())
            assert ("js" in keys) == (loss_mode == "ict")
            for key in keys:
                torch.testing.assert_close(old.batch[f"ict_{key}"], getattr(stats, key) * mask,
                                           atol=1e-5, rtol=1e-5)  # fmt: skip

    grpo = {"compute_log_prob": B // log_prob_micro, "update_actor": mini_batches * epochs
            * (B // mini_batches) // micro}  # fmt: skip
    for name in ("verl_vanilla", "ict_grpo", "ict", "ict_entropy"):
        assert forwards[name] == grpo, (name, forwards[name])
    assert forwards["ict_batch_mean"] == {**grpo, "compute_log_prob": 2 * B // log_prob_micro}
    assert all(c == {"compute_log_prob": 1, "update_actor": 1} for c in calls.values()), calls
    assert (want["group_position"].js[mask] > 0).any()  # not vacuous
