"""Cross-engine equivalence: the verl path turns ict.integrations.cases into the native selection,
loss and gradient. The verl path is the plugin's own code on verl's layouts: old-policy statistics
from packed logits on two simulated DP ranks (sum and count of p added, as the all-reduce does),
the driver's global selection, then the registered loss over two micro-batches with global
counts; and, for the gradient, the update through verl's own engine (FSDPEngineWithLMHead's
forward_backward_batch, prepare_model_inputs / outputs with the plugin's hooks, ppo_loss) on a
tiny Hugging Face model, against the native trainer's forward and loss on the same model
(ict.integrations.cases.native_gradient); and the on-policy step (one mini-batch, one epoch) of
verl's own driver and actor worker code, its statistics from verl's old-log-prob forward on the
model, against the native on-policy step on the same model (old log-probs = the current ones).
"""

import pytest
import torch

pytest.importorskip("verl")
from verl_helpers import (  # noqa: E402
    VerlStep,
    actor_config,
    bare_engine,
    packed_logits,
    padded_inputs,
    step_batch,
    step_config,
    verl_batch,
)

from ict.errors import ConfigError  # noqa: E402
from ict.integrations.cases import (  # noqa: E402
    LOSS_SEED,
    METHOD_OPTION_KEYS,
    assert_gradients_match,
    assert_matches_native,
    case_clip_range,
    case_delta,
    case_divergence,
    case_method,
    equivalence_cases,
    native_gradient,
    native_selection,
)
from ict.integrations.verl import loss as verl_loss  # noqa: E402
from ict.integrations.verl.config import IctVerlConfig, validate  # noqa: E402
from ict.integrations.verl.hooks import _OldPolicyPass, score_micro_batch, select_batch  # noqa: E402
from ict.loss import row_counts  # noqa: E402

pytestmark = pytest.mark.verl

CASES = equivalence_cases()
# references verl does not compute (refused by validate with "not supported on verl")
UNSUPPORTED = {"group_mean", "sequence_mean", "previous_token", "reference_policy"}


def _spec(o):
    """The `ict:` section a user would write for the case: its method and only its settings."""
    return IctVerlConfig(
        **{k: o[k] for k in METHOD_OPTION_KEYS}, seed=o["seed"],
        stapo_prob_below=o["prob_below"], stapo_entropy_quantile=o["entropy_quantile"],
    )  # fmt: skip


def _reference(case):
    return case_method(case.options).reference


def _prompt_lens(B):
    """The prompt length of each of B rows (1 to 3 tokens, left-padded)."""
    return [1 + (b % 3) for b in range(B)]


def verl_path(case, ranks=2, micro_batches=2):
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import no_padding_2_padding

    o = case.options
    spec = _spec(o)
    validate(spec)
    B, T = case.mask.shape
    V = case.lm_head_weight.shape[0]
    prompt_lens = _prompt_lens(B)
    shards = torch.arange(B).chunk(ranks)

    if (
        spec.resolved().reference == "group_position" and spec.needs_js
    ):  # one pass per rank, each rank holding whole groups
        G = int((case.group_ids == case.group_ids[0]).sum())
        stats = {}
        for rows in shards:
            td = verl_batch(
                [prompt_lens[i] for i in rows], case.tokens[rows], case.mask[rows], vocab=V
            )
            tu.assign_non_tensor(td, temperature=o["temperature"])
            td["ict_group"] = case.group_ids[rows]
            logits = packed_logits(td, case.logits[rows])
            state = _OldPolicyPass(5, "group_position", group_size=G, divergence=case_divergence(o))
            offsets = td["input_ids"].offsets()
            for key, values in score_micro_batch(state, logits, td).items():
                nested = torch.nested.nested_tensor_from_jagged(values, offsets)
                stats.setdefault(key, []).append(no_padding_2_padding(nested, td))
        return _driver_and_loss(
            case, spec, {k: torch.cat(v) for k, v in stats.items()}, micro_batches
        )

    # worker side, pass 1 on every rank, then the all-reduce of sum p and count
    batches, passes = [], []
    for rows in shards:
        td = verl_batch([prompt_lens[i] for i in rows], case.tokens[rows], case.mask[rows], vocab=V)
        tu.assign_non_tensor(td, temperature=o["temperature"])
        logits = packed_logits(td, case.logits[rows])
        state = _OldPolicyPass(chunk_size=5)
        batches.append((td, logits, score_micro_batch(state, logits, td)))
        passes.append(state)
    reference = sum(s.prob_sum for s in passes) / sum(s.count for s in passes)
    stats = {"ict_entropy": [], "ict_renyi2": [], "ict_js": []}
    for td, logits, first in batches:
        second = score_micro_batch(_OldPolicyPass(chunk_size=5, reference=reference), logits, td)
        offsets = td["input_ids"].offsets()
        for key, values in {**first, **second}.items():
            nested = torch.nested.nested_tensor_from_jagged(values, offsets)
            stats[key].append(no_padding_2_padding(nested, td))
    tensors = {k: torch.cat(v) for k, v in stats.items()}
    return _driver_and_loss(case, spec, tensors, micro_batches)


