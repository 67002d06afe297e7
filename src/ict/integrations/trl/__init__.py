"""TRL integration: token-selective GRPO on top of TRL's `GRPOTrainer`.

Swap two names in an existing TRL script and every ict method runs inside TRL, with TRL's own
generation (transformers or vLLM), accelerate/DeepSpeed/FSDP, logging and checkpointing:

    from ict.integrations.trl import ICTGRPOConfig as GRPOConfig, ICTGRPOTrainer as GRPOTrainer
    args = GRPOConfig(..., method="ict", ratio=0.10)

The step itself is ict's (ict.methods.StepPlan, docs/engines/CONTRACT.md): the trainer resolves
it once (`ICTGRPOTrainer.ict_resolve`, at set-up and again when TRL knows the run's length) from
the config and TRL's layout, and calls it. Each module here is a thin adapter of one of TRL's
hooks:

- `config`: `ICTGRPOConfig` (GRPOConfig plus ict.methods.MethodOptions) and the map of ict's
  loss aggregations onto TRL's `loss_type`.
- `trainer`: `ICTGRPOTrainer`; `_generate_and_score_completions` (after TRL has sampled and
  scored a generation batch: the statistics of the policy that produced it, `stats`) and
  `_prepare_inputs` (once TRL has shuffled and split the batch into micro-batches: the step's
  selection, normalisers and metrics, the plan's `step`, on the rows in generation order so that
  nothing depends on the shuffle or the number of processes).
- `stats`: ict's token statistics from the policy's final hidden states and LM head
  (ict.stats.token_stats_from_hidden, chunked); whole groups per process for a group reference.
- `loss`: `_compute_loss`: the selection multiplied into TRL's loss mask, TRL's own loss
  unchanged (clip, dual clip, KL, vLLM importance sampling, loss types), or ict.loss.policy_loss
  for a method TRL's loss cannot compute (a loss mode, an entropy bonus); the per-optimizer-step
  normalisers.
- `single_forward`: on-policy, the statistics from the loss forward of each micro-batch instead of
  a separate forward (`ICTGRPOConfig.one_forward`; `ICTGRPOTrainer.ict_one_forward_reason` says
  why a run keeps the two passes).

`loss_agg` maps onto TRL's `loss_type`: token_mean -> "dapo" (global token mean),
seq_mean_token_mean -> "grpo" (advantages rescaled so that the mean runs over the responses with a
selected token, as in METHOD.md), seq_mean_token_sum_norm -> "dr_grpo" (see docs/engines/trl.md).
"""

from __future__ import annotations

from ict.errors import UserError

TRL_MIN, TRL_MAX = "1.16", "2"  # supported: TRL_MIN <= trl < TRL_MAX (the hooks used are private)


def check_trl_version(version: str) -> None:
    """Raise `UserError` unless `TRL_MIN <= version < TRL_MAX` (the private hooks used here)."""
    from packaging.version import Version

    v = Version(version)
    if not (Version(TRL_MIN) <= Version(v.base_version) < Version(TRL_MAX)):
        raise UserError(
            f"ict.integrations.trl supports trl>={TRL_MIN},<{TRL_MAX}, found trl {version}: "
            f'install a supported version with `pip install "trl>={TRL_MIN},<{TRL_MAX}"`.'
        )


try:
    import trl
except ImportError as e:  # pragma: no cover - exercised only without the optional install
    raise UserError(
        'ict.integrations.trl needs TRL: install it with `pip install "ict[trl]"`.'
    ) from e
check_trl_version(trl.__version__)

from ict.integrations.trl.config import (  # noqa: E402
    LOSS_AGG_TO_TRL,
    ICTGRPOConfig,
    ict_computes_loss,
)
from ict.integrations.trl.stats import check_whole_groups  # noqa: E402
from ict.integrations.trl.trainer import ICTGRPOTrainer  # noqa: E402

__all__ = [
    "ICTGRPOConfig",
    "ICTGRPOTrainer",
    "LOSS_AGG_TO_TRL",
    "check_trl_version",
    "ict_computes_loss",
    "check_whole_groups",
]
