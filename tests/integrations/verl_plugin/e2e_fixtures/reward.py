"""The end-to-end test's reward (verl's `reward.custom_reward_function`, test fixture).

An arbitrary deterministic score in [0, 1] of the decoded response that differs between the
random tiny model's samples, so GRPO's group-normalised advantages are non-zero.
"""


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    return (sum(map(ord, solution_str)) % 97) / 96.0