def _driver_and_loss(case, spec, tensors, micro_batches):
    o = case.options
    B = case.mask.shape[0]
    # driver side: global selection over the whole batch
    tensors.update(response_mask=case.mask.long(), advantages=case.advantages[:, None] * case.mask,
                   old_log_probs=case.old_logprob, responses=case.tokens)  # fmt: skip
    selected, _ = select_batch(tensors, spec, step=o["step"])
    method = spec.resolved()

    # worker update: micro-batches, global counts, verl's agg_loss
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    eps_low, eps_high = case_clip_range(o)  # the method's unless the case sets one
    config = actor_config(clip_ratio_low=eps_low, clip_ratio_high=eps_high,
                          clip_ratio_c=o["dual_clip"] or 3.0)  # fmt: skip
    config.global_batch_info.update(dp_size=1, batch_num_tokens=int(case.mask.sum()),
                                    global_batch_size=B, loss_scale_factor=None)  # fmt: skip
    counts = row_counts(case.mask, selected, normalize_by=method.normalize_by)
    n_sel, n_rows = int(counts.tokens.sum()), int(counts.rows.sum())
    fn = get_policy_loss_fn("ict")
    # what the driver sends and the engine hook reads back (loss mode, bonus, their settings)
    settings = verl_loss.settings_fields(spec.loss_settings(method))
    if method.loss_mode != "vanilla":  # its covariance spans one loss call, native's whole batch
        micro_batches = 1
    loss = torch.zeros(())
    for rows in torch.arange(B).chunk(micro_batches):
        sel = verl_loss.MicroBatchSelection(selected[rows], method.normalize_by, n_sel, n_rows,
                                            loss_agg=method.loss_agg, **settings,
                                            entropy=case.entropy[rows])  # fmt: skip
        with verl_loss.micro_batch(sel):
            torch.manual_seed(LOSS_SEED)  # Clip-Cov's draw, as native_reference
            part, _ = fn(case.old_logprob[rows], case.logprob[rows], tensors["advantages"][rows],
                         case.mask[rows].long(), "token-mean", config)  # fmt: skip
        loss = loss + part
    return selected, loss


@pytest.mark.parametrize("case", [c for c in CASES if _reference(c) not in UNSUPPORTED],
                         ids=lambda c: c.name)  # fmt: skip
def test_same_selection_and_loss_as_native(case):
    assert_matches_native(case, *verl_path(case))


@pytest.fixture(scope="module")
def tiny_model():
    from ict.testing import tiny_model_and_tokenizer

    return tiny_model_and_tokenizer(seed=0)[0].float()


def verl_engine_gradient(case, selected, model, monkeypatch):
    """The case's update through verl's engine: (the model's parameter gradients, the native
    ones). One micro-batch of all rows (one loss call, as native_gradient's), the driver's
    meta-data (normaliser, aggregation, loss settings), the case's clip range as verl's actor
    config, old log-probabilities that give the case's ratios."""
    import functools

    from verl.utils import tensordict_utils as tu
    from verl.workers.config import PolicyLossConfig
    from verl.workers.utils.losses import ppo_loss

    o = case.options
    spec = _spec(o)
    method = spec.resolved()
    B, T = case.mask.shape
    prompt_lens = _prompt_lens(B)
    V = model.config.vocab_size
    _, input_ids, attention_mask = padded_inputs(prompt_lens, case.tokens, case.mask, vocab=V)
    want, old, _ = native_gradient(case, model, input_ids, attention_mask, selected,
                                   temperature=o["temperature"])  # fmt: skip
    td = verl_batch(prompt_lens, case.tokens, case.mask, vocab=V)
    tu.assign_non_tensor(td, use_remove_padding=False, use_dynamic_bsz=False,
                         micro_batch_size_per_gpu=B, temperature=o["temperature"],
                         use_fused_kernels=False, calculate_entropy=False, global_batch_size=B,
                         **{verl_loss.NORMALIZE_KEY: method.normalize_by,
                            verl_loss.LOSS_AGG_KEY: method.loss_agg,
                            verl_loss.LOSS_SETTINGS_KEY: spec.loss_settings(method)})  # fmt: skip
    td["old_log_probs"], td["advantages"] = old, case.advantages[:, None] * case.mask
    td[verl_loss.SELECTED_KEY] = selected
    td[verl_loss.ROW_COUNTS_KEY] = verl_loss.counts_column(
        row_counts(case.mask, selected, normalize_by=method.normalize_by)
    )
    eps_low, eps_high = case_clip_range(o)
    config = actor_config(clip_ratio_low=eps_low, clip_ratio_high=eps_high,
                          clip_ratio_c=o["dual_clip"] or 3.0,
                          policy_loss=PolicyLossConfig(loss_mode="ict"))  # fmt: skip
    engine = bare_engine(monkeypatch, model)
    model.zero_grad()
    torch.manual_seed(LOSS_SEED)  # Clip-Cov's draw, as native_gradient's
    engine.forward_backward_batch(
        td, functools.partial(ppo_loss, config=config), forward_only=False
    )
    got = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    return got, want


