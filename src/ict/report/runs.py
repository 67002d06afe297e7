"""Read run directories (written by `ict train`, or by TRL / verl runs in the same format).

A run directory holds metrics.jsonl (one JSON object per step), optionally config.yaml,
summary.json and samples.jsonl; see docs/ARCHITECTURE.md. Readers tolerate a truncated last line
(a run killed while writing; ict.files.read_jsonl) and missing optional files.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ict.errors import DataError
from ict.files import load_json, read_jsonl


def _read_config(run_dir: Path) -> dict:
    for name in ("config.yaml", "config.yml", "config.json"):
        path = run_dir / name
        if path.exists():
            if name.endswith(".json"):
                return load_json(path) or {}
            import yaml

            return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {}


def _find(config: dict, *keys: str):
    """First value of any of `keys` in config or its nested dicts (one level)."""
    for key in keys:
        if key in config and not isinstance(config[key], dict):
            return config[key]
    for value in config.values():
        if isinstance(value, dict):
            for key in keys:
                if key in value and not isinstance(value[key], dict):
                    return value[key]
    return None


@dataclass
class Run:
    """One run directory, loaded: its config, per-step metrics and summary."""

    path: Path
    config: dict = field(default_factory=dict)
    metrics: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    final_eval: dict = field(default_factory=dict)  # final_eval.json (written by `ict compare`)

    @property
    def method(self) -> str:
        value = _find(self.config, "method", "selector") or self.summary.get("method")
        if value:
            return str(value)
        match = re.match(r"(.+?)[_-]seed[_-]?\d+$", self.path.name)
        return match.group(1) if match else self.path.name

    @property
    def seed(self) -> int | None:
        value = _find(self.config, "seed")
        if value is None:
            value = self.summary.get("seed")
        if value is None:
            match = re.search(r"seed[_-]?(\d+)$", self.path.name)
            value = match.group(1) if match else None
        return None if value is None else int(value)

    @property
    def samples_path(self) -> Path:
        return self.path / "samples.jsonl"

    def series(self, key: str) -> tuple[list[float], list[float]]:
        """(steps, values) of one metric over the rows that have it (finite numbers only)."""
        steps, values = [], []
        for i, row in enumerate(self.metrics):
            value = row.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if math.isfinite(value):
                steps.append(row.get("step", i))
                values.append(float(value))
        return steps, values

    def keys(self) -> set[str]:
        """Metric keys logged in any row, plus those of final_eval.json."""
        return {k for row in self.metrics for k in row} | set(self.final_eval.get("metrics", {}))

    def final(self, key: str) -> float | None:
        """Final value of a metric: final_eval.json's metrics, then summary.json's `final`/top
        level, else the last row that logged it."""
        for source in (
            self.final_eval.get("metrics", {}),
            self.summary.get("final", {}),
            self.summary.get("metrics", {}),
            self.summary,
        ):
            value = source.get(key) if isinstance(source, dict) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
        _, values = self.series(key)
        return values[-1] if values else None

    def flag(self, key: str) -> bool:
        """True if a boolean health flag was raised at any step or in summary.json."""
        if any(row.get(key) is True for row in self.metrics):
            return True
        short = key.split("/")[-1]
        for source in (self.summary, self.summary.get("health", {})):
            if isinstance(source, dict) and (source.get(key) is True or source.get(short) is True):
                return True
        return False


def load_run(run_dir: str | Path) -> Run:
    """Load one run directory; raises DataError naming the fix when metrics.jsonl is missing."""
    path = Path(run_dir)
    if not path.is_dir():
        raise DataError(
            f"run directory {path} does not exist; pass a directory written by `ict train`"
        )
    metrics_path = path / "metrics.jsonl"
    if not metrics_path.exists():
        raise DataError(
            f"{path} has no metrics.jsonl; a run directory needs one JSON object per step "
            "(see docs/ARCHITECTURE.md, 'Run directory')"
        )
    summary_path = path / "summary.json"
    summary = load_json(summary_path) if summary_path.exists() else {}
    final_path = path / "final_eval.json"
    final_eval = load_json(final_path) if final_path.exists() else {}
    return Run(
        path=path,
        config=_read_config(path),
        metrics=read_jsonl(metrics_path),
        summary=summary,
        final_eval=final_eval,
    )


def flat_config(config: dict) -> dict:
    """Grouped config ({section: {key: value}}) -> flat {key: value}; flat configs pass through."""
    nested_values = ("task_config", "selector_options")
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict) and key not in nested_values:
            flat.update(value)
        else:
            flat[key] = value
    return flat
