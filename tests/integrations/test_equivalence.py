"""Same semantics everywhere: every engine turns the fixed cases into the native selection, loss
and gradient.

The cases live in `ict.integrations.cases` (pure tensors). The TRL engine runs each case through
ICTGRPOTrainer's own code and TRL's own forward of a tiny model
(`_get_per_token_logps_and_entropies`, not a stub), with old log-probabilities that give the
case's ratios; the native reference is the native trainer's forward and loss on the same model
(`native_gradient`): the selection must be equal, the loss and every parameter's gradient equal
to float32 tolerance. The verl engine runs the same cases in the verl environment
(tests/integrations/verl_plugin/test_verl_equivalence.py), through verl's engine.
"""

from __future__ import annotations

import math

import pytest
import torch

from ict.errors import ConfigError
from ict.head import LogitHead
from ict.integrations.cases import (
    DEFAULT_OPTIONS,
    LOSS_SEED,
    METHOD_OPTION_KEYS,
    assert_gradients_match,
    case_delta,
    equivalence_cases,
    native_gradient,
    native_reference,
    native_selection,
)
from ict.methods import get_method

CASES = equivalence_cases()


def test_cases_are_fixed_and_well_formed():
    again = equivalence_cases()
    assert [c.name for c in CASES] == [c.name for c in again] and len(
        {c.name for c in CASES}
    ) == len(CASES)
    for a, b in zip(CASES, again, strict=True):
        assert torch.equal(a.hidden, b.hidden) and torch.equal(a.logprob, b.logprob)
        assert a.mask.any(dim=1).all() and a.mask[0].all()
        assert set(a.options) == set(DEFAULT_OPTIONS)
        # old_logprob is log softmax(hidden @ W.T / T) at the sampled tokens
        logits = a.logits / a.options["temperature"]
        want = torch.log_softmax(logits, -1).gather(-1, a.tokens[..., None]).squeeze(-1) * a.mask
        torch.testing.assert_close(a.old_logprob, want)
        ratio = torch.exp(a.logprob - a.old_logprob)[a.mask]
        assert (ratio < 0.8).any() and (ratio > 1.28).any()  # both clip bounds are active


def case_named(name):
    return next(c for c in CASES if c.name == name)


def test_cases_cover_every_registered_method_and_the_warmup_end():
    from ict.methods import METHODS

    names = {c.options["method"] for c in CASES if c.name.startswith("method_")}
    assert names == set(METHODS)
    dense, sparse = (
        case_named("ict_warmup_last_dense_step"),
        case_named("ict_warmup_first_sparse_step"),
    )
    assert (
        dense.options["step"] == dense.options["dense_warmup_steps"] == sparse.options["step"] - 1
    )


def _clipped(case):
    rho = torch.exp(case.logprob - case.old_logprob)
    A = case.advantages[:, None].expand_as(rho)
    return -torch.minimum(rho * A, rho.clamp(0.8, 1.28) * A)


def test_native_reference_hand_checks():
    """The reference itself: the global token mean, the paper's ICT and the warm-up, by hand."""
    case = case_named("ict_batch_mean_global_token_mean")
    selected, loss = native_reference(case)
    assert int(selected.sum()) == math.ceil(0.1 * int(case.mask.sum()))
    torch.testing.assert_close(loss, _clipped(case)[selected].mean())

    # the paper's ICT: ceil(10%) of each response, loss = mean over responses of their means
    case = case_named("method_ict")
    selected, loss = native_reference(case)
    lengths = case.mask.sum(1).tolist()
    assert selected.sum(1).tolist() == [max(1, math.ceil(0.1 * n)) for n in lengths]
    per_token = _clipped(case)
    want = torch.stack([per_token[r][selected[r]].mean() for r in range(len(lengths))]).mean()
    torch.testing.assert_close(loss, want)

    # the last warm-up step updates every valid token, the next one only the selection
    case = case_named("ict_warmup_last_dense_step")
    assert torch.equal(native_reference(case)[0], case.mask)
    sparse = native_reference(case_named("ict_warmup_first_sparse_step"))[0]
    assert sparse.sum() < case_named("ict_warmup_first_sparse_step").mask.sum()


