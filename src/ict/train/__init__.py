"""The native trainer: `train(config)` / `Trainer`, `TrainConfig`, checkpoints and run outputs.

See docs/training.md for the user guide and docs/ARCHITECTURE.md for the run-directory format.
"""

from ict.train.config import TrainConfig
from ict.train.problems import Problem
from ict.train.trainer import Trainer, train

__all__ = ["Problem", "TrainConfig", "Trainer", "train"]
