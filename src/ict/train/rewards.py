"""Deprecated name of `ict.train.safe_rewards` (time-limited, never-raising reward calls)."""

from ict.train.safe_rewards import *  # noqa: F403
from ict.train.safe_rewards import score_responses  # noqa: F401
