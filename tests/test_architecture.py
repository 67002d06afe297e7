"""The layers of docs/ARCHITECTURE.md hold in the code, and the page names what the code has.

Every import in src/ict is read with `ast`, wherever it sits (module level, inside functions,
behind TYPE_CHECKING), and so is every string that is a whole module path of ict (the module
paths of lazy-export tables, registries and `importlib` calls: "ict.train.trainer",
"ict.step.selection:select_step"). The layer order is the page's module map, read from the page
itself: a module imports only what the map lists above it (or its own top-level unit), so the
top-level units form no cycle and `data`, `eval` and `report` import nothing above them. The
page's where-each-rule-lives table names places in the code: each must exist.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "ict"
DOC = ROOT / "docs" / "ARCHITECTURE.md"

# a string that is a whole module path of ict, optionally with ":attribute"
MODULE_STRING = re.compile(r"ict(\.[A-Za-z_][A-Za-z0-9_]*)+(:[A-Za-z_][A-Za-z0-9_]*)?")
# calls whose string arguments name loggers, not modules
NOT_IMPORTS = {"getLogger"}

# Known exceptions: (importing unit, imported unit, why). Empty: none is allowed today.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit(module: str) -> str:
    """The top-level unit of a module path: ict.train.plan -> train, ict.errors -> errors."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def imports_of(path: Path) -> list[tuple[str, int, str]]:
    """(imported module path, line, how) of every import and module-path string in `path`."""
    return imports_in(
        path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py"
    )


def imports_in(text: str, name: str, is_package: bool = False) -> list[tuple[str, int, str]]:
    """imports_of for the source `text` of module `name`."""
    tree = ast.parse(text)
    package = name if is_package else name.rpartition(".")[0]
    skip = _docstrings(tree)
    for node in ast.walk(tree):  # logger names are strings too
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in NOT_IMPORTS:
                skip.update(id(a) for a in node.args)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, "import") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, node.lineno, "from"))
            # `from ict.x import y` where y is itself a module
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if _exists(sub):
                    found.append((sub, node.lineno, "from"))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and MODULE_STRING.fullmatch(node.value)
        ):
            module = node.value.split(":")[0]
            while module and not _exists(module):  # "ict.step.select_step": the module part
                module = module.rpartition(".")[0]
            if module:
                found.append((module, node.lineno, "string"))
    return [(m, line, how) for m, line, how in found if m == "ict" or m.startswith("ict.")]


def _exists(module: str) -> bool:
    parts = module.split(".")
    if parts[0] != "ict":
        return False
    base = SRC.parent.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def all_modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def edges() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> where ("ict/x/y.py:12 (how)"), between different units."""
    out = defaultdict(list)
    for path in all_modules():
        source = unit(module_name(path))
        for target, line, how in imports_of(path):
            dest = unit(target)
            if source and dest and source != dest:
                out[(source, dest)].append(f"{path.relative_to(SRC.parent)}:{line} ({how})")
    return out


# ---- the page --------------------------------------------------------------------------------
def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def module_map() -> list[str]:
    """The module map's entries, bottom to top: the first code block after 'The module map'."""
    text = doc_text()
    start = text.index("The module map")
    block = text[text.index("```", start) + 3 :]
    block = block[block.index("\n") + 1 : block.index("```")]
    entries = []
    for line in block.splitlines():
        match = re.match(r"ict/([A-Za-z_][\w]*)(\.py)?(/)?\s", line + " ")
        if match:
            entries.append(match.group(1))
    return entries


LAYERS = module_map()


def map_entries() -> dict[str, str]:
    """unit -> its map entry's text (continuation lines joined)."""
    text = doc_text()
    start = text.index("The module map")
    block = text[text.index("```", start) + 3 :]
    block = block[block.index("\n") + 1 : block.index("```")]
    entries, current = {}, None
    for line in block.splitlines():
        match = re.match(r"ict/(\w+)", line)
        if match:
            current = match.group(1)
            entries[current] = line[match.end() :]
        elif current:
            entries[current] += " " + line.strip()
    return entries


def rank(name: str) -> int:
    assert name in LAYERS, f"ict.{name} is not in docs/ARCHITECTURE.md's module map"
    return LAYERS.index(name)


# ---- tests -----------------------------------------------------------------------------------
def test_the_map_lists_every_top_level_unit_once_and_nothing_else():
    listed = module_map()
    assert len(listed) == len(set(listed)), "a unit is listed twice in the module map"
    units = {  # modules, and packages (ict/compare is a namespace package: no __init__.py)
        p.stem if p.is_file() else p.name
        for p in SRC.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and any(p.glob("*.py")))
    }
    assert set(listed) == units, (
        f"docs/ARCHITECTURE.md's module map: missing {sorted(units - set(listed))}, "
        f"not in the code {sorted(set(listed) - units)}"
    )


