"""`ict compare --preset paper --dry-run` from a wheel install, outside the source tree.

Builds the wheel from a copy of the sources (nothing is written into the checkout), installs it
with no network and no dependencies into a fresh virtual environment that borrows this
environment's packages (torch, transformers, ...) through a .pth file, and runs the dry run from a
temporary directory: the benchmark fixtures must come from the installed package. One cell
(`--methods ict --seeds 1`) keeps it to seconds; tests/eval/test_paper_dry_run.py runs the whole
dry-run grid from the source tree.
"""

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _offline_env(tmp_path: Path) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "ICT_DATA_DIR")
    }
    env.update(
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        ICT_CACHE=str(tmp_path / "cache"),
    )
    return env


def test_paper_dry_run_from_an_installed_wheel(tmp_path):
    pytest.importorskip("setuptools")
    env = _offline_env(tmp_path)

    # the wheel, from a copy of the sources
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, source / name)
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "src", source / "src", ignore=junk)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels, source], env=env)
    (wheel,) = wheels.glob("ict-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "ict/compare/fixtures/benchmarks/gsm8k_train.jsonl" in names  # package data
    shipped = {p.name for p in (ROOT / "src/ict/configs/presets").glob("*.yaml")}
    assert shipped and {f"ict/configs/presets/{n}" for n in shipped} <= set(names)  # the presets

    # a fresh environment with the wheel and (through a .pth file) this one's dependencies
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], env=env)
    python = venv / "bin" / "python"
    _run([*pip, "--python", python, "install", "--no-deps", "-q", wheel], env=env)
    purelib = _run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env=env
    ).stdout.strip()
    (Path(purelib) / "_borrowed_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")

    elsewhere = tmp_path / "elsewhere"  # outside the checkout: no src/ or tests/ to fall back on
    elsewhere.mkdir()
    where = _run(
        [
            python,
            "-c",
            "import ict, ict.compare.presets as p; print(ict.__file__, p.FIXTURES_DIR, p.PRESET_DIR)",
        ],
        env=env,
        cwd=elsewhere,
    ).stdout.split()
    assert all(Path(p).is_relative_to(venv) for p in where), where  # the wheel, not the sources

    out = elsewhere / "grid"
    args = ["compare", "--preset", "paper", "--dry-run", "--methods", "ict", "--seeds", "1"]
    done = _run([venv / "bin" / "ict", *args, "--out", "grid"], env=env, cwd=elsewhere)
    assert "AIME 2025 P@4" in done.stdout and "| ict |" in done.stdout  # the paper's table
    final = json.loads((out / "runs" / "ict_seed0" / "final_eval.json").read_text())
    assert any(key.startswith("eval/gsm8k/") for key in final["metrics"])
    assert (out / "report" / "report.md").exists()
