"""Held-out pass@1 before and after RL, on the same problems and sampling settings.

`ict train` (with `heldout_eval`, on by default) evaluates the policy on `eval_size` held-out
problems of its own task (reasoning-gym: disjoint seeds; datasets: their eval split) with
`eval_num_samples` samples each, before the first step and after the last, with the rollout's
temperature, top-p, stop strings and response budget, and one sampling seed for both. The
difference is paired by problem; intervals come from a bootstrap over problems
(`ict.evidence.hierarchical`, 2000 resamples), so they stay inside [0, 1] (a level) and [-1, 1]
(the difference).

Files in the run directory: heldout_before.json and heldout_after.json ({"benchmark",
"settings", "summary", "per_problem": {"ids", "n", "correct"}, "step", "seconds"}), written
atomically; a resumed run reuses heldout_before.json. With `eval_every` N, the trainer runs the
same evaluation every N steps into eval_steps/step_<step, 6 digits>.json (same schema), so every
method and seed is evaluated on the same problems with the same sampling seed (`eval_seed`) and
heldout_before.json is the curve's step 0. Responses are scored as training scores them
(`item.score`: the task's own scorer for the toy tasks, else the verifier).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from ict.eval.scoring import ItemScorer, as_verdict  # noqa: F401  (as_verdict: re-exported)
from ict.train.config import TrainConfig


def heldout_settings(config: TrainConfig, model_label: str):
    """The ict.eval settings of the before/after evaluation (sampling as the rollouts)."""
    from ict.eval.metrics import default_ks
    from ict.eval.runner import EvalSettings

    n = config.eval_num_samples
    return EvalSettings(
        model=model_label,
        n=n,
        k=default_ks(n),
        temperature=config.temperature,
        top_p=config.top_p,
        max_new_tokens=config.max_new_tokens,
        batch_size=config.generation_batch_size,
        seed=config.eval_seed,
        limit=config.eval_size,
        stop=list(config.stop),
        num_bootstrap=1000,
    )


STEP_EVAL_DIR = "eval_steps"  # RUN/eval_steps/step_000050.json: the periodic evaluation


def step_eval_path(run_dir: str | Path, step: int) -> Path:
    """RUN/eval_steps/step_<step:06d>.json: the periodic held-out evaluation after `step` steps."""
    return Path(run_dir) / STEP_EVAL_DIR / f"step_{int(step):06d}.json"


def step_eval_metrics(result: dict) -> dict[str, float]:
    """The flat numbers of a heldout_eval result for metrics.jsonl: {"eval/<task>/pass@k",
    "eval/<task>/accuracy", ...} (lists such as the intervals left out)."""
    from ict.eval.runner import flat_metrics

    return flat_metrics({result["benchmark"]: result["summary"]})


def heldout_eval(model, tokenizer, config: TrainConfig, *, model_label: str) -> dict:
    """Evaluate `model` on the task's held-out problems. Returns {"benchmark", "settings",
    "summary" (ict.eval summary: pass@k, accuracy, format rate, ...), "per_problem"}."""
    from ict.data import task_label
    from ict.eval.runner import evaluate_benchmark, hf_sampler, load_eval_items, summarise
    from ict.rewards import default_verifier
    from ict.train.problems import task_spec

    spec = task_spec(config)
    settings = heldout_settings(config, model_label)
    settings.validate()
    items = load_eval_items(spec, limit=config.eval_size)
    was_training = model.training
    model.eval()
    try:
        verifier = ItemScorer(default_verifier())
        records = evaluate_benchmark(
            task_label(spec), items, hf_sampler(model, tokenizer, settings), verifier, settings
        )
    finally:
        model.train(was_training)
    return {
        "benchmark": task_label(spec),
        "settings": dataclasses.asdict(settings),
        "summary": summarise(records, settings),
        "per_problem": {
            "ids": [str(r["id"]) for r in records],
            "n": [int(r["n"]) for r in records],
            "correct": [int(r["num_correct"]) for r in records],
        },
    }


def write_heldout_eval(
    path: str | Path, model, tokenizer, config: TrainConfig, *, model_label: str, step: int
) -> dict:
    """`heldout_eval`, with the `step` it was taken at and its `seconds`, written atomically to
    `path` (heldout_*.json, eval_steps/step_*.json, a grid's start point). Returns the result."""
    import time

    from ict.files import write_json_atomic

    t0 = time.perf_counter()
    result = heldout_eval(model, tokenizer, config, model_label=model_label)
    result.update(step=step, seconds=round(time.perf_counter() - t0, 1))
    write_json_atomic(path, result)
    return result


def per_problem_pass1(result: dict) -> tuple[list[str], np.ndarray]:
    """(problem ids, pass@1 per problem = correct / n) of a heldout_eval result."""
    per = result["per_problem"]
    return per["ids"], np.asarray(per["correct"], float) / np.asarray(per["n"], float)


def compare_before_after(before: dict, after: dict, *, seed: int = 0) -> dict:
    """pass@1 before and after with bootstrap intervals over problems, and the paired difference.

    Both results must come from the same problems (ids) and settings; raises ValueError if not.
    Returns {"before": {"mean", "low", "high"}, "after": {...}, "difference": {...},
    "problems": int, "samples_per_problem": int, "method": str}.
    """
    from ict.evidence.hierarchical import bootstrap_difference, bootstrap_mean, run_units

    ids_b, p_b = per_problem_pass1(before)
    ids_a, p_a = per_problem_pass1(after)
    if ids_b != ids_a:
        raise ValueError("before/after evaluations hold different problems; they cannot be paired")
    ub, ua = run_units(p_b, ids_b), run_units(p_a, ids_a)
    lo_b = bootstrap_mean([ub], n_resamples=2000, seed=seed)
    lo_a = bootstrap_mean([ua], n_resamples=2000, seed=seed)
    diff = bootstrap_difference({0: ua}, {0: ub}, n_resamples=2000, seed=seed)

    def as_dict(iv):
        return {"mean": iv.mean, "low": iv.low, "high": iv.high}

    return {
        "before": as_dict(lo_b),
        "after": as_dict(lo_a),
        "difference": as_dict(diff),
        "problems": len(ids_b),
        "samples_per_problem": int(before["settings"]["n"]),
        "method": f"{diff.method}, 2000 resamples, 95%",
    }


def load_result(path: Path) -> dict | None:
    """A saved heldout_*.json, or None if missing or unreadable (then it is recomputed)."""
    from ict.files import read_json

    return read_json(path)


def headline(comparison: dict | None, summary: dict) -> str:
    """The line that tells the user what happened, e.g.
    `held-out pass@1 0.22 -> 0.41 (+0.19 [+0.11, +0.27]); reward 0.30 -> 0.52; no entropy collapse`."""
    parts = []
    if comparison:
        b, a, d = comparison["before"], comparison["after"], comparison["difference"]
        parts.append(
            f"held-out pass@1 {b['mean']:.2f} -> {a['mean']:.2f} "
            f"({d['mean']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}])"
        )
    r0, r1 = summary.get("reward_first_steps"), summary.get("reward_last_steps")
    if r0 is not None and r1 is not None:
        parts.append(f"reward {r0:.2f} -> {r1:.2f}")
    health = summary.get("health", {})
    flags = [name for name in ("entropy_collapse", "entropy_explosion") if health.get(name)]
    parts.append(
        ", ".join(f.replace("_", " ") for f in flags)
        if flags
        else "no entropy collapse or explosion"
    )
    return "; ".join(parts)
