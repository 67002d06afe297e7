"""The validation split: disjoint from training and held-out problems (procedural tasks by their
generator seeds, datasets by rows carved from their training split), and the same problems for a
given spec every time."""

import json

import pytest

from ict.data import EVAL_SEED_OFFSET, load_task
from ict.data.rg import VALIDATION_SEED_OFFSET
from ict.errors import DataError

CHAIN = "rg:chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=2"


def ids(items):
    return [i.id for i in items]


def test_reasoning_gym_validation_has_its_own_generator_seeds():
    splits = {s: load_task(CHAIN, s, seed=3, size=10) for s in ("train", "validation", "eval")}
    seeds = {s: {i.metadata["rg_seed"] for i in items} for s, items in splits.items()}
    assert seeds["train"] == set(range(3, 13))
    assert seeds["eval"] == set(range(EVAL_SEED_OFFSET + 3, EVAL_SEED_OFFSET + 13))
    assert seeds["validation"] == set(
        range(VALIDATION_SEED_OFFSET + 3, VALIDATION_SEED_OFFSET + 13)
    )
    assert ids(load_task(CHAIN, "validation", seed=3, size=10)) == ids(splits["validation"])


@pytest.mark.parametrize("spec", ["toy:add?max_a=9&max_b=9", "toy:cot?digits=2"])
def test_toy_validation_is_disjoint_from_train_and_held_out_pairs(spec):
    train = set(ids(load_task(spec, "train", size=60)))
    held_out = set(ids(load_task(spec, "eval")))
    validation = ids(load_task(spec, "validation"))
    assert validation and len(set(validation)) == len(validation)  # distinct pairs
    assert not set(validation) & train and not set(validation) & held_out
    assert validation == ids(load_task(spec, "validation"))  # deterministic


def test_toy_add_splits_partition_the_pairs():
    pairs = {s: set(ids(load_task("toy:add?max_a=9&max_b=9", s))) for s in ("validation", "eval")}
    train = set(ids(load_task("toy:add?max_a=9&max_b=9", "train", size=70)))
    assert (len(train), len(pairs["eval"]), len(pairs["validation"])) == (70, 20, 10)
    assert len(train | pairs["eval"] | pairs["validation"]) == 100  # every pair, once


def test_a_dataset_carves_validation_from_its_training_rows(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"question": f"{i}+0", "answer": str(i)}) + "\n" for i in range(10)))  # fmt: skip
    with pytest.raises(DataError, match="validation_size=N"):
        load_task(str(path), "validation")
    spec = f"{path}?validation_size=3"
    train, validation = load_task(spec, "train"), load_task(spec, "validation")
    assert [i.answer for i in validation] == ["7", "8", "9"]  # the last 3 training rows
    assert [i.answer for i in train] == [str(i) for i in range(7)]  # training leaves them out
    assert len(load_task(str(path), "train")) == 10  # no option: every row trains, as before
    with pytest.raises(DataError, match="validation_size=10 must be in 1..9"):
        load_task(f"{path}?validation_size=10", "train")


def test_unknown_split_is_a_clear_error():
    with pytest.raises(DataError, match="train, validation, eval"):
        load_task(CHAIN, "test")
