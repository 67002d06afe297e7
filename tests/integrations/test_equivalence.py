"""Same semantics everywhere: every engine turns the fixed cases into the native selection and loss.

The cases live in `ict.integrations.cases` (pure tensors). An engine is a function
`case -> (selected bool[B, T], loss scalar)`; `assert_matches_native` compares it with the native
path (ict.stats -> ict.select -> ict.loss). The verl engine runs the same cases in the verl
environment (tests/integrations/test_verl*.py):

    from ict.integrations.cases import assert_matches_native, equivalence_cases
    for case in equivalence_cases():
        assert_matches_native(case, *verl_path(case))
"""

from __future__ import annotations

import math

import pytest
import torch

from ict.errors import ConfigError
from ict.integrations.cases import (
    DEFAULT_OPTIONS,
    assert_matches_native,
    equivalence_cases,
    native_reference,
)

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


def test_native_reference_hand_checks():
    """The reference itself, on the default case: k = ceil(0.1 N) tokens, loss by hand."""
    case = CASES[0]
    selected, loss = native_reference(case)
    assert int(selected.sum()) == math.ceil(0.1 * int(case.mask.sum()))
    rho = torch.exp(case.logprob - case.old_logprob)
    A = case.advantages[:, None].expand_as(rho)
    per_token = -torch.minimum(rho * A, rho.clamp(0.8, 1.28) * A)
    torch.testing.assert_close(loss, per_token[selected].mean())


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


def trl_path(trainer, case):
    """Run a case through ICTGRPOTrainer's own code: its statistics call, its selection and
    normaliser (`_ict_apply_selection`), and TRL's loss (`_compute_loss`) on the case's log-probs."""
    from ict.integrations.trl import LOSS_AGG_TO_TRL

    o = case.options
    a = trainer.args
    a.method, a.ratio, a.reference, a.scope, a.granularity = (
        o["method"], o["ratio"], o["reference"], o["scope"], o["granularity"],
    )  # fmt: skip
    a.normalize_by, a.seed, a.loss_agg = o["normalize_by"], o["seed"], o["loss_agg"]
    a.dense_warmup_steps = 0  # the cases compare one selected step (the warm-up is tested apart)
    a.stapo_prob_below, a.stapo_entropy_quantile = o["prob_below"], o["entropy_quantile"]
    a.delta = o["dual_clip"]  # TRL's two-sided clip == dual clip for A < 0 (delta > 1 + eps_high)
    trainer.loss_type = LOSS_AGG_TO_TRL[o["loss_agg"]]
    trainer.epsilon_low, trainer.epsilon_high = o["eps_low"], o["eps_high"]
    trainer.max_completion_length = case.mask.size(1)
    trainer._ict_temperature = o["temperature"]
    trainer.state.global_step = 0

    stats = trainer.ict_stats_from_hidden(
        case.hidden, case.lm_head_weight, None, case.tokens, case.mask, case.group_ids
    )
    B = case.tokens.size(0)
    batch = {
        "prompt_ids": torch.zeros(B, 1, dtype=torch.long),
        "prompt_mask": torch.ones(B, 1, dtype=torch.long),
        "completion_ids": case.tokens,
        "completion_mask": case.mask.long(),
        "advantages": case.advantages,
        "old_per_token_logps": case.old_logprob,
        "num_items_in_batch": case.mask.sum(),  # TRL's own: the number of valid tokens
        "ict_row": torch.arange(B),
        **{f"ict_{f}": getattr(stats, f) for f in ("entropy", "renyi2", "logprob", "js", "kl")},
    }
    trainer._ict_apply_selection([batch], "train")

    logprob = case.logprob.clone().requires_grad_(True)
    original = trainer._get_per_token_logps_and_entropies
    trainer._get_per_token_logps_and_entropies = lambda *args, **kw: (
        logprob,
        torch.zeros_like(logprob),
        None,
    )
    try:
        loss = trainer._compute_loss(trainer.model, batch)
    finally:
        trainer._get_per_token_logps_and_entropies = original
    return batch["ict_selected"], loss


@pytest.mark.trl
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_trl_matches_native(trl_trainer, case):
    assert_matches_native(case, *trl_path(trl_trainer, case))


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
    m = args.ict_method()
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
        stats = trl_trainer.ict_stats_from_hidden(
            case.hidden, case.lm_head_weight, None, case.tokens, case.mask, case.group_ids
        )
        got = trl_trainer.ict_select(a.method, stats, case.mask, case.advantages, case.tokens)
    finally:
        a.method, a.selector_options, a.ratio, a.scope, a.reference, a.dense_warmup_steps = saved
    want = select_tokens(registered_selector, case.mask, stats=stats, advantages=case.advantages,
                         weight=3.0)  # fmt: skip
    plain = select_tokens(registered_selector, case.mask, stats=stats, advantages=case.advantages)
    assert torch.equal(got, want) and not torch.equal(want, plain)  # the option reached it
