"""Token labels of running-total chains (ict.data.running_total), checked by hand."""

from ict.data.prompts import render_messages
from ict.data.running_total import token_categories


def test_labels_of_a_well_formed_chain():
    tokens = ["Step", " ", "1", ":", " ", "4", " +", " ", "7", " =", " ", "1", "1", ".",
              " So", " the", " answer", " is", " ", "1", "1", ".", " <", "answer", ">", "1", "1",
              "</", "answer", ">", "<|im_end|>"]  # fmt: skip
    labels = token_categories(tokens)
    assert len(labels) == len(tokens)
    expected = {
        0: "step_label", 2: "step_label", 3: "step_label",
        5: "operand", 8: "operand", 11: "step_sum", 12: "step_sum",
        19: "answer", 20: "answer", 25: "answer", 26: "answer",
        6: "format", 14: "format", 23: "format", 30: "eos",
    }  # fmt: skip
    for index, label in expected.items():
        assert labels[index] == label, (index, tokens[index], labels[index])


def test_a_token_spanning_two_categories_takes_the_more_decisive():
    # " = 19" as one token holds format ("=") and the step's sum: the sum wins
    assert token_categories(["3 + 16", " = 19"]) == ["operand", "step_sum"]


def test_malformed_text_is_format():
    assert token_categories(["I", " think", " 7"]) == ["format", "format", "format"]
    assert token_categories([]) == []


def test_the_prompt_shows_chains_of_three_to_five_terms():
    messages = render_messages("running_total_3shot", "Calculate 1 + 2 + 3 + 4.")
    assert [m["role"] for m in messages] == ["user", "assistant"] * 3 + ["user"]
    assert messages[-1]["content"].startswith("Calculate 1 + 2 + 3 + 4.")
    steps = [m["content"].count("Step ") for m in messages if m["role"] == "assistant"]
    assert steps == [2, 3, 4]


def test_the_smollm_cot_task_is_labelled_as_a_running_total_chain():
    from ict.compare.presets import SMOLLM_COT_TASK
    from ict.report.positions import categorizer_for, generic_categories

    assert categorizer_for(SMOLLM_COT_TASK) is token_categories
    assert categorizer_for("rg:chain_sum") is generic_categories
