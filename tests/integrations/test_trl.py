"""ict.integrations.trl on a tiny offline model: selection, gradients, loss, metrics, config errors."""

from __future__ import annotations

import math

import pytest
import torch

from ict.methods import get_method
from ict.step import selection_seed

pytest.importorskip("trl")
pytestmark = pytest.mark.trl

from _trl_helpers import recording_trainer_class, run_tiny  # noqa: E402

from ict.errors import ConfigError, UserError  # noqa: E402
from ict.integrations.trl import LOSS_AGG_TO_TRL, ICTGRPOConfig, check_trl_version  # noqa: E402
from ict.loss import policy_loss  # noqa: E402
from ict.select import select_tokens  # noqa: E402
from ict.stats import TokenStats  # noqa: E402

METHODS = ["ict", "grpo", "entropy", "stapo", "random", "ict+stapo"]
FIELDS = ("entropy", "renyi2", "logprob", "js")


def _whole_batch(records):
    """The first generation batch (its 2 recorded micro-batches), rows back in generation order."""
    first = records[:2]

    def cat(key):
        return torch.cat([r["inputs"][key] if key in r["inputs"] else r[key] for r in first])

    order = torch.argsort(cat("ict_row"))
    keys = ("ict_selected", "completion_mask", "completion_ids", "advantages", "logps", "entropies")
    out = {k: cat(k)[order] for k in keys}
    out.update({f: cat(f"ict_{f}")[order] for f in FIELDS})
    return out


def test_check_trl_version():
    check_trl_version("1.16.0")
    check_trl_version("1.17.2.dev0")
    for bad in ("1.15.9", "2.0.0", "0.19.1"):
        with pytest.raises(UserError, match=r"trl>=1\.16,<2"):
            check_trl_version(bad)


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(method="ict2"), "method='ict2' is unknown"),
        (dict(ratio=1.5), r"ratio=1.5 must be in \(0, 1\]"),
        (dict(scope="rank"), "scope='rank' is unknown"),
        (dict(method="grpo", ratio=0.1), "ratio does not apply"),
        (dict(normalize_by="valid", loss_agg="seq_mean_token_mean"), "normalize_by='valid' needs"),
        (dict(top_entropy_quantile=0.2), "top_entropy_quantile=0.2 is TRL's own entropy mask"),
        (dict(reference="reference_policy"), "set beta"),
        (dict(loss_agg="mean"), "loss_agg='mean' is unknown"),
        (dict(dense_warmup_steps=-1), "dense_warmup_steps=-1 must be an integer >= 0"),
        (dict(selector_options={"alpha": 1}), r"selector_options \['alpha'\] are not options"),
        # ict's own loss (a loss mode or an entropy bonus) refuses what it does not compute
        # ict's loss computes TRL's KL term (beta) itself, without TRL's importance weighting
        (dict(method="kl_cov", beta=0.04), r"kl_cov.* runs ict's loss.*set use_bias_correction_kl"),
        (dict(method="clip_cov", delta=3.0), r"no dual clip.*set delta=None"),
        (dict(method="clip_cov", use_vllm=True), "vllm_importance_sampling_correction=False"),
        (dict(method="entropy_bonus", use_adaptive_entropy=True), "use_adaptive_entropy=False"),
        (dict(method="clip_cov", use_adaptive_entropy=True), "use_adaptive_entropy=False"),
        (dict(method="grpo", entropy_coef=0.01, loss_type="cispo"), "'cispo' has no ict agg"),
        (dict(method="kl_cov", importance_sampling_level="sequence"), "level='token'"),
        (dict(method="clip_cov", off_policy_mask_threshold=0.5), "off_policy_mask_threshold=None"),
        (dict(method="kl_cov", top_entropy_quantile=0.2), "set top_entropy_quantile=1.0"),
        (
            dict(method="entropy_bonus", gradient_accumulation_steps=2, steps_per_generation=3),
            "steps_per_generation=3 is not a multiple",
        ),
        (dict(method="kl_cov", loss_mode="cov"), "loss_mode='cov' is unknown"),
        (dict(method="w_reinforce", scale_rewards="batch"), "leave them at 'group'"),
        (
            dict(method="grpo", advantage="psr", multi_objective_aggregation="normalize_then_sum"),
            "advantage='psr'.*leave them at",
        ),
        (dict(method="grpo", advantage="gae"), "advantage='gae' is unknown"),
        (dict(method="kl_cov", kl_cov_ratio=0.0), r"kl_cov_ratio must be in \(0, 1\]"),
    ],
)
def test_config_errors_name_the_fix(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], **overrides)


