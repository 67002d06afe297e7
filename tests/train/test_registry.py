"""Register once, use everywhere: a selector or method registered by a user works in `ict train`
with no other edit, and its facts (ratio, scope, options) come from the registry."""

import json
from pathlib import Path

import pytest
import torch

from ict.errors import ConfigError
from ict.methods import METHODS, Method, get_method, register_method
from ict.select import SELECTORS, register_selector
from ict.train import TrainConfig, train
from ict.train.plan import RunPlan


@pytest.fixture
def user_selector():
    """A ratio selector scoring tokens by surprisal, per response by default, with one option."""

    @register_selector(
        "surprise_test", default_ratio=0.34, default_scope="sequence", needs=("logprob",)
    )
    def surprise(ctx, *, power: float = 1.0):
        return (-ctx.require_stats("surprise_test", "logprob").logprob) ** power

    yield "surprise_test"
    SELECTORS.pop("surprise_test", None)
    METHODS.pop("surprise_method_test", None)


def test_user_selector_trains_with_its_own_facts(user_selector, tiny, digit_problems, tiny_config):
    config = tiny_config(method=user_selector, max_steps=1, selector_options={"power": 2.0})
    resolved = RunPlan.from_config(config).config
    assert (resolved.ratio, resolved.scope) == (0.34, "sequence")  # the Selector's facts
    train(config, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)
    row = json.loads((Path(config.output_dir) / "metrics.jsonl").read_text().splitlines()[0])
    # max_new_tokens=3: ceil(0.34 * n) of each response of n <= 3 tokens is 1 (n <= 2) or 2 (n = 3)
    assert row["by_selector/surprise_test/fraction"] == row["selected_fraction"]
    assert 0 < row["selected_fraction"] < 1


def test_user_method_and_unknown_names(user_selector, tiny, digit_problems, tiny_config):
    register_method(
        Method("surprise_method_test", user_selector, "test", ratio=0.5, dense_warmup_steps=1)
    )
    config = tiny_config(method="surprise_method_test", max_steps=2)
    resolved = RunPlan.from_config(config).config
    assert resolved.ratio == 0.5 and resolved.dense_warmup_steps == 1
    train(config, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)
    rows = [
        json.loads(x) for x in (Path(config.output_dir) / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["dense_warmup"] for r in rows] == [True, False]
    assert rows[0]["selected_fraction"] == 1.0 and rows[1]["selected_fraction"] < 1.0
    with pytest.raises(ConfigError, match="surprise_test"):
        TrainConfig(method="surprise_tset")  # close match named
    with pytest.raises(ValueError, match="must not contain"):
        register_method(Method("a+b", "grpo"))


def test_builtin_methods_resolve():
    ict = get_method("ict").resolved()
    assert (ict.reference, ict.scope, ict.ratio, ict.loss_agg, ict.dense_warmup_steps) == (
        "group_position",
        "sequence",
        0.1,
        "seq_mean_token_mean",
        10,
    )
    # a composition led by a method is that method (warm-up, loss) with the selectors intersected
    combo = get_method("ict+stapo").resolved()
    assert combo.selector == "js_top+not_spurious"
    assert (combo.reference, combo.dense_warmup_steps, combo.ratio) == ("group_position", 10, 0.1)
    assert get_method("ict_bottom").resolved().ratio == 0.9
    assert get_method("random_sequence").resolved().scope == "sequence"
    assert SELECTORS["js_bottom"].needs == ("js",)


def test_a_name_is_a_method_and_a_selector_only_where_both_mean_the_same(user_selector):
    """A method's name says which recipe runs, a selector's what it keeps; `get_method` reads
    METHODS first, so a name in both registries must run that very selector, or `--method NAME`
    would not be the selector the name promises (and `a+NAME` would compose another one)."""
    from ict.errors import ConfigError
    from ict.select import available_selectors, select_tokens

    for name in set(available_selectors()) & set(METHODS):
        assert METHODS[name].selector == name, name
    # a user's method named like its selector, with a paper's settings on top, is allowed
    register_method(Method(user_selector, user_selector, scope="global"))
    try:
        assert get_method(user_selector).resolved().scope == "global"
        assert get_method(f"ict+{user_selector}").selector == f"js_top+{user_selector}"
    finally:
        METHODS.pop(user_selector)
    # the built-in method names are not selectors: `random` runs the selector `uniform`
    assert get_method("random").selector == "uniform" and "uniform" in SELECTORS
    mask = torch.ones(2, 10, dtype=torch.bool)
    with pytest.raises(ConfigError, match="unknown selector 'random'"):
        select_tokens("random", mask, seed=3)  # a method's name is not a selector's
