"""Training problems: adapt task items, a resumable seeded prompt order, the rendered prompts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import quote

import numpy as np

from ict.data import load_task
from ict.errors import DataError
from ict.train.config import TrainConfig


@dataclass
class Problem:
    """One training problem: a prompt (text or chat messages) and its reward function (response -> reward)."""

    prompt: str | list
    reward: object  # Callable[[str], float | (float, bool) | dict]
    own_time_limit: bool = False  # the reward function enforces its own time limit (ict.data items)


def as_problem(item) -> Problem:
    """Adapt a task item (ict.data item, dict or Problem) to a Problem."""
    if isinstance(item, Problem):
        return item
    get = item.get if isinstance(item, dict) else lambda k, d=None: getattr(item, k, d)
    prompt = get("messages") or get("prompt")  # ict.data.Item: the full (few-shot) messages
    reward_fn = get("reward")  # ict.data.Item.reward, or a dict's "reward" callable
    if prompt is None or not callable(reward_fn):
        raise DataError(f"task item {item!r:.120} needs a prompt and a callable reward(response)")
    # ict.data items are rewarded through ict.rewards, whose sandbox enforces the time limit itself
    return Problem(prompt, reward_fn, own_time_limit=hasattr(item, "verifier"))


class PromptSampler:
    """Prompt indices in seeded epoch-wise permutations; its state is the number consumed."""

    def __init__(self, size: int, seed: int):
        self.size, self.seed, self.consumed = size, seed, 0

    def next(self, count: int) -> list[int]:
        out = []
        for _ in range(count):
            epoch, pos = divmod(self.consumed, self.size)
            out.append(int(np.random.default_rng([self.seed, epoch]).permutation(self.size)[pos]))
            self.consumed += 1
        return out

    def state_dict(self) -> dict:
        return {"consumed": self.consumed, "size": self.size, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        self.consumed = int(state["consumed"])


def task_spec(config: TrainConfig) -> str:
    """The ict.data spec string: `task` plus `task_config` as ?key=value options.

    Values are JSON (strings as they are) and percent-encoded, so that characters with a meaning
    in a query string survive (`{operators: ["+"]}`: a bare "+" would read back as a space)."""
    if not config.task_config:
        return config.task
    options = "&".join(
        f"{k}={quote(v if isinstance(v, str) else json.dumps(v), safe='')}"
        for k, v in config.task_config.items()
    )
    return f"{config.task}{'&' if '?' in config.task else '?'}{options}"


def load_problems(
    config: TrainConfig, split: str = "train", size: int | None = None, *, data_dir=None
) -> list[Problem]:
    """Problems of the task via ict.data.load_task (train split by default); `data_dir`: local
    task and benchmark files (ict.data.sources: then $ICT_DATA_DIR)."""
    items = load_task(
        task_spec(config),
        split=split,
        seed=config.data_seed,
        size=size or config.train_size,
        data_dir=data_dir,
    )
    problems = [as_problem(item) for item in items]
    if not problems:
        raise DataError(
            f"task {config.task!r} produced no training problems; check task_config / train_size"
        )
    return problems
