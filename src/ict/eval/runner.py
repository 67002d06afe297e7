"""The evaluation runner: sample n responses per problem, verify, cache, summarise.

Problems are processed in fixed chunks of `max(1, batch_size // n)` consecutive problems; each
chunk is sampled with its own seed (from the run seed, the benchmark and the chunk index), so a
rerun after an interruption skips the finished problems (cached one JSON line each in
OUT/samples/<benchmark>.jsonl) and produces the same summary as an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ict.data import Item, file_stem, load_task, task_label
from ict.errors import ConfigError
from ict.eval.metrics import DEFAULT_KS, default_ks, pass_at_k_per_problem
from ict.evidence.bootstrap import bootstrap_ci
from ict.files import (
    append_jsonl,
    read_jsonl,
    write_atomic,
    write_json_atomic,
    write_jsonl_atomic,
)
from ict.models import EMBEDDED_MODEL_LABEL


@dataclass
class EvalSettings:
    """Everything that determines the samples (all of it is reported with every number)."""

    model: str = EMBEDDED_MODEL_LABEL
    n: int = 16
    k: list[int] = field(default_factory=lambda: list(DEFAULT_KS))
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    batch_size: int = 32
    seed: int = 0
    limit: int | None = None
    backend: str = "hf"
    stop: list[str] = field(default_factory=lambda: ["</answer>"])
    num_bootstrap: int = 1000

    def validate(self) -> None:
        if self.n < 1:
            raise ConfigError(f"--n must be >= 1, got {self.n}")
        bad = [k for k in self.k if not 1 <= k <= self.n]
        if bad:
            raise ConfigError(
                f"every k must be in 1..n={self.n}; got {bad}: raise --n or lower --k"
            )
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ConfigError("need --temperature >= 0 and 0 < --top-p <= 1")
        if self.temperature == 0 and self.n > 1:
            raise ConfigError("--temperature 0 (greedy) gives n identical samples; use --n 1 --k 1")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be >= 1, got {self.limit}")

    def fingerprint(self, label: str) -> str:
        """Hash of the settings that determine a benchmark's samples (not limit/k/bootstrap)."""
        keys = (
            "model",
            "n",
            "temperature",
            "top_p",
            "max_new_tokens",
            "batch_size",
            "seed",
            "backend",
            "stop",
        )
        payload = json.dumps([label] + [getattr(self, key) for key in keys])
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def chunk_seed(seed: int, label: str, chunk: int) -> int:
    """A 31-bit sampling seed for one chunk of one benchmark."""
    digest = hashlib.sha256(f"{seed}|{label}|{chunk}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def load_eval_items(spec: str, *, limit: int | None = None, data_dir=None) -> list[Item]:
    """The held-out problems of a benchmark spec (reasoning-gym: eval seeds, 100 by default)."""
    return load_task(spec, split="eval", size=limit, data_dir=data_dir)


def load_all_eval_items(
    benchmarks: Sequence[str], limit: int | None, data_dir=None
) -> dict[str, list[Item]]:
    """{label: items} for each benchmark spec (load before the model to fail fast on data)."""
    return {
        task_label(spec): load_eval_items(spec, limit=limit, data_dir=data_dir)
        for spec in benchmarks
    }


def problem_record(
    index: int, item: Item, samples: list[tuple[str, int]], verdicts, fingerprint: str
) -> dict:
    """One JSON line of the samples file: the problem, each sample with its verdict, the counts."""
    rows = [
        {"text": text, "length": length, **verdict.to_dict()}
        for (text, length), verdict in zip(samples, verdicts, strict=True)
    ]
    return {
        "index": index,
        "id": item.id,
        "question": item.question,
        "gold": item.answer,
        "n": len(rows),
        "num_correct": sum(r["correct"] for r in rows),
        "samples": rows,
        "fingerprint": fingerprint,
    }


def summarise(records: list[dict], settings: EvalSettings) -> dict[str, Any]:
    """Metrics of one benchmark from its per-problem records."""
    n = np.array([r["n"] for r in records])
    c = np.array([r["num_correct"] for r in records])
    samples = [s for r in records for s in r["samples"]]
    out: dict[str, Any] = {"problems": len(records), "n": settings.n}
    for k in settings.k:
        per_problem = pass_at_k_per_problem(n, c, k)
        out[f"pass@{k}"] = float(per_problem.mean())
        out[f"pass@{k}_ci95"] = list(
            bootstrap_ci(per_problem, num_resamples=settings.num_bootstrap, seed=settings.seed)
        )
    accuracy = c / n
    out["accuracy"] = float(accuracy.mean())
    out["accuracy_ci95"] = list(
        bootstrap_ci(accuracy, num_resamples=settings.num_bootstrap, seed=settings.seed)
    )
    formats = [s["format_ok"] for s in samples if s.get("format_ok") is not None]
    # None: the task's own scorer says nothing about the format (the toy tasks)
    out["format_rate"] = float(np.mean(formats)) if formats else None
    out["response_length_mean"] = float(np.mean([s["length"] for s in samples]))
    out["verifier_errors"] = sum(s["error"] is not None and not s["timed_out"] for s in samples)
    out["verifier_timeouts"] = sum(bool(s["timed_out"]) for s in samples)
    return out


def evaluate_benchmark(
    label: str,
    items: list[Item],
    sampler,
    verifier,
    settings: EvalSettings,
    *,
    cache_path: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Per-problem records of one benchmark, reusing and extending the cache file if given."""
    fingerprint = settings.fingerprint(label)
    done: dict[int, dict] = {}
    if cache_path is not None:
        for row in read_jsonl(cache_path):
            if row.get("fingerprint") != fingerprint:
                raise ConfigError(
                    f"{cache_path} holds samples from other settings (model/sampling/seed); "
                    "use another --out directory, or --overwrite to discard them"
                )
            done[row["index"]] = row
    per_chunk = max(1, settings.batch_size // settings.n)
    for start in range(0, len(items), per_chunk):
        indices = [i for i in range(start, min(start + per_chunk, len(items)))]
        if all(i in done for i in indices):
            continue
        chunk_items = [items[i] for i in indices]
        outputs = sampler.sample(
            [item.messages for item in chunk_items],
            n=settings.n,
            seed=chunk_seed(settings.seed, label, start // per_chunk),
        )
        for index, item, samples in zip(indices, chunk_items, outputs, strict=True):
            if index in done:
                continue
            verdicts = verifier.score([(item, text) for text, _ in samples])
            record = problem_record(index, item, samples, verdicts, fingerprint)
            if cache_path is not None:
                append_jsonl(cache_path, record)
            done[index] = record
        if progress:
            progress(f"{label}: {min(start + per_chunk, len(items))}/{len(items)} problems")
    return [done[i] for i in range(len(items))]


def flat_metrics(benchmarks: dict[str, dict]) -> dict[str, float]:
    """{"eval/<bench>/pass@k": ..., "eval/<bench>/accuracy": ..., ...} for the trainer's log."""
    flat = {}
    for label, metrics in benchmarks.items():
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and key not in ("problems", "n"):
                flat[f"eval/{label}/{key}"] = float(value)
    return flat


def run_eval(
    sampler,
    benchmarks: Sequence[str],
    settings: EvalSettings,
    *,
    out_dir: str | os.PathLike | None = None,
    data_dir=None,
    verifier=None,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
    items: dict[str, list[Item]] | None = None,
) -> dict[str, Any]:
    """Evaluate on each benchmark spec; write OUT/samples/*.jsonl, summary.json, summary.md.

    `items` may hold already loaded problems by label (`load_all_eval_items`); else they are loaded.
    Returns the summary: {"model", "date", "settings", "benchmarks": {label: metrics}, "metrics"}.
    """
    from ict.eval.scoring import ItemScorer
    from ict.rewards import default_verifier

    settings.validate()
    verifier = verifier or ItemScorer(default_verifier())  # each item's own scorer, as training
    out = Path(out_dir) if out_dir is not None else None
    loaded = (
        items if items is not None else load_all_eval_items(benchmarks, settings.limit, data_dir)
    )
    results = {}
    for label, items in loaded.items():
        cache = out / "samples" / f"{file_stem(label)}.jsonl" if out is not None else None
        if cache is not None and overwrite and cache.exists():
            cache.unlink()
        records = evaluate_benchmark(
            label, items, sampler, verifier, settings, cache_path=cache, progress=progress
        )
        if cache is not None:
            write_jsonl_atomic(cache, records)
        results[label] = summarise(records, settings)
    summary = {
        "model": settings.model,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": asdict(settings),
        "benchmarks": results,
        "metrics": flat_metrics(results),
    }
    if out is not None:
        write_json_atomic(out / "summary.json", summary)
        write_atomic(out / "summary.md", summary_markdown(summary))
    return summary


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def results_table(summary: dict[str, Any]) -> str:
    """A Markdown table: one row per benchmark, pass@k and accuracy with their 95% percentile
    bootstrap intervals over problems (this model's own uncertainty), format rate, length."""
    ks = summary["settings"]["k"]
    head = (
        ["benchmark", "problems"]
        + [f"pass@{k} (95% CI)" for k in ks]
        + ["accuracy (95% CI)", "format", "length"]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, m in summary["benchmarks"].items():
        cells = [label.replace("|", "\\|"), str(m["problems"])]
        for k in ks:
            low, high = m[f"pass@{k}_ci95"]
            cells.append(f"{_pct(m[f'pass@{k}'])} [{_pct(low)}, {_pct(high)}]")
        accuracy = _pct(m["accuracy"])
        if "accuracy_ci95" in m:
            low, high = m["accuracy_ci95"]
            accuracy += f" [{_pct(low)}, {_pct(high)}]"
        fmt = "n/a" if m.get("format_rate") is None else _pct(m["format_rate"])
        cells += [accuracy, fmt, f"{m['response_length_mean']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_markdown(summary: dict[str, Any]) -> str:
    """The summary as a Markdown page: the table, then every setting."""
    s = summary["settings"]
    settings_lines = "\n".join(f"- {key}: {value}" for key, value in s.items())
    return (
        f"# Evaluation of {summary['model']}\n\n"
        f"Date: {summary['date']}. Values in %; pass@k is the unbiased estimator averaged over "
        f"problems with n = {s['n']} samples each; intervals are percentile bootstrap over "
        f"problems ({s['num_bootstrap']} resamples). Length is in tokens.\n\n"
        f"{results_table(summary)}\n\n## Settings\n\n{settings_lines}\n"
    )


def evaluate(
    model,
    tokenizer,
    benchmarks: str | Sequence[str],
    *,
    n: int = 4,
    k: Sequence[int] | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 128,
    batch_size: int = 32,
    seed: int = 0,
    limit: int | None = 50,
    data_dir=None,
    verifier=None,
    num_bootstrap: int = 200,
) -> dict[str, float]:
    """Training hook: metrics {"eval/<bench>/pass@k", "eval/<bench>/accuracy", ...} of an in-memory
    model on held-out problems (no files written), e.g. every N steps of an external trainer.
    (The native trainer's `eval_every` uses ict.train.heldout: per-problem files, `eval_seed`.)

    `benchmarks`: one spec or a list (see ict.data.load_task); `k` defaults to default_ks(n)
    (1, 2, 4, ... <= n); `limit`: problems per benchmark.
    """
    if isinstance(benchmarks, str):
        benchmarks = [benchmarks]
    if k is None:
        k = default_ks(n)
    settings = EvalSettings(
        model=type(model).__name__,
        n=n,
        k=list(k),
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        seed=seed,
        limit=limit,
        num_bootstrap=num_bootstrap,
    )
    sampler = hf_sampler(model, tokenizer, settings)
    summary = run_eval(sampler, benchmarks, settings, data_dir=data_dir, verifier=verifier)
    return summary["metrics"]


def hf_sampler(model, tokenizer, settings: EvalSettings):
    """The Hugging Face sampler for `model` with the sampling settings of `settings`."""
    from ict.eval.backends import HFSampler

    return HFSampler(
        model,
        tokenizer,
        temperature=settings.temperature,
        top_p=settings.top_p,
        max_new_tokens=settings.max_new_tokens,
        batch_size=settings.batch_size,
        stop=settings.stop,
    )
