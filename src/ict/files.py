"""Crash-safe files: atomic writes, JSON lines, and the run-directory conventions.

Each rule is written once, here; train, eval, report and compare import it.

Atomic writes. `write_atomic` writes to a temp file in the target's directory, flushes and fsyncs
it, then `replace_atomic` renames it over the target: a reader (or a run killed at any moment)
sees the old content or the new one, never part of one, and a failed write removes its temp file.
Checkpoints and warm starts, whole directories, are written to a temp directory and put in place
by the same `replace_atomic`. Files get the mode an ordinary open gives (0644 under umask 0022).

JSON lines. One JSON object per line; a record is committed by the newline written with it.
`read_jsonl` policy: blank lines are skipped; the LAST line is a crash's torn write when it has
no newline or does not parse, and is skipped with a logged warning; an unparsable line anywhere
else is a DataError naming the file and line number. `JsonlWriter` drops such a torn tail before
appending, so the next record starts on a line of its own.

Portable names. `safe_filename` turns a label (a benchmark spec such as `toy:cot`, a metric key
such as `pass@1`) into one file-name component that every common file system accepts (Windows
forbids `<>:"/\\|?*`, control characters, trailing dots and spaces, and names such as `CON`).
`relative_path` names a path relative to a base directory, for reports that must not carry the
absolute paths of the machine they were made on.

Output locations. `check_writable` tries, before any model loads, to create a file where an
output directory is (or, when it does not exist yet, in its nearest existing parent) and reads
the free space there: a read-only or full location fails in one UserError line naming the path
and the fix. A write that fails later (the disk fills during a run) is `write_failure`'s: one
line naming the file and the cause (`is_write_failure` tells such an OSError apart).

Run directory. Checkpoints live in RUN_DIR/checkpoints/step_NNNNNN/; `checkpoints/latest` names
the newest one. A checkpoint is complete when it holds every file `save_checkpoint` writes
(config.json, the safetensors weights, trainer_state.pt); `latest_checkpoint` is the one lookup.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any

from ict.errors import DataError, UserError

logger = logging.getLogger("ict.files")

CHECKPOINTS = "checkpoints"
LATEST = "latest"
STATE_FILE = "trainer_state.pt"
WEIGHTS_FILES = ("model.safetensors", "model.safetensors.index.json")  # single file or sharded
_STEP_DIR = re.compile(r"step_(\d+)")


# ---- output locations ------------------------------------------------------------------------
MIN_FREE_BYTES = 64 * 2**20  # an output location with less free space is refused at once
# the causes of a failed write that the user fixes (space, quota, file size, a read-only mount);
# not EACCES / EPERM, which a read can raise too (permissions are checked up front)
WRITE_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EROFS", "EFBIG") if hasattr(errno, name)
)


def _existing_parent(path: Path) -> Path:
    """`path` itself when it exists, else its nearest existing parent (the current directory
    for a relative path none of whose parts exist)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def check_writable(
    path: str | os.PathLike, *, flag: str, min_free_bytes: int = MIN_FREE_BYTES
) -> None:
    """Raise UserError (one line: the path, the cause, the fix) unless files can be written in
    the directory `path` (created later when absent): a file is created and removed in `path`,
    or in its nearest existing parent, and that file system must have `min_free_bytes` free.
    Creates nothing that stays. `flag` names the option that sets the path (e.g. --output-dir)."""
    path = Path(path)
    base = _existing_parent(path)
    fix = f"pass a writable {flag}"
    if not base.is_dir():
        raise UserError(f"{flag} {path}: {base} is a file, not a directory; {fix}")
    try:
        fd, tmp = _create_temp(base / ".ict-write-check")
        os.close(fd)
        os.unlink(tmp)
    except OSError as err:
        cause = err.strerror or type(err).__name__
        raise UserError(
            f"{flag} {path} cannot be written ({cause} in {base}); {fix}, or make {base} writable"
        ) from None
    free = shutil.disk_usage(base).free
    if free < min_free_bytes:
        raise UserError(
            f"{flag} {path}: only {free / 2**20:.0f} MiB free in {base} (at least "
            f"{min_free_bytes / 2**20:.0f} MiB needed); free space there or {fix}"
        )


