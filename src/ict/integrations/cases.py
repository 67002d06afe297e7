"""Fixed cases for the cross-engine equivalence suite (native vs TRL vs verl).

Every engine must turn the same inputs into the same selected tokens, the same loss value and,
through its own forward pass of a real model, the same parameter gradient.
`equivalence_cases()` is a pure function: it builds small tensors from fixed seeds (CPU, float32)
and returns them with the options of each case; `native_reference(case)` is what the native path
(ict.stats + ict.step.select_step + ict.loss) gives, the value an engine is compared against.
A case names a method and only the settings a user would set: every registered method appears by
name alone, so each engine must resolve the method's own reference, scope, loss and warm-up.

Layout (docs/ARCHITECTURE.md): `tokens[:, t]` is predicted by `hidden[:, t] @ lm_head_weight.T`
(already shifted); `mask[:, t]` is True on response tokens. The old policy's log-probabilities are
those of `hidden`/`lm_head_weight` at `temperature`; the current policy's (`logprob`) differ from
them by a fixed perturbation in [-0.5, 0.5] nats so that both clip bounds are active.

An engine test looks like:

    for case in equivalence_cases():
        want_selected, want_loss = native_reference(case)
        got_selected, got_loss = my_engine(case)
        assert torch.equal(got_selected, want_selected)
        torch.testing.assert_close(got_loss, want_loss)

and, for gradients, on a model (`ict.testing.tiny_model_and_tokenizer`) whose log-probabilities
the engine computes with its own forward (TRL's `_get_per_token_logps_and_entropies`, verl's
engine): `native_gradient(case, model, input_ids, attention_mask, ...)` runs the native trainer's
forward (ict.train.logprobs.policy_logprobs) and loss, with old log-probabilities set to the
model's own minus the case's perturbation (so the ratios are the case's), and returns the
parameter gradients the engine's must equal (`assert_gradients_match`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ict.loss.advantages import ADVANTAGE_ESTIMATORS, compute_advantages, group_stats


def _method_cases() -> list[tuple[str, dict]]:
    """One case per registered method, with nothing but its name: each engine must resolve the
    method's own settings (reference, scope, loss, warm-up) from the name. Step 11 is past the
    paper's 10 dense steps. STAPO's thresholds are loosened so that it silences something here."""
    from ict.methods import METHODS

    loose = {"prob_below": 0.2, "entropy_quantile": 0.5}
    return [(f"method_{name}", {"method": name, **(loose if "stapo" in name else {})})
            for name in sorted(METHODS)]  # fmt: skip


# (name, options): options not given take DEFAULT_OPTIONS (method fields None: the method's)
_CASES = [
    # the step where the warm-up ends: dense at step = dense_warmup_steps, sparse one step later
    ("ict_warmup_last_dense_step", {"dense_warmup_steps": 3, "step": 3}),
    ("ict_warmup_first_sparse_step", {"dense_warmup_steps": 3, "step": 4}),
    ("random_sequence_warmup_end", {"method": "random_sequence", "dense_warmup_steps": 2, "step": 3}),
    # explicit settings over a method's
    ("ict_batch_mean_global_token_mean",
     {"reference": "batch_mean", "scope": "global", "loss_agg": "token_mean"}),
    ("ict_group_mean_seq_mean", {"reference": "group_mean", "scope": "global"}),
    ("ict_sequence_scope", {"scope": "sequence", "reference": "sequence_mean"}),
    ("ict_ratio_0.3_valid", {"ratio": 0.3, "normalize_by": "valid", "reference": "batch_mean",
                             "scope": "global", "loss_agg": "token_mean"}),
    ("ict_token_id", {"granularity": "token_id", "ratio": 0.25, "reference": "batch_mean",
                      "scope": "global", "loss_agg": "token_mean"}),
    ("entropy_0.2_sequence", {"method": "entropy", "scope": "sequence"}),
    ("ict+stapo_dual_clip",
     {"method": "ict+stapo", "ratio": 0.4, "prob_below": 0.2, "entropy_quantile": 0.5,
      "dual_clip": 3.0}),
    ("grpo_dr_grpo", {"method": "grpo", "loss_agg": "seq_mean_token_sum_norm"}),
    ("grpo_token_mean_eps_sym", {"method": "grpo", "loss_agg": "token_mean", "eps_high": 0.2}),
    ("random_seed_3", {"method": "random", "seed": 3}),
    # the loss modes and the entropy bonus with settings that make them act on these small cases
    ("clip_cov_wide_window", {"method": "clip_cov", "clip_cov_ratio": 0.1, "clip_cov_lb": 0.0}),
    ("clip_cov_wide_window_clip_0.2",
     {"method": "clip_cov", "clip_cov_ratio": 0.1, "clip_cov_lb": 0.0, "eps_low": 0.2,
      "eps_high": 0.2}),
    ("kl_cov_ratio_0.1", {"method": "kl_cov", "kl_cov_ratio": 0.1, "kl_cov_coef": 2.0}),
    # a loss mode with a sparse method: the mode acts on the selected tokens M (METHOD.md)
    ("ict_with_clip_cov", {"method": "ict", "loss_mode": "clip_cov", "clip_cov_ratio": 0.3,
                           "clip_cov_lb": -1.0}),
    ("ict_with_kl_cov", {"method": "ict", "loss_mode": "kl_cov", "kl_cov_ratio": 0.3}),
    ("entropy_bonus_0.1_token_mean",
     {"method": "entropy_bonus", "entropy_coef": 0.1, "loss_agg": "token_mean"}),
    ("ict_with_entropy_bonus", {"method": "ict", "entropy_coef": 0.05}),
    # the entropy-based advantage with the paper's ICT's loss (its per-response mean)
    ("ict_with_entropy_advantage", {"method": "ict", "entropy_advantage": 0.4}),
    ("ict_temperature_0.7", {"temperature": 0.7}),
    ("ict_group_position_global", {"scope": "global", "ratio": 0.2}),
    ("ict_group_position_valid_t0.7",
     {"normalize_by": "valid", "loss_agg": "token_mean", "temperature": 0.7, "ratio": 0.3}),
]  # fmt: skip


@dataclass
class EquivalenceCase:
    """One fixed input. Tensors: B rows (G responses per prompt), T positions, D hidden, V vocab."""

    name: str
    hidden: torch.Tensor  # [B, T, D] float32
    lm_head_weight: torch.Tensor  # [V, D] float32
    tokens: torch.Tensor  # [B, T] long
    mask: torch.Tensor  # [B, T] bool, right-padded responses, >= 1 valid token per row
    advantages: torch.Tensor  # [B] float32
    group_ids: torch.Tensor  # [B] long, prompt index of each row
    old_logprob: torch.Tensor  # [B, T] float32, log p_old(tokens), 0 where mask is False
    logprob: torch.Tensor  # [B, T] float32, log p_theta(tokens), 0 where mask is False
    entropy: torch.Tensor  # [B, T] float32, the current policy's entropy (nats) for the bonus
    options: dict = field(default_factory=dict)  # see defaults in equivalence_cases()

    @property
    def logits(self) -> torch.Tensor:
        """[B, T, V] float32 logits (before temperature), for engines that take logits."""
        return self.hidden @ self.lm_head_weight.T


DEFAULT_OPTIONS = {
    # method options (ict.methods.MethodOptions): None = the method's own
    "method": "ict", "ratio": None, "reference": None, "scope": None, "loss_agg": None,
    "normalize_by": None, "dense_warmup_steps": None, "granularity": "position",
    "prob_below": 0.01, "entropy_quantile": 0.05,  # STAPO
    # the rollout batch (1-based: past the paper's 10 dense steps) and the run's seed
    "step": 11, "seed": 0,
    "temperature": 1.0, "eps_low": None, "eps_high": None, "dual_clip": None,  # None: method's
    "loss_mode": None, "entropy_coef": None, "entropy_advantage": None,  # the method's
    # the loss modes' settings (ict.loss.modes defaults)
    "clip_cov_ratio": 2e-4, "clip_cov_lb": 1.0, "clip_cov_ub": 5.0, "kl_cov_ratio": 2e-3,
    "kl_cov_coef": 1.0,
}  # fmt: skip
METHOD_OPTION_KEYS = ("method", "ratio", "reference", "scope", "loss_agg", "normalize_by",
                      "dense_warmup_steps", "granularity", "loss_mode", "entropy_coef",
                      "entropy_advantage", "clip_cov_ratio", "clip_cov_lb", "clip_cov_ub",
                      "kl_cov_ratio", "kl_cov_coef")  # fmt: skip
# Clip-Cov draws its tokens from torch's global generator (as verl): an engine test seeds it with
# LOSS_SEED right before its loss call, as native_reference does
LOSS_SEED = 2026


def _estimator(options: dict) -> str:
    """The advantage estimator a case's method runs (ict.methods: grpo unless it fixes one)."""
    from ict.methods import get_method

    return get_method(options["method"]).resolved().advantage


