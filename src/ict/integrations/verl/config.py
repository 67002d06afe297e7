"""The `ict:` section of a verl config, read on the driver, and the loss-mode -> selector map.

A verl run opts in with `actor_rollout_ref.actor.policy_loss.loss_mode=ict` (or one of the other
names in LOSS_MODES). Everything else is optional and defaults to METHOD.md:

    ict:
      selector: null          # any ict.select name ("ict+stapo", ...); default from loss_mode
      ratio: null             # null: the selector's default (ict 0.10, entropy 0.20, random 0.10)
      scope: global           # global (whole rollout batch, all ranks) or sequence
      granularity: position   # position or token_id
      reference: batch_mean   # JS reference distribution (only batch_mean on verl for now)
      normalize_by: selected  # selected or valid (the loss denominator)
      seed: 0                 # for the random control (step number is added)
      chunk_size: 1024        # rows of [rows x vocab] float32 scored at once on each GPU
      selector_options: {}    # e.g. {prob_below: 0.01, entropy_quantile: 0.05} for stapo
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ict.errors import ConfigError

# verl loss_mode -> ict.select selector name
LOSS_MODES: dict[str, str] = {
    "ict": "ict",
    "ict_entropy": "entropy",
    "ict_stapo": "stapo",
    "ict_random": "random",
    "ict_grpo": "grpo",
}
REFERENCES = ("batch_mean",)
SCOPES = ("global", "sequence")
NORMALIZE_BY = ("selected", "valid")


@dataclass(frozen=True)
class IctVerlConfig:
    selector: str
    ratio: float | None = None
    scope: str = "global"
    granularity: str = "position"
    reference: str = "batch_mean"
    normalize_by: str = "selected"
    seed: int = 0
    chunk_size: int = 1024
    selector_options: dict[str, Any] = field(default_factory=dict)

    @property
    def needs_js(self) -> bool:
        """Whether the selector reads the JS score (then the old-policy pass runs twice)."""
        return "ict" in self.selector.split("+")

    def stats_request(self) -> dict[str, Any]:
        """What the workers compute during the old-policy forward (sent as batch meta-data)."""
        return {
            "reference": self.reference if self.needs_js else None,
            "chunk_size": self.chunk_size,
        }


def _get(cfg: Any, dotted: str, default: Any = None) -> Any:
    node = cfg
    for key in dotted.split("."):
        if node is None:
            return default
        node = node.get(key, None) if hasattr(node, "get") else getattr(node, key, None)
    return default if node is None else node


def from_verl_config(cfg: Any) -> IctVerlConfig | None:
    """Read the run's config (OmegaConf or dict). None when the loss mode is not an ict one."""
    loss_mode = _get(cfg, "actor_rollout_ref.actor.policy_loss.loss_mode", "vanilla")
    if loss_mode not in LOSS_MODES:
        return None
    section = _get(cfg, "ict", {}) or {}
    section = dict(section.items()) if hasattr(section, "items") else {}
    unknown = set(section) - set(IctVerlConfig.__dataclass_fields__)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {sorted(unknown)} in the `ict:` section of the verl config; "
            f"allowed: {sorted(IctVerlConfig.__dataclass_fields__)}"
        )
    section.setdefault("selector", None)
    if section["selector"] is None:
        section["selector"] = LOSS_MODES[loss_mode]
    section["selector_options"] = dict(section.get("selector_options") or {})
    out = IctVerlConfig(**section)
    validate(out, cfg)
    return out


def validate(spec: IctVerlConfig, cfg: Any = None) -> None:
    """Clear errors for settings the verl integration does not support."""
    if spec.reference not in REFERENCES:
        raise ConfigError(
            f"ict.reference={spec.reference!r} is not supported on verl (supported: {REFERENCES}); "
            "use the native trainer (`ict train`) for the other references"
        )
    if spec.scope not in SCOPES:
        raise ConfigError(
            f"ict.scope={spec.scope!r} is not supported on verl (supported: {SCOPES})"
        )
    if spec.granularity not in ("position", "token_id"):
        raise ConfigError(f"ict.granularity={spec.granularity!r}: use 'position' or 'token_id'")
    if spec.normalize_by not in NORMALIZE_BY:
        raise ConfigError(f"ict.normalize_by={spec.normalize_by!r}: use one of {NORMALIZE_BY}")
    if spec.ratio is not None and not 0.0 < float(spec.ratio) <= 1.0:
        raise ConfigError(f"ict.ratio={spec.ratio!r} must be in (0, 1]")
    if int(spec.chunk_size) < 1:
        raise ConfigError(f"ict.chunk_size={spec.chunk_size!r} must be a positive integer")
    if cfg is None:
        return
    actor = _get(cfg, "actor_rollout_ref.actor", {})
    if _get(actor, "fsdp_config.ulysses_sequence_parallel_size", 1) not in (1, None) or _get(
        actor, "ulysses_sequence_parallel_size", 1
    ) not in (1, None):
        raise ConfigError(
            "the ict losses need the old-policy logits of whole sequences on one GPU: "
            "set actor_rollout_ref.actor.ulysses_sequence_parallel_size=1"
        )
    if _get(actor, "use_fused_kernels", False) or _get(
        cfg, "actor_rollout_ref.model.use_fused_kernels", False
    ):
        raise ConfigError(
            "the ict losses need the logits, which fused kernels never build: "
            "set actor_rollout_ref.model.use_fused_kernels=False"
        )
    if _get(cfg, "algorithm.rollout_correction.bypass_mode", False):
        raise ConfigError(
            "the ict losses score tokens during the old-log-prob recomputation, which bypass mode "
            "skips: set algorithm.rollout_correction.bypass_mode=false"
        )
    strategy = _get(actor, "strategy", "fsdp")
    if strategy not in ("fsdp", "fsdp2"):
        raise ConfigError(
            f"actor strategy {strategy!r} is not supported by the ict losses on verl: use fsdp or fsdp2"
        )
