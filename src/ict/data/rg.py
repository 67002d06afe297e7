"""reasoning-gym tasks as `Item`s, seeded, with disjoint train and held-out (eval) seed ranges.

A reasoning-gym dataset with base seed S generates item i from `Random(S + i)`. Training items
use base seed `seed`, eval items `EVAL_SEED_OFFSET + seed` and validation items
`VALIDATION_SEED_OFFSET + seed`, so the generator seeds of the three splits never overlap while
`seed + size <= EVAL_SEED_OFFSET`. (Tasks with a small problem space, e.g. 2-term chain sums, can
still repeat a problem's text across splits.)
"""

from __future__ import annotations

import difflib
from typing import Any

from ict.data.items import Item
from ict.data.prompts import render_messages
from ict.errors import DataError

EVAL_SEED_OFFSET = 1_000_000_000
VALIDATION_SEED_OFFSET = 2 * EVAL_SEED_OFFSET
SPLIT_OFFSETS = {"train": 0, "eval": EVAL_SEED_OFFSET, "validation": VALIDATION_SEED_OFFSET}
DEFAULT_TEMPLATES = {"chain_sum": "chain_sum_2shot"}


def rg_task_names() -> list[str]:
    """All registered reasoning-gym task names."""
    import reasoning_gym  # noqa: F401 - registers the tasks
    from reasoning_gym.factory import DATASETS

    return sorted(DATASETS)


def check_rg_task(task: str) -> None:
    """DataError with close matches when `task` is not a reasoning-gym task."""
    names = rg_task_names()
    if task not in names:
        close = difflib.get_close_matches(task, names, n=5, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise DataError(
            f"unknown reasoning-gym task {task!r}.{hint} "
            f'All {len(names)} tasks: python -c "import reasoning_gym.factory as f; print(sorted(f.DATASETS))"'
        )


def rg_base_seed(split: str, seed: int, size: int) -> int:
    """The base generator seed of a split (see the module docstring)."""
    if split not in SPLIT_OFFSETS:
        raise DataError(f"split must be one of {', '.join(SPLIT_OFFSETS)}, got {split!r}")
    if seed < 0 or seed + size > EVAL_SEED_OFFSET:
        raise DataError(
            f"seed ({seed}) must be >= 0 and seed + size ({seed + size}) <= {EVAL_SEED_OFFSET} "
            "so that the train, validation and held-out seeds stay disjoint"
        )
    return SPLIT_OFFSETS[split] + seed


def load_rg_items(
    task: str,
    config: dict[str, Any] | None = None,
    *,
    split: str = "train",
    seed: int = 0,
    size: int = 100,
    template: str | None = None,
) -> list[Item]:
    """`size` items of a reasoning-gym task (scored by the task's own `score_answer`).

    Args:
        task: reasoning-gym task name, e.g. "chain_sum".
        config: the task's config fields, e.g. {"min_terms": 2, "max_terms": 2}.
        split: "train", "validation" or "eval" (disjoint generator seeds).
        template: prompt template; default `chain_sum_2shot` for chain_sum, else `answer_tags`.
    """
    import reasoning_gym

    check_rg_task(task)
    config = dict(config or {})
    base = rg_base_seed(split, seed, size)
    try:
        dataset = reasoning_gym.create_dataset(task, seed=base, size=size, **config)
    except (TypeError, ValueError, AssertionError) as err:
        raise DataError(f"invalid config {config} for reasoning-gym task {task!r}: {err}") from err
    template = template or DEFAULT_TEMPLATES.get(task, "answer_tags")
    items = []
    for index in range(size):
        entry = dataset[index]
        metadata = dict(entry.get("metadata", {}))
        metadata.update(rg_task=task, rg_config=config, rg_seed=base + index, split=split)
        items.append(
            Item(
                id=f"rg:{task}/{base + index}",
                task=f"rg:{task}",
                question=entry["question"],
                answer=str(entry["answer"]),
                messages=render_messages(template, entry["question"]),
                verifier="rg",
                metadata=metadata,
            )
        )
    return items