@pytest.mark.parametrize("case", [c for c in CASES if _reference(c) not in UNSUPPORTED],
                         ids=lambda c: c.name)  # fmt: skip
def test_same_gradient_as_native_through_verls_engine(case, tiny_model, gloo, monkeypatch):
    """Every registered method and case (the loss modes and the entropy bonus included): the
    parameter gradient through verl's engine and the registered loss equals the native
    trainer's, for the selection the plugin's driver made (equal to native's, test above)."""
    selected, _ = verl_path(case)
    got, want = verl_engine_gradient(case, selected, tiny_model, monkeypatch)
    assert_gradients_match(case, got, want)
    assert any(float(g.abs().max()) > 0 for g in want)  # not vacuous


def on_policy_verl_step(case, model, monkeypatch):
    """The case's step through verl's own step code (verl_helpers.VerlStep: the driver's
    `_compute_old_log_prob` and `_update_actor` with the plugin's wrappers, verl's actor worker,
    `bare_engine(model)`), on-policy: one mini-batch of the whole batch, one epoch, the old
    log-probs verl's own recomputed ones. Returns (the VerlStep after the step, the old-log-prob
    output, the update's metrics)."""
    from ict.methods import get_method

    o = case.options
    spec = _spec(o)
    method = spec.resolved()
    B = case.mask.shape[0]
    G = int((case.group_ids == case.group_ids[0]).sum())
    section = {k: v for k, v in vars(spec).items() if v is not None}
    clip = case_clip_range(o)
    if get_method(spec.method).fixes_clip_range():  # verl refuses any other (config.validate);
        clip = (method.eps_low, method.eps_high)  # on-policy (rho = 1) no clip bound acts
    config, actor = step_config(
        "ict", section, n=G, mini_batch=B // G,
        temperature=o["temperature"], clip=clip, dual_clip=o["dual_clip"] or 3.0,
    )  # fmt: skip
    # one loss call for the loss modes (their covariance spans it, native's the whole batch);
    # else two micro-batches with the global counts; old-log-prob micro-batches of whole groups
    micro = B if method.loss_mode != "vanilla" else B // 2
    step = VerlStep(monkeypatch, model, config, actor, micro_batch=micro, log_prob_micro_batch=G)
    update = step.trainer.actor_rollout_wg.update_actor

    def seeded_update(td):
        torch.manual_seed(LOSS_SEED)  # Clip-Cov's draw, as native_gradient's
        return update(td)

    step.trainer.actor_rollout_wg.update_actor = seeded_update
    batch = step_batch(_prompt_lens(B), case.tokens, case.mask, vocab=model.config.vocab_size,
                       group_size=G, temperature=o["temperature"])  # fmt: skip
    old, metrics = step.run(batch, case.advantages[:, None] * case.mask, step=o["step"])
    return step, old, metrics


def native_on_policy_case(case, model):
    """The case on `model`: its hidden states (the model's final ones before the positions that
    predict the case's responses, as every engine's forward computes them) and logit head, so
    that the native selection reads the model's statistics, and zero perturbation (log pi =
    log pi_old: the on-policy update)."""
    import dataclasses

    B, T = case.mask.shape
    V = model.config.vocab_size
    _, input_ids, attention_mask = padded_inputs(_prompt_lens(B), case.tokens, case.mask, vocab=V)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp_min(0)
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask,
                    position_ids=position_ids, output_hidden_states=True)  # fmt: skip
    hidden = out.hidden_states[-1][:, -T - 1 : -1].float()
    on_policy = dataclasses.replace(
        case, hidden=hidden, lm_head_weight=model.lm_head.weight.detach().float(),
        logprob=case.old_logprob,
    )  # fmt: skip
    assert float(case_delta(on_policy).abs().max()) == 0.0
    return on_policy, input_ids, attention_mask


