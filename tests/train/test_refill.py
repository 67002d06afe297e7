"""Dynamic sampling with refill (ict.train.refill): which groups a step keeps, the merged batch,
and the trainer's refilled steps (B informative groups, deterministic, exact resume after a kill)."""

import json
import logging

import pytest
import torch

from ict.errors import ConfigError
from ict.generation import Rollout
from ict.train import Problem, TrainConfig, Trainer, train
from ict.train.refill import choose_groups, take_groups
from ict.train.rollout import RolloutBatch

TIMING = ("time/", "throughput/")


def rows_of(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def comparable(rows):
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in rows]


def test_choose_groups_keeps_the_first_informative_ones_and_counts_the_surplus():
    flags = [False, True, False, True, True, False, True]
    assert choose_groups(flags, 2) == ([1, 3], 2)  # 4 and 6 drawn beyond B: surplus (verl's)
    assert choose_groups(flags, 4) == ([1, 3, 4, 6], 0)
    # the cap: 4 informative of 7 drawn, B = 6 -> topped up with the first silent ones, draw order
    assert choose_groups(flags, 6) == ([0, 1, 2, 3, 4, 6], 0)
    assert choose_groups([False] * 3, 2) == ([0, 1], 0)


def _batch(prompt_widths, response_width, group_size, offset):
    """A RolloutBatch of len(prompt_widths) groups: group g's prompt has prompt_widths[g] real
    tokens, left-padded (pad 0) to the widest; tokens numbered so that every row is unique."""
    width_p = max(prompt_widths)
    rows = len(prompt_widths) * group_size
    ids = torch.zeros(rows, width_p + response_width, dtype=torch.long)
    attn = torch.zeros_like(ids)
    resp = torch.zeros_like(ids, dtype=torch.bool)
    for row in range(rows):
        p = prompt_widths[row // group_size]
        n = 1 + row % response_width  # response lengths 1 .. response_width
        ids[row, width_p - p : width_p] = (
            offset + 100 * (row // group_size) + torch.arange(1, p + 1)
        )
        ids[row, width_p : width_p + n] = offset + 1000 + 10 * row + torch.arange(n)
        attn[row, width_p - p : width_p + n] = 1
        resp[row, width_p : width_p + n] = True
    rollout = Rollout(
        torch.arange(len(prompt_widths)).repeat_interleave(group_size), ids, attn, resp, width_p,
        [f"r{offset}-{i}" for i in range(rows)], [f"p{offset}-{g}" for g in range(len(prompt_widths))],
    )  # fmt: skip
    rewards = torch.arange(rows, dtype=torch.float32) + offset
    return RolloutBatch(rollout, rewards, list(rollout.prompts), [None] * rows, 1, 0, 0.5)


def _strip(rollout, row):
    """(prompt tokens, response tokens) of one row, padding removed."""
    p = rollout.prompt_length
    prompt = rollout.input_ids[row, :p][rollout.attention_mask[row, :p].bool()]
    response = rollout.input_ids[row][rollout.response_mask[row]]
    return prompt.tolist(), response.tolist()


def test_take_groups_merges_rounds_of_different_widths_row_for_row():
    g = 2
    rounds = [_batch([3, 2], 2, g, 0), _batch([5, 1], 4, g, 10_000)]
    merged = take_groups(rounds, [1, 2, 3], 2, g, pad_id=0)
    r = merged.rollout
    assert r.prompt_length == 5 and r.input_ids.shape == (6, 5 + 4)
    assert r.prompt_index.tolist() == [0, 0, 1, 1, 2, 2]
    for new, (k, old) in enumerate([(0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)]):
        assert _strip(r, new) == _strip(rounds[k].rollout, old)
        assert r.texts[new] == rounds[k].rollout.texts[old]
        assert merged.rewards[new] == rounds[k].rewards[old]
    assert merged.prompts == ["p0-1", "p10000-0", "p10000-1"] == r.prompts
    assert not r.response_mask[:, :5].any()  # responses start at the common prompt width
    assert merged.errors == 2 and merged.seconds == 1.0
    # one whole round is returned as it is
    assert take_groups(rounds[:1], [0, 1], 2, g, pad_id=0) is rounds[0]


def test_config_refuses_a_cap_below_one_and_groups_of_one_before_any_model_loads():
    with pytest.raises(ConfigError, match="max_generation_rounds must be a positive integer"):
        TrainConfig(dynamic_sampling=True, max_generation_rounds=0)
    with pytest.raises(ConfigError, match="dynamic_sampling needs num_generations >= 2"):
        TrainConfig(dynamic_sampling=True, num_generations=1, advantage="dr_grpo")
    TrainConfig(num_generations=1, advantage="dr_grpo")  # without refill: allowed as before


def _refill_config(tiny_config, **changes):
    # 4 samples per prompt of a ~10%-reward task: most groups are all wrong at random init
    base = dict(
        method="ict", num_generations=4, dynamic_sampling=True, max_generation_rounds=12,
        max_steps=3, dense_warmup_steps=1,
    )  # fmt: skip
    return tiny_config(**{**base, **changes})


def test_a_refilled_step_holds_b_informative_groups(tiny_config, digit_problems):
    from ict.testing import tiny_model_and_tokenizer

    config = _refill_config(tiny_config)
    model, tok = tiny_model_and_tokenizer(seed=0)
    trainer = Trainer(config, model=model, tokenizer=tok, problems=digit_problems)
    seen = []
    run = trainer.step_service.train_on_rollout
    trainer.step_service.train_on_rollout = lambda rollout, rewards, step: (
        seen.append((rollout, rewards)) or run(rollout, rewards, step=step)
    )
    trainer.train()
    rows = rows_of(trainer.run_dir / "metrics.jsonl")
    B, G = config.prompts_per_step, config.num_generations
    for (rollout, rewards), row in zip(seen, rows, strict=True):
        assert rollout.input_ids.shape[0] == B * G
        groups = rewards.view(B, G)
        assert bool((groups.max(1).values > groups.min(1).values).all())  # every group informative
        assert row["zero_variance_share"] == 0 and row["dynamic/informative_groups"] == B
        assert not row["dynamic/cap_hit"]
        assert row["dynamic/prompts"] == B * row["dynamic/rounds"]
        assert row["rollout/sequences"] == G * row["dynamic/prompts"]
    assert any(r["dynamic/rounds"] > 1 for r in rows), "the task should need refills"
    # the data cursor: every prompt drawn is consumed, surplus included
    assert trainer.sampler.consumed == sum(r["dynamic/prompts"] for r in rows)


def test_refilled_runs_are_deterministic_and_resume_exactly_after_a_kill(
    tiny_config, digit_problems, tmp_path
):
    from ict.testing import tiny_model_and_tokenizer

    full = _refill_config(tiny_config, max_steps=4, save_every=2, output_dir=str(tmp_path / "a"))
    again = full.replace(output_dir=str(tmp_path / "b"))
    for config in (full, again):
        model, tok = tiny_model_and_tokenizer(seed=0)
        train(config, model=model, tokenizer=tok, problems=digit_problems)
    a, b = rows_of(tmp_path / "a" / "metrics.jsonl"), rows_of(tmp_path / "b" / "metrics.jsonl")
    assert comparable(a) == comparable(b)
    assert any(r["dynamic/rounds"] > 1 for r in a[2:]), "a refill after the checkpoint"

    part = full.replace(output_dir=str(tmp_path / "part"))
    model, tok = tiny_model_and_tokenizer(seed=0)
    assert train(part, model=model, tokenizer=tok, problems=digit_problems, stop_after=3) == {}
    with open(tmp_path / "part" / "metrics.jsonl", "a") as f:
        f.write('{"step": 4, "rew')  # killed mid-line, after step 3 ran past the checkpoint
    model, tok = tiny_model_and_tokenizer(seed=7)  # the checkpoint must overwrite it
    trainer = Trainer(part, model=model, tokenizer=tok, problems=digit_problems, resume=True)
    assert trainer.step == 2
    assert trainer.sampler.consumed == sum(r["dynamic/prompts"] for r in a[:2])
    trainer.train()
    assert comparable(rows_of(tmp_path / "part" / "metrics.jsonl")) == comparable(a)


def test_one_round_is_the_step_without_refill(tiny_config, digit_problems, tmp_path):
    """Round 0 draws the same prompts with the same seed as a step without dynamic sampling."""
    from ict.testing import tiny_model_and_tokenizer

    out = {}
    for name, on in (("plain", False), ("one", True)):
        config = _refill_config(
            tiny_config, dynamic_sampling=on, max_generation_rounds=1, max_steps=2,
            output_dir=str(tmp_path / name),
        )  # fmt: skip
        model, tok = tiny_model_and_tokenizer(seed=0)
        train(config, model=model, tokenizer=tok, problems=digit_problems)
        out[name] = rows_of(tmp_path / name / "metrics.jsonl")
    strip = [{k: v for k, v in r.items() if not k.startswith("dynamic/")} for r in out["one"]]
    assert comparable(strip) == comparable(out["plain"])
    assert [r["dynamic/rounds"] for r in out["one"]] == [1, 1]


def test_the_cap_proceeds_with_what_it_has_and_says_so(tiny_config, tmp_path, caplog):
    """A task nothing solves: every round silent, the step trains on B groups after the cap, and
    the run says it learned nothing (the window warning and the final line)."""
    from ict.testing import tiny_model_and_tokenizer

    problems = [Problem(f"Say a digit {i}:", lambda text: 0.0) for i in range(16)]
    config = _refill_config(tiny_config, max_generation_rounds=2, max_steps=3, health_window=2)
    model, tok = tiny_model_and_tokenizer(seed=0)
    with caplog.at_level(logging.WARNING, logger="ict.train"):
        summary = train(config, model=model, tokenizer=tok, problems=problems)
    rows = rows_of(tmp_path / "run" / "metrics.jsonl")
    B = config.prompts_per_step
    for row in rows:
        assert row["dynamic/cap_hit"] and row["dynamic/rounds"] == 2
        assert row["dynamic/prompts"] == 2 * B and row["dynamic/informative_groups"] == 0
        assert row["zero_variance_share"] == 1.0 and row["zero_variance_groups"] == B
    assert rows[0]["health/no_signal"] is False and rows[1]["health/no_signal"] is True
    text = "100% of groups carried no signal (3 of 3 steps none at all: no update)"
    assert summary["headline"].endswith(
        f"{text}: raise --num-generations or --max-generation-rounds, or use an easier task"
    )
    warnings = [r.getMessage() for r in caplog.records if "carried no signal" in r.getMessage()]
    assert warnings[0].startswith("steps 1-2: 100% of groups carried no signal")
    assert len(warnings) == 2  # once per stretch during the run, once at the end


def test_no_signal_warning_stays_quiet_on_a_task_with_signal(tiny_config, tmp_path, caplog):
    """A default-like task (about half the responses right, most groups mixed): no warning, and
    the final line says nothing about the signal."""
    from ict.testing import tiny_model_and_tokenizer

    def odd_first_token(text: str) -> float:
        return float(bool(text) and ord(text[0]) % 2 == 1)

    problems = [Problem(f"Say a digit {i}:", odd_first_token) for i in range(16)]
    config = tiny_config(method="grpo", max_steps=3, health_window=2)
    model, tok = tiny_model_and_tokenizer(seed=0)
    with caplog.at_level(logging.WARNING, logger="ict.train"):
        summary = train(config, model=model, tokenizer=tok, problems=problems)
    rows = rows_of(tmp_path / "run" / "metrics.jsonl")
    assert max(r["zero_variance_share"] for r in rows) < 0.8
    assert not any(r["health/no_signal"] for r in rows)
    assert not summary["health"]["no_signal"] and "signal" not in summary["headline"]
    assert not [r for r in caplog.records if "carried no signal" in r.getMessage()]