# ---- TRL engine -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trl_trainer(tmp_path_factory):
    pytest.importorskip("trl")
    from _trl_helpers import tiny_config, toy_dataset, toy_reward

    from ict.integrations.trl import ICTGRPOTrainer
    from ict.testing import tiny_model_and_tokenizer

    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    args = tiny_config(tmp_path_factory.mktemp("trl"))
    trainer = ICTGRPOTrainer(
        model=model, reward_funcs=toy_reward, args=args, train_dataset=toy_dataset(),
        processing_class=tokenizer,
    )  # fmt: skip
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def trl_args(trainer, case, **extra):
    """A fresh ICTGRPOConfig with the case's method options (None: the method's), as a user
    would write it; the trainer then reads everything from it."""
    from ict.integrations.trl import ICTGRPOConfig

    o = case.options
    method_fields = {k: o[k] for k in METHOD_OPTION_KEYS}
    args = ICTGRPOConfig(
        output_dir=trainer.args.output_dir, use_cpu=True, report_to=[], seed=o["seed"],
        stapo_prob_below=o["prob_below"], stapo_entropy_quantile=o["entropy_quantile"],
        epsilon=o["eps_low"], epsilon_high=o["eps_high"], delta=o["dual_clip"],
        per_device_train_batch_size=trainer.args.per_device_train_batch_size,
        num_generations=trainer.args.num_generations, **method_fields, **extra,
        accelerator_config={"use_configured_state": True},  # keep the running trainer's state
    )  # fmt: skip
    # copy the resolved fields onto the trainer's own args (a second TrainingArguments would
    # reset accelerate's state under the running trainer)
    import dataclasses

    from ict.methods import MethodOptions

    names = [f.name for f in dataclasses.fields(MethodOptions)] + [
        "loss_type", "seed", "epsilon", "epsilon_high", "delta", "gradient_accumulation_steps",
        "steps_per_generation", "stats_chunk_size",
    ]  # fmt: skip
    for name in names:
        setattr(trainer.args, name, getattr(args, name))
    args = trainer.args
    trainer.loss_type = args.loss_type  # TRL copies these at __init__
    trainer.epsilon_low, trainer.epsilon_high = args.epsilon, args.epsilon_high
    trainer.max_completion_length = case.mask.size(1)
    trainer._ict_temperature = o["temperature"]
    trainer.state.max_steps = 0  # run length unknown: the warm-up is taken as resolved
    trainer.ict_resolve()  # the changed config, resolved once more
    return args


PROMPT_LEN = 3


def model_inputs(case):
    """The case's responses after a fixed unpadded prompt of PROMPT_LEN tokens: (prompt [B, P],
    input_ids [B, P + T], attention_mask [B, P + T])."""
    B = case.tokens.size(0)
    prompt = torch.arange(B * PROMPT_LEN).view(B, PROMPT_LEN) % 11 + 20  # ids of the tiny vocab
    ids = torch.cat([prompt, case.tokens], dim=1)
    return prompt, ids, torch.cat([torch.ones_like(prompt), case.mask.long()], dim=1)


def native_for(trainer, case, selected):
    """native_gradient on the trainer's model, at TRL's sampling temperature (its fused head's):
    (gradients, old log-probs [B, T], loss)."""
    _, ids, attn = model_inputs(case)
    return native_gradient(
        case, trainer.model, ids, attn, selected, temperature=trainer.temperature
    )


def trl_batch(trainer, case, rows, old_logprob):
    """TRL's micro-batch dict for `rows` of the case, with ict's statistics of the old policy and
    the given old log-probs (TRL keeps them when an update is off-policy)."""
    stats = trainer.ict_stats_from_hidden(
        case.hidden, LogitHead(case.lm_head_weight), case.tokens, case.mask, case.group_ids
    )
    prompt, _, _ = model_inputs(case)
    return {
        "prompt_ids": prompt[rows],
        "prompt_mask": torch.ones_like(prompt[rows]),
        "completion_ids": case.tokens[rows],
        "completion_mask": case.mask[rows].long(),
        "advantages": case.advantages[rows],
        "old_per_token_logps": old_logprob[rows],
        "num_items_in_batch": case.mask.sum(),  # TRL's own: the generation batch's valid tokens
        "ict_row": rows,
        **{f"ict_{f}": None if getattr(stats, f) is None else getattr(stats, f)[rows]
           for f in ("entropy", "renyi2", "logprob", "js", "kl")},
    }  # fmt: skip


def trl_loss(trainer, batch, micro_batch=None):
    """ICTGRPOTrainer's `_compute_loss` on a micro-batch (TRL's loss, or ict's for a loss mode or
    an entropy bonus), through TRL's own forward of the trainer's model
    (`_get_per_token_logps_and_entropies`). micro_batch: its index in the generation batch's
    cycle (TRL's `_step`; the first optimizer step's micro-batches run on-policy). Clip-Cov's
    draw: torch's global generator seeded with LOSS_SEED, as native_loss does."""
    if micro_batch is not None:
        trainer._step = micro_batch
    torch.manual_seed(LOSS_SEED)
    return trainer._compute_loss(trainer.model, batch)


