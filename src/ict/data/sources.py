"""Rows from local JSONL/JSON/Parquet files or the Hugging Face hub, as lists of plain dicts.

Local files come first: `--data-dir DIR` (or env `ICT_DATA_DIR`) holding `DIR/<name>.jsonl`,
`DIR/<name>.parquet`, `DIR/<name>.json` or `DIR/<name>.csv` (header row). The hub is tried only when it is reachable or the hub
is in offline mode (then only the local cache is used); it never hangs: a 3 s connection probe
decides first.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ict.errors import DataError
from ict.files import read_json_required

FILE_SUFFIXES = (".jsonl", ".parquet", ".json", ".csv")
DATA_DIR_ENV = "ICT_DATA_DIR"


def data_dirs(data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The directories searched for local files: `data_dir`, then $ICT_DATA_DIR."""
    dirs = [Path(data_dir)] if data_dir else []
    if os.environ.get(DATA_DIR_ENV):
        dirs.append(Path(os.environ[DATA_DIR_ENV]))
    return dirs


def find_local_file(name: str, data_dir: str | os.PathLike | None = None) -> Path | None:
    """`DIR/<name>.jsonl|.parquet|.json|.csv` in the first directory that has one, else None."""
    for directory in data_dirs(data_dir):
        for suffix in FILE_SUFFIXES:
            path = directory / f"{name}{suffix}"
            if path.is_file():
                return path
    return None


def read_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """All rows of a JSONL, JSON (list of objects), Parquet or CSV (header row) file as dicts."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"data file {path} does not exist")
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
        if path.suffix == ".json":
            rows = read_json_required(path)
            if not isinstance(rows, list):
                raise DataError(f"{path}: expected a JSON list of objects")
            return rows
        if path.suffix == ".csv":
            import csv

            with path.open(encoding="utf-8", newline="") as f:
                return [dict(row) for row in csv.DictReader(f)]
        if path.suffix == ".jsonl":
            with path.open(encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.strip()]
    except (json.JSONDecodeError, OSError, ValueError, UnicodeDecodeError) as err:
        if isinstance(err, DataError):
            raise
        raise DataError(f"cannot read {path}: {err}") from err
    raise DataError(f"{path}: unsupported file type; use one of {', '.join(FILE_SUFFIXES)}")


def hub_offline() -> bool:
    """True when the environment asks for offline hub access (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)."""
    return any(
        os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on")
        for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether a TCP connection to the hub endpoint succeeds within `timeout_s`."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def load_hub_rows(hub_id: str, config: str | None, split: str, *, hint: str = "") -> list[dict]:
    """Rows of a hub dataset split (from the local cache when offline); DataError on failure.

    `hint` is appended to the error message (where to put a local file instead).
    """
    if not hub_offline() and not hub_reachable():
        raise DataError(f"the Hugging Face hub is not reachable to download {hub_id}. {hint}")
    try:
        import datasets

        dataset = datasets.load_dataset(hub_id, config, split=split)
    except Exception as err:  # noqa: BLE001 - offline, missing, gated: all need the same advice
        mode = " (offline mode: only the local cache is used)" if hub_offline() else ""
        raise DataError(
            f"cannot load {hub_id} (config {config}, split {split}) from the hub{mode}: "
            f"{type(err).__name__}: {str(err)[:200]}. {hint}"
        ) from err
    return [dict(row) for row in dataset]


def get_field(row: dict[str, Any], path: str) -> Any:
    """A column, or a nested value by dotted path ("reward_model.ground_truth", "prompt.0.content")."""
    value: Any = row
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, (list, tuple)) and part.lstrip("-").isdigit():
            value = value[int(part)]
        else:
            raise KeyError(path)
    return value