def test_the_files_a_map_entry_names_exist():
    """A package's entry that names a file ("trainer.py") or a sub-package ("verl/") names one
    of that package's; the top-level units the code splits into the entries' words all exist."""
    missing = []
    for name, entry in map_entries().items():
        for file in re.findall(r"(?<![/\w])(\w+)\.py\b", entry):
            if not (SRC / name / f"{file}.py").is_file():
                missing.append(f"ict/{name}: {file}.py")
        for sub in re.findall(r"\b(\w+)/(?!\w)", entry):
            if not (SRC / name / sub).is_dir():
                missing.append(f"ict/{name}: {sub}/")
    assert not missing, f"docs/ARCHITECTURE.md's module map names what the code lacks: {missing}"


def test_every_module_path_the_page_names_exists():
    """Every `ict.a.b` name and ict/a/b path on the page is a module or a name one defines
    (`ict.method=NAME`, verl's config key, is not a module path)."""
    text = doc_text()
    names = set(re.findall(r"\b(ict(?:\.[A-Za-z_]\w*)+)\b(?!=)", text))
    bad = sorted(n for n in names if not resolves(n))
    paths = set(re.findall(r"\bict/[\w/]*\w(?:\.py)?", text))
    bad += sorted(p for p in paths if not (SRC.parent / p).exists())
    assert not bad, f"docs/ARCHITECTURE.md names what the code lacks: {bad}"


def test_no_module_is_only_a_re_export():
    """A module (not a package's __init__) holds code: one made only of imports (and __all__)
    is an alias that nothing needs."""
    aliases = []
    for path in all_modules():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        body = ast.parse(path.read_text(encoding="utf-8")).body
        body = [
            n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
        ]
        if all(
            isinstance(n, ast.Import | ast.ImportFrom)
            or (
                isinstance(n, ast.Assign)
                and [getattr(t, "id", "") for t in n.targets] == ["__all__"]
            )
            for n in body
        ):
            aliases.append(str(path.relative_to(SRC.parent)))
    assert not aliases, f"modules that only re-export: {aliases}"


def test_the_reader_finds_imports_everywhere():
    """The reader sees a function-level import, a relative import, a module-path string and a
    `from package import module`, and not a logger name or a docstring."""
    text = (
        '"""Mentions ict.compare.grid in prose."""\n'
        "import logging\n"
        "from ict import files\n"
        "from .loss import policy\n"
        'log = logging.getLogger("ict.report")\n'
        'TABLE = {"x": "ict.train.trainer", "y": "ict.step.selection:select_step"}\n'
        "def f():\n"
        "    from ict.eval.runner import Evaluation\n"
    )
    found = {(m, how) for m, _, how in imports_in(text, "ict.probe")}
    assert found == {
        ("ict", "from"),
        ("ict.files", "from"),
        ("ict.loss", "from"),
        ("ict.loss.policy", "from"),
        ("ict.train.trainer", "string"),
        ("ict.step.selection", "string"),
        ("ict.eval.runner", "from"),
    }


def test_every_import_points_down_the_module_map():
    up = {
        (src, dst): where
        for (src, dst), where in edges().items()
        if rank(dst) > rank(src) and (src, dst) not in KNOWN_EXCEPTIONS
    }
    lines = [f"{s} -> {d}: {', '.join(w[:3])}" for (s, d), w in sorted(up.items())]
    assert not up, "imports up the module map (docs/ARCHITECTURE.md):\n" + "\n".join(lines)


def test_no_cycle_between_top_level_units():
    graph = defaultdict(set)
    for src, dst in edges():
        graph[src].add(dst)
    cycles, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, f"cycles between top-level units: {cycles}"


@pytest.mark.parametrize("low", ["data", "eval", "report"])
def test_data_eval_report_import_nothing_above_them(low):
    above = {
        dst: where for (src, dst), where in edges().items() if src == low and rank(dst) > rank(low)
    }
    assert not above, f"ict.{low} imports above it: {above}"


# ---- the where-each-rule-lives table ---------------------------------------------------------
def rule_table() -> list[str]:
    text = doc_text()
    start = text.index("## Where each rule lives")
    end = text.index("\n## ", start + 5)
    return [line for line in text[start:end].splitlines() if line.startswith("| ")][2:]


def _defined_names(tree: ast.Module) -> dict[str, ast.AST]:
    names = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names[n.id] = node
        elif isinstance(node, ast.ImportFrom | ast.Import):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, ast.If):  # TYPE_CHECKING blocks, optional imports
            names.update(_defined_names(ast.Module(body=node.body + node.orelse, type_ignores=[])))
        elif isinstance(node, ast.Try):
            names.update(_defined_names(ast.Module(body=node.body, type_ignores=[])))
    return names