def test_config_maps_loss_agg_and_defaults(tmp_path):
    for agg, loss_type in LOSS_AGG_TO_TRL.items():
        args = ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], loss_agg=agg)
        assert args.loss_type == loss_type
    args = ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[])
    assert (args.method, args.epsilon, args.epsilon_high, args.beta) == ("ict", 0.2, 0.28, 0.0)
    # method="ict" is the paper's ICT (ict.methods): Sparse-GRPO = TRL's "grpo" loss type
    m = args.resolved_method()
    assert (args.loss_type, m.normalize_by, m.reference, m.scope, m.ratio) == (
        "grpo", "selected", "group_position", "sequence", 0.10,
    )  # fmt: skip
    assert m.dense_warmup_steps == 10
    # explicit settings override the method's; the batch-mean ablation keeps its token mean
    args = ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[],
                         reference="batch_mean", dense_warmup_steps=0)  # fmt: skip
    assert (args.resolved_method().reference, args.resolved_method().dense_warmup_steps) == (
        "batch_mean",
        0,
    )
    args = ICTGRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, report_to=[], method="ict_batch_mean"
    )
    m = args.resolved_method()
    assert (args.loss_type, m.reference, m.scope, m.selector) == (
        "dapo",
        "batch_mean",
        "global",
        "js_top",
    )
    # the clip range: TRL's epsilon / epsilon_high, None = the method's (its authors')
    for name, clip in (("entropy", (0.2, 0.28)), ("clip_cov", (1.0, 1.0)), ("kl_cov", (0.2, 0.28))):
        args = ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], method=name)
        m = args.resolved_method()
        assert (args.epsilon, args.epsilon_high) == clip == (m.eps_low, m.eps_high)
    args = ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], method="clip_cov",
                         epsilon_high=0.28)  # fmt: skip
    assert (args.epsilon, args.epsilon_high, args.resolved_method().eps_high) == (1.0, 0.28, 0.28)
    # every method runs its own aggregation: random_sequence's is ICT's per-response mean
    for name in ("random_sequence", "ict_kl", "ict_bottom", "grpo", "entropy", "stapo"):
        args = ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], method=name)
        want = get_method(name).resolved().loss_agg
        assert (args.loss_type, args.resolved_method().loss_agg) == (LOSS_AGG_TO_TRL[want], want)
    # an explicit ict-equivalent loss_type is honoured and is what the method reports
    args = ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], method="ict",
                         loss_type="dapo")  # fmt: skip
    assert (args.loss_type, args.resolved_method().loss_agg) == ("dapo", "token_mean")
    # TRL's own loss types run with the every-token method, reported as TRL's
    args = ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], method="grpo",
                         loss_type="cispo")  # fmt: skip
    assert (args.loss_type, args.resolved_method().loss_agg) == ("cispo", "trl_cispo")
    with pytest.raises(ConfigError, match="not an ict aggregation"):
        ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], loss_type="cispo")
    with pytest.raises(ConfigError, match="disagree"):
        ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], loss_type="dapo",
                      loss_agg="seq_mean_token_mean")  # fmt: skip
    with pytest.raises(ConfigError, match="steps_per_generation=3 is not a multiple"):
        ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[],
                      gradient_accumulation_steps=2, steps_per_generation=3)  # fmt: skip