def equivalence_cases(
    B: int = 8, G: int = 4, T: int = 7, D: int = 8, V: int = 16
) -> list[EquivalenceCase]:
    """The fixed cases (deterministic: same tensors on every call and machine, CPU float32)."""
    cases = []
    for index, (name, overrides) in enumerate(_method_cases() + _CASES):
        g = torch.Generator().manual_seed(1234 + index)
        options = {**DEFAULT_OPTIONS, **overrides}
        hidden = torch.randn(B, T, D, generator=g) * 1.5
        weight = torch.randn(V, D, generator=g)
        tokens = torch.randint(0, V, (B, T), generator=g)
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        lengths[0] = T  # one full-length response
        mask = torch.arange(T)[None, :] < lengths[:, None]
        rewards = torch.randint(0, 2, (B,), generator=g).float()
        group_ids = torch.arange(B) // G
        mean = torch.zeros(B).index_add_(0, group_ids, rewards)[group_ids] / G
        advantages = rewards - mean + 0.1 * torch.randn(B, generator=g)
        estimator = _estimator(options)
        if estimator == "passk":  # k = 2: with k = G = 4 every subset is the whole group, A = 0
            advantages = ADVANTAGE_ESTIMATORS["passk"](
                rewards, group_stats(rewards, group_ids), eps=1e-6, k=2
            )
        elif estimator != "grpo":  # the method's own (w_reinforce, nsr, psr: 0 on some rows)
            advantages = compute_advantages(rewards, group_ids, mode=estimator)[0]
        logp = torch.log_softmax(hidden @ weight.T / options["temperature"], dim=-1)
        old_logprob = logp.gather(-1, tokens[..., None]).squeeze(-1) * mask
        delta = (torch.rand(B, T, generator=g) - 0.5) * mask
        entropy = -(logp.exp() * logp).sum(-1) * mask
        cases.append(
            EquivalenceCase(
                name=name,
                hidden=hidden,
                lm_head_weight=weight,
                tokens=tokens,
                mask=mask,
                advantages=advantages,
                group_ids=group_ids,
                old_logprob=old_logprob,
                logprob=old_logprob + delta,
                entropy=entropy,
                options=options,
            )  # fmt: skip
        )
    return cases


