"""math-verify's own test cases through ict's verifier: every disagreement, listed.

    python scripts/mathverify_suite.py                  # download the sdist once, run every case
    python scripts/mathverify_suite.py --limit 40 --no-download   # a quick offline subset

The test files come from math-verify's source distribution for the installed version, fetched at
run time with `pip download --no-binary :all:` into `.cache/mathverify/` (git-ignored; nothing of
it is copied into this repository). Each test function is called with its own parameters while
`parse` and `verify` are recorded, so every (gold, prediction) pair is taken with the settings
that test uses (extraction targets, boxed priority, precision, strict, set/relation comparison)
and math-verify's live verdict. Each pair then goes through `Verifier.math_equal(gold, pred)`
and `Verifier.judge_one(item, pred)` with the same settings as the item's `verifier_options`.

Prints the counts and a table of disagreements: "ict right, math-verify wrong" (must be none:
exit status 1 otherwise) and "ict wrong, math-verify right" (allowed: ict is stricter).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import inspect
import itertools
import logging
import subprocess
import sys
import tarfile
import types
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = ROOT / ".cache" / "mathverify"


@dataclass
class Case:
    """One recorded (gold, prediction) pair: where it came from, its settings, the verdicts."""

    where: str
    gold: str
    pred: str
    options: dict | None  # VerifyOptions fields; None when ict cannot express the settings
    why_not: str = ""
    mathverify: bool = False
    ict: dict[str, bool] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def sdist_tests(version: str, cache: Path, download: bool) -> Path:
    """The `tests/` folder of math-verify's sdist for `version` (downloaded into `cache`)."""
    target = cache / version
    tests = next(target.glob("math_verify-*/tests"), None) if target.exists() else None
    if tests is not None:
        return tests
    archives = sorted(target.glob("math_verify-*.tar.gz")) if target.exists() else []
    if not archives:
        if not download:
            raise SystemExit(
                f"no cached math-verify {version} sdist under {target} (--no-download)"
            )
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"math-verify=={version}",
                "-d",
                str(target),
            ],
            check=True,
        )
        archives = sorted(target.glob("math_verify-*.tar.gz"))
    with tarfile.open(archives[0]) as archive:
        archive.extractall(target, filter="data")
    tests = next(target.glob("math_verify-*/tests"), None)
    if tests is None:
        raise SystemExit(f"the math-verify {version} sdist has no tests/ folder")
    return tests


class Recorder:
    """Stand-ins for math-verify's `parse` and `verify` that record each compared pair."""

    def __init__(self):
        import math_verify

        self.real_parse, self.real_verify = math_verify.parse, math_verify.verify
        self.parse_signature = inspect.signature(self.real_parse)
        self.cases: list[Case] = []
        self.where = ""

    def parse(self, *args, **kwargs):
        bound = self.parse_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        result = _Parsed(self.real_parse(*args, **kwargs))
        result.text, result.settings = bound.arguments["pred"], dict(bound.arguments)
        return result

    def verify(self, gold, target, *args, **kwargs):
        result = self.real_verify(gold, target, *args, **kwargs)
        if isinstance(gold, _Parsed) and isinstance(target, _Parsed):
            bound = inspect.signature(self.real_verify).bind(gold, target, *args, **kwargs)
            bound.apply_defaults()
            options, why = ict_options(gold.settings, target.settings, bound.arguments)
            self.cases.append(Case(self.where, gold.text, target.text, options, why, bool(result)))
        return result


class _Parsed(list):
    text: str
    settings: dict


def ict_options(gold: dict, pred: dict, verify_args: dict) -> tuple[dict | None, str]:
    """The `VerifyOptions` fields matching math-verify's settings, or (None, why not)."""
    from latex2sympy2_extended import NormalizationConfig  # noqa: F401 - default equality below
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    def targets(settings):
        return tuple(settings["extraction_config"])

    if targets(gold) != targets(pred):
        return None, "gold and prediction parsed with different targets"
    for settings in (gold, pred):
        if (settings["fallback_mode"], settings["extraction_mode"]) != ("first_match", "any_match"):
            return None, "non-default fallback/extraction mode"
    extraction, boxed = [], 50
    for target in targets(gold):
        if (
            isinstance(target, LatexExtractionConfig)
            and target.try_extract_without_anchor
            and (target.normalization_config == LatexExtractionConfig().normalization_config)
        ):
            extraction.append("latex")
            boxed = target.boxed_match_priority
        elif isinstance(target, ExprExtractionConfig) and target.try_extract_without_anchor:
            extraction.append("expr")
        else:
            return None, f"extraction target {type(target).__name__} not expressible"
    if verify_args.get("numeric_precision", 15) != 15:
        return None, "numeric_precision"
    return {
        "precision": verify_args["float_rounding"],
        "extraction": extraction,
        "boxed_priority": boxed,
        "strict": verify_args["strict"],
        "allow_set_relation_comp": verify_args["allow_set_relation_comp"],
    }, ""


