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
    from ict.compare.presets import get_preset
    from ict.data import generic_categories, task_categorizer

    assert task_categorizer(get_preset("smollm-cot").task) is token_categories
    assert task_categorizer("rg:chain_sum") is generic_categories


def test_first_error_of_hand_written_chains():
    from ict.data.running_total import first_error

    terms = [4, 7, 1, 8]
    right = "Step 1: 4 + 7 = 11. Step 2: 11 + 1 = 12. Step 3: 12 + 8 = 20. So the answer is 20."
    assert first_error(terms, right + " <answer>20</answer>") is None
    assert first_error(terms, right) is None  # "the answer is 20" is the final answer
    cases = {
        "Step 1: 4 + 7 = 11. Step 2: 11 + 8 = 19. Step 3: 19 + 1 = 20.": "term_copy",  # skipped 1
        "Step 1: 4 + 7 = 11. Step 2: 12 + 1 = 13. Step 3: 13 + 8 = 21.": "total_copy",
        "Step 1: 4 + 7 = 11. Step 2: 11 + 1 = 13. Step 3: 13 + 8 = 21.": "step_sum",
        right + " Step 4: 20 + 1 = 21. So the answer is 21.": "extra_step",
        "Step 1: 4 + 7 = 11. Step 2: 11 + 1 = 12. So the answer is 12.": "missing_step",
        right.replace("answer is 20", "answer is 21"): "answer",
        "4 + 7 + 1 + 8 is 20. <answer>20</answer>": "no_chain",
        "Step 1: 4 + 7 + 1 = 12. Step 2: 12 + 8 = 20. So the answer is 20.": "lumped_step",
        "Step 1: 4 - 7 = -3. Step 2: -3 + 1 = -2.": "term_copy",
    }
    for response, expected in cases.items():
        assert first_error(terms, response) == expected, response