def case_options(options: dict):
    """The case's ict.methods.MethodOptions (what a user would write in any engine's config)."""
    from ict.methods import MethodOptions

    return MethodOptions(
        **{k: options[k] for k in METHOD_OPTION_KEYS},
        stapo_prob_below=options["prob_below"], stapo_entropy_quantile=options["entropy_quantile"],
    )  # fmt: skip


def case_method(options: dict):
    """The resolved ict.methods.Method the case runs (its warm-up as given: no run length)."""
    from ict.methods import resolve_method

    return resolve_method(case_options(options))


def selector_options(options: dict) -> dict:
    """The keyword options `ict.select.select_tokens` takes for this case's method: the STAPO
    thresholds, for the selectors that declare them (ict.select facts)."""
    from ict.methods import selector_kwargs

    return selector_kwargs(case_options(options), case_method(options).selector)


def case_divergence(options: dict) -> str:
    """ "kl" when the case's selector reads the KL score (ict.select facts), else "js"."""
    return "kl" if "kl" in case_method(options).needs() else "js"


def case_clip_range(options: dict) -> tuple[float, float]:
    """(eps_low, eps_high) the case runs: the explicit ones, else the method's (ict.methods)."""
    method = case_method(options)
    low, high = options["eps_low"], options["eps_high"]
    return (method.eps_low if low is None else low, method.eps_high if high is None else high)


def case_loss_config(options: dict):
    """The ict.loss.LossConfig the case's method runs (clip range, aggregation, loss mode, entropy
    bonus, the loss modes' settings), as every engine must build it from the case's options."""
    from ict.loss import LossConfig

    method = case_method(options)
    eps_low, eps_high = case_clip_range(options)
    return LossConfig.from_config(
        case_options(options), eps_low=eps_low, eps_high=eps_high,
        dual_clip=options["dual_clip"], loss_agg=method.loss_agg,
        normalize_by=method.normalize_by, loss_mode=method.loss_mode,
        entropy_coef=method.entropy_coef, entropy_advantage=method.entropy_advantage,
    )  # fmt: skip


def native_selection(case: EquivalenceCase) -> torch.Tensor:
    """The native step's selection: ict.stats -> ict.step.select_step. bool [B, T]."""
    from ict.head import LogitHead
    from ict.stats import token_stats_from_hidden
    from ict.step import StepInputs, select_step

    o = case.options
    method = case_method(o)
    stats = token_stats_from_hidden(
        case.hidden, LogitHead(case.lm_head_weight), case.tokens, case.mask,
        temperature=o["temperature"],
        reference=method.reference, group_ids=case.group_ids, divergence=case_divergence(o),
    )  # fmt: skip
    inputs = StepInputs(case.mask, stats, case.advantages, case.tokens)
    return select_step(method, case_options(o), inputs, step=o["step"], seed=o["seed"]).selected


