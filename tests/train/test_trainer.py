"""The trainer on the tiny offline model: every method runs, a task is learned, outputs, resume."""

import json
import math
from pathlib import Path

import pytest
import torch

from ict.errors import DataError, ModelLoadError, UserError
from ict.methods import METHODS, get_method
from ict.select.core import selector_facts
from ict.train import Problem, Trainer, train

REQUIRED_KEYS = {
    "step",
    "reward/mean",
    "accuracy",
    "response_length/mean",
    "clip_fraction",
    "valid/entropy",
    "valid/renyi2",
    "valid/js",
    "valid/prob",
    "selected/entropy",
    "selected/renyi2",
    "selected/js",
    "selected/prob",
    "selected_fraction",
    "overlap/ict_entropy_jaccard",
    "grad_norm",
    "lr",
    "zero_variance_groups",
    "time/rollout_s",
    "time/stats_s",
    "time/update_s",
    "throughput/rollout_tok_s",
    "throughput/update_tok_s",
    "health/entropy_collapse",
    "health/entropy_explosion",
    "reward/errors",
}
TIMING = ("time/", "throughput/")


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def comparable(rows):
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in rows]


def expected_fraction(name, n_valid, rows, max_new_tokens):
    """The selected fraction of a step the registry's facts imply (the method's selector, ratio
    and scope), for `rows` responses of at most `max_new_tokens` <= 3 tokens and `n_valid` valid
    tokens; None for a mask selector other than `every` (only a bound is known)."""
    method = get_method(name).resolved()
    if not selector_facts(method.selector)["takes_ratio"]:
        return 1.0 if method.selector == "every" else None
    if method.scope == "global":  # the top ceil(ratio x n) of the whole batch
        return math.ceil(method.ratio * n_valid) / n_valid
    # per response: keep_count(n) = ceil(ratio x n), at least 1: one token of each response of
    # up to 3 tokens below a ratio of 1/3, every token above 2/3
    assert method.scope == "sequence" and max_new_tokens <= 3
    if method.ratio <= 1 / 3:
        return rows / n_valid
    assert method.ratio > 2 / 3, f"{name}: a ratio this test cannot count without the lengths"
    return 1.0