def parameter_sets(func) -> list[dict] | None:
    """Keyword arguments for each parametrized case of a test function ([{}] when it takes none);
    None when it needs fixtures or mocks."""
    if hasattr(func, "patchings"):
        return None
    grids = []
    for mark in getattr(func, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = [getattr(v, "values", v) for v in values]
        grids.append(
            [dict(zip(names, row if len(names) > 1 else [row], strict=True)) for row in rows]
        )
    kwargs = [
        dict(itertools.chain(*(p.items() for p in combo))) for combo in itertools.product(*grids)
    ]
    wanted = set(inspect.signature(func).parameters)
    return kwargs if all(set(k) == wanted for k in kwargs) else None


def collect(tests: Path) -> tuple[list[Case], int, list[str]]:
    """Run every usable test function of math-verify's suite and record its compared pairs.

    Returns the pairs, the number of test calls, and the calls that failed (math-verify's own
    failing tests; their pairs keep math-verify's live verdict)."""
    package = types.ModuleType("tests")
    package.__path__ = [str(tests)]
    sys.modules["tests"] = package
    recorder, calls, failed = Recorder(), 0, []
    for path in sorted(tests.glob("test_*.py")):
        module = importlib.import_module(f"tests.{path.stem}")
        for name in ("parse", "verify"):
            if hasattr(module, name):
                setattr(module, name, getattr(recorder, name))
        for name, func in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("test") or func.__module__ != module.__name__:
                continue
            for index, kwargs in enumerate(parameter_sets(func) or []):
                recorder.where = f"{path.stem}::{name}[{index}]"
                calls += 1
                try:
                    func(**kwargs)
                except Exception:  # noqa: BLE001 - math-verify's own failing test; verdict recorded
                    failed.append(recorder.where)
    return recorder.cases, calls, failed


def run_ict(cases: list[Case], timeout_s: float) -> None:
    """Fill `case.ict` with ict's verdicts (math_equal, judge_one) under the case's options."""
    from ict.rewards import Verifier, VerifyOptions

    verifier = Verifier(timeout_s=timeout_s)
    for case in cases:
        if case.options is None:
            continue
        options = VerifyOptions(**case.options)
        equal, error, _ = verifier.math_equal(case.gold, case.pred, options)
        item = SimpleNamespace(
            answer=case.gold, verifier="math", metadata={"verifier_options": case.options}
        )
        verdict = verifier.judge_one(item, case.pred)
        case.ict = {"math_equal": equal, "judge_one": verdict.correct}
        case.errors = [e for e in (error, verdict.error) if e]
    verifier.close()


def _cell(text: str, width: int = 70) -> str:
    text = text.replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def report(cases: list[Case], header: str) -> int:
    """Print the counts and the disagreement tables; the number of lenient disagreements."""
    usable = [c for c in cases if c.options is not None]
    print(header)
    print(
        f"checked {len(cases)} distinct pairs, {len(usable)} expressible as ict verifier "
        f"options ({len(cases) - len(usable)} not: {sorted({c.why_not for c in cases if c.why_not})})"
    )
    lenient = 0
    for api in ("math_equal", "judge_one"):
        more = [c for c in usable if c.ict[api] and not c.mathverify]
        less = [c for c in usable if not c.ict[api] and c.mathverify]
        lenient += len(more)
        print(
            f"\n{api}: agree {len(usable) - len(more) - len(less)}, "
            f"ict right & math-verify wrong {len(more)}, ict wrong & math-verify right {len(less)}"
        )
        for title, rows in (
            ("ict right, math-verify wrong", more),
            ("ict wrong, math-verify right", less),
        ):
            if not rows:
                continue
            print(
                f"\n{title} ({api}):\n\n| test | gold | prediction | ict error |\n|---|---|---|---|"
            )
            for c in rows:
                print(
                    f"| {c.where} | `{_cell(c.gold)}` | `{_cell(c.pred)}` | {_cell('; '.join(c.errors), 50)} |"
                )
    return lenient


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--no-download", action="store_true", help="use the cached sdist only")
    parser.add_argument("--limit", type=int, default=None, help="first N recorded pairs only")
    parser.add_argument("--timeout", type=float, default=10.0, help="ict's per-call time limit")
    args = parser.parse_args(argv)
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    logging.getLogger("ict.rewards").setLevel(logging.ERROR)
    version = importlib.metadata.version("math-verify")
    cases, calls, failed = collect(sdist_tests(version, args.cache_dir, not args.no_download))
    unique = list({(c.gold, c.pred, repr(c.options)): c for c in cases}.values())
    header = (
        f"math-verify {version} test suite: {calls} test calls ({len(failed)} failing in "
        f"math-verify itself{': ' + ', '.join(failed) if failed else ''}), "
        f"{len(cases)} compared pairs, {len(unique)} distinct"
    )
    if args.limit is not None:
        unique = unique[: args.limit]
    run_ict(unique, args.timeout)
    lenient = report(unique, header)
    print(
        f"\nresult: {'FAIL' if lenient else 'OK'}: {lenient} case(s) judged right by ict and wrong by math-verify"
    )
    return 1 if lenient else 0


if __name__ == "__main__":
    sys.exit(main())