def native_loss(
    case: EquivalenceCase,
    selected: torch.Tensor,
    *,
    logprob: torch.Tensor | None = None,
    old_logprob: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
) -> torch.Tensor:
    """The native loss of the case (ict.loss.policy_loss, one loss call over the whole batch,
    Clip-Cov's draw after torch.manual_seed(LOSS_SEED)). logprob / old_logprob / entropy [B, T]:
    a model's (with gradient), else the case's own tensors."""
    from ict.loss import policy_loss

    config = case_loss_config(case.options)
    logprob = case.logprob if logprob is None else logprob
    old_logprob = case.old_logprob if old_logprob is None else old_logprob
    entropy = case.entropy if entropy is None else entropy
    torch.manual_seed(LOSS_SEED)
    loss, _ = policy_loss(
        logprob, old_logprob, case.advantages, case.mask, selected, config,
        entropy=entropy if config.needs_entropy else None, max_response_length=case.mask.size(1),
    )  # fmt: skip
    return loss


def native_reference(case: EquivalenceCase) -> tuple[torch.Tensor, torch.Tensor]:
    """Native path: ict.stats -> ict.step.select_step -> ict.loss, as the native trainer's
    step runs them. Returns (selected [B, T] bool, loss scalar)."""
    selected = native_selection(case)
    return selected, native_loss(case, selected)


def case_delta(case: EquivalenceCase) -> torch.Tensor:
    """[B, T] log pi - log pi_old of the case (its fixed perturbation; 0 off the mask)."""
    return case.logprob - case.old_logprob


def native_gradient(
    case: EquivalenceCase,
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    selected: torch.Tensor,
    *,
    temperature: float = 1.0,
) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """The native trainer's gradient of the case's loss on a real model.

    input_ids, attention_mask: [B, P + T], the case's responses (`case.tokens`) in the last T
    columns after P prompt columns (left-padded prompts: positions skip the padding, as
    `generate` and verl number them). The log-probabilities and entropies come from the native
    update's forward (ict.train.logprobs.policy_logprobs, the model's own logit head, at
    `temperature`); the old log-probabilities are those, detached, minus the case's perturbation,
    so rho = exp(case_delta) as in the case. Returns (gradients of the model's trainable
    parameters, in `model.parameters()` order; old_logprob [B, T]; the loss)."""
    from ict.train.logprobs import policy_logprobs

    T = case.mask.size(1)
    where = torch.zeros_like(input_ids, dtype=torch.bool)
    where[:, -T:] = case.mask
    logprob, entropy = policy_logprobs(
        model, input_ids, attention_mask, where, temperature=temperature, with_entropy=True
    )
    logprob, entropy = logprob[:, -T:], entropy[:, -T:]
    old_logprob = torch.where(case.mask, logprob.detach() - case_delta(case), 0.0)
    loss = native_loss(case, selected, logprob=logprob, old_logprob=old_logprob, entropy=entropy)
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]
    return grads, old_logprob, loss.detach()


def assert_gradients_match(
    case: EquivalenceCase, got: list[torch.Tensor], want: list[torch.Tensor], *, atol=1e-5
) -> None:
    """Raise AssertionError unless an engine's parameter gradients equal the native ones (float32
    tolerance, relative to the gradient's size), and are not all zero where native's are not."""
    got_flat = torch.cat([g.detach().float().flatten().cpu() for g in got])
    want_flat = torch.cat([g.detach().float().flatten().cpu() for g in want])
    scale = float(want_flat.abs().max()) or 1.0
    torch.testing.assert_close(
        got_flat / scale, want_flat / scale, atol=atol, rtol=1e-4,
        msg=lambda m: f"case {case.name}: gradient differs from native: {m}",
    )  # fmt: skip


def assert_matches_native(
    case: EquivalenceCase, selected: torch.Tensor, loss: torch.Tensor
) -> None:
    """Raise AssertionError unless an engine's (selected [B, T], loss) equal the native path's:
    the same selected tokens exactly, the same loss to float32 tolerance."""
    want_selected, want_loss = native_reference(case)
    if not torch.equal(selected.bool().cpu(), want_selected.cpu()):
        diff = (selected.bool().cpu() ^ want_selected.cpu()).nonzero().tolist()
        raise AssertionError(
            f"case {case.name}: selection differs from native at (row, pos) {diff}"
        )
    torch.testing.assert_close(
        loss.detach().float().cpu(), want_loss.detach().float().cpu(), atol=1e-6, rtol=1e-5,
        msg=lambda m: f"case {case.name}: loss differs from native: {m}",
    )  # fmt: skip
