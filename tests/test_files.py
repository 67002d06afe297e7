"""ict.files: atomic writes, the one JSON-lines torn-line policy, JsonlWriter, checkpoint lookup."""

import json
import logging
import os

import numpy as np
import pytest

from ict.errors import DataError
from ict.files import (
    JsonlWriter,
    append_jsonl,
    latest_checkpoint,
    list_checkpoints,
    read_json_required,
    read_jsonl,
    replace_atomic,
    truncate_jsonl,
    write_atomic,
    write_json_atomic,
    write_jsonl_atomic,
)


def test_write_atomic_text_bytes_and_parents(tmp_path):
    path = tmp_path / "a" / "b" / "f.txt"
    write_atomic(path, "héllo\n")
    assert path.read_text(encoding="utf-8") == "héllo\n"
    write_atomic(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert os.listdir(path.parent) == ["f.txt"]  # no temp file left


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_interrupted_write_leaves_the_old_content_and_no_temp(tmp_path, monkeypatch, failing):
    path = tmp_path / "f.json"
    write_atomic(path, "old")

    def boom(*args):
        raise KeyboardInterrupt  # a kill between writing the temp file and renaming it

    monkeypatch.setattr(os, failing, boom)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, "new content that must never be seen half-written")
    monkeypatch.undo()
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["f.json"]

    fresh = tmp_path / "never.json"
    monkeypatch.setattr(os, failing, boom)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(fresh, "x")
    monkeypatch.undo()
    assert not fresh.exists() and os.listdir(tmp_path) == ["f.json"]


@pytest.fixture
def umask():
    """Set the process umask for a test (restored after)."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_get_the_mode_the_umask_gives(tmp_path, umask, mask, mode):
    """What ict.files writes is shareable as any file the user writes (not tempfile's 0600)."""
    umask(mask)
    write_atomic(tmp_path / "a.txt", "x")
    write_json_atomic(tmp_path / "b.json", {"x": 1})
    write_jsonl_atomic(tmp_path / "c.jsonl", [{"x": 1}])
    append_jsonl(tmp_path / "d.jsonl", {"x": 1})
    with JsonlWriter(tmp_path / "e.jsonl") as writer:
        writer.write({"x": 1})
    write_atomic(tmp_path / "a.txt", "rewritten")  # a replaced file too
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == dict.fromkeys(["a.txt", "b.json", "c.jsonl", "d.jsonl", "e.jsonl"], mode)


def test_replace_atomic_puts_a_directory_in_place(tmp_path):
    final, tmp = tmp_path / "ckpt", tmp_path / ".tmp_ckpt"
    final.mkdir()
    (final / "old.bin").write_text("old")
    tmp.mkdir()
    (tmp / "new.bin").write_text("new")
    replace_atomic(tmp, final)
    assert sorted(os.listdir(tmp_path)) == ["ckpt"] and os.listdir(final) == ["new.bin"]


def test_load_json_names_the_file(tmp_path):
    path = tmp_path / "info.json"
    with pytest.raises(DataError, match="info.json does not exist"):
        read_json_required(path)
    path.write_text('{"a": ')
    with pytest.raises(DataError, match="info.json is not valid JSON"):
        read_json_required(path)
    path.write_text('{"a": 1}')
    assert read_json_required(path) == {"a": 1}


def test_write_json_atomic_defaults_and_kwargs(tmp_path):
    path = tmp_path / "s.json"
    write_json_atomic(path, {"b": 1, "a": tmp_path})
    text = path.read_text()
    assert text.endswith("}\n") and '\n  "b": 1' in text  # indented, non-JSON values as str
    assert json.loads(text) == {"b": 1, "a": str(tmp_path)}
    write_json_atomic(path, {"b": 1, "a": 2}, indent=None, sort_keys=True)
    assert path.read_text() == '{"a": 2, "b": 1}\n'


def test_torn_last_line_is_skipped_with_a_warning(tmp_path, caplog):
    path = tmp_path / "m.jsonl"
    for torn in ('{"step": 2, "rew', '{"step": 2}', '{"step": 2, "rew\n', "\x00\x00\n"):
        path.write_text('{"step": 0}\n\n{"step": 1}\n' + torn)
        with caplog.at_level(logging.WARNING, logger="ict.files"):
            caplog.clear()
            assert [r["step"] for r in read_jsonl(path)] == [0, 1], torn
        assert "m.jsonl:" in caplog.text and "torn" in caplog.text
    assert read_jsonl(tmp_path / "missing.jsonl") == []


def test_bad_middle_line_is_a_data_error_with_its_line_number(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 0}\n{"ste\n{"step": 2}\n')
    with pytest.raises(DataError, match=r"m\.jsonl:2 is not valid JSON"):
        read_jsonl(path)
    with pytest.raises(DataError, match=":2"):
        truncate_jsonl(path, 5)


def test_jsonl_writer_round_trip_and_append_after_a_torn_tail(tmp_path):
    path = tmp_path / "sub" / "m.jsonl"
    with JsonlWriter(path) as writer:
        writer.write({"step": 1, "x": float("nan"), "y": np.float32(1.5), "p": tmp_path})
        writer.write({"step": 2, "x": [1, 2]})
    assert read_jsonl(path) == [
        {"step": 1, "x": None, "y": 1.5, "p": str(tmp_path)},
        {"step": 2, "x": [1, 2]},
    ]
    with open(path, "a") as f:
        f.write('{"step": 3, "x"')  # killed mid-write
    append_jsonl(path, {"step": 3})  # the torn tail is dropped, the record gets its own line
    assert [r["step"] for r in read_jsonl(path)] == [1, 2, 3]
    assert path.read_text().endswith('{"step": 3}\n')


def test_truncate_and_write_jsonl_atomic(tmp_path):
    path = tmp_path / "m.jsonl"
    write_jsonl_atomic(path, [{"step": s} for s in range(1, 6)])
    with open(path, "a") as f:
        f.write('{"step": 6')
    truncate_jsonl(path, 3)
    assert path.read_text() == '{"step": 1}\n{"step": 2}\n{"step": 3}\n'
    truncate_jsonl(tmp_path / "missing.jsonl", 3)  # nothing to do


def _fake_checkpoint(run, name, files=("config.json", "model.safetensors", "trainer_state.pt")):
    directory = run / "checkpoints" / name
    directory.mkdir(parents=True)
    for file in files:
        (directory / file).write_text("x")
    return directory


def test_latest_checkpoint_has_one_completeness_test(tmp_path):
    assert latest_checkpoint(tmp_path) is None and list_checkpoints(tmp_path) == []
    two = _fake_checkpoint(tmp_path, "step_000002")
    ten = _fake_checkpoint(tmp_path, "step_000010")
    _fake_checkpoint(tmp_path, "step_000011", files=("config.json", "model.safetensors"))
    _fake_checkpoint(tmp_path, ".tmp_step_000012")
    assert list_checkpoints(tmp_path) == [two, ten]  # numeric order, incomplete ones ignored
    assert latest_checkpoint(tmp_path) == ten  # no pointer: the newest complete one
    (tmp_path / "checkpoints" / "latest").write_text("step_000002")
    assert latest_checkpoint(tmp_path) == two  # the pointer wins when it names a complete one
    (tmp_path / "checkpoints" / "latest").write_text("step_000011\n")
    assert latest_checkpoint(tmp_path) == ten  # ... and is ignored when it does not