def test_entropy_coef_is_icts_and_trls_own_term_stays_off(tmp_path):
    """`entropy_coef` is MethodOptions' (None: the method's), resolved in the config so that it
    reads what runs; ict computes the bonus (ict_computes_loss) and TRL's own term stays 0."""
    from ict.integrations.trl import ict_computes_loss

    def config(**kw):
        return ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], **kw)

    args = config(method="entropy_bonus")
    assert args.entropy_coef == 0.01 and args.resolved_method().entropy_coef == 0.01
    assert ict_computes_loss(args.resolved_method())
    # the resolved value, written back (a saved config, re-read), runs the same method
    again = config(method="entropy_bonus", entropy_coef=args.to_dict()["entropy_coef"])
    assert again.resolved_method() == args.resolved_method()
    args = config(method="ict", entropy_coef=0.05)
    assert args.resolved_method().entropy_coef == 0.05 and ict_computes_loss(args.resolved_method())
    args = config(method="ict")
    assert args.entropy_coef == 0.0 and not ict_computes_loss(args.resolved_method())
    assert ict_computes_loss(config(method="kl_cov").resolved_method())
    # TRL's adaptive controller: TRL's own term, entropy_coef its initial value; ict's bonus off
    args = config(method="grpo", entropy_coef=0.01, use_adaptive_entropy=True)
    assert args.entropy_coef == 0.01 and not ict_computes_loss(args.resolved_method())


@pytest.mark.parametrize("method", ["kl_cov", "entropy_bonus"])
def test_trl_runs_icts_loss_for_loss_modes_and_the_entropy_bonus(tmp_path, method):
    """A real TRL run (2 steps, 2 micro-batches each): ict's loss on TRL's own log-probs and
    entropies equals ict.loss.policy_loss with the optimizer step's normaliser; TRL's own entropy
    term is off; the loss metrics are in TRL's log."""
    from ict.loss import LossConfig

    trainer = run_tiny(tmp_path, method=method, gradient_accumulation_steps=2)
    assert trainer.entropy_coef == 0.0 and not trainer._entropy_bonus_enabled
    config = trainer.ict_loss_config(trainer.args.resolved_method())
    assert (config.loss_mode, config.entropy_coef) == {
        "kl_cov": ("kl_cov", 0.0), "entropy_bonus": ("vanilla", 0.01)}[method]  # fmt: skip
    assert len(trainer.records) == 4
    for step in (0, 1):
        records = trainer.records[2 * step : 2 * step + 2]
        masks = [r["inputs"]["completion_mask"].bool() for r in records]
        sel = [r["inputs"]["ict_selected"] for r in records]
        width = max(m.shape[1] for m in masks)
        pad = [torch.nn.functional.pad(m, (0, width - m.shape[1])) for m in masks]
        pad_sel = [torch.nn.functional.pad(m, (0, width - m.shape[1])) for m in sel]
        denominator = config.denominator(torch.cat(pad), torch.cat(pad_sel))
        for rec in records:
            inp = rec["inputs"]
            assert float(inp["ict_loss_denominator"]) == denominator
            want, _ = policy_loss(
                rec["logps"], rec["logps"], inp["advantages"], inp["completion_mask"].bool(),
                inp["ict_selected"], config, entropy=rec["entropies"], denominator=denominator,
            )  # fmt: skip
            torch.testing.assert_close(rec["loss"], want.detach(), atol=1e-6, rtol=1e-5)
    assert isinstance(config, LossConfig)
    logged = trainer.state.log_history[0]
    assert "entropy" in logged and "clip_ratio/region_mean" in logged
    # the step keys every engine logs (TRL: per optimizer step); grad_norm is transformers' own,
    # the total norm before clipping
    for key in ("grad_norm", "clip_fraction", "update/param_change_rel", "zero_variance_share"):
        assert key in logged, key
    assert logged["clip_fraction"] == logged["clip_ratio/region_mean"]
    assert logged["zero_variance_share"] == logged["frac_reward_zero_std"]
    assert logged["update/param_change_rel"] > 0
    assert ("loss_mode/changed_tokens" in logged) == (method == "kl_cov")
    if method == "kl_cov":  # the two micro-batches' changed tokens, at least one per call
        assert logged["loss_mode/changed_tokens"] >= 2
        assert logged["loss_mode/nominal_rate"] == trainer.args.kl_cov_ratio
    # TRL's `policy_loss` is the policy term: the logged loss minus the bonus (first step)
    policy = 0.0
    for rec in trainer.records[:2]:
        inp = rec["inputs"]
        denominator = float(inp["ict_loss_denominator"])
        part, _ = policy_loss(rec["logps"], rec["logps"], inp["advantages"],
                              inp["completion_mask"].bool(), inp["ict_selected"], config,
                              entropy_coef=0.0, denominator=denominator)  # fmt: skip
        policy += float(part)
    assert logged["policy_loss"] == pytest.approx(policy, abs=1e-5)


