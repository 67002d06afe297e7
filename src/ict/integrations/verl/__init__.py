"""verl plugin: token-selective policy losses (ICT, 20-Entropy, STAPO, random, GRPO, Clip-Cov,
KL-Cov, an entropy bonus) for verl 0.9.1.

Loaded into every verl process (driver and Ray workers) by verl's plugin mechanism: the
`verl.plugins` entry point `ict = "ict.integrations.verl"` (automatic once ict is installed in
the verl environment), or `VERL_USE_EXTERNAL_MODULES=ict.integrations.verl`. Importing this module

1. checks the verl version (the patches are written against verl 0.9.1's source),
2. registers the policy losses `ict`, `ict_entropy`, `ict_stapo`, `ict_random`, `ict_grpo`,
   `ict_clip_cov`, `ict_kl_cov`, `ict_entropy_bonus` (config.LOSS_MODES: each a method's name;
   every one runs the method's selection, loss mode and entropy bonus),
3. registers ict's advantage estimators verl lacks (w_reinforce, nsr, psr, dr_grpo, passk) for
   `algorithm.adv_estimator` (advantages.py),
4. wraps five verl methods so the old policy's per-token statistics reach the loss and the step's
   metrics reach verl's log (hooks.py, metrics.py), and verl's start-up `validate_config` so a bad
   `ict:` setting or verl's v1 trainer stops the run before Ray starts (hooks.py).

A verl config opts in with `actor_rollout_ref.actor.policy_loss.loss_mode=ict`; an optional
top-level `ict:` section sets the options (config.py). See docs/engines/verl.md.
"""

from __future__ import annotations

import logging
import os

from ict.errors import ConfigError

from .config import LOSS_MODES, IctVerlConfig, from_verl_config

SUPPORTED_VERL_VERSIONS = ("0.9.1",)
_SKIP_CHECK_ENV = "ICT_VERL_SKIP_VERSION_CHECK"

__all__ = [
    "LOSS_MODES",
    "SUPPORTED_VERL_VERSIONS",
    "IctVerlConfig",
    "check_verl_version",
    "from_verl_config",
    "install",
]


def check_verl_version(version: str | None = None) -> str:
    """Raise ConfigError unless `version` (default: the installed verl's) is supported."""
    if version is None:
        try:
            import verl
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigError(
                "ict.integrations.verl needs verl, which is not installed here: build the verl "
                "environment with `make venv-verl` (scripts/setup_verl_env.sh)"
            ) from exc
        version = verl.__version__
    if version not in SUPPORTED_VERL_VERSIONS and os.environ.get(_SKIP_CHECK_ENV) != "1":
        raise ConfigError(
            f"ict.integrations.verl supports verl {', '.join(SUPPORTED_VERL_VERSIONS)} but found verl "
            f"{version}: its loss and engine hooks patch verl internals that change between releases. "
            f"Install verl=={SUPPORTED_VERL_VERSIONS[-1]} (scripts/setup_verl_env.sh), or set "
            f"{_SKIP_CHECK_ENV}=1 to try anyway at your own risk"
        )
    return version


def install() -> list[str]:
    """Version check, loss registration and patches (idempotent). Returns the registered names."""
    check_verl_version()
    from .advantages import register_advantages
    from .hooks import apply_patches
    from .loss import register_losses

    names = register_losses()
    register_advantages()
    apply_patches()
    return names


try:
    install()
except Exception as exc:  # verl swallows plugin errors at debug level: make them visible
    logging.getLogger("ict.integrations.verl").error("ict verl plugin not loaded: %s", exc)
    raise
