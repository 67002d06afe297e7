"""Training mixtures and decontamination: weights, seeds, own reward_fns, no eval problem leaks."""

import pytest

from ict.compare.presets import FIXTURES_DIR
from ict.data import (
    decontaminate,
    load_benchmark,
    load_task,
    normalise_problem,
    parse_mixture,
)
from ict.data.mixture import apportion
from ict.errors import DataError

FIXTURES = FIXTURES_DIR  # the fixture files shipped with ict (package data)
PAPER_MIX = "mix:gsm8k@0.5,math@0.5"


def test_parse_mixture_weights_and_bracket_commas():
    assert parse_mixture("mix:gsm8k@0.5,math@0.5") == [("gsm8k", 0.5), ("math", 0.5)]
    assert parse_mixture("mix:rg:chain_sum?x=[1,2]@2, gsm8k") == [
        ("rg:chain_sum?x=[1,2]", 2.0),
        ("gsm8k", 1.0),
    ]
    for bad in ("mix:gsm8k@0", "mix:gsm8k@-1", "mix:gsm8k@half", "mix:", "mix:mix:gsm8k@1"):
        with pytest.raises(DataError):
            parse_mixture(bad)


def test_apportion_sums_and_follows_weights():
    assert apportion(10, [1, 1]) == [5, 5]
    assert apportion(10, [3, 1]) == [8, 2]  # 7.5 / 2.5: the tie goes to the first component
    assert apportion(7, [1, 1, 1]) == [3, 2, 2]
    assert sum(apportion(1001, [0.2, 0.3, 0.5])) == 1001


def test_mixture_counts_seeds_and_scorers():
    items = load_task(PAPER_MIX, "train", seed=3, size=10, data_dir=FIXTURES)
    tasks = [i.task for i in items]
    assert tasks.count("gsm8k") == 5 and tasks.count("math") == 5
    assert {i.metadata["mix_component"] for i in items} == {"gsm8k", "math"}
    again = load_task(PAPER_MIX, "train", seed=3, size=10, data_dir=FIXTURES)
    assert [i.id for i in again] == [i.id for i in items]
    other = load_task(PAPER_MIX, "train", seed=4, size=10, data_dir=FIXTURES)
    assert [i.id for i in other] != [i.id for i in items]
    # each item keeps its own gold answer and reward_fn
    for item in items:
        assert item.reward(f"\\boxed{{{item.answer}}}").correct
    skewed = load_task("mix:gsm8k@3,math@1", "train", seed=0, size=8, data_dir=FIXTURES)
    assert [i.task for i in skewed].count("gsm8k") == 6


def test_mixture_without_size_never_repeats():
    items = load_task(PAPER_MIX, "train", seed=0, data_dir=FIXTURES)
    assert len(items) == len({i.id for i in items}) == 6  # 3 clean gsm8k + 3 of 4 clean math


def test_mixture_with_reasoning_gym_component():
    items = load_task(
        "mix:rg:chain_sum?min_terms=2&max_terms=2@1,gsm8k@1",
        "train",
        seed=0,
        size=6,
        data_dir=FIXTURES,
    )
    assert sorted(i.verifier for i in items) == ["math"] * 3 + ["rg"] * 3


def test_normalise_problem_ignores_formatting_only():
    a = r"What is $\frac{1}{4} + \frac{1}{4}$?"
    assert normalise_problem(a) == normalise_problem(r"what is  $\dfrac{1}{4}+\dfrac{1}{4}$ ?")
    assert normalise_problem(a) != normalise_problem(r"What is $\frac{1}{4} + \frac{1}{2}$?")


def test_math500_problem_is_removed_from_math_train():
    math500 = {normalise_problem(i.question) for i in load_benchmark("math500", data_dir=FIXTURES)}
    raw = load_benchmark("math", data_dir=FIXTURES, split="train")
    assert any(normalise_problem(i.question) in math500 for i in raw)  # the fixture has a leak
    clean = load_task("math", "train", data_dir=FIXTURES)
    assert not any(normalise_problem(i.question) in math500 for i in clean)
    math_test = {normalise_problem(i.question) for i in load_benchmark("math", data_dir=FIXTURES)}
    assert not any(normalise_problem(i.question) in math_test for i in clean)
    assert len(clean) == len(raw) - 2
    kept = load_task("math?decontaminate=false", "train", data_dir=FIXTURES)
    assert len(kept) == len(raw)


def test_every_train_eval_pair_is_clean():
    """Every benchmark with a training split, alone or in the paper's mixture, shares no problem
    text with any evaluation set in the fixtures."""
    names = ["gsm8k", "math", "math500", "aime23", "aime24", "aime25", "mmlu_stem", "gpqa"]
    eval_keys = {
        normalise_problem(i.question) for n in names for i in load_benchmark(n, data_dir=FIXTURES)
    }
    for spec in ("gsm8k", "math", PAPER_MIX):
        train = load_task(spec, "train", seed=0, size=20, data_dir=FIXTURES)
        assert not {normalise_problem(i.question) for i in train} & eval_keys, spec


def test_decontaminate_counts_per_eval_set():
    train = load_benchmark("gsm8k", data_dir=FIXTURES, split="train")
    kept, removed = decontaminate(train, {"gsm8k": load_benchmark("gsm8k", data_dir=FIXTURES)})
    assert removed == {"gsm8k": 1} and len(kept) == len(train) - 1


def test_decontamination_needs_the_eval_file(tmp_path, monkeypatch):
    monkeypatch.delenv("ICT_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "gsm8k_train.jsonl").write_text((FIXTURES / "gsm8k_train.jsonl").read_text())
    with pytest.raises(DataError, match="gsm8k.jsonl"):
        load_task("gsm8k", "train", data_dir=tmp_path)


def test_export_verl_parquet_matches_load_task(tmp_path):
    import pyarrow.parquet as pq

    from ict.data.export import export_verl_parquet

    path = tmp_path / "train.parquet"
    count = export_verl_parquet(PAPER_MIX, path, seed=2, size=6, data_dir=FIXTURES)
    rows = pq.read_table(path).to_pylist()
    items = load_task(PAPER_MIX, "train", seed=2, size=6, data_dir=FIXTURES)
    assert count == len(rows) == 6
    assert [r["reward_model"]["ground_truth"] for r in rows] == [i.answer for i in items]
    assert {r["data_source"] for r in rows} == {
        "openai/gsm8k",
        "DigitalLearningGmbH/MATH-lighteval",
    }
    assert rows[0]["prompt"][-1]["content"] == items[0].prompt