@pytest.mark.parametrize("method", ["w_reinforce", "nsr"])
def test_trl_runs_the_methods_advantages(tmp_path, method):
    """A real TRL run with a 0/1 reward: every micro-batch's advantages are the method's
    estimator's (W-REINFORCE 0.1 / -1, NSR 0 / -1; TRL's own would be group-normalised), and NSR
    trains only on the incorrect responses."""
    from _trl_helpers import binary_reward

    trainer = run_tiny(tmp_path, method=method, reward_funcs=binary_reward)
    decode = trainer.processing_class.decode
    seen = set()
    for rec in trainer.records:
        inp = rec["inputs"]
        mask = inp["completion_mask"].bool()
        for row, ids in enumerate(inp["completion_ids"]):
            reward = binary_reward([decode(ids[mask[row]], skip_special_tokens=True)])[0]
            want = {"w_reinforce": (-1.0, 0.1), "nsr": (-1.0, 0.0)}[method][int(reward)]
            assert float(inp["advantages"][row]) == pytest.approx(want)
            kept = bool(inp["ict_selected"][row].any())
            assert kept == (method == "w_reinforce" or reward == 0.0)
            seen.add(reward)
    assert seen == {0.0, 1.0}  # both kinds of response occurred


def test_trl_loss_mode_with_trls_kl_term(tmp_path):
    """A loss mode with a KL term (beta): ict's loss adds TRL's KL (k3 to TRL's reference model,
    over the loss tokens, the policy term's aggregation) next to the mode's policy term, which
    the KL does not change; equal to ict.loss.policy_loss with kl_coef = beta, k3, kl_on =
    selected, on TRL's own log-probs and reference log-probs."""
    from _trl_helpers import tiny_config, toy_dataset, toy_reward

    from ict.integrations.trl import ICTGRPOTrainer
    from ict.testing import tiny_model_and_tokenizer

    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    cls = recording_trainer_class(ICTGRPOTrainer)
    args = tiny_config(tmp_path / "run", method="kl_cov", kl_cov_ratio=0.2, beta=0.5,
                       use_bias_correction_kl=False, max_steps=2)  # fmt: skip
    trainer = cls(model=str(tmp_path / "model"), reward_funcs=toy_reward, args=args,
                  train_dataset=toy_dataset(), processing_class=tokenizer)  # fmt: skip
    trainer.train()
    config = trainer.ict_loss_config(trainer.args.resolved_method())
    assert (config.kl_coef, config.kl_estimator, config.kl_on) == (0.5, "k3", "selected")
    saw_kl = False
    for rec in trainer.records:
        inp = rec["inputs"]
        ref = inp["ref_per_token_logps"]
        kw = dict(entropy=rec["entropies"], denominator=float(inp["ict_loss_denominator"]))
        want, metrics = policy_loss(rec["logps"], rec["logps"], inp["advantages"],
                                    inp["completion_mask"].bool(), inp["ict_selected"], config,
                                    ref_logprob=ref, **kw)  # fmt: skip
        torch.testing.assert_close(rec["loss"], want.detach(), atol=1e-6, rtol=1e-5)
        without, _ = policy_loss(rec["logps"], rec["logps"], inp["advantages"],
                                 inp["completion_mask"].bool(), inp["ict_selected"], config,
                                 kl_coef=0.0, **kw)  # fmt: skip
        saw_kl = saw_kl or not torch.allclose(without, want)
        assert metrics["loss_mode/changed_tokens"] >= 1
    assert saw_kl  # the second step's policy has moved away from the reference
    assert "kl" in trainer.state.log_history[0]


