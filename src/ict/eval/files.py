"""Atomic file writes (temp file in the same directory + os.replace) and an append-only cache."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` so that readers see the old or the new file, never a partial one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def write_jsonl_atomic(path: str | os.PathLike, rows: list[dict]) -> None:
    write_atomic(path, "".join(json.dumps(r, default=str) + "\n" for r in rows))


def append_jsonl(path: str | os.PathLike, row: dict) -> None:
    """Append one JSON line and fsync it (a crash loses at most the line being written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_jsonl_tolerant(path: str | os.PathLike) -> list[dict]:
    """The complete JSON lines of a file; a torn last line (from a crash) is skipped."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break  # torn write
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return rows
