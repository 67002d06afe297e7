"""Portable output names: no ':' (or any other Windows-reserved character) in the files ict writes,
run directories named relative to the grid in reports, no such name among the tracked files."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ict.files import relative_path, safe_filename

ROOT = Path(__file__).resolve().parents[2]
PORTABLE = re.compile(r"[A-Za-z0-9._-]+")
WINDOWS_FORBIDDEN = set('<>:"\\|?*')


@pytest.mark.parametrize(
    "name, expected",
    [
        ("eval_toy:cot_passat1.png", "eval_toy_cot_passat1.png"),
        ("pass@k a/b.png", "pass_k_a_b.png"),
        ('x<>:"|?*y', "x_y"),
        ("CON", "_CON"),
        ("nul.txt", "_nul.txt"),
        ("report..", "report"),
        ("::", "_"),
        ("", "_"),
        ("already-safe_name.v2.png", "already-safe_name.v2.png"),
    ],
)
def test_safe_filename(name, expected):
    assert safe_filename(name) == expected
    assert safe_filename(expected) == expected  # idempotent
    assert PORTABLE.fullmatch(expected)


def test_safe_filename_refuses_a_path_object():
    with pytest.raises(TypeError, match="takes a str"):
        safe_filename(Path("a:b"))


def test_relative_path(tmp_path):
    grid = tmp_path / "grid"
    assert relative_path(grid / "runs" / "grpo_seed0", grid) == "runs/grpo_seed0"
    assert relative_path(tmp_path / "other" / "run", grid) == "../other/run"


def test_save_figure_writes_a_portable_name(tmp_path):
    from matplotlib.figure import Figure

    from ict.report.plots import save_figure

    fig = Figure()
    fig.add_subplot().plot([0, 1], [0, 1])
    written = save_figure(fig, tmp_path / "plots" / "eval_toy:cot_passat1.png")
    assert written == tmp_path / "plots" / "eval_toy_cot_passat1.png"
    assert written.is_file() and [p.name for p in written.parent.iterdir()] == [written.name]


def _run(root: Path, method: str, seed: int) -> Path:
    run = root / f"{method}_seed{seed}"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"method": method, "seed": seed}))
    rows = [
        {"step": s, "reward/mean": 0.1 * s + 0.01 * seed, "valid/entropy": 1.0} for s in range(3)
    ]
    rows[-1]["eval/toy:cot/pass@1"] = 0.5 + 0.01 * seed
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "summary.json").write_text(json.dumps({"method": method, "seed": seed}))
    return run


def test_comparison_report_names_portable_files_and_relative_run_dirs(tmp_path):
    from ict.report.comparison import build_report

    grid = tmp_path / "grid"
    runs = [_run(grid / "runs", m, s) for m in ("grpo", "ict") for s in range(2)]
    build_report(runs, grid / "report")
    names = [p.name for p in (grid / "report").rglob("*")]
    assert any(n.startswith("eval_toy_cot") for n in names), names  # the benchmark's curve
    assert not [n for n in names if set(n) & WINDOWS_FORBIDDEN], names
    for doc in ("report.md", "report.html"):
        text = (grid / "report" / doc).read_text()
        assert str(tmp_path) not in text, f"{doc} names an absolute path"
    md = (grid / "report" / "report.md").read_text()
    assert "`runs/grpo_seed0`" in md and "`runs/ict_seed1`" in md


def _tracked() -> list[str] | None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True)
    return done.stdout.decode().split("\0") if done.returncode == 0 else None


def test_no_tracked_path_has_a_windows_reserved_character():
    tracked = _tracked()
    if tracked is None:
        pytest.skip("not a git checkout")
    bad = [p for p in tracked if set(p) & WINDOWS_FORBIDDEN]
    assert not bad, f"{len(bad)} tracked path(s) a Windows checkout cannot create: {bad[:5]}"