def test_the_first_optimizer_step_of_a_generation_batch_is_on_policy(tmp_path):
    """steps_per_generation = 2: one generation batch feeds 2 optimizer steps and TRL keeps old
    log-probs. The first step (same weights as the generation) uses the current log-probs,
    detached (rho exactly 1: KL-Cov's |log rho| penalty has no gradient there); the second the
    old log-probs TRL kept."""
    trainer = run_tiny(tmp_path, method="kl_cov", kl_cov_ratio=0.2, max_steps=2,
                       steps_per_generation=2, per_device_train_batch_size=4)  # fmt: skip
    config = trainer.ict_loss_config(trainer.args.resolved_method())
    assert len(trainer.records) == 2
    for index, rec in enumerate(trainer.records):
        inp = rec["inputs"]
        assert inp["old_per_token_logps"] is not None  # TRL kept them for both
        old = rec["logps"] if index == 0 else inp["old_per_token_logps"]
        want, _ = policy_loss(rec["logps"], old, inp["advantages"], inp["completion_mask"].bool(),
                              inp["ict_selected"], config, entropy=rec["entropies"],
                              denominator=float(inp["ict_loss_denominator"]))  # fmt: skip
        torch.testing.assert_close(rec["loss"], want.detach(), atol=0, rtol=0)
    second = trainer.records[1]
    moved = second["logps"] - second["inputs"]["old_per_token_logps"]
    assert moved[second["inputs"]["completion_mask"].bool()].abs().max() > 1e-4  # not vacuous


def test_trl_adaptive_entropy_is_trls_own_term(tmp_path):
    """use_adaptive_entropy=True with a vanilla method: TRL's own controller runs (on the selected
    tokens), entropy_coef its initial coefficient, incremented each step below the target."""
    trainer = run_tiny(tmp_path, method="grpo", entropy_coef=0.01, use_adaptive_entropy=True,
                       entropy_target=15.0)  # fmt: skip
    assert trainer._entropy_bonus_enabled and trainer.entropy_coef > 0.01
    assert trainer.ict_loss_config(trainer.args.resolved_method()) is None  # TRL's loss
    assert "entropy_coef" in trainer.state.log_history[0]


