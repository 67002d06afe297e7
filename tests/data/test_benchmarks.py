"""The registered hub benchmarks load from local fixture files in the datasets' own column formats."""

import pytest

from ict.compare.presets import FIXTURES_DIR
from ict.data import BENCHMARKS, load_benchmark, load_task
from ict.errors import DataError

FIXTURES = FIXTURES_DIR  # the fixture files shipped with ict (package data)

EXPECTED = {  # first row: (question starts with, gold answer)
    "gsm8k": ("Tom has 3 apples", "7"),
    "math500": (r"What is $\frac{1}{4}", r"\frac{1}{2}"),
    "aime24": ("Find the remainder", "024"),
    "amc23": ("What is $3^3$", "27"),
    "olympiadbench": ("Find the smallest", "8"),
    "minerva": ("A ball falls", "20"),
    "commonsenseqa": ("Where would you put a plate", "A"),
    "math": ("Simplify", "2\\sqrt{3}"),
    "mmlu_stem": ("What is the order of the cyclic group", "C"),
    "gpqa": ("What is the spin of an electron", "B"),
    "aime23": ("Compute $25", "117"),
    "aime25": ("Find the sum of all positive divisors", "28"),
}


def test_registry_has_every_benchmark():
    assert set(BENCHMARKS) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_benchmark_loads_from_fixture(name):
    items = load_benchmark(name, data_dir=FIXTURES)
    question_start, gold = EXPECTED[name]
    assert items[0].question.startswith(question_start)
    assert items[0].answer == gold
    assert items[0].id == f"{name}/0" and items[0].task == name
    assert len(load_benchmark(name, data_dir=FIXTURES, limit=1)) == 1
    # The gold answer, given in the requested format, is scored correct by the item's verifier.
    response = f"<answer>{gold}</answer>"
    assert items[0].reward(response).correct, (name, items[0].answer)


def test_gsm8k_gold_strips_commas_and_keeps_sign():
    items = load_benchmark("gsm8k", data_dir=FIXTURES)
    assert [i.answer for i in items] == ["7", "1000", "-3"]


def test_commonsenseqa_prompt_lists_options_and_scores_letters():
    problem = load_benchmark("commonsenseqa", data_dir=FIXTURES)[0]
    assert "A. cupboard" in problem.prompt and "E. car" in problem.prompt
    assert problem.verifier == "choice"
    assert not problem.reward("<answer>B</answer>").correct


def test_env_var_data_dir(monkeypatch):
    monkeypatch.setenv("ICT_DATA_DIR", str(FIXTURES))
    assert load_task("minerva", "eval")[1].answer == "3"


def test_missing_file_offline_says_where_to_put_it(tmp_path, monkeypatch):
    monkeypatch.delenv("ICT_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError) as err:
        load_benchmark("math500", data_dir=tmp_path)
    message = str(err.value)
    assert f"{tmp_path}/math500.jsonl" in message and "HuggingFaceH4/MATH-500" in message
    assert "problem" in message and "answer" in message


def test_eval_only_benchmark_has_no_train_split():
    with pytest.raises(DataError, match="no training split"):
        load_task("math500", "train")


def test_row_missing_a_column_names_it(tmp_path):
    (tmp_path / "minerva.jsonl").write_text('{"question": "q"}\n')
    with pytest.raises(DataError, match="answer"):
        load_benchmark("minerva", data_dir=tmp_path)


def test_benchmark_verifier_options_reach_every_item():
    import dataclasses

    from ict.data.benchmarks import rows_to_items
    from ict.rewards import VerifyOptions

    rows = [{"problem": "What is 1/3 to two places?", "answer": r"\frac{1}{3}"}]
    default = rows_to_items(BENCHMARKS["math500"], rows)[0]
    assert "verifier_options" not in default.metadata
    assert not default.reward("<answer>0.33</answer>").correct
    loose = dataclasses.replace(BENCHMARKS["math500"], verifier_options=VerifyOptions(precision=2))
    item = rows_to_items(loose, rows)[0]
    assert item.metadata["verifier_options"]["precision"] == 2
    assert item.reward("<answer>0.33</answer>").correct