def grads_of(trainer, loss, retain_graph=False):
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True, retain_graph=retain_graph)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]


def trl_path(trainer, case):
    """Run a case through ICTGRPOTrainer's own code: its config resolution, its statistics call,
    its per-step selection and normaliser (`_ict_apply_selection`) and its loss through TRL's
    forward, at the case's rollout batch (`state.global_step`). Returns (selected, loss,
    gradients) and the native (loss, gradients) on the same model."""
    trl_args(trainer, case)
    trainer.state.global_step = case.options["step"] - 1  # one optimizer step per generation batch
    trainer.current_gradient_accumulation_steps = 1
    want_grads, old, want_loss = native_for(trainer, case, native_selection(case))
    batch = trl_batch(trainer, case, torch.arange(case.tokens.size(0)), old)
    trainer._ict_apply_selection([batch], "train")
    loss = trl_loss(trainer, batch)
    return (batch["ict_selected"], loss, grads_of(trainer, loss)), (want_loss, want_grads)


@pytest.mark.trl
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_trl_matches_native(trl_trainer, case):
    """Selection, loss value and parameter gradient through TRL's forward equal the native
    trainer's (its forward, ict.loss) for every registered method and case."""
    (selected, loss, grads), (want_loss, want_grads) = trl_path(trl_trainer, case)
    assert torch.equal(selected.bool(), native_selection(case))
    torch.testing.assert_close(loss.detach(), want_loss, atol=1e-6, rtol=1e-5)
    assert_gradients_match(case, grads, want_grads)
    assert any(float(g.abs().max()) > 0 for g in want_grads)  # not vacuous


@pytest.mark.trl
@pytest.mark.parametrize("name", ["method_ict", "method_random_sequence", "method_entropy",
                                  "ict_ratio_0.3_valid", "method_ict_batch_mean"])  # fmt: skip
def test_trl_matches_native_when_a_generation_batch_spans_two_optimizer_steps(trl_trainer, name):
    """steps_per_generation = 4, gradient_accumulation_steps = 2: one generation batch, split by
    TRL into 4 micro-batches, feeds 2 optimizer steps. Each optimizer step's loss (the sum of its
    2 micro-batch losses, TRL's accumulation) and its gradient equal the native ones of a
    mini-batch of those rows: the same selection, normalised over exactly that update's rows
    (TRL's micro-batches are shuffled rows, here a fixed permutation)."""
    from ict.loss import policy_loss

    case = case_named(name)
    trl_args(trl_trainer, case, gradient_accumulation_steps=2, steps_per_generation=4)
    # 2 optimizer steps per generation batch: the case's rollout batch starts at this global step
    trl_trainer.state.global_step = 2 * (case.options["step"] - 1)
    assert trl_trainer.ict_rollout_batch() == case.options["step"]
    trl_trainer.current_gradient_accumulation_steps = 2
    trl_trainer.model.train()  # TRL's loss reads the mode (train: accumulated)
    want_selected = native_selection(case)
    _, ids, attn = model_inputs(case)
    where = torch.zeros_like(ids, dtype=torch.bool)
    where[:, -case.mask.size(1) :] = case.mask
    from ict.train.logprobs import policy_logprobs

    logprob = policy_logprobs(trl_trainer.model, ids, attn, where,
                              temperature=trl_trainer.temperature)[0][:, -case.mask.size(1) :]  # fmt: skip
    old = torch.where(case.mask, logprob.detach() - case_delta(case), 0.0)
    B = case.tokens.size(0)
    rows = torch.randperm(B, generator=torch.Generator().manual_seed(5)).chunk(4)
    chunks = [trl_batch(trl_trainer, case, r, old) for r in rows]
    trl_trainer._ict_apply_selection(chunks, "train")
    got = torch.zeros_like(case.mask)
    for r, c in zip(rows, chunks, strict=True):
        got[r] = c["ict_selected"]
    assert torch.equal(got, want_selected)

    method = trl_trainer.args.resolved_method()
    assert (
        method.loss_agg == get_method(case.options["method"]).resolved().loss_agg
        or case.options["loss_agg"] == method.loss_agg
    )
    try:
        for window in (0, 1):
            step_rows = torch.cat(rows[2 * window : 2 * window + 2])
            parts = range(2 * window, 2 * window + 2)
            trl = sum(trl_loss(trl_trainer, chunks[j], micro_batch=j) for j in parts)
            # the generation batch's first optimizer step is on-policy: rho exactly 1
            step_old = logprob.detach() if window == 0 else old
            native, _ = policy_loss(
                logprob[step_rows], step_old[step_rows], case.advantages[step_rows],
                case.mask[step_rows], want_selected[step_rows], eps_low=0.2, eps_high=0.28,
                loss_agg=method.loss_agg, normalize_by=method.normalize_by,
                max_response_length=case.mask.size(1),
            )  # fmt: skip
            torch.testing.assert_close(trl.detach(), native.detach(), atol=1e-6, rtol=1e-5)
            want = grads_of(trl_trainer, native, retain_graph=True)  # one native forward
            assert_gradients_match(case, grads_of(trl_trainer, trl), want)
    finally:
        trl_trainer.model.eval()


