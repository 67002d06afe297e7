"""The clipped policy-gradient loss on selected tokens (METHOD.md, "Policy loss").

    A_t   <- A_t + min(alpha * detach(H_t), |A_t| / kappa)     (optional entropy-based advantage
             shaping, arXiv 2506.14758: alpha = entropy_advantage, kappa = ENTROPY_ADVANTAGE_KAPPA)
    rho_t = exp(log pi_theta(y_t) - log pi_old(y_t))
    l_t   = -min(rho_t A, clip(rho_t, 1 - eps_low, 1 + eps_high) A)    (clip-higher)
    l_t   = min(l_t, -c A) where A < 0          (optional dual clip, c > 1; the vanilla mode only)
    l_t   <- the loss mode's change (ict.loss.modes: vanilla, clip_cov, kl_cov)
    M     = valid * selected;  D = M (normalize_by="selected") or valid (normalize_by="valid")
    loss  = agg(l, M, D) + kl_coef * agg(kl, K, D_K) - entropy_coef * agg(H, M, D)

K is M (kl_on="selected", then D_K = D) or valid (kl_on="valid", then D_K = valid). `agg` is
`LOSS_AGGREGATIONS[loss_agg]`, pure functions in the verl core_algos style.

Numerical guards: positions outside M never reach the arithmetic (padding may hold NaN or inf);
the log-ratio and the KL's log-difference are clamped to [-20, 20] before exp (as verl does), which
only matters for ratios beyond e^20.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ict.errors import ConfigError, DataError
from ict.loss.modes import LOSS_MODES, CovarianceOptions, apply_loss_mode, loss_mode_metrics
from ict.loss.normaliser import loss_masks, row_counts
from ict.loss.options import COVARIANCE_FIELDS

LOG_RATIO_CLAMP = 20.0


def _safe_div(num: Tensor, den) -> Tensor:
    den = torch.as_tensor(den, dtype=num.dtype, device=num.device)
    return num / torch.where(den > 0, den, torch.ones_like(den))


def token_mean(values, loss_mask, norm_mask, *, max_response_length, denominator, row_counts=None):
    """sum(l M) / sum(D); `denominator` replaces sum(D). 0 when the normaliser is 0."""
    num = torch.where(loss_mask, values, 0.0).sum()
    return _safe_div(num, norm_mask.sum() if denominator is None else denominator)


def seq_mean_token_mean(
    values, loss_mask, norm_mask, *, max_response_length, denominator, row_counts=None
):
    """Mean over responses of sum_t(l M) / sum_t(D), over the responses with sum_t(D) > 0 (as
    verl); `denominator` replaces that number of responses and `row_counts` [B] the per-response
    sum_t(D) (for a slice of the columns: the counts of the whole responses)."""
    counts = norm_mask.sum(-1) if row_counts is None else row_counts.to(values.device)
    per_row = _safe_div(torch.where(loss_mask, values, 0.0).sum(-1), counts)
    rows = (counts > 0).sum() if denominator is None else denominator
    return _safe_div(per_row.sum(), rows)


def seq_mean_token_sum_norm(
    values, loss_mask, norm_mask, *, max_response_length, denominator, row_counts=None
):
    """Dr. GRPO: sum(l M) / (B * max_response_length) (default T); `denominator` replaces the
    product. `normalize_by` does not apply (the normaliser is a constant)."""
    B, T = values.shape
    length = T if max_response_length is None else max_response_length
    num = torch.where(loss_mask, values, 0.0).sum()
    return _safe_div(num, B * length if denominator is None else denominator)


LOSS_AGGREGATIONS: dict[str, Callable[..., Tensor]] = {
    "token_mean": token_mean,
    "seq_mean_token_mean": seq_mean_token_mean,
    "seq_mean_token_sum_norm": seq_mean_token_sum_norm,
}


def kl_k1(d: Tensor) -> Tensor:
    """k1 = log pi - log pi_ref = -d, with d = log pi_ref - log pi."""
    return -d


def kl_k3(d: Tensor) -> Tensor:
    """k3 = exp(d) - d - 1 >= 0, with d = log pi_ref - log pi."""
    return torch.exp(d) - d - 1


def kl_low_var(d: Tensor) -> Tensor:
    """verl's `low_var_kl` (its GRPO recipe's KL loss): k3 clamped to [-10, 10] (so at most 10 per
    token, and no gradient where k3 > 10), with d = log pi_ref - log pi (clamped to [-20, 20] by
    policy_loss before any estimator, as verl clamps it)."""
    return kl_k3(d).clamp(-10.0, 10.0)


KL_ESTIMATORS: dict[str, Callable[[Tensor], Tensor]] = {
    "k1": kl_k1, "k3": kl_k3, "low_var_kl": kl_low_var,
}  # fmt: skip
NORMALIZE_BY = ("selected", "valid")
KL_ON = ("selected", "valid")
# Cheng et al., "Reasoning with Exploration: An Entropy Perspective" (arXiv 2506.14758, v3, sec. 4):
# "We fix kappa to 2 throughout all experiments, and set alpha to 0.4 for GRPO"
ENTROPY_ADVANTAGE_KAPPA = 2.0
ENTROPY_ADVANTAGE_ALPHA = 0.4


@dataclass(frozen=True)
class LossConfig:
    """The policy loss's settings, built once (e.g. `LossConfig.from_config(train_config)`).

    eps_low / eps_high: clip range (clip-higher); dual_clip: c > 1 or None; loss_agg: a key of
    LOSS_AGGREGATIONS; normalize_by: "selected" | "valid"; max_response_length: Dr. GRPO's constant
    (tokens); kl_coef / kl_estimator / kl_on: the KL penalty; entropy_coef: the entropy bonus;
    loss_mode: a key of ict.loss.modes.LOSS_MODES, with Clip-Cov's and KL-Cov's settings;
    entropy_advantage: alpha of the entropy-based advantage shaping (0: off; `shape_advantages`).
    """

    eps_low: float = 0.2
    eps_high: float = 0.28
    dual_clip: float | None = None
    loss_agg: str = "seq_mean_token_mean"
    normalize_by: str = "selected"
    max_response_length: int | None = None
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    kl_on: str = "selected"
    entropy_coef: float = 0.0
    loss_mode: str = "vanilla"
    clip_cov_ratio: float = CovarianceOptions.clip_cov_ratio
    clip_cov_lb: float = CovarianceOptions.clip_cov_lb
    clip_cov_ub: float = CovarianceOptions.clip_cov_ub
    kl_cov_ratio: float = CovarianceOptions.kl_cov_ratio
    kl_cov_coef: float = CovarianceOptions.kl_cov_coef
    entropy_advantage: float = 0.0

    def __post_init__(self):
        self.validate()

    def validate(
        self, *, has_ref: bool = True, has_entropy: bool = True, denominator=None,
        kl_denominator=None,
    ) -> None:  # fmt: skip
        """Raise a one-line ConfigError for a bad setting; and, for one loss call, for a KL or
        entropy term without its input (`has_ref`, `has_entropy`) or a bad normaliser given
        (`denominator`, `kl_denominator`: see `policy_loss`)."""
        _check_settings(self)
        _check_call(self, has_ref, has_entropy, denominator, kl_denominator)

    @classmethod
    def from_config(cls, config, **overrides) -> LossConfig:
        """From any object with these attribute names (TrainConfig, a resolved Method, ...)."""
        names = [f.name for f in dataclasses.fields(cls)]
        values = {n: getattr(config, n) for n in names if getattr(config, n, None) is not None}
        values.update(overrides)
        return cls(**values)

    @property
    def covariance(self) -> CovarianceOptions:
        """Clip-Cov's and KL-Cov's settings (ict.loss.modes)."""
        return CovarianceOptions(**{k: getattr(self, k) for k in COVARIANCE_FIELDS})

    @property
    def needs_entropy(self) -> bool:
        """Whether the loss reads the policy's per-token entropy (`entropy=`): the entropy bonus
        or the entropy-based advantage shaping."""
        return self.entropy_coef != 0.0 or self.entropy_advantage != 0.0

    @property
    def reads_every_valid_token(self) -> bool:
        """True when a term reads rows whatever their advantage: the KL term, the entropy bonus,
        or a covariance loss mode (its means and token count span every row of the call)."""
        return self.kl_coef != 0.0 or self.entropy_coef != 0.0 or self.loss_mode != "vanilla"

    def denominator(
        self, mask: Tensor, selected: Tensor | None = None, *, term: str = "policy"
    ) -> float:
        """The normaliser of a whole (mini-)batch, for summing its micro-batches' losses exactly:
        `count`, at least 1. Pass them as `denominator=` and `kl_denominator=` to `policy_loss`
        for every micro-batch of the mini-batch."""
        return max(self.count(mask, selected, term=term), 1.0)

    def count(self, mask: Tensor, selected: Tensor | None = None, *, term: str = "policy") -> float:
        """The normaliser's count in these rows, without `denominator`'s floor of 1 (0 when the
        rows have no normaliser token): the sum of the rows' shares (ict.loss.normaliser.
        row_counts, the one ladder), so that the counts of micro-batches and processes add up
        to the whole batch's.

        mask, selected: bool [B, T]. term: "policy" (the policy and entropy terms, normaliser
        tokens D) or "kl" (the KL term, D_K)."""
        counts = row_counts(mask, selected, loss=self)
        return float(int((counts.kl_loss if term == "kl" else counts.loss).sum()))


def clipped_token_loss(
    logprob: Tensor,
    old_logprob: Tensor,
    advantages: Tensor,
    loss_mask: Tensor,
    *,
    eps_low: float,
    eps_high: float,
    dual_clip: float | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The clipped surrogate per token: the one formula every engine uses (native, TRL, verl).

    logprob: [B, T] log pi_theta(y_t) (with grad); old_logprob: [B, T] (detached here);
    advantages: [B, T]; loss_mask: bool [B, T] (positions outside never reach the arithmetic).
    Returns (per_token loss [B, T] (0 off-mask), ratio [B, T], clipped_loss [B, T] before the dual
    clip). Dtype: float32 at least.
    """
    dtype = torch.promote_types(logprob.dtype, torch.float32)
    A = torch.where(loss_mask, advantages.detach().to(dtype), 0.0)
    log_ratio = torch.where(loss_mask, logprob.to(dtype) - old_logprob.detach().to(dtype), 0.0)
    ratio = torch.exp(log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
    pg_unclipped = -A * ratio
    pg_clipped = -A * ratio.clamp(1 - eps_low, 1 + eps_high)
    clipped_loss = torch.maximum(pg_unclipped, pg_clipped)
    per_token = clipped_loss
    if dual_clip is not None:
        per_token = torch.where(A < 0, torch.minimum(per_token, -dual_clip * A), per_token)
    return per_token, ratio, clipped_loss


def policy_loss(
    logprob: Tensor,
    old_logprob: Tensor,
    advantages: Tensor,
    mask: Tensor,
    selected: Tensor | None = None,
    config: LossConfig | None = None,
    *,
    ref_logprob: Tensor | None = None,
    entropy: Tensor | None = None,
    denominator: float | Tensor | None = None,
    row_counts: Tensor | None = None,
    kl_row_counts: Tensor | None = None,
    kl_denominator: float | Tensor | None = None,
    generator: torch.Generator | None = None,
    **settings,
) -> tuple[Tensor, dict[str, float]]:
    """Clipped surrogate loss on the selected tokens. Returns (scalar loss, metrics).

    (Twelve parameters: the tensors of one loss call and the normalisers an engine computed over a
    larger batch; the settings themselves travel as one LossConfig.)

    config: a LossConfig (default LossConfig()); keyword `settings` (eps_low=..., loss_agg=...)
    override its fields for one call. row_counts: [B] per-response normaliser counts when the
    tensors hold only some columns of each response (`LossConfig.row_counts` of the full rows).

    logprob: [B, T] log pi_theta(y_t) (with grad). old_logprob, ref_logprob: [B, T] (no grad is
    taken through them). advantages: [B] or [B, T] (no grad). mask: bool [B, T] valid response
    tokens. selected: bool [B, T] (None = all valid). entropy: [B, T] policy entropy for the bonus.
    denominator: the normaliser of the aggregation computed elsewhere (gradient accumulation, data
    parallel: the global count); see LOSS_AGGREGATIONS for what it replaces in each.
    kl_denominator: the KL term's (`LossConfig.denominator(..., term="kl")`); None: `denominator`
    (the same normaliser unless kl_on="valid" with normalize_by="selected"). generator: Clip-Cov's
    draw (None: torch's global generator, as verl).
    Metrics (python floats, fractions over M unless said): clip_fraction (low or high clip
    active), clip/low (rho < 1-eps_low, A < 0), clip/high (rho > 1+eps_high, A > 0),
    dual_clip_fraction, selected_fraction (|M| / |valid|), ratio/mean, pg_loss, loss, the loss
    mode's `loss_mode/changed_tokens` (tokens of M it cut or penalised in this call),
    `loss_mode/changed_rate` (that / |M|) and `loss_mode/nominal_rate` (clip_cov / kl_cov only;
    ict.loss.modes.loss_mode_metrics), and kl (mean over K) / entropy (mean over M) when given. An empty M gives loss 0 that still
    back-propagates (zero gradients).
    """
    unknown = set(settings) - {f.name for f in dataclasses.fields(LossConfig)}
    if unknown:
        raise ConfigError(f"policy_loss got unknown setting(s) {sorted(unknown)}")
    config = config or LossConfig()
    if settings:
        config = dataclasses.replace(config, **settings)
    c = config
    c.validate(
        has_ref=ref_logprob is not None, has_entropy=entropy is not None,
        denominator=denominator, kl_denominator=kl_denominator,
    )  # fmt: skip
    valid, M, A = _check_tensors(
        logprob, old_logprob, advantages, mask, selected, ref_logprob, entropy
    )
    dtype = torch.promote_types(logprob.dtype, torch.float32)
    logprob = logprob.to(dtype)
    if c.entropy_advantage != 0.0:
        A = shape_advantages(A.to(dtype), entropy, c.entropy_advantage)
    per_token, ratio, clipped_loss = clipped_token_loss(
        logprob, old_logprob, A, M, eps_low=c.eps_low, eps_high=c.eps_high, dual_clip=c.dual_clip
    )
    A = torch.where(M, A.detach().to(dtype), 0.0)
    per_token, changed = apply_loss_mode(
        c.loss_mode, per_token, logprob=logprob, old_logprob=old_logprob, ratio=ratio,
        advantages=A, loss_mask=M, options=c.covariance, generator=generator,
    )  # fmt: skip
    kl_coef, kl_on, entropy_coef = c.kl_coef, c.kl_on, c.entropy_coef

    _, D, K, D_K = loss_masks(valid, M, normalize_by=c.normalize_by, kl_on=kl_on)
    agg = LOSS_AGGREGATIONS[c.loss_agg]
    kw = dict(max_response_length=c.max_response_length, denominator=denominator)
    kw_policy = dict(kw, row_counts=row_counts)
    pg_loss = agg(per_token, M, D, **kw_policy)
    loss = pg_loss
    metrics: dict[str, float] = {}

    if ref_logprob is not None:
        d = torch.where(K, ref_logprob.detach().to(dtype) - logprob, 0.0)
        kl = KL_ESTIMATORS[c.kl_estimator](d.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
        if kl_coef != 0.0:
            kl_rows = row_counts if kl_on == "selected" else kl_row_counts
            kw_kl = dict(kw, denominator=denominator if kl_denominator is None else kl_denominator)
            loss = loss + kl_coef * agg(kl, K, D_K, **kw_kl, row_counts=kl_rows)
        metrics["kl"] = float(_safe_div(torch.where(K, kl.detach(), 0.0).sum(), K.sum()))
    if entropy is not None:
        entropy = entropy.to(dtype)
        if entropy_coef != 0.0:
            loss = loss - entropy_coef * agg(torch.where(M, entropy, 0.0), M, D, **kw_policy)
        metrics["entropy"] = float(_safe_div(torch.where(M, entropy.detach(), 0.0).sum(), M.sum()))

    metrics.update(_clip_metrics(ratio, A, M, valid, clipped_loss, c))
    metrics.update(
        loss_mode_metrics(c.loss_mode, c.covariance, int((changed & M).sum()), int(M.sum()))
    )
    metrics["pg_loss"], metrics["loss"] = float(pg_loss.detach()), float(loss.detach())
    return loss, metrics


def shape_advantages(
    advantages: Tensor, entropy: Tensor, alpha: float, kappa: float = ENTROPY_ADVANTAGE_KAPPA
) -> Tensor:
    """Entropy-based advantage shaping (arXiv 2506.14758, eqs. 5-6): A + min(alpha * H, |A| /
    kappa) with H detached, so the term never exceeds |A| / kappa (nor flips a negative A's sign)
    and adds no entropy gradient. advantages: [B, T] (or broadcastable); entropy: [B, T] nats,
    the policy's entropy at each position. Returns [B, T]."""
    entropy = entropy.detach().to(advantages.dtype)
    return advantages + torch.minimum(alpha * entropy, advantages.abs() / kappa)


@torch.no_grad()
def _clip_metrics(ratio, A, M, valid, clipped_loss, c: LossConfig) -> dict[str, float]:
    """clip_fraction, clip/low, clip/high, dual_clip_fraction (fractions of M), selected_fraction
    (|M| / |valid|) and ratio/mean (over M) of one loss call; all [B, T] inputs."""
    n_sel = M.sum()
    dtype = ratio.dtype

    def frac(x: Tensor) -> float:
        return float(_safe_div((x & M).sum().to(dtype), n_sel))

    low = (ratio < 1 - c.eps_low) & (A < 0)
    high = (ratio > 1 + c.eps_high) & (A > 0)
    dual = (
        torch.zeros_like(M) if c.dual_clip is None else (A < 0) & (-c.dual_clip * A < clipped_loss)
    )
    return {
        "clip_fraction": frac(low | high),
        "clip/low": frac(low),
        "clip/high": frac(high),
        "dual_clip_fraction": frac(dual),
        "selected_fraction": float(_safe_div(n_sel.to(dtype), valid.sum())),
        "ratio/mean": float(_safe_div(torch.where(M, ratio, 0.0).sum(), n_sel)),
    }


def _check_settings(c: LossConfig) -> None:
    """The settings' own checks (LossConfig.validate)."""
    eps_low, eps_high, dual_clip, loss_agg = c.eps_low, c.eps_high, c.dual_clip, c.loss_agg
    normalize_by, kl_estimator, kl_on = c.normalize_by, c.kl_estimator, c.kl_on
    max_response_length, loss_mode, kl_coef = c.max_response_length, c.loss_mode, c.kl_coef
    clip_cov_ratio, clip_cov_lb, clip_cov_ub = c.clip_cov_ratio, c.clip_cov_lb, c.clip_cov_ub
    kl_cov_ratio, kl_cov_coef = c.kl_cov_ratio, c.kl_cov_coef
    if not 0 <= eps_low <= 1:
        raise ConfigError(
            f"eps_low must be in [0, 1] (clip lower bound 1 - eps_low >= 0; 1: no lower clip, as "
            f"Clip-Cov's authors run it), got {eps_low!r}"
        )
    if not eps_high >= 0:
        raise ConfigError(f"eps_high must be >= 0, got {eps_high!r}")
    if dual_clip is not None and not dual_clip > 1:
        raise ConfigError(
            f"dual_clip must be > 1 (e.g. 3.0) or None to disable it, got {dual_clip!r}"
        )
    if loss_agg not in LOSS_AGGREGATIONS:
        raise ConfigError(f"unknown loss_agg {loss_agg!r}; choose from {sorted(LOSS_AGGREGATIONS)}")
    if normalize_by not in NORMALIZE_BY:
        raise ConfigError(
            f"unknown normalize_by {normalize_by!r}; choose from {list(NORMALIZE_BY)}"
        )
    if kl_estimator not in KL_ESTIMATORS:
        raise ConfigError(
            f"unknown kl_estimator {kl_estimator!r}; choose from {sorted(KL_ESTIMATORS)}"
        )
    if kl_on not in KL_ON:
        raise ConfigError(f"unknown kl_on {kl_on!r}; choose from {list(KL_ON)}")
    if loss_mode not in LOSS_MODES:
        raise ConfigError(f"unknown loss_mode {loss_mode!r}; choose from {list(LOSS_MODES)}")
    if loss_mode != "vanilla" and dual_clip is not None:
        raise ConfigError(
            f"loss_mode={loss_mode!r} has no dual clip (verl's {loss_mode} has none): drop "
            f"dual_clip={dual_clip!r}, or use the vanilla loss"
        )
    for name, value in (("clip_cov_ratio", clip_cov_ratio), ("kl_cov_ratio", kl_cov_ratio)):
        if not 0 < value <= 1:
            raise ConfigError(f"{name} must be in (0, 1] (a fraction of tokens), got {value!r}")
    if not clip_cov_lb < clip_cov_ub:
        raise ConfigError(
            f"clip_cov_lb must be below clip_cov_ub (the covariance window), got "
            f"{clip_cov_lb!r} >= {clip_cov_ub!r}"
        )
    if not kl_cov_coef >= 0:
        raise ConfigError(f"kl_cov_coef must be >= 0, got {kl_cov_coef!r}")
    if max_response_length is not None and (
        isinstance(max_response_length, bool)
        or not isinstance(max_response_length, int)
        or max_response_length < 1
    ):
        raise ConfigError(
            f"max_response_length must be a positive int, got {max_response_length!r}"
        )
    if not kl_coef >= 0:
        raise ConfigError(f"kl_coef must be >= 0, got {kl_coef!r}")


def _check_call(c: LossConfig, has_ref, has_entropy, denominator, kl_denominator) -> None:
    """One loss call's checks (LossConfig.validate): its inputs and normalisers."""
    kl_coef, kl_on, normalize_by, loss_agg = c.kl_coef, c.kl_on, c.normalize_by, c.loss_agg
    entropy_coef, entropy_advantage = c.entropy_coef, c.entropy_advantage
    if kl_coef != 0 and not has_ref:
        raise ConfigError("kl_coef > 0 needs ref_logprob= (the reference model's log-probs)")
    if entropy_coef != 0 and not has_entropy:
        raise ConfigError("entropy_coef != 0 needs entropy= (the policy's per-token entropy)")
    if not (isinstance(entropy_advantage, (int, float)) and 0 <= entropy_advantage < float("inf")):
        raise ConfigError(
            f"entropy_advantage (alpha of the entropy-based advantage) must be a finite number "
            f">= 0, e.g. {ENTROPY_ADVANTAGE_ALPHA}, got {entropy_advantage!r}"
        )
    if entropy_advantage != 0 and not has_entropy:
        raise ConfigError("entropy_advantage != 0 needs entropy= (the policy's per-token entropy)")
    if denominator is not None:
        if not float(denominator) >= 0:
            raise ConfigError(
                f"denominator must be >= 0 (a token or response count), got {denominator!r}"
            )
        if (
            kl_coef != 0
            and kl_on == "valid"
            and normalize_by == "selected"
            and loss_agg != "seq_mean_token_sum_norm"
            and kl_denominator is None
        ):
            raise ConfigError(
                "with kl_on='valid' and normalize_by='selected' the KL and policy terms have "
                "different normalisers: pass kl_denominator= (LossConfig.denominator(mask, "
                "selected, term='kl')) as well as denominator="
            )


def _check_tensors(logprob, old_logprob, advantages, mask, selected, ref_logprob, entropy):
    if not isinstance(logprob, Tensor) or logprob.dim() != 2:
        raise DataError(
            f"logprob must be a [B, T] tensor, got {getattr(logprob, 'shape', type(logprob))}"
        )
    shape = logprob.shape
    if isinstance(advantages, tuple):
        raise DataError(
            "advantages must be a tensor [B] or [B, T], got a tuple: compute_advantages returns "
            "(advantages, info); pass its first element (advantages, _ = compute_advantages(...))"
        )
    if not isinstance(advantages, Tensor):
        try:
            advantages = torch.as_tensor(advantages)
        except (TypeError, ValueError, RuntimeError):
            raise DataError(
                f"advantages must be a tensor [B] or [B, T], got {type(advantages).__name__}"
            ) from None
    if mask is None:
        raise DataError("mask is required: a bool [B, T] tensor of the valid response tokens")
    if selected is not None and not isinstance(selected, Tensor):
        hint = (
            ": pass the LossConfig as config=... (the 5th positional argument is `selected`)"
            if isinstance(selected, LossConfig) or selected is LossConfig
            else ""
        )
        raise DataError(
            f"selected must be a bool [B, T] tensor or None, got {type(selected).__name__}{hint}"
        )
    for name, x in (
        ("old_logprob", old_logprob),
        ("mask", mask),
        ("selected", selected),
        ("ref_logprob", ref_logprob),
        ("entropy", entropy),
    ):
        if x is not None and (not isinstance(x, Tensor) or x.shape != shape):
            raise DataError(
                f"{name} must have logprob's shape {tuple(shape)}, got {getattr(x, 'shape', type(x))}"
            )
    valid = mask.bool()
    M = loss_masks(valid, selected)[0]
    advantages = torch.as_tensor(advantages, device=logprob.device)
    if advantages.shape == shape[:1]:
        advantages = advantages[:, None].expand(shape)
    elif advantages.shape != shape:
        raise DataError(
            f"advantages must be [B] = {tuple(shape[:1])} or [B, T] = {tuple(shape)}, got {tuple(advantages.shape)}"
        )
    return valid, M, advantages
