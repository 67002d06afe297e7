"""Rewards: answer extraction and verification (math-verify with a hard time limit, option
letters, reasoning-gym's own scorers). See `Verifier` (the default `RewardFunction`)."""

from ict.rewards.extract import (
    Extraction,
    extract_answer,
    extract_answer_tag,
    extract_boxed,
    extract_choice_letter,
    extract_gsm8k_gold,
    extract_last_number,
)
from ict.rewards.sandbox import Sandbox
from ict.rewards.verify import (
    VERIFIERS,
    RewardFunction,
    Verdict,
    Verifier,
    default_verifier,
    rg_score,
    score_response,
)

__all__ = [
    "VERIFIERS",
    "Extraction",
    "RewardFunction",
    "Sandbox",
    "Verdict",
    "Verifier",
    "default_verifier",
    "extract_answer",
    "extract_answer_tag",
    "extract_boxed",
    "extract_choice_letter",
    "extract_gsm8k_gold",
    "extract_last_number",
    "rg_score",
    "score_response",
]