def _module_path(module: str) -> Path | None:
    base = SRC.parent.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def resolves(dotted: str) -> bool:
    """Whether `ict.a.b.Name.attr` names a module, or a name a module defines (exports included,
    lazy tables included), and then an attribute its class defines."""
    parts = dotted.split(".")
    for cut in range(len(parts), 1, -1):
        path = _module_path(".".join(parts[:cut]))
        if path is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = _defined_names(tree)
        if rest[0] not in names:  # a lazy export (ict.lazy): follow it to its home module
            try:
                value = getattr(importlib.import_module(".".join(parts[:cut])), rest[0])
            except (ImportError, AttributeError):
                return False
            if len(rest) == 1:
                return True  # found (a registry dict or tuple has no home module to follow)
            home = getattr(value, "__module__", None)
            return (
                bool(home) and home != ".".join(parts[:cut]) and resolves(".".join([home, *rest]))
            )
        node = names[rest[0]]
        for attr in rest[1:]:
            if not isinstance(node, ast.ClassDef):
                return isinstance(node, ast.ImportFrom)  # re-exported: checked at its home
            members = _defined_names(ast.Module(body=node.body, type_ignores=[]))
            if attr not in members:
                return False
            node = members[attr]
        return True
    return False


def test_every_place_the_rule_table_names_exists():
    missing = []
    for line in rule_table():
        for dotted in re.findall(r"`(ict(?:\.[A-Za-z_]\w*)+)`", line):
            if not resolves(dotted):
                missing.append(dotted)
        # `ict.x.y.name` followed by bare names in the same cell: `ict.select.SELECTORS`
        # (`Selector` facts, `register_selector`): the bare names live in the first one's module
        for cell in line.split("|")[2:3]:
            head = re.search(r"`(ict(?:\.[a-z_]\w*)+)\.[A-Za-z_]\w*`", cell)
            if not head:
                continue
            module = head.group(1)
            for bare in re.findall(r"`([A-Za-z_]\w*)`", cell):
                if not (
                    resolves(f"{module}.{bare}")
                    or resolves(f"{module}.{bare}".rsplit(".", 2)[0] + "." + bare)
                ):
                    missing.append(f"{module}.{bare}")
    assert not missing, f"docs/ARCHITECTURE.md's rule table names what the code lacks: {missing}"


def test_the_rule_table_is_read():
    """The table's parser finds the rows and the names (a renamed heading fails here)."""
    rows = rule_table()
    assert len(rows) >= 20
    assert any("`ict.train.plan.RunPlan.from_config`" in row for row in rows)
    assert resolves("ict.train.plan.RunPlan.from_config")
    assert not resolves("ict.train.plan.RunPlan.not_there")
    assert not resolves("ict.nowhere.thing")


# ---- the engines run ict's step, they do not re-plan it -------------------------------------
# the step's rules an engine adapter must not call or import itself: it calls ict.step.StepPlan
# (resolved once: warm-up, seeds, single forward) and drives its StepRun (selection, normaliser
# counts, the single forward's check, metrics)
STEP_RULES = {
    "run_warmup", "warmup_warning", "is_dense", "selection_seed", "selection_in_forward",
    "select_step", "select_method", "step_metrics", "count_rule_mask", "LOCAL_REFERENCES",
    "derive_seed", "stream_seed", "rank_seed",
}  # fmt: skip
# the normaliser's counting (ict.loss.normaliser, the one ladder): an engine sums the run's
# per-row counts (`StepRun.counts`), it counts nothing of its own
NORMALISER_NAMES = {
    "row_counts", "normaliser_shares", "normaliser_counts", "local_counts", "StepCounts",
    "denominator",
}  # fmt: skip
ENGINE_PACKAGES = ("train", "integrations/trl", "integrations/verl")


def _names_used(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every imported name, bare name and attribute in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.Name):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            found.append((node.lineno, node.attr))
    return found


def test_engine_adapters_count_no_normaliser_of_their_own():
    """The native trainer's, TRL's and verl's code names none of the normaliser's counting
    functions (imported, called or as an attribute): the loss normaliser of every engine is the
    sum of the step run's per-row counts, from ict.loss.normaliser's one ladder."""
    found = [
        f"{path.relative_to(SRC)}:{line} {name}"
        for package in ENGINE_PACKAGES
        for path in sorted((SRC / package).rglob("*.py"))
        for line, name in _names_used(path)
        if name in NORMALISER_NAMES
    ]
    assert not found, found
    # the reader sees them where they are used: the step's plan counts through the one ladder
    assert "row_counts" in {n for _, n in _names_used(SRC / "step" / "plan.py")}