@pytest.mark.parametrize("method", METHODS)
def test_trl_steps_train_only_selected_tokens(tmp_path, method):
    # stapo thresholds loosened so that the tiny random model has spurious tokens to silence
    # the batch-mean, global, token-mean settings, stated (not the paper's ICT defaults)
    trainer = run_tiny(
        tmp_path, method=method, gradient_accumulation_steps=2, stapo_prob_below=0.2,
        stapo_entropy_quantile=0.9, scope="global", reference="batch_mean", loss_agg="token_mean",
        dense_warmup_steps=0,
    )  # fmt: skip
    assert len(trainer.records) == 4  # 2 steps x 2 micro-batches
    batch = _whole_batch(trainer.records)
    valid = batch["completion_mask"].bool()
    selected = batch["ict_selected"]
    assert not (selected & ~valid).any()

    # ict's statistics (hidden states + LM head) agree with TRL's own fused-head log-probs and entropy
    torch.testing.assert_close(batch["logprob"], batch["logps"] * valid, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(batch["entropy"], batch["entropies"] * valid, atol=1e-4, rtol=1e-4)
    assert (batch["js"] >= 0).all() and (batch["js"] <= math.log(2) + 1e-6).all()

    # the selection over the whole generation batch equals ict.select on the same statistics
    stats = TokenStats(**{f: batch[f] for f in FIELDS})
    options = dict(prob_below=0.2, entropy_quantile=0.9) if "stapo" in method else {}
    want = select_tokens(
        get_method(method).selector,
        valid,
        stats=stats,
        advantages=batch["advantages"],
        tokens=batch["completion_ids"],
        seed=selection_seed(0, 1),  # the first generation batch's
        scope="global",
        **options,
    )
    assert torch.equal(selected, want)
    n_valid = int(valid.sum())
    expected_count = {"ict": math.ceil(0.1 * n_valid), "entropy": math.ceil(0.2 * n_valid),
                      "random": math.ceil(0.1 * n_valid), "grpo": n_valid}  # fmt: skip
    if method in expected_count:
        assert int(selected.sum()) == expected_count[method]
    if "stapo" in method:  # STAPO silenced at least one token here (thresholds loosened above)
        base = (
            want
            if method == "stapo"
            else select_tokens("js_top", valid, stats=stats, scope="global")
        )
        assert int(selected.sum()) < int((valid if method == "stapo" else base).sum())

    total_selected, signal = int(selected.sum()), False
    for rec in trainer.records[:2]:
        inp = rec["inputs"]
        sel, grad = inp["ict_selected"], rec["grad"]
        adv = inp["advantages"][:, None].expand_as(sel)
        # gradient reaches exactly the selected tokens (those with a non-zero advantage)
        assert torch.equal(grad != 0, sel & (adv != 0))
        signal = signal or bool((grad != 0).any())
        # TRL's loss on this micro-batch = native policy_loss with the global selected count
        assert float(inp["num_items_in_batch"]) == total_selected
        old = inp.get("old_per_token_logps", rec["logps"])
        want_loss, _ = policy_loss(
            rec["logps"], old, inp["advantages"], inp["completion_mask"].bool(), sel,
            eps_low=0.2, eps_high=0.28, denominator=torch.tensor(float(total_selected)),
            loss_agg="token_mean",
        )  # fmt: skip
        torch.testing.assert_close(rec["loss"], want_loss.detach(), atol=1e-6, rtol=1e-5)

    assert signal  # not vacuous: some selected token had a non-zero advantage

    logged = trainer.state.log_history[0]
    assert logged["selected_fraction"] == pytest.approx(total_selected / n_valid, abs=1e-6)
    for key in (
        "valid/entropy",
        "valid/renyi2",
        "valid/js",
        "selected/js",
        "overlap/ict_entropy_jaccard",
    ):
        assert key in logged, key
    assert logged["valid/renyi2"] <= logged["valid/entropy"] + 1e-6
    # the ICT diagnostic is the run's own selection when the method is ict, else ICT's defaults
    ict_sel = selected if method == "ict" else select_tokens("js_top", valid, stats=stats)
    ent_sel = select_tokens("entropy_top", valid, stats=stats)
    want_j = int((ict_sel & ent_sel).sum()) / int((ict_sel | ent_sel).sum())
    assert logged["overlap/ict_entropy_jaccard"] == pytest.approx(want_j, abs=1e-6)


def test_trl_grpo_method_is_plain_trl(tmp_path):
    """method='grpo' with normalize_by='valid' trains exactly like TRL's GRPOTrainer (same seed)."""
    from trl import GRPOTrainer

    ours = run_tiny(tmp_path / "a", method="grpo", normalize_by="valid", loss_agg="token_mean")
    plain = run_tiny(  # the same config object type; GRPOTrainer reads only TRL's fields of it
        tmp_path / "b", trainer_class=recording_trainer_class(GRPOTrainer), loss_agg="token_mean"
    )
    assert ours.loss_type == plain.loss_type == "dapo"
    assert len(ours.records) == len(plain.records) == 2
    for a, b in zip(ours.records, plain.records, strict=True):
        assert torch.equal(a["inputs"]["completion_ids"], b["inputs"]["completion_ids"])
        assert a["inputs"]["advantages"].abs().sum() > 0
        torch.testing.assert_close(a["loss"], b["loss"])
        torch.testing.assert_close(a["grad"], b["grad"])


@pytest.mark.parametrize(
    "loss_agg, normalize_by",
    [
        ("token_mean", "valid"),
        ("seq_mean_token_mean", "selected"),
        ("seq_mean_token_sum_norm", "selected"),
    ],
)
def test_trl_loss_aggregations_match_native_over_micro_batches(tmp_path, loss_agg, normalize_by):
    """Each micro-batch's loss is the native loss with the whole generation batch's normaliser."""
    trainer = run_tiny(
        tmp_path, method="ict", ratio=0.3, loss_agg=loss_agg, normalize_by=normalize_by,
        gradient_accumulation_steps=2, max_steps=1, scope="global", dense_warmup_steps=0,
    )  # fmt: skip
    batch = _whole_batch(trainer.records)
    valid, selected = batch["completion_mask"].bool(), batch["ict_selected"]
    denominator = {
        "token_mean": valid.sum(),  # all valid tokens of the generation batch
        "seq_mean_token_mean": selected.any(dim=1).sum(),  # responses with a selected token
        "seq_mean_token_sum_norm": valid.size(0) * trainer.args.max_completion_length,
    }[loss_agg]
    assert 0 < int(selected.any(dim=1).sum()) < valid.size(0) or loss_agg != "seq_mean_token_mean"
    for rec in trainer.records:
        inp = rec["inputs"]
        want, _ = policy_loss(
            rec["logps"], rec["logps"], inp["advantages"], inp["completion_mask"].bool(),
            inp["ict_selected"], loss_agg=loss_agg, normalize_by=normalize_by,
            max_response_length=trainer.args.max_completion_length,
            denominator=torch.as_tensor(denominator, dtype=torch.float32),
        )  # fmt: skip
        torch.testing.assert_close(rec["loss"], want.detach(), atol=1e-6, rtol=1e-5)


def test_example_script_quick_runs(tmp_path):
    """examples/trl/train_ict.py --quick: 3 offline steps, ICT metrics in TRL's log."""
    import runpy
    from pathlib import Path

    script = Path(__file__).parents[2] / "examples" / "trl" / "train_ict.py"
    main = runpy.run_path(str(script))["main"]
    trainer = main(["--quick", "--output-dir", str(tmp_path)])
    steps = [row for row in trainer.state.log_history if "selected_fraction" in row]
    assert len(steps) == 3
    # --quick: one dense warm-up step, then the paper's top 10% of each response (at least one)
    assert [row["dense_warmup"] for row in steps] == [1.0, 0.0, 0.0]
    assert steps[0]["selected_fraction"] == 1.0
    assert all(0.1 <= row["selected_fraction"] < 0.5 for row in steps[1:])


def _js(p, q):
    def h(x):
        return -(x * x.clamp_min(1e-30).log()).sum(-1)

    return h((p + q) / 2) - h(p) / 2 - h(q) / 2


def test_previous_token_reference_uses_the_last_prompt_position(tmp_path):
    """JS of each response token to the distribution one position earlier, the first one compared
    with the distribution that predicted the last prompt token; checked with full logits."""
    trainer = run_tiny(tmp_path, method="ict", reference="previous_token", max_steps=1)
    rec = trainer.records[0]["inputs"]
    # the statistics were computed before the update: recompute them with the initial weights
    from ict.testing import tiny_model_and_tokenizer

    model, _ = tiny_model_and_tokenizer(seed=0)
    ids = torch.cat([rec["prompt_ids"], rec["completion_ids"]], 1)
    att = torch.cat([rec["prompt_mask"], rec["completion_mask"]], 1)
    with torch.no_grad():
        probs = torch.softmax(model(input_ids=ids, attention_mask=att).logits.float(), -1)
    P, C = rec["prompt_ids"].size(1), rec["completion_ids"].size(1)
    p = probs[:, P - 1 : P + C - 1]  # predicts completion token t
    q = probs[:, P - 2 : P + C - 2]  # one position earlier
    want = _js(p, q) * rec["completion_mask"]
    torch.testing.assert_close(rec["ict_js"], want, atol=2e-5, rtol=1e-3)
    assert (rec["ict_js"][:, 0] > 0).all()


def test_reference_policy_reference_starts_at_zero(tmp_path):
    """reference='reference_policy' (beta > 0): JS to TRL's frozen reference model is 0 before the
    first update and positive after it."""
    from ict.testing import tiny_model_and_tokenizer

    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    from _trl_helpers import tiny_config, toy_dataset, toy_reward

    from ict.integrations.trl import ICTGRPOTrainer

    cls = recording_trainer_class(ICTGRPOTrainer)
    args = tiny_config(tmp_path / "run", reference="reference_policy", beta=0.04, max_steps=2)
    trainer = cls(model=str(tmp_path / "model"), reward_funcs=toy_reward, args=args,
                  train_dataset=toy_dataset(), processing_class=tokenizer)  # fmt: skip
    trainer.train()
    first, second = trainer.records[0]["inputs"], trainer.records[1]["inputs"]
    assert first["ict_js"].abs().max() < 1e-6
    assert second["ict_js"][second["completion_mask"].bool()].min() > 0


def test_paper_ict_dense_warmup_then_top_tenth_of_each_response(tmp_path):
    """method='ict' (the paper's): dense for the first dense_warmup_steps optimizer steps, then the
    top 10% of each response by JS to the position-aligned group mean (ict.stats group_position)."""
    trainer = run_tiny(tmp_path, method="ict", dense_warmup_steps=1, max_steps=2)
    assert trainer.args.loss_type == "grpo"
    steps = [row for row in trainer.state.log_history if "selected_fraction" in row]
    assert [row["dense_warmup"] for row in steps] == [1.0, 0.0]
    for index, rec in enumerate(trainer.records):
        inp = rec["inputs"]
        valid = inp["completion_mask"].bool()
        if index == 0:  # warm-up: every valid token, TRL's own GRPO
            assert torch.equal(inp["ict_selected"], valid)
            continue
        stats = TokenStats(**{f: inp[f"ict_{f}"] for f in FIELDS})
        want = select_tokens("js_top", valid, stats=stats)  # ict's default scope: per response
        assert torch.equal(inp["ict_selected"], want)
        counts = inp["ict_selected"].sum(-1)
        assert torch.equal(counts, torch.ceil(0.1 * valid.sum(-1)).long())


def test_group_split_across_processes_is_refused_naming_the_setting():
    from ict.integrations.trl import check_whole_groups

    check_whole_groups(8, 4, 2, "train")  # whole groups per process
    check_whole_groups(2, 4, 1, "train")  # one process holds every group
    with pytest.raises(ConfigError, match="per_device_train_batch_size \\* steps_per_generation"):
        check_whole_groups(2, 4, 2, "train")
    with pytest.raises(ConfigError, match="per_device_eval_batch_size"):
        check_whole_groups(6, 4, 2, "eval")
    with pytest.raises(ConfigError, match='reference="group_mean" needs'):  # a group's mean too
        check_whole_groups(2, 4, 2, "train", "group_mean")
    check_whole_groups(2, 4, 2, "train", "batch_mean")  # spans the batch: all-reduced over ranks
    check_whole_groups(2, 4, 2, "train", "sequence_mean")  # one row's own


def test_the_methods_own_warmup_is_capped_at_half_of_a_short_trl_run(tmp_path):
    """method='ict' with no explicit warm-up in a 4-step run: 2 dense generation batches, then the
    selection (before, the paper's 10 steps made a short TRL run plain GRPO without a word)."""
    trainer = run_tiny(tmp_path, method="ict", max_steps=4)
    steps = [row for row in trainer.state.log_history if "selected_fraction" in row]
    assert [row["dense_warmup"] for row in steps] == [1.0, 1.0, 0.0, 0.0]


def test_warmup_counts_generation_batches_when_one_feeds_two_optimizer_steps(tmp_path):
    """steps_per_generation = 2 x gradient_accumulation_steps: each generation batch feeds two
    optimizer steps; a warm-up of 1 covers the first generation batch (2 optimizer steps)."""
    trainer = run_tiny(tmp_path, method="ict", max_steps=4, dense_warmup_steps=1,
                       gradient_accumulation_steps=1, steps_per_generation=2,
                       per_device_train_batch_size=4)  # fmt: skip
    dense = [r["inputs"]["ict_selected"].sum() == r["inputs"]["completion_mask"].sum()
             for r in trainer.records]  # fmt: skip
    assert dense[:2] == [True, True] and not any(dense[2:])


def test_args_none_builds_the_ict_default_config(tmp_path, monkeypatch):
    """As TRL's GRPOTrainer does for args=None: a default config (here ICTGRPOConfig)."""
    import dataclasses

    from _trl_helpers import toy_dataset, toy_reward

    import ict.integrations.trl.config as trl_module
    from ict.integrations.trl import ICTGRPOConfig, ICTGRPOTrainer
    from ict.testing import tiny_model_and_tokenizer

    @dataclasses.dataclass
    class CpuDefaults(ICTGRPOConfig):  # TRL's own default (bf16) needs a bf16 device
        use_cpu: bool = True

    monkeypatch.setattr(trl_module, "ICTGRPOConfig", CpuDefaults)
    monkeypatch.chdir(tmp_path)
    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    trainer = ICTGRPOTrainer(model=model, reward_funcs=toy_reward, train_dataset=toy_dataset(),
                             processing_class=tokenizer)  # fmt: skip
    assert isinstance(trainer.args, ICTGRPOConfig) and trainer.args.method == "ict"
