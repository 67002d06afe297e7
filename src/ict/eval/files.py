"""Compatibility names: the crash-safe file helpers now live in `ict.files` (one implementation).

`read_jsonl_tolerant` is `ict.files.read_jsonl` (a torn last line is skipped, a bad line in the
middle is a DataError).
"""

from ict.files import (
    append_jsonl,
    read_jsonl,
    write_atomic,
    write_json_atomic,
    write_jsonl_atomic,
)

read_jsonl_tolerant = read_jsonl

__all__ = [
    "append_jsonl",
    "read_jsonl",
    "read_jsonl_tolerant",
    "write_atomic",
    "write_json_atomic",
    "write_jsonl_atomic",
]
