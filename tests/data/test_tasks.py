"""Tasks: reasoning-gym seeds and configs, specs, local files with column mappings, errors."""

import json

import pytest

from ict.data import DEFAULT_TASK, EVAL_SEED_OFFSET, load_task, parse_spec, render_messages
from ict.errors import DataError


def test_parse_spec_values():
    assert parse_spec("rg:chain_sum?min_terms=2&max_terms=3&flag=true&name=x") == (
        "rg:chain_sum",
        {"min_terms": 2, "max_terms": 3, "flag": True, "name": "x"},
    )
    assert parse_spec("gsm8k") == ("gsm8k", {})


def test_rg_config_and_seed_ranges_are_disjoint():
    train = load_task(
        "rg:chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=2", "train", seed=3, size=20
    )
    held = load_task(
        "rg:chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=2", "eval", seed=3, size=20
    )
    train_seeds = {i.metadata["rg_seed"] for i in train}
    held_seeds = {i.metadata["rg_seed"] for i in held}
    assert train_seeds == set(range(3, 23))
    assert held_seeds == set(range(EVAL_SEED_OFFSET + 3, EVAL_SEED_OFFSET + 23))
    for problem in train + held:
        expression = problem.metadata["expression"]
        assert len(expression.split()) == 3  # two terms and one operator
        assert all(len(t) <= 2 for t in expression.split()[::2])
        assert int(problem.answer) == eval(expression)  # independent check of the gold answer
    # Deterministic: the same seed gives the same problems.
    again = load_task(
        "rg:chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=2", "train", seed=3, size=20
    )
    assert [p.question for p in again] == [p.question for p in train]


def test_default_task_uses_two_shot_prompt_ending_in_answer_tags():
    problem = load_task(DEFAULT_TASK, size=1)[0]
    roles = [m["role"] for m in problem.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    for example in problem.messages[1:4:2]:
        assert example["content"].rstrip().endswith("</answer>")
    assert problem.question in problem.prompt
    assert problem.verifier == "rg"


def test_rg_bare_name_and_template_override():
    problem = load_task("chain_sum?template=answer_tags", size=1)[0]
    assert len(problem.messages) == 1 and "<answer>" in problem.prompt


def test_rg_seed_range_guard_and_bad_config():
    with pytest.raises(DataError, match="disjoint"):
        load_task("rg:chain_sum", "train", seed=EVAL_SEED_OFFSET - 5, size=10)
    with pytest.raises(DataError, match="invalid config"):
        load_task("rg:chain_sum?no_such_field=1", size=2)


def test_unknown_name_lists_close_matches():
    with pytest.raises(DataError, match="chain_sum"):
        load_task("chain_summ")
    with pytest.raises(DataError, match="gsm8k"):
        load_task("gsm8", "eval")


def test_local_file_with_column_mapping_dotted_paths(tmp_path):
    path = tmp_path / "dapo.jsonl"
    rows = [
        {
            "prompt": [{"role": "user", "content": "What is 2+2?"}],
            "reward_model": {"ground_truth": "4"},
        },
        {
            "prompt": [{"role": "user", "content": "What is 3+3?"}],
            "reward_model": {"ground_truth": "6"},
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = load_task(f"{path}?question=prompt&answer=reward_model.ground_truth&template=raw")
    assert [(i.question, i.answer) for i in items] == [("What is 2+2?", "4"), ("What is 3+3?", "6")]
    assert items[0].messages == [{"role": "user", "content": "What is 2+2?"}]
    assert items[1].reward(r"\boxed{6}").correct


def test_local_file_answer_formats(tmp_path):
    path = tmp_path / "math.jsonl"
    path.write_text(json.dumps({"problem": "p", "solution": r"so \boxed{\frac{1}{3}}."}) + "\n")
    items = load_task(f"{path}?answer=solution&answer_format=boxed")
    assert items[0].answer == r"\frac{1}{3}"
    assert "boxed" in items[0].prompt
    with pytest.raises(DataError, match="answer_format"):
        load_task(f"{path}?answer_format=latex")
    with pytest.raises(DataError, match="cannot read question"):
        load_task(f"{path}?question=missing")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_task(str(tmp_path / "nope.jsonl"))


def test_unknown_template():
    with pytest.raises(ValueError, match="chain_sum_2shot"):
        render_messages("fancy", "q")
