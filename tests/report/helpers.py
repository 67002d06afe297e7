"""Synthetic run directories for report tests (no model, no trainer)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import yaml


def write_run(
    root: Path,
    method: str,
    seed: int,
    *,
    steps: int = 6,
    final_pass: float = 0.5,
    collapse: bool = False,
    samples: list[dict] | None = None,
    correct: list[int] | None = None,
    n: int = 4,
    entropy: list[float] | None = None,
    extra: dict | None = None,
) -> Path:
    """A run dir with config.yaml, metrics.jsonl (deterministic curves), summary.json; with
    `correct` (correct samples of `n` per problem), a final_eval.json as `ict compare` writes it.
    `entropy`: the valid/entropy of each step (else a slow fall, or a collapse with `collapse`);
    `extra`: more keys logged at every step."""
    run = root / f"{method}_seed{seed}"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(
        yaml.safe_dump({"method": method, "seed": seed, "lr": 1e-6, "steps": steps})
    )
    rows = []
    for s in range(steps):
        h = 1.0 - 0.1 * s if not collapse else 1.0 * math.exp(-s)
        h = entropy[s] if entropy is not None else h
        rows.append(
            {
                "step": s,
                "reward/mean": 0.1 * s + 0.01 * seed,
                "accuracy": 0.1 * s,
                "response_length/mean": 20 + s,
                "clip_fraction": 0.01 * s,
                "valid/entropy": h,
                "selected/entropy": 2 * h,
                "valid/renyi2": 0.5 * h,
                "selected/renyi2": h,
                "valid/js": 0.01,
                "selected/js": 0.05,
                "selected_fraction": 0.1,
                "overlap/ict_entropy_jaccard": 0.3,
                "health/entropy_collapse": collapse and s >= 3,
                **(extra or {}),
            }
        )
    rows[-1]["eval/toy/pass@1"] = final_pass / 2
    rows[-1]["eval/toy/pass@4"] = final_pass
    with open(run / "metrics.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    (run / "summary.json").write_text(json.dumps({"method": method, "seed": seed}))
    if correct is not None:
        write_final_eval(run, correct, n)
    if samples is not None:
        with open(run / "samples.jsonl", "w") as f:
            for rec in samples:
                f.write(json.dumps(rec) + "\n")
    return run


def make_sample(
    step: int, tokens: list[str], rng: np.random.Generator, reward: float = 1.0
) -> dict:
    """A samples.jsonl record with random stats and top-k selections computed from them."""
    n = len(tokens)
    h = rng.uniform(0, 3, n)
    js = rng.uniform(0, 0.5, n)
    k_ict, k_ent = max(1, math.ceil(0.1 * n)), max(1, math.ceil(0.2 * n))
    ict = np.zeros(n, int)
    ict[np.argsort(-js)[:k_ict]] = 1
    ent = np.zeros(n, int)
    ent[np.argsort(-h)[:k_ent]] = 1
    stapo = np.ones(n, int)
    stapo[np.argmin(h)] = 0
    return {
        "step": step,
        "prompt": "What is 2+3?",
        "response": "".join(tokens),
        "reward": reward,
        "tokens": tokens,
        "entropy": h.round(4).tolist(),
        "renyi2": (0.6 * h).round(4).tolist(),
        "js": js.round(4).tolist(),
        "selected": {"ict": ict.tolist(), "entropy": ent.tolist(), "stapo": stapo.tolist()},
    }


def write_final_eval(run: Path, correct: list[int], n: int) -> None:
    """final_eval.json with pass@1 and pass@n of toy problems p0.. and their per-problem counts."""
    c = np.asarray(correct)
    metrics = {
        "eval/toy/pass@1": float((c / n).mean()),
        f"eval/toy/pass@{n}": float((c > 0).mean()),
    }
    (run / "final_eval.json").write_text(
        json.dumps(
            {
                "metrics": metrics,
                "settings": {
                    "problems": len(c),
                    "samples_per_problem": n,
                    "temperature": 1.0,
                    "seed": 7,
                },
                "per_problem": {
                    "toy": {
                        "ids": [f"p{i}" for i in range(len(c))],
                        "n": [n] * len(c),
                        "correct": c.tolist(),
                    }
                },
            }
        )
    )
