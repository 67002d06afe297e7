"""Rewards: answer extraction and verification (math-verify with a hard time limit, option
letters, reasoning-gym's own reward_fns). See `Verifier` (the default `RewardFunction`) and
`VerifyOptions` (an item's math-verify settings); the rules are in docs/eval.md."""

from ict.rewards.extract import (
    Extraction,
    extract_answer,
    extract_answer_tag,
    extract_answer_tags,
    extract_boxed,
    extract_boxes,
    extract_choice_letter,
    extract_gsm8k_gold,
    extract_last_number,
    final_answers,
)
from ict.rewards.options import VerifyOptions
from ict.rewards.results import ItemJudge, as_verdict, unpack_reward
from ict.rewards.sandbox import Sandbox, VerifierUnavailable
from ict.rewards.verify import (
    VERIFIERS,
    RewardFunction,
    Verdict,
    Verifier,
    default_verifier,
    judge_response,
    rg_reward,
)

__all__ = [
    "VERIFIERS",
    "Extraction",
    "ItemJudge",
    "RewardFunction",
    "Sandbox",
    "Verdict",
    "Verifier",
    "VerifierUnavailable",
    "VerifyOptions",
    "as_verdict",
    "default_verifier",
    "extract_answer",
    "extract_answer_tag",
    "extract_answer_tags",
    "extract_boxed",
    "extract_boxes",
    "extract_choice_letter",
    "extract_gsm8k_gold",
    "extract_last_number",
    "final_answers",
    "rg_reward",
    "judge_response",
    "unpack_reward",
]
