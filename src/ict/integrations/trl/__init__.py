"""TRL integration: token-selective GRPO on top of TRL's `GRPOTrainer`.

Swap two names in an existing TRL script and every ict method runs inside TRL, with TRL's own
generation (transformers or vLLM), accelerate/DeepSpeed/FSDP, logging and checkpointing:

    from ict.integrations.trl import ICTGRPOConfig as GRPOConfig, ICTGRPOTrainer as GRPOTrainer
    args = GRPOConfig(..., method="ict", ratio=0.10)

The step is ict's (ict.step.StepPlan, docs/engines/CONTRACT.md), resolved once by the trainer
and called from TRL's hooks; each module is a thin adapter: `config` (ICTGRPOConfig: GRPOConfig
plus ict.methods.MethodOptions, ict's aggregations as TRL loss types), `trainer`
(ICTGRPOTrainer: the plan, the generation and micro-batch hooks), `stats` (the old policy's
token statistics), `loss` (TRL's loss on the selected tokens, or ict's; the normalisers) and
`single_forward` (on-policy: the statistics from the loss forward). docs/engines/trl.md.
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
        'ict.integrations.trl needs TRL: install it with `pip install -e ".[trl]"` in a clone of ict.'
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
