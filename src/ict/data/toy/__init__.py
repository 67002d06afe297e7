"""The toy tasks as an ict.data task family: `ict.data.load_task("toy:add")`, `"toy:cot?digits=2"`.

ict.data.tasks resolves every spec that starts with "toy:" here (its TASK_FAMILIES), so training,
evaluation and mixtures load the toy tasks as they load any other task:

    toy:add?max_a=99&max_b=99&seed=0           a + b, response "a+b=sum" (ict.data.toy.add)
    toy:cot?digits=4&seed=0&test_pool=2000     the per-digit chain with carries (ict.data.toy.cot)
    toy:paths?digits=3&carry_pct=20&long_pct=15  two paths: a short one right without carries,
                                               the chain right on all (ict.data.toy.paths)

The options are the task dataclass's fields (the defaults above). split "train" gives training
pairs, "eval" the held-out ones and "validation" pairs for tuning (the three disjoint); size:
number of problems (default: train 10000, eval and validation every pair of the split). The
task's own `seed=` option picks the splits, so the
data seed of load_task does not apply (a different data seed must not move held-out pairs into
training). Each problem is a `RuleItem`: an ict.data Item whose `reward(response)` is the task's
own reward_fn (1.0 when the final answer is right, else 0.0), id "a+b". `toy_categorizer` gives a
toy task's token labelling (toy:cot's chain categories).
"""

from __future__ import annotations

import dataclasses

from ict.data.categories import Categorize
from ict.data.items import RuleItem
from ict.data.specs import parse_spec
from ict.data.toy import cot, paths
from ict.data.toy.add import ToyAddTask
from ict.data.toy.cot import ToyCotTask
from ict.errors import DataError

TOY_TASKS: dict[str, type] = {
    "toy:add": ToyAddTask,
    "toy:cot": ToyCotTask,
    "toy:paths": paths.ToyPathsTask,
}
DEFAULT_TRAIN_SIZE = 10_000


def toy_task(spec: str):
    """The task object of a toy spec ("toy:add?max_a=9" -> ToyAddTask(max_a=9)); DataError when
    the name or an option is unknown."""
    name, options = parse_spec(spec)
    return _task(name, options)


def _task(name: str, options: dict):
    if name not in TOY_TASKS:
        raise DataError(f"unknown toy task {name!r}; known: {', '.join(TOY_TASKS)}")
    cls = TOY_TASKS[name]
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise DataError(f"{name}: unknown options {unknown}; it takes {', '.join(sorted(fields))}")
    return cls(**{k: int(v) for k, v in options.items()})


def task_items(task, split: str, size: int) -> list[RuleItem]:
    """`size` problems of a toy task object; split "train", "validation" or "test"/"eval"
    (held-out)."""
    pairs = task.split("test" if split in ("test", "eval") else split, size)
    items = []
    for a, b in pairs:
        text = task.prompt(a, b)
        items.append(
            RuleItem(
                id=f"{a}+{b}",
                task=task.spec_name,
                question=text,
                answer=str(a + b),
                messages=[{"role": "user", "content": text}],
                verifier="exact",
                metadata={"a": a, "b": b, "target": task.target(a, b)},
                reward_fn=task.reward_fn(a, b),
            )
        )
    return items


def load_toy_task(
    name: str, options: dict, *, split: str, seed: int = 0, size: int | None = None
) -> list[RuleItem]:
    """ict.data's loader of the toy family (see the module docstring); `seed` is not used."""
    del seed  # the task's own seed= option picks the splits
    options = dict(options)
    size = options.pop("size", size)
    task = _task(name, options)
    if size is None:
        sizes = {"train": DEFAULT_TRAIN_SIZE, "validation": task.validation_size}
        size = sizes.get(split, task.test_size)
    return task_items(task, split, int(size))


def toy_categorizer(name: str) -> Categorize | None:
    """The token labelling of a toy task's responses: toy:cot's chain categories (None: the
    generic labelling)."""
    return {"toy:cot": cot.token_categories, "toy:paths": paths.token_categories}.get(name)
