"""Verification: math-verify equivalences, letters, reasoning-gym, errors and the hard time limit."""

import time
from types import SimpleNamespace

import pytest

from ict.rewards import RewardFunction, Sandbox, Verifier


def item(answer, verifier="math", **metadata):
    return SimpleNamespace(answer=answer, verifier=verifier, metadata=metadata, question="q")


@pytest.mark.parametrize(
    "gold, response, correct, format_ok",
    [
        (r"\frac{1}{2}", "<answer>0.5</answer>", True, True),
        ("0.5", r"\boxed{\frac{1}{2}}", True, True),
        (r"\frac{1}{2}", r"\boxed{\dfrac12}", True, True),
        (r"2\sqrt{3}", r"\boxed{\sqrt{12}}", True, True),
        ("5", r"\boxed{5\text{ cm}}", True, True),
        ("-3", "it falls to -3.", True, False),
        ("-3", r"\boxed{3}", False, True),
        ("1000", r"\boxed{1,000}", True, True),
        ("024", "<answer>24</answer>", True, True),
        ("(2,1)", r"\boxed{(2, 1)}", True, True),
        ("7", "I do not know", False, False),
        ("7", "<answer>seven apples</answer>", False, True),
    ],
)
def test_math_verdicts(verifier, gold, response, correct, format_ok):
    verdict = verifier.judge_one(item(gold), response)
    assert verdict.correct is correct
    assert verdict.reward == float(correct)
    assert verdict.format_ok is format_ok
    assert verdict.error is None and not verdict.timed_out


def test_choice_verdicts(verifier):
    gold = item("B", verifier="choice")
    assert verifier.judge_one(gold, "<answer>B</answer>").correct
    wrong = verifier.judge_one(gold, "<answer>C</answer>")
    assert (wrong.correct, wrong.answer, wrong.format_ok) == (False, "C", True)
    untagged = verifier.judge_one(gold, "The answer is (B)")
    assert untagged.correct and not untagged.format_ok


def test_reasoning_gym_uses_task_scorer(verifier):
    from ict.data import load_task

    problem = load_task("rg:chain_sum?min_terms=2&max_terms=2", size=1)[0]
    right = verifier.judge_one(problem, f"<answer>{problem.answer}</answer>")
    assert right.correct and right.reward == 1.0
    wrong = verifier.judge_one(problem, f"<answer>{int(problem.answer) + 1}</answer>")
    assert not wrong.correct


def test_batch_api_matches_single_calls(verifier):
    samples = [(item("4"), r"\boxed{4}"), (item("4"), r"\boxed{5}"), (item("A", "choice"), "A")]
    assert isinstance(verifier, RewardFunction)
    batch = verifier.judge(samples)
    assert [v.correct for v in batch] == [True, False, True]
    assert batch == [verifier.judge_one(i, t) for i, t in samples]


def test_failing_scorer_is_reward_zero_and_counted(verifier):
    verdict = verifier.judge_one(item(""), r"\boxed{x^2}")  # empty gold: parse error
    assert verdict.reward == 0.0 and verdict.error is not None and not verdict.timed_out
    broken_rg = item("3", verifier="rg", rg_task="no_such_task")
    verdict = verifier.judge_one(broken_rg, "<answer>3</answer>")
    assert verdict.reward == 0.0 and "no_such_task" in verdict.error


def test_adversarial_power_tower_hits_the_time_limit():
    v = Verifier(timeout_s=1.0)
    v.sandbox.run("_sleep", 0)  # start the child outside the timed part
    start = time.monotonic()
    verdict = v.judge_one(item("5"), r"\boxed{10^{10^{10^{10}}}}")
    elapsed = time.monotonic() - start
    assert verdict.timed_out and verdict.reward == 0.0
    assert elapsed < 4.0  # limit 1 s; math-verify alone would take >= 5 s or never return
    assert v.judge_one(item("5"), r"\boxed{5.0}").correct  # the verifier still works afterwards
    v.close()


def test_sandbox_kills_an_uninterruptible_call():
    box = Sandbox(timeout_s=0.5)
    box.run("_sleep", 0)
    start = time.monotonic()
    value, error, timed_out = box.run("_sleep", 30)
    assert timed_out and value is None and "timed out" in error
    assert time.monotonic() - start < 2.0
    assert box.restarts == 1
    assert box.run("_sleep", 0) == (True, None, False)  # a fresh child serves the next call
    box.close()


def test_unknown_verifier_is_rejected(verifier):
    with pytest.raises(ValueError, match="unknown verifier"):
        verifier.judge_one(item("1", verifier="llm-judge"), "1")


def test_interpreter_exit_with_a_live_child_is_clean():
    import subprocess
    import sys

    code = (
        "from types import SimpleNamespace as S\n"
        "from ict.rewards import judge_response\n"
        "print(judge_response(S(answer='1/2', verifier='math', metadata={}), '<answer>0.5</answer>').correct)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True" and "Fatal" not in done.stderr
