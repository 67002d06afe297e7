"""The native trainer: `train(config)` / `Trainer`, `TrainConfig`, checkpoints and run outputs.

See docs/training.md for the user guide and docs/ARCHITECTURE.md for the run-directory format.

The names below are imported on first use (module `__getattr__`), so that importing
`ict.train.config` (which `ict train --help` is generated from) does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ict.lazy import lazy_exports

if TYPE_CHECKING:
    from ict.train.config import TrainConfig
    from ict.train.problems import Problem
    from ict.train.trainer import Trainer, train

_EXPORTS = {
    "Problem": "ict.train.problems",
    "TrainConfig": "ict.train.config",
    "Trainer": "ict.train.trainer",
    "train": "ict.train.trainer",
}

__all__ = ["Problem", "TrainConfig", "Trainer", "train"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
