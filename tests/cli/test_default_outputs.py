"""What the CLI writes by default goes under runs/ (git-ignored), never loose in the current
directory, with the mode the umask gives (0644 under umask 0022), so a team can share it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ict.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def umask_0022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_runs_is_ignored_by_git():
    paths = ["runs/eval/x/summary.json", "runs/inspect/x/token_map.html"]
    done = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True, text=True)
    if done.returncode == 128:
        pytest.skip(f"not a git checkout: {done.stderr.strip()}")
    assert done.stdout.split() == paths  # each ignored


def test_eval_without_out_writes_under_runs(tiny_model_dir, tmp_path, monkeypatch, umask_0022):
    from ict.cli.eval import default_out_dir

    assert default_out_dir(None) == str(Path("runs", "eval", "smollm2-135m-instruct"))
    monkeypatch.chdir(tmp_path)
    argv = ["eval", "--model", str(tiny_model_dir), "--limit", "1", "--n", "1", "--k", "1"]
    assert main([*argv, "--max-new-tokens", "2"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # nothing loose in the cwd
    written = _files(tmp_path / "runs" / "eval")
    assert any(p.name == "summary.json" for p in written)
    assert {oct(p.stat().st_mode & 0o777) for p in written} == {oct(0o644)}


def test_inspect_model_writes_under_runs(tiny_model_dir, tmp_path, monkeypatch, umask_0022):
    monkeypatch.chdir(tmp_path)
    argv = ["inspect", "--model", str(tiny_model_dir), "--prompt", "1+1=", "--no-terminal"]
    assert main([*argv, "--num-samples", "2", "--max-new-tokens", "3"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
    (html,) = _files(tmp_path / "runs")
    assert html == tmp_path / "runs" / "inspect" / tiny_model_dir.name / "token_map.html"
    assert html.stat().st_mode & 0o777 == 0o644
