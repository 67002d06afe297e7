"""The trainer's periodic evaluation (`eval_every`): RUN/eval_steps/step_<step>.json with
per-problem counts, sampled with `eval_seed` (the same for every seed and method)."""

import json
from pathlib import Path

import pytest

from ict.eval.settings import chunk_seed
from ict.train import TrainConfig, train


class EvenSampler:
    """Records its seeds, answers "<answer>i</answer>" to the even questions "i+0" (correct) and
    "no" to the odd ones, so the counts are known."""

    def __init__(self):
        self.seeds = []

    def sample(self, prompts, *, n, seed):
        self.seeds.append(seed)
        out = []
        for messages in prompts:
            i = int(messages[-1]["content"].split("+")[0].split()[-1])
            text = f"<answer>{i}</answer>" if i % 2 == 0 else "<answer>no</answer>"
            out.append([(text, 3)] * n)
        return out


@pytest.fixture
def sampler():
    return EvenSampler()


def run(tmp_path: Path, seed: int, sampler=None, **changes) -> Path:
    from ict.testing import tiny_model_and_tokenizer

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"question": f"{i}+0", "answer": str(i)}) + "\n" for i in range(4)))  # fmt: skip
    model, tok = tiny_model_and_tokenizer(seed=0)
    config = TrainConfig(
        **{
            "max_steps": 2, "prompts_per_step": 2, "num_generations": 2, "max_new_tokens": 2,
            "stop": [], "learning_rate": 1e-3, "warmup_steps": 0, "save_every": 0, "plots": False,
            "progress": False, "micro_batch_size": 8, "eval_every": 1, "eval_size": 4,
            "eval_num_samples": 2, "generation_batch_size": 4, "task": str(data), "task_config": {},
            "seed": seed, "output_dir": str(tmp_path / f"run{seed}"), **changes,
        }
    )  # fmt: skip
    train(config, model=model, tokenizer=tok, sampler_factory=lambda *_: sampler)
    return Path(config.output_dir)


def test_step_files_hold_per_problem_counts_sampled_with_the_eval_seed(tmp_path, sampler):
    runs = [run(tmp_path, seed, sampler) for seed in (0, 1)]
    seeds_used = list(sampler.seeds)
    results = {}
    for r in runs:
        assert sorted(p.name for p in (r / "eval_steps").iterdir()) == [
            "step_000001.json",
            "step_000002.json",
        ]  # and no temp file left behind: written atomically
        for step in (1, 2):
            result = json.loads((r / "eval_steps" / f"step_{step:06d}.json").read_text())
            assert result["step"] == step and result["settings"]["seed"] == 1234
            (label,) = result["per_problem"]
            counts = result["per_problem"][label]
            assert counts["n"] == [2, 2, 2, 2]
            # the responses answer the even questions: 2 of 2 correct there, 0 elsewhere
            assert sorted(counts["correct"]) == [0, 0, 2, 2]
            results[(r.name, step)] = result
        before = json.loads((r / "heldout_before.json").read_text())
        # the same problems and settings: the before-RL evaluation is the curves' step 0
        assert before["settings"] == results[(r.name, 1)]["settings"]
        assert before["per_problem"] == results[(r.name, 1)]["per_problem"]
        row = json.loads((r / "metrics.jsonl").read_text().splitlines()[0])
        assert row[f"eval/{label}/pass@1"] == pytest.approx(0.5)  # mean of correct / n
        assert row[f"eval/{label}/pass@2"] == pytest.approx(0.5)
    # one sampling seed for every evaluation of every training seed: chunk_seed(eval_seed, ...)
    (label,) = results[(runs[0].name, 1)]["per_problem"]
    per_chunk = max(1, 4 // 2)
    expected = {chunk_seed(1234, label, c) for c in range(4 // per_chunk)}
    assert set(seeds_used) == expected


def test_another_eval_seed_samples_with_other_seeds(tmp_path, sampler):
    path = run(tmp_path, 0, sampler, eval_seed=7, heldout_eval=False)
    result = json.loads((path / "eval_steps" / "step_000001.json").read_text())
    assert result["settings"]["seed"] == 7 and not (path / "heldout_before.json").exists()
    (label,) = result["per_problem"]
    assert set(sampler.seeds) == {chunk_seed(7, label, c) for c in range(2)}


def test_evaluate_scores_toy_items_with_their_own_scorer():
    """`ict.eval.run_eval` (behind `ict eval` and the `evaluate` training hook) scores a toy chain
    by the task's rule, as training does, not by the math verifier."""
    from ict.data.toy import task_items
    from ict.data.toy.cot import ToyCotTask
    from ict.eval import EvalSettings, run_eval

    items = task_items(ToyCotTask(digits=2), "test", 3)

    class Sampler:  # answers each problem with its own target chain
        def sample(self, prompts, *, n, seed):
            return [[(item.metadata["target"], 10)] * n for item in items]

    settings = EvalSettings(n=2, k=[1], limit=3, batch_size=6)
    summary = run_eval(Sampler(), ["toy"], settings, model="x", items={"toy": items})
    assert summary["metrics"]["eval/toy/pass@1"] == 1.0
