"""The toy tasks as an ict.data task family: `ict.data.load_task("toy:add")`, `"toy:cot?digits=2"`.

ict.data.tasks resolves every spec that starts with "toy:" here (its TASK_FAMILIES), so training,
evaluation and mixtures load the toy tasks as they load any other task:

    toy:add?max_a=99&max_b=99&seed=0           a + b, response "a+b=sum" (ict.compare.toy)
    toy:cot?digits=4&seed=0&test_pool=2000     the per-digit chain with carries (ict.compare.toy_cot)

The options are the task dataclass's fields (the defaults above). split "train" gives training
pairs, "eval" the held-out ones and "validation" pairs for tuning (the three disjoint); size:
number of problems (default: train 10000, eval and validation every pair of the split). The
task's own `seed=` option picks the splits, so the
data seed of load_task does not apply (a different data seed must not move held-out pairs into
training). Each problem is a `ScoredItem`: an ict.data Item whose `score(response)` is the task's
own scorer (1.0 when the final answer is right, else 0.0), id "a+b".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from ict.compare.toy import ToyTask
from ict.compare.toy_cot import ToyCotTask
from ict.data.items import Item
from ict.errors import ConfigError, DataError

TOY_TASKS: dict[str, type] = {"toy:add": ToyTask, "toy:cot": ToyCotTask}
DEFAULT_TRAIN_SIZE = 10_000


@dataclass
class ScoredItem(Item):
    """An ict.data Item that carries its own scorer: `score(response)` -> float (the trainer and
    the grid call it; `verifier` and `answer` still let ict.rewards read it)."""

    scorer: Callable[[str], float] | None = field(default=None, repr=False, compare=False)

    def score(self, response: str, verifier=None):
        if self.scorer is None:
            return super().score(response, verifier)
        return self.scorer(response)


def toy_task(spec: str):
    """The task object of a toy spec ("toy:add?max_a=9" -> ToyTask(max_a=9)); DataError when the
    name or an option is unknown."""
    from ict.data.tasks import parse_spec

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


def supervised_task(task):
    """A task the warm start can teach: a toy task object as it is, or the task of its spec."""
    if isinstance(task, str):
        try:
            return toy_task(task)
        except DataError as err:
            raise ConfigError(
                f"the supervised warm start needs a task with target responses "
                f"({', '.join(TOY_TASKS)}), got {task!r}: {err}"
            ) from err
    return task


def task_items(task, split: str, size: int) -> list[ScoredItem]:
    """`size` problems of a toy task object; split "train", "validation" or "test"/"eval"
    (held-out)."""
    pairs = task.split("test" if split in ("test", "eval") else split, size)
    items = []
    for a, b in pairs:
        text = task.prompt(a, b)
        items.append(
            ScoredItem(
                id=f"{a}+{b}",
                task=task.spec_name,
                question=text,
                answer=str(a + b),
                messages=[{"role": "user", "content": text}],
                verifier="exact",
                metadata={"a": a, "b": b, "target": task.target(a, b)},
                scorer=task.scorer(a, b),
            )
        )
    return items


def load_toy_task(
    name: str, options: dict, *, split: str, seed: int = 0, size: int | None = None
) -> list[ScoredItem]:
    """ict.data's loader of the toy family (see the module docstring); `seed` is not used."""
    del seed  # the task's own seed= option picks the splits
    options = dict(options)
    size = options.pop("size", size)
    task = _task(name, options)
    if size is None:
        sizes = {"train": DEFAULT_TRAIN_SIZE, "validation": task.validation_size}
        size = sizes.get(split, task.test_size)
    return task_items(task, split, int(size))
