"""The two-path task toy:paths: its paths, reward, carry mix, splits and warm-start mixture."""

import numpy as np
import pytest

from ict.data import load_task
from ict.data.toy import toy_categorizer, toy_task
from ict.data.toy.paths import (
    ToyPathsTask,
    digitwise_sum,
    has_carry,
    reward,
    short_target,
    strategy,
    token_categories,
)
from ict.errors import DataError


def test_the_two_paths_and_where_each_is_right():
    task = ToyPathsTask(digits=3)
    # no carry: both paths give the sum
    assert short_target(307, 40) == "7+0=7;0+4=4;3+0=3;=0347"
    assert task.target(307, 40) == "7+0+0=7 c0;0+4+0=4 c0;3+0+0=3 c0;=0347"
    assert reward(short_target(307, 40), 307, 40) == reward(task.target(307, 40), 307, 40) == 1.0
    # a carry: the short path drops it and is wrong, the chain is right
    assert short_target(849, 437) == "9+7=6;4+3=7;8+4=2;=0276"
    assert reward(short_target(849, 437), 849, 437) == 0.0
    assert reward(task.target(849, 437), 849, 437) == 1.0
    assert strategy(short_target(849, 437)) == "short"
    assert strategy(task.target(849, 437)) == "long"
    assert strategy("9+7+0=16 c1;4+3") == "other"


def test_reward_reads_only_a_full_final_answer():
    assert reward("9+7+0=16 c1;=1286", 849, 437) == 1.0
    assert reward("=1286", 849, 437) == 1.0  # a bare answer of the right width
    assert reward("9+7+0=16 c1;=128", 849, 437) == 0.0  # too few digits
    assert reward("9+7+0=1286", 849, 437) == 0.0  # a step sum, not the final answer
    assert reward("", 849, 437) == 0.0


@pytest.mark.parametrize("a,b", [(0, 0), (999, 0), (555, 444), (5, 5), (990, 10), (123, 987)])
def test_carry_is_exactly_where_the_digitwise_sum_is_wrong(a, b):
    carries = any((a // 10**i) % 10 + (b // 10**i) % 10 >= 10 for i in range(3))
    assert has_carry(a, b, 3) == carries == (digitwise_sum(a, b, 3) != a + b)


def test_splits_hold_the_declared_carry_share_and_are_disjoint():
    task = toy_task("toy:paths?carry_pct=20&long_pct=15")
    test, val, train = (
        task.split("test", 2000),
        task.split("validation", 2000),
        task.split("train", 4000),
    )
    assert not set(test) & set(val) and not set(test) & set(train) and not set(val) & set(train)
    assert len(set(test)) == 2000
    share = np.mean([has_carry(a, b, 3) for a, b in test])
    assert abs(share - 0.20) < 0.03  # binomial SD 0.009
    assert test == task.split("test", 2000)  # seeded
    other = toy_task("toy:paths?carry_pct=50")
    assert abs(np.mean([has_carry(a, b, 3) for a, b in other.split("test", 2000)]) - 0.5) < 0.04


def test_warm_start_mixture_shows_the_long_path_at_its_share_whatever_the_problem():
    task = ToyPathsTask(long_pct=15)
    batch = task.sft_examples(seed=0, batch_size=4000)()
    kinds = [strategy(t) for _, t in batch]
    assert set(kinds) == {"short", "long"}
    assert abs(kinds.count("long") / len(kinds) - 0.15) < 0.02
    test = set(task.split("test", task.test_pool))
    assert all(
        (int(p[2:5]), int(p[6:9])) not in test for p, _ in batch
    )  # "Q:abc+def\nA:": held-out pairs never taught


def test_items_score_with_the_task_reward_and_label_tokens():
    items = load_task("toy:paths", split="eval", size=5)
    a, b = items[0].metadata["a"], items[0].metadata["b"]
    assert items[0].reward(ToyPathsTask().target(a, b)) == 1.0
    assert toy_categorizer("toy:paths") is token_categories
    labels = token_categories(list(short_target(849, 437)) + ["</s>"])
    assert labels[:5] == ["operand", "format", "operand", "format", "step_sum"]
    assert labels[-5:] == ["answer"] * 4 + ["eos"]


def test_bad_options_fail_in_one_line():
    with pytest.raises(DataError, match="percents"):
        toy_task("toy:paths?carry_pct=150")
    with pytest.raises(DataError, match="unknown options"):
        toy_task("toy:paths?carries=3")


def test_the_warm_starts_carry_share_is_its_own_option_and_leaves_the_splits_alone():
    base, more = ToyPathsTask(), ToyPathsTask(sft_carry_pct=50)
    assert base.split("test", 300) == more.split("test", 300)
    assert base.split("train", 300) == more.split("train", 300)

    def share(task):
        batch = task.sft_examples(seed=0, batch_size=3000)()
        return np.mean([has_carry(int(p[2:5]), int(p[6:9]), 3) for p, _ in batch])

    assert abs(share(base) - 0.20) < 0.03 and abs(share(more) - 0.50) < 0.04
    with pytest.raises(DataError, match="sft_carry_pct=101"):
        ToyPathsTask(sft_carry_pct=101)
