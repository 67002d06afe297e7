"""A training run's evaluations: before RL, every `eval_every` steps and after RL, one
`ict.eval.Evaluation` derived from the training config.

`eval_settings(config)`: the rollouts' sampling and prompt rendering (temperature, top-p, stop
strings, response budget, generation batch size, chat template, system prompt), `eval_seed`,
`eval_size` problems of the task's `eval_split` split (default the test problems, `eval`;
`validation` for a tuning stage) with `eval_num_samples` samples each and pass@k for k = 1, 2, 4,
... <= n. `ict train` (with `heldout_eval`, on by default) evaluates the policy
with it before the first step and after the last; the difference is paired by problem, with
intervals from a bootstrap over problems (`ict.evidence.hierarchical`, 2000 resamples), so they stay
inside [0, 1] (a level) and [-1, 1] (the difference). A grid's start-point and final evaluations
derive from the same settings (ict.compare.grid), and `ict eval --model RUN` repeats them.

Files in the run directory (the result schema of ict.eval.runner): heldout_before.json and
heldout_after.json, written atomically (a resumed run reuses heldout_before.json), and with
`eval_every` N, eval_steps/step_<step, 6 digits>.json every N steps, so every method and seed is
evaluated on the same problems with the same sampling seed and heldout_before.json is the curves'
step 0. Responses are scored as training scores them (`item.score`: the task's own rule for the
toy tasks, else the verifier).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ict.eval import EvalSettings, Evaluation, default_ks
from ict.eval.backends import SamplerFactory, hf_sampler
from ict.eval.runner import only_benchmark
from ict.train.config import TrainConfig
from ict.train.plan import sampling_of
from ict.train.problems import task_spec

STEP_EVAL_DIR = "eval_steps"  # RUN/eval_steps/step_000050.json: the periodic evaluation


def eval_settings(config: TrainConfig, **changes) -> EvalSettings:
    """The evaluation settings of a run (module docstring); `changes`: EvalSettings fields that
    differ (a grid's final evaluation: its n, k, problems, seed)."""
    n = config.eval_num_samples
    settings = EvalSettings.from_sampling(
        sampling_of(config),
        n=n,
        k=default_ks(n),
        seed=config.eval_seed,
        limit=config.eval_size,
        split=config.eval_split,
    )
    return settings.replace(**changes)


def training_evaluation(
    config: TrainConfig,
    *,
    sampler_factory: SamplerFactory | None = None,
    data_dir=None,
    tasks=None,
    **changes,
) -> Evaluation:
    """The Evaluation of a run: its task (`tasks`: other task specs, e.g. a grid's benchmarks)
    with `eval_settings(config, **changes)`."""
    return Evaluation(
        list(tasks) if tasks else [task_spec(config)],
        eval_settings(config, **changes),
        data_dir=data_dir,
        sampler_factory=sampler_factory or hf_sampler,
    )


def step_eval_path(run_dir: str | Path, step: int) -> Path:
    """RUN/eval_steps/step_<step:06d>.json: the periodic evaluation after `step` steps."""
    return Path(run_dir) / STEP_EVAL_DIR / f"step_{int(step):06d}.json"


def per_problem_pass1(result: dict) -> tuple[list[str], np.ndarray]:
    """(problem ids, pass@1 per problem = correct / n) of a one-task evaluation result."""
    per = result["per_problem"][only_benchmark(result)]
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


def headline(comparison: dict | None, summary: dict) -> str:
    """The line that tells the user what happened, e.g.
    `held-out pass@1 0.22 -> 0.41 (+0.19 [+0.11, +0.27]); reward 0.30 -> 0.52; no entropy collapse`,
    a flag naming its phase in a run with a dense warm-up (`entropy collapse in the dense warm-up
    (GRPO, steps 1-3: ...), not in ict's own steps 4-6 (...)`), ending with the learning-signal verdict when most groups carried no signal
    (ict.evidence.health.judge_signal)."""
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
    parts.append(  # a flag with its phase when the run had a dense warm-up (ict.train.outputs)
        ", ".join(health.get(f"{f}_text") or f.replace("_", " ") for f in flags)
        if flags
        else "no entropy collapse or explosion"
    )
    if health.get("no_signal") and health.get("no_signal_text"):
        parts.append(health["no_signal_text"])
    return "; ".join(parts)