def is_write_failure(err: BaseException) -> bool:
    """Whether `err` is a write that failed for a cause the user fixes (WRITE_ERRNOS: no space,
    quota, file size, a read-only file system)."""
    return isinstance(err, OSError) and err.errno in WRITE_ERRNOS


def write_failure(err: OSError, *, after: str = "") -> UserError:
    """The one-line UserError of a failed write (`is_write_failure`): the file, the cause and
    the fix; `after` adds what is left intact and how to continue (e.g. the last checkpoint)."""
    name = err.filename or "an output file"
    cause = err.strerror or str(err)
    return UserError(
        f"could not write {name} ({cause}); free space or make it writable"
        + (f"; {after}" if after else "")
    )


# ---- atomic writes ---------------------------------------------------------------------------
def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Replace `path` by `data` (str is UTF-8 encoded) so that readers see the old or new file.

    The file gets the mode an ordinary `open(path, "w")` gives (0666 less the process umask:
    0644 under umask 0022), so a team can share a run directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        replace_atomic(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _create_temp(path: Path) -> tuple[int, Path]:
    """(fd, name) of a new temp file next to `path`, created with mode 0666 less the umask (what
    tempfile.mkstemp would make 0600)."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name next to {path}")


_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


def replace_atomic(tmp: str | os.PathLike, final: str | os.PathLike) -> None:
    """Put the finished `tmp` (a file or a directory, in `final`'s folder) in place of `final`
    with one rename, and make the rename durable: readers see the old `final` or the new one,
    never part of one. The one rename of every crash-safe write (write_atomic, checkpoints, warm
    starts). A directory `final` that exists is removed first (a rename cannot replace a
    non-empty directory), so a crash between the two leaves no `final`, never a partial one."""
    tmp, final = Path(tmp), Path(final)
    if tmp.is_dir() and final.is_dir():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(final.parent)


def _fsync_dir(directory: Path) -> None:
    """Make a rename durable (best effort: not every platform can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json_atomic(path: str | os.PathLike, obj: Any, **json_kwargs) -> None:
    """`obj` as indented JSON (non-JSON values as str()), atomically; json_kwargs go to dumps."""
    text = json.dumps(obj, **{"indent": 2, "default": str, **json_kwargs})
    write_atomic(path, text + "\n")


def read_json_if_present(path: str | os.PathLike) -> Any:
    """The JSON value saved at `path`, or None when the file is missing or unreadable (a result
    file that is then recomputed or left out). `read_json_required` when it must be there."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_json_required(path: str | os.PathLike) -> Any:
    """The JSON value saved at `path`, which must be there: a missing file or one that does not
    parse is a DataError naming the file (a record that a run or report needs).
    `read_json_if_present` when it may be missing."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path} does not exist") from None
    except ValueError as err:
        raise DataError(f"{path} is not valid JSON ({err}); remove it or write it again") from None


# the earlier names, until ict/report and scripts/explore_study.py (issue 49's study work, in
# another branch) read through the names above: remove them once nothing imports them
read_json = read_json_if_present
load_json = read_json_required


# ---- JSON lines ------------------------------------------------------------------------------
def _json_safe(value):
    """JSON-safe scalars: 0-d tensors / numpy scalars -> python, NaN / inf -> None."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def jsonl_line(row: dict) -> str:
    """One record as a JSON line (top-level NaN/inf as null, other non-JSON values as str())."""
    return json.dumps({k: _json_safe(v) for k, v in row.items()}, default=str) + "\n"


def _complete_lines(path: Path):
    """(line number, text, record) of the complete lines of `path` under the module's policy."""
    lines = path.read_text(encoding="utf-8").split("\n")  # the last item: text after the last \n
    tail = lines.pop()
    if tail.strip():
        logger.warning("%s:%d has no newline (a torn write): skipped", path, len(lines) + 1)
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            if i == last and not tail.strip():
                logger.warning("%s:%d is not valid JSON (a torn write): skipped", path, i + 1)
                return
            raise DataError(
                f"{path}:{i + 1} is not valid JSON ({err}); fix or remove that line"
            ) from err
        yield i + 1, line, row


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """The records of a JSON-lines file ([] if it does not exist); see the module's policy."""
    path = Path(path)
    if not path.exists():
        return []
    return [row for _, _, row in _complete_lines(path)]


def write_jsonl_atomic(path: str | os.PathLike, rows: list[dict]) -> None:
    """Replace `path` by the JSON lines of `rows`, atomically."""
    write_atomic(path, "".join(jsonl_line(r) for r in rows))


def truncate_jsonl(path: str | os.PathLike, max_step: int) -> None:
    """Keep the records whose `step` <= max_step (a torn last line goes too), atomically."""
    path = Path(path)
    if not path.exists():
        return
    kept = [line for _, line, row in _complete_lines(path) if int(row.get("step", 0)) <= max_step]
    write_atomic(path, "".join(f"{line}\n" for line in kept))


def _drop_torn_tail(path: Path) -> None:
    """Cut the file back to its last newline (the torn write of a killed run), if it has one."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with open(path, "r+b") as f:
        end = pos = f.seek(0, os.SEEK_END)
        cut = 0
        while pos > 0:
            start = max(0, pos - (1 << 16))
            f.seek(start)
            chunk = f.read(pos - start)
            if pos == end and chunk.endswith(b"\n"):
                return
            if (i := chunk.rfind(b"\n")) >= 0:
                cut = start + i + 1
                break
            pos = start
        f.truncate(cut)
        f.flush()
        os.fsync(f.fileno())
    logger.warning("%s: dropped %d bytes of a torn last line before appending", path, end - cut)


class JsonlWriter:
    """Append records to a JSON-lines file, one line each, flushed and fsynced after each write
    (a crash loses at most the line being written). Usable as a context manager."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _drop_torn_tail(self.path)
        self._file = open(self.path, "a", encoding="utf-8")

    def write(self, row: dict) -> None:
        self._file.write(jsonl_line(row))
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def append_jsonl(path: str | os.PathLike, row: dict) -> None:
    """Append one record (opens and closes the file; keep a JsonlWriter open for many)."""
    with JsonlWriter(path) as writer:
        writer.write(row)


# ---- portable names -------------------------------------------------------------------------
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9._-]+")
_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL"} | {
    f"{p}{i}" for p in ("COM", "LPT") for i in range(1, 10)
}


