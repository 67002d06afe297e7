"""What a reward function returns, read one way for training (`unpack_reward`) and for
evaluation (`as_verdict`), and `ItemJudge` judging each item by its own rule."""

import pytest

from ict.rewards import ItemJudge, Verdict, as_verdict, unpack_reward


@pytest.mark.parametrize(
    "value, expected",
    [
        (1.0, (1.0, None)),
        (0, (0.0, None)),
        ((0.5, True), (0.5, True)),
        ((1.0, None), (1.0, None)),
        ({"reward": 1, "format": False}, (1.0, False)),
        ({"reward": 0.25, "formatted": True}, (0.25, True)),
        (Verdict(1.0, True, "3", True), (1.0, True)),
    ],
)
def test_unpack_reward_reads_every_form(value, expected):
    assert unpack_reward(value) == expected


def test_a_failed_verdict_raises_for_training_and_is_reward_zero_for_evaluation():
    with pytest.raises(TimeoutError):
        unpack_reward(Verdict(0.0, False, None, False, timed_out=True))
    with pytest.raises(RuntimeError, match="bad"):
        unpack_reward(Verdict(0.0, False, None, False, error="bad"))
    broken = as_verdict({"no reward": 1})  # unreadable: scored 0 with the error, as in training
    assert (broken.reward, broken.correct) == (0.0, False) and "KeyError" in broken.error


def test_as_verdict_clips_and_judges_correct_at_one():
    assert as_verdict(1.0) == Verdict(1.0, True, None, None)
    assert as_verdict((0.99, True)) == Verdict(0.99, False, None, True)
    assert as_verdict(3.0).reward == 1.0 and as_verdict(-1.0).reward == 0.0
    verdict = Verdict(1.0, True, "7", True)
    assert as_verdict(verdict) is verdict


def test_item_scorer_uses_each_items_own_rule_else_the_verifier():
    class OwnRule:
        def reward(self, text, verifier=None):
            return float(text == "yes")

    class Plain:
        def reward(self, text, verifier=None):
            return verifier.judge_one(self, text)

    class Verifier:
        def judge_one(self, item, text):
            return Verdict(0.5, False, text, True)

    verdicts = ItemJudge(Verifier()).judge([(OwnRule(), "yes"), (OwnRule(), "no"), (Plain(), "x")])
    assert [v.reward for v in verdicts] == [1.0, 0.0, 0.5]
    assert [v.correct for v in verdicts] == [True, False, False]
