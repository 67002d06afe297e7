"""The paper's benchmarks: MMLU-STEM subject filter, GPQA's seeded option shuffle, AIME years,
multiple-choice scoring on right, wrong, malformed and adversarial answers, the import cycle."""

import subprocess
import sys
from pathlib import Path

import pytest

from ict.compare.presets import FIXTURES_DIR
from ict.data import PAPER_BENCHMARKS, load_benchmark, load_task
from ict.data.choice import MMLU_STEM_SUBJECTS, gpqa_options_seed, gpqa_shuffled
from ict.errors import DataError

FIXTURES = FIXTURES_DIR  # the fixture files shipped with ict (package data)
GPQA_ROW = {
    "Question": "Q?",
    "Correct Answer": "right",
    "Incorrect Answer 1": "w1",
    "Incorrect Answer 2": "w2",
    "Incorrect Answer 3": "w3",
}


def test_paper_benchmarks_all_load_from_fixtures():
    assert len(PAPER_BENCHMARKS) == 7
    for name in PAPER_BENCHMARKS:
        assert load_benchmark(name, data_dir=FIXTURES), name


def test_mmlu_stem_keeps_only_stem_subjects():
    items = load_benchmark("mmlu_stem", data_dir=FIXTURES)
    subjects = [i.metadata["subject"] for i in items]
    assert subjects == ["abstract_algebra", "high_school_mathematics", "astronomy"]
    assert "anatomy" not in MMLU_STEM_SUBJECTS and len(MMLU_STEM_SUBJECTS) == 18
    # answer index -> letter of the right option text
    first = items[0]
    assert first.metadata["options"][ord(first.answer) - ord("A")] == "6"
    assert "C. 6" in first.prompt and first.verifier == "choice"
    # the filter applies before --limit
    assert [
        i.metadata["subject"] for i in load_benchmark("mmlu_stem", data_dir=FIXTURES, limit=2)
    ] == [
        "abstract_algebra",
        "high_school_mathematics",
    ]


def test_mmlu_bad_answer_index_is_a_data_error(tmp_path):
    row = '{"question": "q", "subject": "astronomy", "choices": ["a", "b", "c", "d"], "answer": 7}'
    (tmp_path / "mmlu_stem.jsonl").write_text(row + "\n")
    with pytest.raises(DataError, match="answer"):
        load_benchmark("mmlu_stem", data_dir=tmp_path)


def test_gpqa_options_are_shuffled_with_recorded_seed():
    items = load_benchmark("gpqa", data_dir=FIXTURES)
    positions = set()
    for item in items:
        options = item.metadata["options"]
        correct = item.metadata["Correct Answer"]
        assert options[ord(item.answer) - ord("A")] == correct
        assert sorted(options) == sorted(
            [correct] + [item.metadata[f"Incorrect Answer {j}"] for j in (1, 2, 3)]
        )
        order = item.metadata["options_order"]
        assert sorted(order) == [0, 1, 2, 3] and options[order.index(0)] == correct
        assert item.metadata["options_seed"] == gpqa_options_seed(item.question)
        positions.add(item.answer)
    assert len(positions) > 1  # not always the first option
    # deterministic, and a different base seed gives a different permutation for some question
    assert gpqa_shuffled(GPQA_ROW) == gpqa_shuffled(dict(GPQA_ROW))
    orders = {
        tuple(gpqa_shuffled(dict(GPQA_ROW, Question=f"Q{i}?"))["options_order"]) for i in range(20)
    }
    assert len(orders) > 3


def test_gpqa_missing_file_names_file_and_columns(tmp_path, monkeypatch):
    monkeypatch.delenv("ICT_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError) as err:
        load_benchmark("gpqa", data_dir=tmp_path)
    message = str(err.value)
    assert f"{tmp_path}/gpqa.jsonl" in message and "gpqa.csv" in message
    assert "'Correct Answer'" in message and "'Incorrect Answer 3'" in message
    assert "Idavidrein/gpqa" in message and "gated" in message


def test_aime23_keeps_only_2023_rows():
    items = load_benchmark("aime23", data_dir=FIXTURES)
    assert [i.answer for i in items] == ["117", "9"]
    assert all("/2023_AIME" in i.metadata["url"] for i in items)


@pytest.mark.parametrize("name", ["mmlu_stem", "gpqa"])
def test_multiple_choice_scoring(verifier, name):
    item = load_benchmark(name, data_dir=FIXTURES)[0]
    gold = item.answer
    wrong = next(c for c in "ABCD" if c != gold)
    right_text = item.metadata["options"][ord(gold) - ord("A")]
    cases = {
        f"<answer>{gold}</answer>": (True, True),
        f"Reasoning... \\boxed{{{gold}}}": (True, True),
        f"The answer is ({gold}).": (True, False),
        f"<answer>{wrong}</answer>": (False, True),
        # malformed: no letter, an out-of-range letter, an unclosed tag with no letter
        "<answer>I am not sure</answer>": (False, False),
        "<answer>E</answer>": (False, False),
        f"<answer>{right_text} maybe": (False, False),
        # adversarial: hedging over several options, listing them all, lower-case prose
        f"<answer>{gold} or {wrong}</answer>": (False, False),
        "<answer>A, B, C, D</answer>": (False, False),
        "A. first\nB. second\nC. third\nD. fourth": (False, False),
        "the answer is a guess": (False, False),
    }
    for response, (correct, format_ok) in cases.items():
        verdict = verifier.judge_one(item, response)
        assert verdict.correct is correct, (response, verdict)
        assert verdict.format_ok is format_ok, (response, verdict)


def test_final_stated_answer_wins(verifier):
    item = load_benchmark("gpqa", data_dir=FIXTURES)[0]
    other = next(c for c in "ABCD" if c != item.answer)
    text = f"The answer is {other}. Wait, no: the answer is {item.answer}."
    assert verifier.judge_one(item, text).correct


def test_data_modules_import_without_a_cycle():
    # each module alone, in a fresh interpreter, in the order that used to recurse
    for module in ("ict.data.benchmarks", "ict.data.tasks", "ict.data.unknown"):
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
    import ict.data.benchmarks as benchmarks

    source = Path(benchmarks.__file__).read_text()
    assert "ict.data.tasks" not in source


def test_unknown_benchmark_lists_close_names():
    with pytest.raises(DataError, match="Did you mean: .*gpqa"):
        load_task("gpqa_diamond", "eval")
