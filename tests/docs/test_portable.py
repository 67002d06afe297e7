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


# an absolute path of a machine (not a URL, not `${HOME}/...`, not a placeholder such as
# /path/to/ict): a root folder that holds users' or machines' files, then a name
MACHINE_PATH = re.compile(
    r"(?<![\w.~}$/:-])(?:/(?:work|home|Users|root|tmp|mnt|scratch|data|srv|opt|var|private|"
    r"Volumes|gpfs|lustre|nfs)/[\w.-]+|[A-Za-z]:\\(?:Users|work)\\)"
)
TEXT_SUFFIXES = (".md", ".py", ".sh", ".yaml", ".yml", ".toml", ".txt", ".json", ".jsonl",
                 ".html", ".cfg", ".ini", ".csv")  # fmt: skip


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Run directories: `/work/runs/compare-x/runs/grpo_seed0`", True),
        ("(/work/shared/docs/MEASUREMENTS.md's summary)", True),
        ('"path": "/home/alice/ict/runs/a"', True),
        (r"C:\Users\bob\ict", True),
        ("train_files: ${oc.env:HOME}/data/ict/math/train.parquet", False),
        ("pip install --no-deps -e /path/to/ict", False),
        ("https://github.com/org/repo/tmp/file", False),
        ("`runs/grpo_seed0` and ~/data/ict/math", False),
    ],
)
def test_the_machine_path_pattern(text, found):
    assert bool(MACHINE_PATH.search(text)) == found


def test_no_tracked_text_names_a_machine_path():
    """Reports and docs name run directories relative to their study folder, and cite files of
    this repository only: no absolute path of the machine they were made on."""
    tracked = _tracked()
    if tracked is None:
        pytest.skip("not a git checkout")
    found = []
    for name in tracked:
        path = ROOT / name
        if not name.endswith(TEXT_SUFFIXES) or not path.is_file() or path == Path(__file__):
            continue  # (this file's own examples of the pattern)
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in MACHINE_PATH.finditer(text):
            found.append(f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m[0]}")
    assert not found, f"{len(found)} absolute machine path(s):\n" + "\n".join(found[:20])


IMAGE_MD = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)\)")
IMAGE_HTML = re.compile(r"<img\b[^>]*>", re.I)


def test_every_image_has_alt_text():
    """Every image of the tracked Markdown and HTML says what it shows (alt text)."""
    tracked = _tracked()
    if tracked is None:
        pytest.skip("not a git checkout")
    missing = []
    for name in tracked:
        if not name.endswith((".md", ".html")):
            continue
        text = (ROOT / name).read_text(encoding="utf-8", errors="replace")
        missing += [f"{name}: {m['src']}" for m in IMAGE_MD.finditer(text) if not m["alt"].strip()]
        missing += [
            f"{name}: {tag[:60]}"
            for tag in IMAGE_HTML.findall(text)
            if not re.search(r'\balt="[^"]+"', tag)
        ]
    assert not missing, "images without alt text:\n" + "\n".join(missing[:20])