@pytest.mark.trl
@pytest.mark.parametrize("name", ["method_kl_cov", "method_entropy_bonus", "clip_cov_wide_window",
                                  "ict_with_entropy_bonus", "ict_with_kl_cov"])  # fmt: skip
def test_trl_ict_loss_matches_native_when_an_optimizer_step_spans_two_micro_batches(
    trl_trainer, name
):
    """ict's own loss in TRL (a loss mode or an entropy bonus) with steps_per_generation = 4 and
    gradient_accumulation_steps = 2: each optimizer step's loss (the sum of its 2 micro-batch
    losses) and its gradient through TRL's forward equal the native trainer's mini-batch loss
    over the same micro-batches: each micro-batch one `policy_loss` call (the loss mode's
    covariance and token counts are per call, on every engine) with the mini-batch's normaliser
    (`LossConfig.denominator`). The generation batch's first optimizer step is on-policy (its
    ratio exactly 1), the second uses TRL's old log-probs. The loss mode's counts are logged once
    per optimizer step, summed over its micro-batches."""
    from ict.integrations.cases import case_loss_config
    from ict.integrations.trl import ict_computes_loss
    from ict.loss import policy_loss
    from ict.train.logprobs import policy_logprobs

    case = case_named(name)
    trl_args(trl_trainer, case, gradient_accumulation_steps=2, steps_per_generation=4)
    assert ict_computes_loss(trl_trainer.args.resolved_method())
    trl_trainer.state.global_step = 2 * (case.options["step"] - 1)
    trl_trainer.current_gradient_accumulation_steps = 2
    trl_trainer.model.train()
    _, ids, attn = model_inputs(case)
    T = case.mask.size(1)
    where = torch.zeros_like(ids, dtype=torch.bool)
    where[:, -T:] = case.mask
    logprob, entropy = policy_logprobs(trl_trainer.model, ids, attn, where, with_entropy=True,
                                       temperature=trl_trainer.temperature)  # fmt: skip
    logprob, entropy = logprob[:, -T:], entropy[:, -T:]
    old = torch.where(case.mask, logprob.detach() - case_delta(case), 0.0)
    B = case.tokens.size(0)
    rows = torch.randperm(B, generator=torch.Generator().manual_seed(5)).chunk(4)
    chunks = [trl_batch(trl_trainer, case, r, old) for r in rows]
    trl_trainer._ict_apply_selection(chunks, "train")
    want_selected = native_selection(case)
    import dataclasses

    config = dataclasses.replace(  # native_reference's constant of Dr. GRPO: the case's width
        case_loss_config(case.options), max_response_length=T
    )
    assert config == trl_trainer.ict_loss_config(trl_trainer.args.resolved_method())
    trl_trainer._metrics["train"].clear()
    changed = []
    try:
        for window in (0, 1):
            parts = range(2 * window, 2 * window + 2)
            step_rows = torch.cat([rows[j] for j in parts])
            denominator = config.denominator(case.mask[step_rows], want_selected[step_rows])
            trl = sum(trl_loss(trl_trainer, chunks[j], micro_batch=j) for j in parts)
            step_old = logprob.detach() if window == 0 else old  # the first step: on-policy
            native, window_changed = 0.0, 0
            for j in parts:
                r = rows[j]
                torch.manual_seed(LOSS_SEED)
                part, metrics = policy_loss(
                    logprob[r], step_old[r], case.advantages[r], case.mask[r], want_selected[r],
                    config, entropy=entropy[r], denominator=denominator,
                )  # fmt: skip
                native = native + part
                window_changed += metrics.get("loss_mode/changed_tokens", 0)
            changed.append(window_changed)
            torch.testing.assert_close(trl.detach(), native.detach(), atol=1e-6, rtol=1e-5)
            want = grads_of(trl_trainer, native, retain_graph=True)  # one native forward
            assert_gradients_match(case, grads_of(trl_trainer, trl), want)
        # not vacuous: the loss mode or the bonus changes the value
        plain = sum(
            policy_loss(logprob[rows[j]], step_old[rows[j]], case.advantages[rows[j]],
                        case.mask[rows[j]], want_selected[rows[j]], config, loss_mode="vanilla",
                        entropy_coef=0.0, denominator=denominator)[0]
            for j in (2, 3)
        )  # fmt: skip
        assert not torch.allclose(plain.detach(), native.detach())
        logged = trl_trainer._metrics["train"]
        assert logged["entropy"] and logged["clip_ratio/region_mean"] and logged["clip_fraction"]
        if config.loss_mode != "vanilla":  # one value per optimizer step: its micro-batches' sum
            assert logged["loss_mode/changed_tokens"] == changed and sum(changed) > 0
            tokens = [int((case.mask & want_selected)[torch.cat(rows[2 * w : 2 * w + 2])].sum())
                      for w in (0, 1)]  # fmt: skip
            rates = [c / t for c, t in zip(changed, tokens, strict=True)]
            assert logged["loss_mode/changed_rate"] == pytest.approx(rates)
            assert logged["loss_mode/nominal_rate"] == [config.covariance.kl_cov_ratio
                if config.loss_mode == "kl_cov" else config.covariance.clip_cov_ratio] * 2  # fmt: skip
        else:
            assert "loss_mode/changed_tokens" not in logged
    finally:
        trl_trainer.model.eval()
        trl_trainer._metrics["train"].clear()