def test_engine_adapters_call_the_step_plan_and_plan_nothing_of_their_own():
    """The native trainer's, TRL's and verl's adapters name none of the step's rules (imported
    or called): the warm-up fit, the seeds, the single-forward decision, the selection, its
    counts and metrics are ict.step.StepPlan's and its run's (docs/engines/CONTRACT.md)."""
    found = []
    for package in ENGINE_PACKAGES:
        for path in sorted((SRC / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.ImportFrom):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.Name):
                    names = [node.id]
                elif isinstance(node, ast.Attribute):
                    names = [node.attr]
                found += [f"{path.relative_to(SRC)}:{node.lineno} {n}" for n in names
                          if n in STEP_RULES]  # fmt: skip
    assert not found, found
    for package in ENGINE_PACKAGES:  # and the rule holds where the adapters are
        assert any("StepPlan" in p.read_text() for p in (SRC / package).rglob("*.py")), package


# ---- the pages' API sketches are the code's signatures ---------------------------------------
SKETCH_BLOCK = re.compile(r"^ *```python sketch\n(?P<body>.*?)^ *```", re.M | re.S)
SKETCH_CALL = re.compile(r"^(?P<indent> *)(?P<name>\.?[A-Za-z_][\w.]*)\(")
SECTION_MODULE = re.compile(r"^## `(?P<module>ict(?:\.\w+)*)`", re.M)
SKETCHED_PAGES = ("docs/ARCHITECTURE.md", "docs/engines/CONTRACT.md")


def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [p.strip() for p in [*parts, current] if p.strip()]


def sketched_calls(page: str) -> list[tuple[str, str, list[tuple[str, str, bool]]]]:
    """(dotted name, where, [(parameter, kind, has default)]) of every call sketched at the start
    of a line of a `python sketch` block of `page`: `name(...)` (a bare name is in the module of
    the section's heading, `## \\`ict.x\\``) or `.method(...)` under the last such name."""
    text = (ROOT / page).read_text(encoding="utf-8")
    out = []
    for block in SKETCH_BLOCK.finditer(text):
        heading = [m for m in SECTION_MODULE.finditer(text) if m.start() < block.start()]
        module = heading[-1].group("module") if heading else None
        lines, owner = block.group("body").splitlines(), None
        for i, line in enumerate(lines):
            match = SKETCH_CALL.match(line)
            if not match or (match.group("indent") and not match.group("name").startswith(".")):
                continue
            name = match.group("name")
            if name.startswith("."):
                name = f"{owner}{name}"
            elif not name.startswith("ict.") and module:
                name = f"{module}.{name}"
            owner = owner if match.group("name").startswith(".") else name
            rest, depth, params = "\n".join([line[match.end() :], *lines[i + 1 :]]), 1, ""
            for ch in rest:
                depth += ch == "("
                depth -= ch == ")"
                if depth == 0:
                    break
                params += ch
            parsed, kind = [], "positional"
            for part in _split_top(params):
                if part == "*":
                    kind = "keyword"
                    continue
                star = len(part) - len(part.lstrip("*"))
                ident = re.match(r"[A-Za-z_]\w*", part.lstrip("*")).group(0)
                default = "=" in part and not star
                parsed.append((ident, ("", "*", "**")[star] or kind, default))
                kind = "keyword" if star == 1 else kind
            out.append((name, f"{page}:{block.group('body')[:0]}{name}", parsed))
    return out


def _resolve_object(dotted: str):
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def _signature_params(obj, sketched: list) -> list[tuple[str, str, bool]]:
    import inspect

    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: "positional",
        inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
        inspect.Parameter.KEYWORD_ONLY: "keyword",
        inspect.Parameter.VAR_POSITIONAL: "*",
        inspect.Parameter.VAR_KEYWORD: "**",
    }
    params = list(inspect.signature(obj).parameters.values())
    if params and params[0].name == "self" and (not sketched or sketched[0][0] != "self"):
        params = params[1:]
    return [(p.name, kinds[p.kind], p.default is not inspect.Parameter.empty) for p in params]


@pytest.mark.parametrize("page", SKETCHED_PAGES)
def test_the_api_sketches_match_the_signatures(page):
    """Every call a page sketches names a function or class of ict with exactly these parameters
    (names, order, positional or keyword-only, with or without a default)."""
    calls = sketched_calls(page)
    assert len(calls) >= 8, page  # the reader finds the sketches
    wrong = []
    for name, _, sketched in calls:
        try:
            obj = _resolve_object(name)
        except (ImportError, AttributeError):
            wrong.append(f"{name}: not in the code")
            continue
        actual = _signature_params(obj, sketched)
        if sketched != actual:
            wrong.append(f"{name}: sketched {sketched}, code {actual}")
    assert not wrong, "\n".join(wrong)
