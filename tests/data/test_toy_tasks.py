"""The toy tasks through ict.data (`toy:add`, `toy:cot`): the same task protocol as every task."""

import pytest

from ict.data import TASK_FAMILIES, RuleItem, load_task, register_task_family
from ict.data.toy import toy_task
from ict.data.toy.add import ToyAddTask
from ict.data.toy.cot import ToyCotTask, target
from ict.errors import ConfigError, DataError


def test_toy_add_loads_as_items_with_its_own_scorer():
    train = load_task("toy:add?max_a=9&max_b=9", "train", size=80)
    held_out = load_task("toy:add?max_a=9&max_b=9", "eval")  # every held-out pair by default
    assert len(train) == 80 and len(held_out) == 20
    assert not {i.id for i in train} & {i.id for i in held_out}
    item = held_out[0]
    a, b = item.metadata["a"], item.metadata["b"]
    assert isinstance(item, RuleItem) and item.task == "toy:add" and item.id == f"{a}+{b}"
    assert item.prompt == f"Q:{a}+{b}\nA:" and item.messages[-1]["content"] == item.prompt
    assert item.reward(f"{a}+{b}={a + b}") == 1.0 and item.reward(f"{a}+{b}={a + b + 1}") == 0.0
    # the same pairs, in the same order, as the task object's own split
    assert [i.id for i in held_out] == [f"{x}+{y}" for x, y in ToyAddTask(9, 9).split("test", 20)]


def test_toy_cot_loads_with_its_options_and_scores_the_final_answer():
    items = load_task("toy:cot?digits=2", "eval", size=3)
    assert toy_task("toy:cot?digits=2") == ToyCotTask(digits=2)
    a, b = items[0].metadata["a"], items[0].metadata["b"]
    assert items[0].metadata["target"] == target(a, b, 2)
    assert items[0].reward(target(a, b, 2)) == 1.0 and items[0].reward("=0") == 0.0


def test_toy_tasks_feed_the_trainer_and_mixtures_like_any_task():
    from ict.train import TrainConfig
    from ict.train.problems import load_problems

    problems = load_problems(TrainConfig(task="toy:add", task_config={"max_a": 9}, train_size=4))
    assert len(problems) == 4 and problems[0].reward("no answer") == 0.0
    mixed = load_task("mix:toy:add@0.5,toy:cot@0.5", "train", size=10)
    assert {item.task for item in mixed} == {"toy:add", "toy:cot"}


def test_bad_toy_specs_name_what_is_wrong():
    with pytest.raises(DataError, match="unknown options \\['digits'\\]"):
        load_task("toy:add?digits=3", "eval")
    with pytest.raises(DataError, match="unknown toy task"):
        load_task("toy:mul", "eval")
    with pytest.raises(ConfigError, match="needs a task with target responses"):
        from ict.compare.warm_start import warm_start

        warm_start("rg:chain_sum")


def test_task_families_are_a_registry(monkeypatch):
    from ict.data.items import Item

    monkeypatch.setitem(TASK_FAMILIES, "echo:", None)

    def load_echo(name, options, *, split, seed, size):
        return [
            Item(f"{name}/{i}", name, "q", "a", [{"role": "user", "content": "q"}])
            for i in range(size)
        ]

    register_task_family("echo:", load_echo)
    assert [i.id for i in load_task("echo:x", "eval", size=2)] == ["echo:x/0", "echo:x/1"]
