"""The one evaluation pipeline: sample n responses per problem, judge each by its item's own rule,
summarise, with one result schema.

`Evaluation(tasks, settings)` is what `ict eval`, the trainer's before/after and periodic
evaluations and the grid's start-point and final evaluations run; `run_eval` is its body for a
ready sampler (vLLM, or a scripted one in tests). Problems are processed in fixed chunks (see
ict.eval.settings); with a cache directory each finished problem is one JSON line of
OUT/samples/<benchmark>.jsonl, so a rerun after an interruption skips them and produces the same
result.

The result schema (every evaluation file: `ict eval`'s summary.json, heldout_before/after.json,
eval_steps/step_<step>.json, a grid's start_eval.json and each cell's final_eval.json):

    {"model": label, "date": ISO time, "step": int or None, "seconds": float,
     "settings": EvalSettings.as_dict(),
     "benchmarks": {label: {"problems", "n", "pass@k", "pass@k_ci95", "accuracy",
                            "accuracy_ci95", "format_rate", "response_length_mean",
                            "verifier_errors", "verifier_timeouts"}},
     "per_problem": {label: {"ids": [P], "n": [P], "correct": [P]}},
     "metrics": {"eval/<label>/<metric>": number},          # the numbers of "benchmarks", flat
     "bootstrap_95": {"eval/<label>/pass@k": [low, high]}}  # their intervals, flat

`label` is the task spec without whitespace (ict.data.task_label); intervals are percentile
bootstrap intervals over problems (`num_bootstrap` resamples, seeded by the evaluation seed).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ict.data import Item, file_stem, load_task, short_labels, task_label
from ict.errors import ConfigError
from ict.eval.backends import Sampler, SamplerFactory, hf_sampler
from ict.eval.metrics import default_ks, pass_at_k_per_problem
from ict.eval.settings import EvalSettings, chunk_seed, problem_seed
from ict.evidence.bootstrap import bootstrap_ci
from ict.files import (
    append_jsonl,
    read_json_if_present,
    read_jsonl,
    write_atomic,
    write_json_atomic,
    write_jsonl_atomic,
)
from ict.rewards.results import ItemJudge

Progress = Callable[[str], None]


def load_eval_items(
    specs: Sequence[str], settings: EvalSettings, data_dir=None
) -> dict[str, list[Item]]:
    """{label: items} of each task spec, `settings.split` and `settings.limit` problems (load
    before the model, so that a data error comes first)."""
    return {
        task_label(spec): load_task(
            spec, split=settings.split, size=settings.limit, data_dir=data_dir
        )
        for spec in specs
    }


def problem_record(index: int, item: Item, samples, verdicts, fingerprint: str) -> dict:
    """One JSON line of the samples cache: the problem, each sample with its verdict, the counts."""
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


def evaluate_benchmark(
    label: str,
    items: list[Item],
    sampler: Sampler,
    judge,
    settings: EvalSettings,
    *,
    model: str,
    cache_path: Path | None = None,
    progress: Progress | None = None,
    name: str | None = None,
) -> list[dict]:
    """Per-problem records of one benchmark, reusing and extending the cache file if given
    (`name`: what the progress lines call it, default the label).

    judge: `.judge([(item, text), ...]) -> [Verdict]` (an ict.rewards.ItemJudge). The batched path
    runs when `settings.sampler` is "batched" and the sampler has `sample_keyed` (BatchedSampler);
    any other sampler (vLLM, a scripted one) runs the chunked loop, fingerprinted as such."""
    keyed = settings.sampler == "batched" and hasattr(sampler, "sample_keyed")
    if not keyed and settings.sampler == "batched":
        settings = settings.replace(sampler="chunked")
    fingerprint = settings.fingerprint(label, model)
    done: dict[int, dict] = {}
    if cache_path is not None:
        for row in read_jsonl(cache_path):
            if row.get("fingerprint") != fingerprint:
                raise ConfigError(
                    f"{cache_path} holds samples from other settings (model/sampling/seed); "
                    "use another --out directory, or --overwrite to discard them"
                )
            done[row["index"]] = row
    shown = name or label
    if keyed:
        _batched(
            label, items, sampler, judge, settings, fingerprint, done, cache_path, progress, shown
        )
        return [done[i] for i in range(len(items))]
    per_chunk = max(1, settings.batch_size // settings.n)
    for start in range(0, len(items), per_chunk):
        indices = list(range(start, min(start + per_chunk, len(items))))
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
            verdicts = judge.judge([(item, text) for text, _ in samples])
            record = problem_record(index, item, samples, verdicts, fingerprint)
            if cache_path is not None:
                append_jsonl(cache_path, record)
            done[index] = record
        if progress:
            progress(f"{shown}: {min(start + per_chunk, len(items))}/{len(items)} problems")
    return [done[i] for i in range(len(items))]


def _batched(
    label, items, sampler, judge, settings, fingerprint, done, cache_path, progress, shown=None
):
    """The batched path of `evaluate_benchmark`: the problems not in `done`, as many per batch as
    the sampler's memory budget holds, each problem keyed by `problem_seed` (so the batches do not
    change the samples); records into `done`. Each problem is judged and its record written to the
    cache as soon as its samples are finished: while the batch decodes on when all its samples
    ended early (the sampler's `on_done`), else when the batch ends. An interrupted evaluation
    keeps every problem it finished, however few, and resumes from them with the same samples."""
    todo = [i for i in range(len(items)) if i not in done]
    if not todo:
        return

    def finish(index: int, samples) -> None:
        if index in done:
            return
        verdicts = judge.judge([(items[index], text) for text, _ in samples])
        record = problem_record(index, items[index], samples, verdicts, fingerprint)
        if cache_path is not None:
            append_jsonl(cache_path, record)
        done[index] = record

    per_batch = sampler.problems_per_batch([items[i].messages for i in todo], settings.n)
    for first in range(0, len(todo), per_batch):
        indices = todo[first : first + per_batch]
        outputs = sampler.sample_keyed(
            [items[i].messages for i in indices],
            n=settings.n,
            seeds=[problem_seed(settings.seed, label, i) for i in indices],
            on_done=lambda j, samples, indices=indices: finish(indices[j], samples),
        )
        for index, samples in zip(indices, outputs, strict=True):
            finish(index, samples)
        if progress:
            progress(
                f"{shown or label}: {len(items) - len(todo) + first + len(indices)}/{len(items)} "
                "problems"
            )


def summarise(records: list[dict], settings: EvalSettings) -> dict[str, Any]:
    """The numbers of one benchmark from its per-problem records (see the module docstring)."""
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
    # None: the task's own judge says nothing about the format (the toy tasks)
    out["format_rate"] = float(np.mean(formats)) if formats else None
    out["response_length_mean"] = float(np.mean([s["length"] for s in samples]))
    out["verifier_errors"] = sum(s["error"] is not None and not s["timed_out"] for s in samples)
    out["verifier_timeouts"] = sum(bool(s["timed_out"]) for s in samples)
    return out


def flat_metrics(benchmarks: dict[str, dict]) -> dict[str, float]:
    """{"eval/<label>/pass@k": ..., "eval/<label>/accuracy": ..., ...}: a result's numbers, flat
    (metrics.jsonl, the report); lists (intervals) and counts left out."""
    flat = {}
    for label, metrics in benchmarks.items():
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and key not in ("problems", "n"):
                flat[f"eval/{label}/{key}"] = float(value)
    return flat


def per_problem_counts(records: list[dict]) -> dict[str, list]:
    """{"ids", "n", "correct"}, each [P]: samples and correct samples per problem, so a report
    recomputes pass@k per problem and bootstraps over problems (and seeds)."""
    return {
        "ids": [str(r["id"]) for r in records],
        "n": [int(r["n"]) for r in records],
        "correct": [int(r["num_correct"]) for r in records],
    }


WHEN_FIELDS = ("date", "seconds")  # when a result was made and how long it took


def without_when(result: dict) -> dict:
    """A result without its WHEN_FIELDS: what two evaluations of the same model, problems and
    settings share exactly (the same samples give the same numbers)."""
    return {k: v for k, v in result.items() if k not in WHEN_FIELDS}


def eval_result(
    records: dict[str, list[dict]],
    settings: EvalSettings,
    *,
    model: str,
    step: int | None = None,
    seconds: float | None = None,
) -> dict[str, Any]:
    """The result schema (module docstring) from each benchmark's per-problem records."""
    benchmarks = {label: summarise(recs, settings) for label, recs in records.items()}
    return {
        "model": model,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "step": step,
        "seconds": seconds,
        "settings": settings.as_dict(),
        "benchmarks": benchmarks,
        "per_problem": {label: per_problem_counts(recs) for label, recs in records.items()},
        "metrics": flat_metrics(benchmarks),
        "bootstrap_95": {
            f"eval/{label}/{key.removesuffix('_ci95')}": value
            for label, m in benchmarks.items()
            for key, value in m.items()
            if key.endswith("_ci95")
        },
    }


def only_benchmark(result: dict) -> str:
    """The label of a result that holds one benchmark (a training run's own task); ValueError
    otherwise."""
    labels = list(result["per_problem"])
    if len(labels) != 1:
        raise ValueError(f"expected the result of one task, got {labels}")
    return labels[0]


def run_eval(
    sampler: Sampler,
    tasks: Sequence[str],
    settings: EvalSettings,
    *,
    model: str,
    verifier=None,
    items: dict[str, list[Item]] | None = None,
    data_dir=None,
    out_dir=None,
    overwrite: bool = False,
    step: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Evaluate `sampler` (the model labelled `model`) on each task spec; returns the result.

    verifier: how items without their own rule are judged (default: the shared
    ict.rewards.default_verifier()); every item is scored by `item.reward` (ItemJudge).
    items: already loaded problems by label (`load_eval_items`). out_dir: cache the samples in
    OUT/samples/<benchmark>.jsonl (resumable) and write OUT/summary.json and OUT/summary.md."""
    settings.validate()
    t0 = time.perf_counter()
    judge = ItemJudge(verifier)
    out = Path(out_dir) if out_dir is not None else None
    loaded = items if items is not None else load_eval_items(tasks, settings, data_dir)
    records = {}
    names = short_labels(loaded)
    for label, bench_items in loaded.items():
        cache = out / "samples" / f"{file_stem(label)}.jsonl" if out is not None else None
        if cache is not None and overwrite and cache.exists():
            cache.unlink()
        records[label] = evaluate_benchmark(
            label, bench_items, sampler, judge, settings,
            model=model, cache_path=cache, progress=progress, name=names[label],
        )  # fmt: skip
        if cache is not None:
            write_jsonl_atomic(cache, records[label])
    result = eval_result(
        records, settings, model=model, step=step, seconds=round(time.perf_counter() - t0, 1)
    )
    if out is not None:
        write_json_atomic(out / "summary.json", result)
        write_atomic(out / "summary.md", summary_markdown(result))
    return result


@dataclass
class Evaluation:
    """One evaluation: the problems of `tasks` (split, count: `settings`), sampled from a model
    with `settings` through `sampler_factory` and scored each by its item's own rule.

    data_dir: local benchmark files (ict.data); sampler_factory: (model, tokenizer, settings) ->
    Sampler (default HF generation; tests inject a scripted one); verifier: see run_eval. The
    problems are loaded once, on first use."""

    tasks: Sequence[str]
    settings: EvalSettings
    data_dir: str | None = None
    sampler_factory: SamplerFactory = hf_sampler
    verifier: Any = None
    _items: dict | None = field(default=None, init=False, repr=False)

    def items(self) -> dict[str, list[Item]]:
        """{label: items}, loaded once."""
        if self._items is None:
            self.settings.validate()
            self._items = load_eval_items(self.tasks, self.settings, self.data_dir)
        return self._items

    def run(self, model, tokenizer, *, model_label: str, step: int | None = None) -> dict:
        """The result (module docstring) of `model` (in memory; its training mode is kept)."""
        sampler = self.sampler_factory(model, tokenizer, self.settings)
        return run_eval(
            sampler, self.tasks, self.settings, model=model_label, verifier=self.verifier,
            items=self.items(), step=step,
        )  # fmt: skip

    def write(self, path, model, tokenizer, *, model_label: str, step: int | None = None) -> dict:
        """`run`, written atomically to `path`; returns the result."""
        result = self.run(model, tokenizer, model_label=model_label, step=step)
        write_json_atomic(path, result)
        return result

    def cached(self, path, model, tokenizer, *, model_label: str, step: int | None = None):
        """The result saved at `path` when it holds this evaluation of `model_label` (same tasks
        and settings), else `write` it there."""
        saved = read_json_if_present(Path(path))
        if self.matches(saved, model_label):
            return saved
        return self.write(path, model, tokenizer, model_label=model_label, step=step)

    def key(self, model_label: str) -> str:
        """A short hash of the model label, the tasks and the settings (a cache file's name)."""
        payload = json.dumps(
            [model_label, [task_label(t) for t in self.tasks], self.settings.as_dict()]
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def matches(self, result: dict | None, model_label: str | None = None) -> bool:
        """True when `result` is this evaluation (its tasks and settings) of `model_label` (None:
        of any model, e.g. a run directory's own files)."""
        return (
            isinstance(result, dict)
            and (model_label is None or result.get("model") == model_label)
            and isinstance(result.get("settings"), dict)
            and EvalSettings.from_dict(result["settings"]).same_result(self.settings)
            and list(result.get("per_problem", {})) == [task_label(t) for t in self.tasks]
        )


def evaluate(
    model,
    tokenizer,
    tasks: str | Sequence[str],
    *,
    n: int = 4,
    k: Sequence[int] | None = None,
    limit: int | None = 50,
    data_dir=None,
    **settings,
) -> dict[str, float]:
    """For an external trainer's loop: the flat metrics {"eval/<label>/pass@k", ...} of an
    in-memory model on held-out problems (an `Evaluation`; no files written).

    `tasks`: one spec or a list (ict.data.load_task); `k` defaults to 1, 2, 4, ... <= n;
    `limit`: problems per task; other keywords: EvalSettings fields (temperature, top_p,
    max_new_tokens, stop, seed, ...)."""
    tasks = [tasks] if isinstance(tasks, str) else list(tasks)
    eval_settings = EvalSettings(
        n=n, k=list(k) if k is not None else default_ks(n), limit=limit, **settings
    )
    evaluation = Evaluation(tasks, eval_settings, data_dir=data_dir)
    return evaluation.run(model, tokenizer, model_label=type(model).__name__)["metrics"]


def _fraction(value: float) -> str:
    return f"{value:.3f}"


def results_table(result: dict[str, Any]) -> str:
    """A Markdown table: one row per benchmark (by its short name, ict.data.short_labels; the full
    specs follow the table when they differ), pass@k and accuracy (fractions) with their 95%
    percentile bootstrap intervals over problems, format rate, mean response length (tokens)."""
    ks = result["settings"]["k"]
    names = short_labels(result["benchmarks"])
    head = (
        ["benchmark", "problems"]
        + [f"pass@{k} (95% CI)" for k in ks]
        + ["accuracy (95% CI)", "format", "length"]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, m in result["benchmarks"].items():
        cells = [names[label].replace("|", "\\|"), str(m["problems"])]
        for key in [f"pass@{k}" for k in ks] + ["accuracy"]:
            low, high = m[f"{key}_ci95"]
            cells.append(f"{_fraction(m[key])} [{_fraction(low)}, {_fraction(high)}]")
        fmt = "n/a" if m.get("format_rate") is None else _fraction(m["format_rate"])
        cells += [fmt, f"{m['response_length_mean']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    specs = [f"{names[label]}: `{label}`" for label in names if names[label] != label]
    if specs:
        lines += ["", "Tasks: " + "; ".join(specs)]
    return "\n".join(lines)


def summary_markdown(result: dict[str, Any]) -> str:
    """The result as a Markdown page: the table, then every setting."""
    s = result["settings"]
    settings_lines = "\n".join(f"- {key}: {value}" for key, value in s.items())
    return (
        f"# Evaluation of {result['model']}\n\n"
        f"Date: {result['date']}. Values are fractions; pass@k is the unbiased estimator averaged "
        f"over problems with n = {s['n']} samples each; intervals are percentile bootstrap over "
        f"problems ({s['num_bootstrap']} resamples). Length is in tokens.\n\n"
        f"{results_table(result)}\n\n## Settings\n\n{settings_lines}\n"
    )
