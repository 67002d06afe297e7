"""ict.integrations.trl on a tiny offline model: selection, gradients, loss, metrics, config errors."""

from __future__ import annotations

import math

import pytest
import torch

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
    assert (args.loss_type, args.normalize_by, args.reference, args.scope) == (
        "dapo",
        "selected",
        "batch_mean",
        "global",
    )


@pytest.mark.parametrize("method", METHODS)
def test_trl_steps_train_only_selected_tokens(tmp_path, method):
    # stapo thresholds loosened so that the tiny random model has spurious tokens to silence
    trainer = run_tiny(
        tmp_path, method=method, gradient_accumulation_steps=2, stapo_prob_below=0.2,
        stapo_entropy_quantile=0.9,
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
        method,
        valid,
        stats=stats,
        advantages=batch["advantages"],
        tokens=batch["completion_ids"],
        seed=0,
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
            want if method == "stapo" else select_tokens("ict", valid, stats=stats, scope="global")
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
    ict_sel = select_tokens("ict", valid, stats=stats)
    ent_sel = select_tokens("entropy", valid, stats=stats)
    want_j = int((ict_sel & ent_sel).sum()) / int((ict_sel | ent_sel).sum())
    assert logged["overlap/ict_entropy_jaccard"] == pytest.approx(want_j, abs=1e-6)


def test_trl_grpo_method_is_plain_trl(tmp_path):
    """method='grpo' with normalize_by='valid' trains exactly like TRL's GRPOTrainer (same seed)."""
    from trl import GRPOTrainer

    ours = run_tiny(tmp_path / "a", method="grpo", normalize_by="valid")
    plain = run_tiny(tmp_path / "b", trainer_class=recording_trainer_class(GRPOTrainer))
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
        gradient_accumulation_steps=2, max_steps=1,
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
    assert all(0.1 <= row["selected_fraction"] < 0.2 for row in steps)  # ceil(0.1 N) / N, N ~ 64


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