def safe_filename(name: str, replacement: str = "_") -> str:
    """`name` as one portable file-name component: every run of characters outside
    `A-Z a-z 0-9 . _ -` becomes `replacement`; no trailing dot or space; a Windows device name
    (`CON`, `nul.txt`, ...) gets a leading `replacement`; never empty. Idempotent.

    >>> safe_filename("eval_toy:cot_pass@1.png")
    'eval_toy_cot_pass_1.png'
    """
    if not isinstance(name, str):
        raise TypeError(f"safe_filename takes a str, got {type(name).__name__}")
    safe = _UNSAFE_RUN.sub(replacement, name).rstrip(". ")
    if not safe:
        return replacement
    if safe.split(".")[0].upper() in _WINDOWS_RESERVED:
        safe = replacement + safe
    return safe


def relative_path(path: str | os.PathLike, base: str | os.PathLike) -> str:
    """`path` relative to `base` in POSIX form (`runs/grpo_seed0`, `../other/run`), both resolved
    first; the bare folder name when no relative path exists (another drive on Windows)."""
    path, base = Path(path).resolve(), Path(base).resolve()
    try:
        return Path(os.path.relpath(path, base)).as_posix()
    except ValueError:
        return path.name


# ---- run directory: checkpoints --------------------------------------------------------------
def checkpoint_name(step: int) -> str:
    return f"step_{step:06d}"


def is_complete_checkpoint(directory: Path) -> bool:
    """True when `directory` holds every file save_checkpoint writes (weights, config, state)."""
    directory = Path(directory)
    return (
        (directory / "config.json").is_file()
        and (directory / STATE_FILE).is_file()
        and any((directory / name).is_file() for name in WEIGHTS_FILES)
    )


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoint directories of a run, oldest first (temp and partial dirs ignored)."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = [
        (int(m.group(1)), p)
        for p in root.iterdir()
        if (m := _STEP_DIR.fullmatch(p.name)) and is_complete_checkpoint(p)
    ]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The complete checkpoint named by `checkpoints/latest`, else the newest complete one, else
    None."""
    root = Path(run_dir) / CHECKPOINTS
    pointer = root / LATEST
    if pointer.is_file():
        name = pointer.read_text(encoding="utf-8").strip()
        if name and is_complete_checkpoint(root / name):
            return root / name
    found = list_checkpoints(run_dir)
    return found[-1] if found else None