@pytest.fixture
def registered_selector():
    """A selector registered by a user (inside the test): the lowest old-policy probabilities,
    shifted by `weight` x advantage. Removed again afterwards."""
    from ict.select import SELECTORS
    from ict.select.core import register_selector

    @register_selector("test_low_prob", default_ratio=0.3, needs=("logprob", "advantages"))
    def low_prob(ctx, *, weight: float = 0.0):
        stats = ctx.require_stats("test_low_prob", "logprob")
        return -stats.logprob + weight * ctx.require_advantages("test_low_prob")

    yield "test_low_prob"
    SELECTORS.pop("test_low_prob")


@pytest.mark.trl
def test_a_registered_selector_runs_in_trl_without_edits(
    trl_trainer, registered_selector, tmp_path
):
    """ICTGRPOConfig accepts it and its options (facts read from the Selector); the trainer selects
    with it exactly as ict.select does, options included."""
    from ict.integrations.trl import ICTGRPOConfig
    from ict.select import select_tokens

    with pytest.raises(ConfigError, match="not options"):
        ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[],
                      method=registered_selector, selector_options={"wieght": 1.0})  # fmt: skip
    args = ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[],
                         method=registered_selector, selector_options={"weight": 3.0})  # fmt: skip
    m = args.resolved_method()
    assert (m.selector, m.ratio, m.scope) == (registered_selector, 0.3, "global")

    case = CASES[0]
    a = trl_trainer.args
    saved = (a.method, a.selector_options, a.ratio, a.scope, a.reference, a.dense_warmup_steps)
    try:
        a.method, a.selector_options, a.ratio, a.scope = (
            registered_selector,
            {"weight": 3.0},
            None,
            None,
        )
        a.reference, a.dense_warmup_steps = "batch_mean", 0
        trl_trainer.ict_resolve()  # the trainer resolves its config once
        stats = trl_trainer.ict_stats_from_hidden(
            case.hidden, LogitHead(case.lm_head_weight), case.tokens, case.mask, case.group_ids
        )
        got = trl_trainer.ict_select(a.method, stats, case.mask, case.advantages, case.tokens)
    finally:
        a.method, a.selector_options, a.ratio, a.scope, a.reference, a.dense_warmup_steps = saved
        trl_trainer.ict_resolve()
    want = select_tokens(registered_selector, case.mask, stats=stats, advantages=case.advantages,
                         weight=3.0)  # fmt: skip
    plain = select_tokens(registered_selector, case.mask, stats=stats, advantages=case.advantages)
    assert torch.equal(got, want) and not torch.equal(want, plain)  # the option reached it
