"""Every repository path the README and docs name exists (a renamed script or example leaves no
stale mention), and the directories ict writes into a checkout are git-ignored."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# a path under one of the repository's top-level folders, not inside a longer path or a URL
PATH = re.compile(
    r"(?<![\w./@:-])((?:src|tests|docs|examples|scripts|benchmarks)/[A-Za-z0-9_./@+-]*[A-Za-z0-9_/])"
)
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")  # a Markdown link's target
# paths in another project's repository that the docs cite as such (the line names the project)
OTHER_REPOSITORIES = {
    "examples/grpo_trainer/run_qwen2-7b.sh": "volcengine/verl",
    "tests/test_grpo_trainer.py": "TRL",
}


def placeholder(path: str) -> bool:
    """A path with a part to fill in (`<stamp>`, `NAME.yaml`, `*.png`, `{a,b}`)."""
    return bool(re.search(r"[<>*{}]|(^|/)NAME(\.|/|$)", path))


def named_paths() -> list[tuple[str, str]]:
    """(doc, path relative to the repository root) of every repository path and relative link."""
    found = []
    for doc in DOCS:
        rel = str(doc.relative_to(ROOT))
        if doc.name == "PROTOCOL.md":  # a declared protocol keeps the words it was committed with
            continue
        for line in doc.read_text(encoding="utf-8").splitlines():
            for m in PATH.finditer(line):
                path = m.group(1)
                other = OTHER_REPOSITORIES.get(path)
                if placeholder(path) or (other is not None and other in line):
                    continue
                found.append((rel, path))
            for m in LINK.finditer(line):
                target = m.group(1)
                if "://" in target or target.startswith("mailto:") or placeholder(target):
                    continue
                resolved = (doc.parent / target).resolve()
                if resolved.is_relative_to(ROOT):
                    found.append((rel, str(resolved.relative_to(ROOT))))
    return found


def ignored(paths: list[str]) -> set[str]:
    """Those of `paths` git ignores (outputs a command writes: runs/, caches)."""
    if not paths or shutil.which("git") is None or not (ROOT / ".git").exists():
        return set()
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True
    )
    return set(done.stdout.split())


def test_the_docs_name_some_paths():
    paths = {p for _, p in named_paths()}
    assert "examples/trl/train_ict.py" in paths and "src/ict/configs/presets/paper.yaml" in paths


def test_every_repository_path_named_in_the_docs_exists():
    named = named_paths()
    missing = [(doc, p) for doc, p in named if not (ROOT / p).exists()]
    outputs = ignored(sorted({p for _, p in missing}))
    stale = sorted({f"{doc}: {p}" for doc, p in missing if p not in outputs})
    assert not stale, "paths named in the docs that do not exist:\n" + "\n".join(stale)


def test_stale_mentions_are_caught():
    """The pattern reads a path in backticks, in prose and in a link."""
    text = "see `examples/trl_*.py` and scripts/no_such.py, or [this](docs/gone.md)."
    assert [m.group(1) for m in PATH.finditer(text)] == [
        "examples/trl_", "scripts/no_such.py", "docs/gone.md",
    ]  # fmt: skip
    assert not (ROOT / "examples/trl_").exists()


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout"
)
@pytest.mark.parametrize(
    "path",
    ["models/smollm2-135m-instruct/model.safetensors", "runs/toy/report.md"],
)
def test_what_ict_writes_into_a_checkout_is_git_ignored(path):
    """`save_embedded("models/...")` (docs/engines/verl.md) and every run's outputs."""
    done = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT)
    assert done.returncode == 0, f"{path} is not git-ignored"