@pytest.mark.parametrize("case", [c for c in CASES if _reference(c) not in UNSUPPORTED],
                         ids=lambda c: c.name)  # fmt: skip
def test_on_policy_step_through_verl_equals_native(case, tiny_model, gloo, monkeypatch):
    """The on-policy step (issue 31: one forward for the old policy and ICT's statistics, no
    separate statistics forward): verl's old-log-prob forward of the model gives the statistics
    the driver selects with and the old log-probs; the one update (one mini-batch, one epoch) is
    the step's first, on-policy (rho exactly 1). The selection equals the native step's on the
    same model (ict.stats.token_stats_from_hidden on its hidden states, ict.step.select_step)
    and the parameter gradient of the plugin's loss equals the native on-policy update's
    (native_gradient with zero perturbation); verl ran one old-log-prob pass (two forwards for
    the batch_mean reference) and one update."""
    import copy

    model = copy.deepcopy(tiny_model)
    on_policy, input_ids, attention_mask = native_on_policy_case(case, model)
    want_selected = native_selection(on_policy)
    want, want_old, _ = native_gradient(on_policy, model, input_ids, attention_mask,
                                        want_selected,
                                        temperature=case.options["temperature"])  # fmt: skip
    step, old, metrics = on_policy_verl_step(case, model, monkeypatch)

    td = step.inputs["update_actor"]
    selected = td[verl_loss.SELECTED_KEY]
    selected = (selected.to_padded_tensor(0) if selected.is_nested else selected).bool()
    assert torch.equal(selected, want_selected), (selected ^ want_selected).nonzero().tolist()
    torch.testing.assert_close(old.batch["old_log_probs"], want_old, atol=1e-5, rtol=1e-5)
    (got,) = step.update_grads  # one update: the step's first, on-policy
    assert_gradients_match(case, got, want)
    assert any(float(g.abs().max()) > 0 for g in want)  # not vacuous
    assert metrics["actor/ppo_kl"] == [0.0]  # rho = 1 exactly: the detached current log-probs
    passes = 2 if _spec(case.options).stats_request()["reference"] == "batch_mean" else 1
    prompts = int(case.group_ids.max()) + 1  # one old-log-prob micro-batch per group
    assert step.calls == {"compute_log_prob": 1, "update_actor": 1}
    assert step.forwards["compute_log_prob"] == passes * prompts


@pytest.mark.parametrize("case", [c for c in CASES if _reference(c) in UNSUPPORTED],
                         ids=lambda c: c.name)  # fmt: skip
def test_unsupported_reference_is_refused_clearly(case):
    with pytest.raises(ConfigError, match="not supported on verl"):
        verl_path(case)


def test_a_registered_selector_runs_in_verl_without_edits():
    """A selector registered by a user (here, inside the test) is a valid ict.method on verl, its
    options are checked against its facts, and the verl path selects and scores like native."""
    import dataclasses

    from omegaconf import OmegaConf

    from ict.integrations.verl.config import from_verl_config
    from ict.select import SELECTORS
    from ict.select.core import register_selector

    @register_selector("test_low_prob", default_ratio=0.3, needs=("logprob", "advantages"))
    def low_prob(ctx, *, weight: float = 0.0):
        stats = ctx.require_stats("test_low_prob", "logprob")
        return -stats.logprob + weight * ctx.require_advantages("test_low_prob")

    try:
        base = {"actor_rollout_ref": {"actor": {"policy_loss": {"loss_mode": "ict"}}}}
        section = {"method": "test_low_prob", "selector_options": {"weight": 3.0}}
        spec = from_verl_config(OmegaConf.create({**base, "ict": section}))
        assert (spec.selector, spec.resolved().ratio, spec.needs_js) == (
            "test_low_prob",
            0.3,
            False,
        )
        with pytest.raises(ConfigError, match="not options of method='test_low_prob'"):
            bad = {"method": "test_low_prob", "selector_options": {"wieght": 3.0}}
            from_verl_config(OmegaConf.create({**base, "ict": bad}))
        case = next(c for c in CASES if c.name == "ict_batch_mean_global_token_mean")
        options = {**case.options, "method": "test_low_prob", "reference": None, "scope": None}
        case = dataclasses.replace(case, options=options)
        selected, loss = verl_path(case)
        assert_matches_native(case, selected, loss)
        assert int(selected.sum()) == -(-3 * int(case.mask.sum()) // 10)  # its own ratio, 0.3
    finally:
        SELECTORS.pop("test_low_prob")
