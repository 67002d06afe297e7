#!/usr/bin/env python3
"""Run TRL's own GRPO trainer tests offline against ict, and report what differs.

    git clone https://github.com/huggingface/trl ../trl    # TRL's source (its PyPI sdist has no tests)
    export ICT_TRL_SOURCE=../trl                             # or pass --trl-source ../trl each time
    .venv/bin/python scripts/peer_tests/trl_grpo.py                    # all tests (about 4 h on 2 cores)
    .venv/bin/python scripts/peer_tests/trl_grpo.py --quick            # a handful of basic tests
    .venv/bin/python scripts/peer_tests/trl_grpo.py -k "loss_types" --out loss_types.json
    .venv/bin/python scripts/peer_tests/trl_grpo.py --resume scripts/peer_tests/.cache/runs/<stamp>
    .venv/bin/python scripts/peer_tests/trl_grpo.py --table scripts/peer_tests/.cache/runs/<stamp>
    .venv/bin/python scripts/peer_tests/trl_grpo.py --rerun-differing scripts/peer_tests/.cache/trl_grpo.json

Steps:
1. Export TRL's tests/test_grpo_trainer.py with its helpers (tests/__init__.py, conftest.py,
   testing_utils.py, testing_constants.py), pyproject.toml (pytest settings), and the generator
   scripts the stand-ins reuse (scripts/generate_zen_dataset.py, scripts/generate_tiny_models/)
   from the TRL source (`--trl-source`: a git directory or a checkout, at `--rev`) into the
   git-ignored cache `scripts/peer_tests/.cache/trl-src/<commit>/`. Nothing of TRL is copied into
   this repository.
2. Build the offline stand-ins (standins.py): tiny random models of the same architectures with
   tokenizers of the same vocabulary size and special-token ids, as a hub cache under
   `<cache>/hf`, and TRL's zen datasets as parquet files.
3. Run the tests twice, sequentially, each in its own pytest process (`-p trl_grpo_plugin`):
   (a) "trl": as they are, TRL's GRPOTrainer; (b) "ict": GRPOTrainer -> ICTGRPOTrainer and
   GRPOConfig -> ICTGRPOConfig with method="grpo" in the test module's namespace.
4. Print the table (both pass / both fail / TRL pass but ict fail / the reverse / skipped) and write
   it as JSON to `--out`.

Resumable: each test's outcome is appended to `<run dir>/<mode>.jsonl` as it finishes (run dir:
`<cache>/runs/<UTC stamp>/`, printed at start, with the arguments in `args.json`). `--resume DIR`
runs the same selection again in DIR, skipping the tests already recorded there (a test that was
running when the process stopped runs again). `--table DIR` writes the table of what DIR holds
so far, running nothing.

Environment of the pytest processes: OMP_NUM_THREADS=1, CUDA_VISIBLE_DEVICES="" (CPU),
HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1, HF_HOME=<cache>/hf.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_CACHE = HERE / ".cache"
TRL_SOURCE_ENV = "ICT_TRL_SOURCE"  # default of --trl-source
TEST_FILE = "tests/test_grpo_trainer.py"
EXPORT_PATHS = [
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/testing_utils.py",
    "tests/testing_constants.py",
    TEST_FILE,
    "pyproject.toml",
    "scripts/generate_zen_dataset.py",
    "scripts/generate_tiny_models",
]
QUICK_K = (
    "test_compute_entropy_mask_0 or test_init_minimal or test_train_dataset_format"
    " or test_train_reward_func_standard or test_train_beta_non_zero or test_train_with_eval"
)
CATEGORIES = {
    "trl_pass_ict_fail": "passing with TRL's GRPOTrainer, failing with ICTGRPOTrainer",
    "ict_pass_trl_fail": "passing with ICTGRPOTrainer, failing with TRL's GRPOTrainer",
    "both_fail": "failing with both",
    "both_pass": "passing with both",
    "skipped": "skipped / xfailed with both (reason)",
    "mixed": "other combinations (e.g. skipped in one run only, missing from a run)",
}


def log(*parts):
    print(*parts, flush=True)


# ---- 1. export ----------------------------------------------------------------------------------
def _git(source: Path, *args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(source), *args], capture_output=True, **kwargs)


def is_git(source: Path) -> bool:
    return _git(source, "rev-parse", "--git-dir").returncode == 0


def export_trl(source: Path, rev: str, cache: Path) -> tuple[Path, str]:
    """Export EXPORT_PATHS of `source` at `rev` into <cache>/trl-src/<commit>. Returns (dir, commit).
    A non-git checkout is copied as it is (commit "worktree")."""
    if is_git(source):
        res = _git(source, "rev-parse", "--verify", f"{rev}^{{commit}}", text=True)
        if res.returncode != 0:
            raise SystemExit(f"--rev {rev!r} is not a commit of {source}: {res.stderr.strip()}")
        commit = res.stdout.strip()
        dest = cache / "trl-src" / commit
        if (dest / ".complete").exists():
            return dest, commit
        paths = [
            p
            for p in EXPORT_PATHS
            if _git(source, "cat-file", "-e", f"{commit}:{p}").returncode == 0
        ]
        if TEST_FILE not in paths:
            raise SystemExit(f"{source} has no {TEST_FILE} at {commit}")
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        with tempfile.TemporaryFile() as tar:
            subprocess.run(
                ["git", "-C", str(source), "archive", commit, *paths], stdout=tar, check=True
            )
            tar.seek(0)
            with tarfile.open(fileobj=tar) as archive:
                archive.extractall(dest, filter="data")
        (dest / ".complete").write_text(commit)
        return dest, commit
    if not (source / TEST_FILE).exists():
        raise SystemExit(f"--trl-source {source} is neither a git directory nor a TRL checkout")
    if rev != "HEAD":
        log(f"warning: {source} is not a git repository, --rev {rev} ignored (copying the files)")
    dest = cache / "trl-src" / "worktree"
    shutil.rmtree(dest, ignore_errors=True)
    for p in EXPORT_PATHS:
        src = source / p
        if src.is_dir():
            shutil.copytree(src, dest / p)
        elif src.exists():
            (dest / p).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / p)
    return dest, "worktree"


# ---- 3. runs --------------------------------------------------------------------------------------
def child_env(
    cache: Path, mode: str, results: Path, timeout: int, manifest: Path, bf16: str = "off"
) -> dict:
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
        CUDA_VISIBLE_DEVICES="", HF_HOME=str(cache / "hf"), HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_CACHE=str(cache / "hf" / "datasets"),
        HF_HUB_DISABLE_TELEMETRY="1", WANDB_MODE="disabled", TRL_EXPERIMENTAL_SILENCE="1",
        PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        PEER_TESTS_MODE=mode, PEER_TESTS_RESULTS=str(results), PEER_TESTS_TIMEOUT=str(timeout),
        PEER_TESTS_MANIFEST=str(manifest), PEER_TESTS_BF16=bf16,
    )  # fmt: skip
    env.pop("PYTEST_ADDOPTS", None)
    return env


def run_mode(mode, src, cache, selection, k, timeout, python, extra, bf16, runs: Path) -> dict:
    runs.mkdir(parents=True, exist_ok=True)
    results = runs / f"{mode}.jsonl"  # appended per test; kept on --resume (the plugin skips those)
    logfile = runs / f"{mode}.log"
    cmd = [
        python, "-m", "pytest", *(selection or [TEST_FILE]), "-p", "no:cacheprovider",
        "-p", "trl_grpo_plugin", "-v", "--tb=short", "-o", "console_output_style=classic",
        f"--junitxml={runs / f'{mode}.xml'}", f"--rootdir={src}",
    ]  # fmt: skip
    if k:
        cmd += ["-k", k]
    cmd += extra
    log(f"\n=== run {mode}: {' '.join(cmd[1:])}\n    (cwd {src}; log {logfile})")
    start = time.time()
    env = child_env(cache, mode, results, timeout, cache / "standins.json", bf16)
    with open(logfile, "a", buffering=1) as out:  # line-buffered: readable while it runs
        proc = subprocess.Popen(
            cmd, cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for line in proc.stdout:
            out.write(line)
            if "::" in line and any(
                w in line for w in (" PASSED", " FAILED", " ERROR", " SKIPPED", " XFAIL", " XPASS")
            ):
                log(f"  [{mode} {time.time() - start:6.0f}s] {line.rstrip()[:160]}")
            elif line.startswith(("ERROR ", "ImportError", "E   ")) and "::" not in line:
                log(f"  [{mode}] {line.rstrip()[:200]}")
        rc = proc.wait()
    outcomes = read_outcomes(results)
    log(f"=== run {mode}: exit {rc}, {len(outcomes)} tests, {time.time() - start:.0f} s")
    if not outcomes:
        log(f"    no test outcomes; last lines of {logfile}:")
        for line in logfile.read_text().splitlines()[-25:]:
            log("    " + line)
    return {
        "exit_code": rc,
        "seconds": round(time.time() - start, 1),
        "outcomes": outcomes,
        "log": str(logfile),
    }


def read_outcomes(results: Path) -> dict:
    """{nodeid: outcome entry} of a run's JSON lines (a truncated last line, from a killed run, is
    ignored)."""
    outcomes = {}
    if results.exists():
        for line in results.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            outcomes[entry.pop("nodeid")] = entry
    return outcomes


# ---- 4. table ---------------------------------------------------------------------------------------
def _kind(entry) -> str | None:
    if entry is None:
        return None
    return {"passed": "pass", "xpassed": "pass", "failed": "fail", "error": "fail",
            "skipped": "skip", "xfailed": "skip"}.get(entry.get("outcome"))  # fmt: skip


def categorize(trl: dict, ict: dict) -> dict:
    table = {c: [] for c in CATEGORIES}
    for nodeid in sorted(set(trl) | set(ict)):
        a, b = trl.get(nodeid), ict.get(nodeid)
        ka, kb = _kind(a), _kind(b)
        row = {"test": nodeid, "trl": a, "ict": b}
        if ka == kb == "pass":
            table["both_pass"].append(row)
        elif ka == kb == "fail":
            table["both_fail"].append(row)
        elif ka == "pass" and kb == "fail":
            table["trl_pass_ict_fail"].append(row)
        elif ka == "fail" and kb == "pass":
            table["ict_pass_trl_fail"].append(row)
        elif ka == kb == "skip":
            table["skipped"].append(row)
        else:
            table["mixed"].append(row)
    return table


def _short(nodeid: str) -> str:
    return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid


def print_table(table: dict, width: int = 150):
    log("\n" + "=" * 100)
    log("TRL GRPO tests: TRL's GRPOTrainer vs ict's ICTGRPOTrainer (method='grpo')")
    for cat, title in CATEGORIES.items():
        log(f"  {len(table[cat]):4d}  {title}")
    for cat in ("trl_pass_ict_fail", "ict_pass_trl_fail", "mixed", "both_fail"):
        rows = table[cat]
        if not rows:
            continue
        log(f"\n--- {CATEGORIES[cat]} ({len(rows)})")
        for row in rows:
            log(f"  {_short(row['test'])}")
            for side in ("trl", "ict"):
                e = row[side]
                if e and _kind(e) != "pass":
                    log(f"      {side}: {e.get('outcome')}: {(e.get('message') or '')[:width]}")
    if table["skipped"]:
        log(f"\n--- {CATEGORIES['skipped']} ({len(table['skipped'])})")
        reasons: dict[str, list[str]] = {}
        for row in table["skipped"]:
            e = row["trl"] or {}
            reason = e.get("xfail_reason") or e.get("message") or ""
            reasons.setdefault(f"{e.get('outcome')}: {reason}"[:width], []).append(
                _short(row["test"])
            )
        for reason, tests in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            log(f"  {len(tests):3d} x {reason}")
            for t in tests[:6]:
                log(f"        {t}")
            if len(tests) > 6:
                log(f"        ... and {len(tests) - 6} more")
    log(f"\n--- {CATEGORIES['both_pass']} ({len(table['both_pass'])})")
    for row in table["both_pass"]:
        log(f"  {_short(row['test'])}")


def versions(python: str) -> dict:
    code = (
        "import json, platform, torch, transformers, trl, datasets, accelerate\n"
        "try:\n import ict; v = getattr(ict, '__version__', '?')\nexcept Exception as e: v = repr(e)\n"
        "print(json.dumps({'trl': trl.__version__, 'transformers': transformers.__version__,"
        " 'torch': torch.__version__, 'datasets': datasets.__version__,"
        " 'accelerate': accelerate.__version__, 'ict': v, 'python': platform.python_version()}))"
    )
    res = subprocess.run(
        [python, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": res.stderr[-2000:]}


def differing_nodeids(path: Path) -> list[str]:
    data = json.loads(Path(path).read_text())
    cats = data["table"]
    return [r["test"] for c in ("trl_pass_ict_fail", "ict_pass_trl_fail", "mixed") for r in cats[c]]


def trl_source(value: Path | None) -> Path:
    """--trl-source, else $ICT_TRL_SOURCE; one line naming both when neither is given."""
    if value is None and os.environ.get(TRL_SOURCE_ENV):
        value = Path(os.environ[TRL_SOURCE_ENV])
    if value is None:
        raise SystemExit(
            f"no TRL source: pass --trl-source DIR or set {TRL_SOURCE_ENV}=DIR, DIR a clone of "
            "https://github.com/huggingface/trl (its PyPI sdist has no tests)"
        )
    if not value.exists():
        raise SystemExit(f"TRL source {value} does not exist (--trl-source / {TRL_SOURCE_ENV})")
    return value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--trl-source", type=Path, default=None,
                   help=f"TRL git directory or checkout (default: ${TRL_SOURCE_ENV})")  # fmt: skip
    p.add_argument("--rev", default="HEAD", help="commit of --trl-source to export (default: HEAD)")
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_CACHE / "trl_grpo.json",
        help="JSON table (default: %(default)s)",
    )
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE,
        help="git-ignored cache (default: %(default)s)",
    )
    p.add_argument("--quick", action="store_true", help=f"only -k '{QUICK_K}'")
    p.add_argument(
        "-k", dest="k", default=None, help="pytest -k expression (combined with --quick by 'and')"
    )
    p.add_argument(
        "--mode", choices=("both", "trl", "ict"), default="both", help="which runs (default: both)"
    )
    p.add_argument(
        "--rerun-differing",
        type=Path,
        metavar="JSON",
        help="run only the tests that differ in an earlier --out JSON",
    )
    p.add_argument("--resume", type=Path, metavar="RUN_DIR",
                   help="continue the run in RUN_DIR with its own arguments, skipping the tests it recorded")  # fmt: skip
    p.add_argument("--table", type=Path, metavar="RUN_DIR",
                   help="write the table of what RUN_DIR holds so far (to --out), running nothing")  # fmt: skip
    p.add_argument(
        "--timeout", type=int, default=900, help="seconds per test, 0 = none (default: %(default)s)"
    )
    p.add_argument("--rebuild", action="store_true", help="rebuild the stand-ins")
    p.add_argument(
        "--bf16",
        choices=("off", "default"),
        default="off",
        help="off (default): configs leaving bf16 unset train in fp32, CPU bf16 matmuls being ~15x slower; "
        "default: TRL's default (bf16 autocast on CPU too)",
    )
    p.add_argument(
        "--parallel",
        action="store_true",
        help="run the trl and ict passes at the same time (two processes; default: one after the other)",
    )
    p.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter with trl, ict and pytest (default: this one)",
    )
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = p.parse_args(argv)

    saved_from = args.resume or args.table
    if saved_from is not None:
        saved = Path(saved_from) / "args.json"
        if not saved.exists():
            raise SystemExit(f"{saved_from} is not a run directory of this script (no args.json)")
        keep = {"out": args.out, "python": args.python, "resume": args.resume, "table": args.table}
        for key, value in json.loads(saved.read_text()).items():
            setattr(
                args,
                key,
                Path(value)
                if key in ("trl_source", "cache_dir", "rerun_differing") and value
                else value,
            )
        vars(args).update(keep)
    args.trl_source = trl_source(args.trl_source)

    cache = args.cache_dir.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now(_dt.timezone.utc)
    log(f"exporting {TEST_FILE} from {args.trl_source} at {args.rev}")
    src, commit = export_trl(args.trl_source, args.rev, cache)
    log(f"  -> {src}")

    log("building offline stand-ins (cached)")
    build = subprocess.run(
        [args.python, "-c", "import sys, standins; from pathlib import Path; "
         f"standins.build_all(Path({str(cache)!r}), Path({str(src)!r}), force={args.rebuild})"],
        cwd=HERE, env=child_env(cache, "build", cache / "build.jsonl", 0, cache / "standins.json"),
        capture_output=True, text=True,
    )  # fmt: skip
    if build.returncode != 0:
        log(build.stdout[-3000:], build.stderr[-5000:])
        raise SystemExit("building the stand-ins failed")
    manifest = json.loads((cache / "standins.json").read_text())

    k = args.k
    if args.quick:
        k = f"({QUICK_K}) and ({k})" if k else QUICK_K
    selection = None
    if args.rerun_differing:
        selection = differing_nodeids(args.rerun_differing)
        if not selection:
            log("no differing tests in " + str(args.rerun_differing))
            return 0

    modes = ("trl", "ict") if args.mode == "both" else (args.mode,)
    runs_dir = (
        Path(saved_from).resolve()
        if saved_from
        else cache / "runs" / started.strftime("%Y%m%dT%H%M%S")
    )
    runs_dir.mkdir(parents=True, exist_ok=True)
    if saved_from is None:
        saved = {key: str(v) if isinstance(v, Path) else v for key, v in vars(args).items()
                 if key not in ("out", "python", "resume", "table", "rebuild")}  # fmt: skip
        (runs_dir / "args.json").write_text(json.dumps(saved, indent=1))
    log(f"run directory {runs_dir} (resume: {sys.argv[0]} --resume {runs_dir})")
    run_args = (
        src,
        cache,
        selection,
        k,
        args.timeout,
        args.python,
        args.pytest_args,
        args.bf16,
        runs_dir,
    )
    runs = {}
    if args.table is not None:
        for mode in modes:
            log_path = runs_dir / f"{mode}.log"
            runs[mode] = {"exit_code": None, "seconds": None, "log": str(log_path),
                          "outcomes": read_outcomes(runs_dir / f"{mode}.jsonl")}  # fmt: skip
    elif args.parallel and len(modes) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(modes)) as pool:
            futures = {m: pool.submit(run_mode, m, *run_args) for m in modes}
            runs = {m: f.result() for m, f in futures.items()}
    else:
        for mode in modes:
            runs[mode] = run_mode(mode, *run_args)
    table = categorize(
        runs.get("trl", {}).get("outcomes", {}), runs.get("ict", {}).get("outcomes", {})
    )
    if args.mode == "both":
        print_table(table)
    result = {
        "date": started.isoformat(timespec="seconds"),
        "run_dir": str(runs_dir),
        "trl_source": str(args.trl_source),
        "rev": args.rev,
        "commit": commit,
        "trl_source_version": _source_version(args.trl_source, commit),
        "installed": versions(args.python),
        "platform": platform.platform(),
        "selection": {
            "k": k,
            "quick": args.quick,
            "nodeids": selection,
            "pytest_args": args.pytest_args,
        },
        "bf16": args.bf16,
        "ict_config": "ICTGRPOConfig subclass, method='grpo' (every valid token)",
        "standins": {
            "models": manifest["models"],
            "datasets": {r: sorted(c) for r, c in manifest["datasets"].items()},
            "missing": manifest["missing"],
        },  # fmt: skip
        "runs": {m: {k2: v for k2, v in r.items() if k2 != "outcomes"} for m, r in runs.items()},
        "counts": {c: len(v) for c, v in table.items()},
        "recorded": {m: len(r.get("outcomes", {})) for m, r in runs.items()},
        "table": table,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    log(f"\ncounts: {result['counts']}\nrecorded: {result['recorded']}\nwritten {args.out}")
    return 0


def _source_version(source: Path, commit: str) -> str | None:
    """`__version__` of trl/__init__.py or VERSION at the exported commit, if readable."""
    if commit == "worktree" or not is_git(source):
        return None
    for path in ("VERSION", "trl/VERSION"):
        res = _git(source, "show", f"{commit}:{path}", text=True)
        if res.returncode == 0:
            return res.stdout.strip()
    return None


if __name__ == "__main__":
    sys.exit(main())
