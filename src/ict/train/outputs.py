"""Run outputs: metrics.jsonl / samples.jsonl writers, optional TensorBoard / W&B, entropy health.

metrics.jsonl has one JSON object per step, flushed each step; on resume the lines after the
checkpoint's step are dropped so that the resumed file matches an uninterrupted run (the writer
and the truncation are ict.files').
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ict.errors import ConfigError

logger = logging.getLogger("ict.train")


class ExternalLogger:
    """Forward scalar metrics to TensorBoard or Weights & Biases (imported lazily)."""

    def __init__(self, kind: str, run_dir: Path, config: dict):
        self.kind, self._writer, self._wandb = kind, None, None
        if kind == "tensorboard":
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as err:
                raise ConfigError(
                    "--report-to tensorboard needs the tensorboard package: pip install tensorboard"
                ) from err
            self._writer = SummaryWriter(log_dir=str(Path(run_dir) / "tensorboard"))
        elif kind == "wandb":
            try:
                import wandb
            except ImportError as err:
                raise ConfigError(
                    "--report-to wandb needs the wandb package: pip install wandb"
                ) from err
            os.environ.setdefault("WANDB_MODE", "offline")
            self._wandb = wandb.init(dir=str(run_dir), config=config, name=Path(run_dir).name)

    def log(self, metrics: dict, step: int) -> None:
        scalars = {
            k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and v is not None
        }
        if self._writer is not None:
            for key, value in scalars.items():
                self._writer.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(scalars, step=step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._wandb is not None:
            self._wandb.finish()
        self._writer = self._wandb = None


class EntropyHealth:
    """Entropy collapse / explosion flags (METHOD.md): compare with the first steps' mean entropy.

    collapse: valid/entropy < collapse_fraction * baseline.
    explosion: valid/entropy > explosion_multiple * baseline, or format_rate below
    format_drop_fraction * its baseline. The baseline is the mean over the first `window` steps.
    """

    def __init__(
        self,
        window: int = 3,
        collapse_fraction: float = 0.3,
        explosion_multiple: float = 3.0,
        format_drop_fraction: float = 0.5,
    ):
        self.window, self.collapse_fraction = window, collapse_fraction
        self.explosion_multiple, self.format_drop_fraction = (
            explosion_multiple,
            format_drop_fraction,
        )
        self.entropies: list[float] = []
        self.formats: list[float] = []
        self.ever_collapsed = self.ever_exploded = False

    def state_dict(self) -> dict:
        return {
            "entropies": self.entropies,
            "formats": self.formats,
            "ever_collapsed": self.ever_collapsed,
            "ever_exploded": self.ever_exploded,
        }

    def load_state_dict(self, state: dict) -> None:
        self.entropies, self.formats = list(state["entropies"]), list(state["formats"])
        self.ever_collapsed, self.ever_exploded = state["ever_collapsed"], state["ever_exploded"]

    def update(self, step: int, entropy: float, format_rate: float | None) -> dict:
        """Record one step; return {"health/entropy_collapse": bool, "health/entropy_explosion": bool}."""
        if len(self.entropies) < self.window:
            self.entropies.append(entropy)
            if format_rate is not None:
                self.formats.append(format_rate)
            return {"health/entropy_collapse": False, "health/entropy_explosion": False}
        base = sum(self.entropies) / len(self.entropies)
        collapse = entropy < self.collapse_fraction * base
        explosion = entropy > self.explosion_multiple * base
        if format_rate is not None and self.formats:
            base_format = sum(self.formats) / len(self.formats)
            explosion = explosion or (
                base_format > 0 and format_rate < self.format_drop_fraction * base_format
            )
        if collapse and not self.ever_collapsed:
            logger.warning(
                "step %d: entropy collapse: mean entropy %.4f < %.2f x baseline %.4f",
                step,
                entropy,
                self.collapse_fraction,
                base,
            )
        if explosion and not self.ever_exploded:
            logger.warning(
                "step %d: entropy explosion: mean entropy %.4f vs baseline %.4f (format rate %s)",
                step,
                entropy,
                base,
                format_rate,
            )
        self.ever_collapsed |= collapse
        self.ever_exploded |= explosion
        return {
            "health/entropy_collapse": bool(collapse),
            "health/entropy_explosion": bool(explosion),
        }