@pytest.mark.parametrize("method", [*METHODS, "ict+stapo"])  # every registered method
def test_every_method_runs_and_writes_the_run_directory(method, tiny, digit_problems, tiny_config):
    config = tiny_config(
        method=method, max_steps=2, save_every=1, keep_last=1, dense_warmup_steps=0
    )
    summary = train(config, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)
    run = config.output_dir
    rows = read_jsonl(Path(run) / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    assert REQUIRED_KEYS <= set(rows[0]), REQUIRED_KEYS - set(rows[0])
    for row in rows:
        n_valid = row["valid_tokens"]
        rows_per_step = config.prompts_per_step * config.num_generations
        want = expected_fraction(method, n_valid, rows_per_step, config.max_new_tokens)
        if "+" in method:  # a composition: the first method's selection, minus some tokens
            first = expected_fraction(method.split("+")[0], n_valid, rows_per_step,
                                      config.max_new_tokens)  # fmt: skip
            assert row["selected_fraction"] <= first + 1e-9
        elif want is None:  # a mask (stapo): every token but a few spurious ones
            assert row["selected_fraction"] <= 1.0 + 1e-9
        else:
            assert row["selected_fraction"] == pytest.approx(want)
        assert (
            0 <= row["valid/js"] <= math.log(2)
            and row["valid/renyi2"] <= row["valid/entropy"] + 1e-6
        )
        assert 0 <= row["overlap/ict_entropy_jaccard"] <= 1
        ict = expected_fraction("ict", n_valid, rows_per_step, config.max_new_tokens)
        assert row["by_selector/ict/fraction"] == pytest.approx(ict)
    samples = read_jsonl(Path(run) / "samples.jsonl")
    assert samples and samples[0]["step"] == 1
    s = samples[0]
    n = len(s["tokens"])
    assert n == len(s["entropy"]) == len(s["js"]) == len(s["renyi2"])
    assert {"ict", "entropy", "stapo", method} <= set(s["selected"])
    assert all(len(v) == n and set(v) <= {0, 1} for v in s["selected"].values())
    assert "".join(s["tokens"]) == s["response"]
    assert summary["steps"] == 2 and summary["method"] == method
    saved = json.loads((Path(run) / "summary.json").read_text())
    assert saved["paths"]["checkpoint"].endswith("step_000002")
    ckpts = sorted(p.name for p in (Path(run) / "checkpoints").glob("step_*"))
    assert ckpts == ["step_000002"]  # keep_last=1


def test_learning_reward_rises_on_a_learnable_task(tiny, digit_problems, tiny_config):
    """GRPO on 'start with a digit' (about 10% at random init): reward must rise within 30 steps."""
    config = tiny_config(method="grpo", max_steps=30)
    summary = train(config, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)
    rows = read_jsonl(Path(config.output_dir) / "metrics.jsonl")
    first = sum(r["reward/mean"] for r in rows[:5]) / 5
    last = sum(r["reward/mean"] for r in rows[-5:]) / 5
    assert first < 0.3 and last > first + 0.4, (first, last)
    assert summary["reward_last_steps"] == pytest.approx(last)
    assert rows[0]["lr"] == pytest.approx(
        config.learning_rate
    )  # warmup_steps=0: full lr from step 1


def test_resume_matches_uninterrupted_run_step_for_step(digit_problems, tiny_config, tmp_path):
    from ict.testing import tiny_model_and_tokenizer

    full = tiny_config(max_steps=6, save_every=2, output_dir=str(tmp_path / "full"), method="ict")
    model, tok = tiny_model_and_tokenizer(seed=0)
    train(full, model=model, tokenizer=tok, problems=digit_problems)

    part = full.replace(output_dir=str(tmp_path / "part"))
    model, tok = tiny_model_and_tokenizer(seed=0)
    assert train(part, model=model, tokenizer=tok, problems=digit_problems, stop_after=3) == {}
    rows = read_jsonl(tmp_path / "part" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3]  # step 3 ran after the last checkpoint (step 2)
    with open(tmp_path / "part" / "metrics.jsonl", "a") as f:
        f.write('{"step": 4, "rew')  # killed mid-line
    model, tok = tiny_model_and_tokenizer(
        seed=7
    )  # different init: the checkpoint must overwrite it
    trainer = Trainer(part, model=model, tokenizer=tok, problems=digit_problems, resume=True)
    assert trainer.step == 2
    trainer.train()
    a = read_jsonl(tmp_path / "full" / "metrics.jsonl")
    b = read_jsonl(tmp_path / "part" / "metrics.jsonl")
    assert [r["step"] for r in b] == [1, 2, 3, 4, 5, 6]
    assert comparable(a) == comparable(b)


def test_gradient_accumulation_and_prompt_sharing_match_one_big_batch(
    tiny_config, digit_problems, tmp_path
):
    """Micro-batches (shared denominator) and the shared-prompt forward give the same update as
    one plain batch of 32 sequences."""
    from ict.testing import tiny_model_and_tokenizer

    params = []
    for micro, share in ((32, False), (2, False), (8, True), (32, True)):
        model, tok = tiny_model_and_tokenizer(seed=0)
        config = tiny_config(
            max_steps=1,
            micro_batch_size=micro,
            share_prompt=share,
            autocast="off",
            method="ict",
            dense_warmup_steps=0,
            learning_rate=1e-3,
            output_dir=str(tmp_path / f"m{micro}{share}"),
            max_grad_norm=0.0,
        )
        train(config, model=model, tokenizer=tok, problems=digit_problems)
        params.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    for other in params[1:]:  # one Adam step of lr 1e-3: float summation order moves it < 5e-6
        torch.testing.assert_close(other, params[0], atol=5e-6, rtol=1e-5)
    model, _ = tiny_model_and_tokenizer(seed=0)
    assert not torch.allclose(params[0], torch.cat([p.flatten() for p in model.parameters()]))


def test_dense_warmup_updates_every_token_and_logs_the_method_selection(
    tiny, digit_problems, tiny_config
):
    """The paper's schedule: dense GRPO for the first Theta steps, then the sparse selection;
    the method's own selection is logged during the warm-up too."""
    config = tiny_config(method="ict", max_steps=3, dense_warmup_steps=2)
    summary = train(config, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)
    rows = read_jsonl(Path(config.output_dir) / "metrics.jsonl")
    assert [r["dense_warmup"] for r in rows] == [True, True, False]
    phases = summary["health"]["phases"]  # the warm-up's health judged apart (issue 50)
    assert phases["warm-up"]["steps"] == [1, 2] and phases["method"]["steps"] == [3, 3]
    assert phases["warm-up"]["entropy_last_step"] == rows[1]["valid/entropy"]
    for row in rows:
        sparse = row["valid_tokens"] and 32 / row["valid_tokens"]
        assert row["by_selector/ict/fraction"] == pytest.approx(sparse)
    assert [r["selected_fraction"] for r in rows[:2]] == [1.0, 1.0]
    assert rows[2]["selected_fraction"] == pytest.approx(32 / rows[2]["valid_tokens"])
    for key in ("paper/collapse_share", "paper/explosion_share"):
        assert 0 <= rows[2][key] <= 1
    assert rows[0]["paper/collapse_share"] + rows[0]["paper/explosion_share"] <= 1 + 1e-9
    curve = rows[0]["score_curve"]  # logged with the samples (step 1)
    assert len(curve) == 101 and curve == sorted(curve, reverse=True) and curve[0] <= math.log(2)
    saved = (Path(config.output_dir) / "config.yaml").read_text()
    assert "reference: group_position" in saved and "dense_warmup_steps: 2" in saved
    assert "precision:" in saved


def test_reward_errors_are_counted_not_fatal(tiny, tiny_config):
    calls = []

    def flaky(text):  # every other call raises: the count does not depend on what was sampled
        calls.append(text)
        if len(calls) % 2 == 0:
            raise ValueError("broken verifier")
        return 0.0

    config = tiny_config(max_steps=1)
    train(config, model=tiny[0], tokenizer=tiny[1], problems=[Problem("x", flaky)] * 4)
    row = read_jsonl(Path(config.output_dir) / "metrics.jsonl")[0]
    assert len(calls) == config.prompts_per_step * config.num_generations  # 32 responses scored
    assert row["reward/errors"] == len(calls) // 2 and row["reward/mean"] == 0.0


def test_kl_reference_model_and_epochs(tiny, digit_problems, tiny_config):
    config = tiny_config(
        max_steps=2,
        kl_coef=0.1,
        num_epochs=2,
        mini_batch_size=16,
        micro_batch_size=8,
        entropy_coef=0.01,
    )
    train(config, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)
    rows = read_jsonl(Path(config.output_dir) / "metrics.jsonl")
    # k3 >= 0 always; > 0 once the policy has moved from the reference: step 1's later mini-batches
    # and its second epoch update a policy its first mini-batch changed, step 2 one step 1 changed
    assert all(row["kl_ref"] > 0 for row in rows), [row.get("kl_ref") for row in rows]


def test_warmup_learning_rate_per_step(tiny, digit_problems, tiny_config):
    """lr logged = the lr of the step's update: linear warm-up (s+1)/(w+1), then constant."""
    config = tiny_config(max_steps=4, warmup_steps=2, learning_rate=3e-3)
    train(config, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)
    rows = read_jsonl(Path(config.output_dir) / "metrics.jsonl")
    assert [r["lr"] for r in rows] == pytest.approx([1e-3, 2e-3, 3e-3, 3e-3])


def test_existing_run_dir_without_resume_is_refused(tiny, digit_problems, tiny_config):
    config = tiny_config(max_steps=1)
    train(config, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)
    with pytest.raises(UserError, match="--resume"):
        Trainer(config, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)


def test_bad_model_path_and_task(tiny_config, tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        Trainer(tiny_config(model=str(tmp_path / "no_such_model")))
    from ict.testing import tiny_model_and_tokenizer

    model, tok = tiny_model_and_tokenizer()
    with pytest.raises(DataError, match="unknown task"):
        Trainer(tiny_config(task="no_such_task", task_config={}), model=model, tokenizer=tok)
    data = tmp_path / "d.jsonl"
    data.write_text('{"q": "1+1", "a": "2"}\n')
    with pytest.raises(DataError, match="question"):
        Trainer(
            tiny_config(task=str(data), task_config={"question": "prompt", "answer": "a"}),
            model=model,
            tokenizer=tok,
        )


def test_tokenizer_without_pad_token_uses_eos(tiny, digit_problems, tiny_config, caplog):
    model, tok = tiny
    tok.pad_token = None
    train(tiny_config(max_steps=1), model=model, tokenizer=tok, problems=digit_problems)
    assert tok.pad_token == tok.eos_token


def test_periodic_evaluation_adds_eval_metrics(tiny, tiny_config, tmp_path):
    """eval_every runs ict.eval.evaluate on held-out problems of the task (a local JSONL file)."""
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(json.dumps({"question": f"{i}+0", "answer": str(i)}) + "\n" for i in range(4))
    )
    config = tiny_config(
        max_steps=1, eval_every=1, eval_size=2, eval_num_samples=2, task=str(data), task_config={}
    )
    train(config, model=tiny[0], tokenizer=tiny[1])
    row = read_jsonl(Path(config.output_dir) / "metrics.jsonl")[0]
    eval_keys = [k for k in row if k.startswith("eval/")]
    assert any(k.endswith("pass@1") for k in eval_keys), row.keys()
    assert all(0 <= row[k] <= 1 for k in eval_keys if "pass@" in k)
