"""Deprecated name of `ict.train.old_policy` (the old-policy pass: statistics and log-probs)."""

from ict.train.old_policy import *  # noqa: F403
from ict.train.old_policy import old_policy_pass, rollout_hidden, sampled_logprobs  # noqa: F401
