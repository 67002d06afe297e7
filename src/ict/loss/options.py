"""The loss modes' names and settings, torch-free (configs and `--help` import them).

The modes themselves (what each computes) are in ict.loss.modes."""

from __future__ import annotations

from dataclasses import dataclass, fields

LOSS_MODES = ("vanilla", "clip_cov", "kl_cov")
# the step metrics of a loss mode (none for vanilla): tokens changed (summed over the step's loss
# calls), changed / |M| over the step, and the configured ratio
LOSS_MODE_KEYS = ("loss_mode/changed_tokens", "loss_mode/changed_rate", "loss_mode/nominal_rate")


@dataclass(frozen=True)
class CovarianceOptions:
    """Clip-Cov and KL-Cov settings (verl's `policy_loss` fields; the paper's recipe values,
    ict.loss.modes)."""

    clip_cov_ratio: float = 2e-4
    clip_cov_lb: float = 1.0
    clip_cov_ub: float = 5.0
    kl_cov_ratio: float = 2e-3
    kl_cov_coef: float = 1.0  # verl's ppo_kl_coef


COVARIANCE_FIELDS = tuple(f.name for f in fields(CovarianceOptions))  # the config fields
# each mode's configured share of the loss tokens it changes (`loss_mode/nominal_rate`)
NOMINAL_RATE_FIELD = {"clip_cov": "clip_cov_ratio", "kl_cov": "kl_cov_ratio"}
