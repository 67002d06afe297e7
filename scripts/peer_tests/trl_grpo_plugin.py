"""pytest plugin that `scripts/peer_tests/trl_grpo.py` injects (`-p trl_grpo_plugin`) into a run of
TRL's own tests/test_grpo_trainer.py (exported from the TRL source into the cache).

Environment (set by the harness):
  PEER_TESTS_MODE      "trl": the tests as they are, with TRL's GRPOTrainer / GRPOConfig.
                       "ict": in the test module's namespace GRPOTrainer -> ICTGRPOTrainer and
                       GRPOConfig -> a subclass of ICTGRPOConfig whose `method` default is "grpo"
                       (every valid token selected, so TRL's own loss runs on every token).
  PEER_TESTS_MANIFEST  the stand-ins manifest (standins.json) with the local dataset files.
  PEER_TESTS_RESULTS   where to append per-test outcomes (JSON lines); tests already recorded
                       there are deselected (how the harness resumes a run).
  PEER_TESTS_TIMEOUT   seconds per test (SIGALRM; 0 = none).
  PEER_TESTS_BF16      "off" (harness default): configs that leave `bf16` unset train in fp32
                       instead of TRL's bf16 default (CPU bf16 matmuls are very slow);
                       "default": TRL's default.

Models need no patching: the harness points HF_HOME at a hub cache holding the stand-ins and
sets HF_HUB_OFFLINE=1. `datasets.load_dataset` is patched here, at plugin import (before the test
module does `from datasets import load_dataset`), to read the stand-in parquet files.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass, field

import pytest

MODE = os.environ.get("PEER_TESTS_MODE", "trl")
TEST_MODULE = "tests.test_grpo_trainer"

# nodeid prefix -> reason: tests skipped because this offline harness has no stand-in for them.
SKIPS = {
    "tests/test_grpo_trainer.py::TestGRPOTrainerVLM": (
        "offline harness: no stand-ins for vision-language models, processors or the "
        "zen-image / zen-multi-image datasets"
    ),
}


def _manifest() -> dict:
    path = os.environ.get("PEER_TESTS_MANIFEST")
    return json.loads(open(path).read()) if path else {"datasets": {}, "missing": []}


MANIFEST = _manifest()


def _patch_load_dataset():
    import datasets

    original = datasets.load_dataset

    def load_dataset(path, name=None, *args, split=None, streaming=False, **kwargs):
        local = MANIFEST["datasets"].get(path)
        if local is None:
            if path in MANIFEST.get("missing", ()):
                raise FileNotFoundError(f"offline harness: no stand-in for dataset {path!r}")
            return original(path, name, *args, split=split, streaming=streaming, **kwargs)
        if name not in local:
            raise FileNotFoundError(
                f"offline harness: stand-in {path!r} has no config {name!r} (has {sorted(local)})"
            )
        return original(
            "parquet", data_files=local[name], split=split, streaming=streaming,
            cache_dir=os.environ.get("HF_DATASETS_CACHE"),
        )  # fmt: skip

    load_dataset.__wrapped__ = original
    datasets.load_dataset = load_dataset


_patch_load_dataset()


def _compat_import_utils(test_dir: str = "tests") -> list[str]:
    """The exported tests may import `is_<pkg>_available` helpers from `trl.import_utils` that the
    installed trl does not have (the source and the installed version differ): define the missing
    ones as "is the package `<pkg>` importable" (TRL's own `_is_package_available`). Returns the
    names added (recorded in the report header)."""
    import ast
    import importlib.util
    import pathlib

    import trl.import_utils as iu

    added = []
    for path in sorted(pathlib.Path(test_dir).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "trl.import_utils":
                for alias in node.names:
                    name = alias.name
                    if hasattr(iu, name) or not (
                        name.startswith("is_") and name.endswith("_available")
                    ):
                        continue
                    pkg = name[3 : -len("_available")]
                    setattr(
                        iu,
                        name,
                        lambda *a, _pkg=pkg, **k: importlib.util.find_spec(_pkg) is not None,
                    )
                    added.append(name)
    return added


COMPAT_ADDED = _compat_import_utils()


def _cpu_fp32_by_default():
    """PEER_TESTS_BF16=off: a config whose `bf16` is left unset (None) gets False instead of TRL's
    default True. On CPU, TRL's default means bf16 autocast, whose matmuls are ~15x slower than
    fp32 on CPUs without bf16 units (the [tokens, vocab] LM-head products of a 150k vocabulary
    dominate), which makes a full run take hours. Explicit `bf16=...` values are kept."""
    if os.environ.get("PEER_TESTS_BF16", "default") != "off":
        return False
    from trl.trainer.base_config import _BaseConfig

    original = _BaseConfig.__post_init__

    def __post_init__(self):
        if self.bf16 is None and not self.fp16:
            self.bf16 = False
        original(self)

    _BaseConfig.__post_init__ = __post_init__
    return True


BF16_OFF = _cpu_fp32_by_default()


def ict_classes():
    """(ICTGRPOTrainer, the ICTGRPOConfig subclass with method="grpo"). The subclass is a global of
    this module (`trl_grpo_plugin.ICTGRPOConfigMethodGRPO`) so that pickling the training
    arguments (Trainer's training_args.bin) finds it."""
    from ict.integrations.trl import ICTGRPOConfig, ICTGRPOTrainer

    global ICTGRPOConfigMethodGRPO
    if "ICTGRPOConfigMethodGRPO" not in globals():

        @dataclass
        class ICTGRPOConfigMethodGRPO(ICTGRPOConfig):
            """ICTGRPOConfig with `method="grpo"`: every valid token trains (TRL's own loss)."""

            method: str = field(
                default="grpo", metadata={"help": "ict method (peer tests: grpo, every token)."}
            )

        globals()["ICTGRPOConfigMethodGRPO"] = ICTGRPOConfigMethodGRPO
    return ICTGRPOTrainer, ICTGRPOConfigMethodGRPO


def pytest_report_header(config):
    bf16 = "; unset bf16 -> False (fp32 on CPU)" if BF16_OFF else ""
    compat = f"; compat helpers added to trl.import_utils: {COMPAT_ADDED}" if COMPAT_ADDED else ""
    trainer = "ICTGRPOTrainer" if MODE == "ict" else "trl"
    return f"peer tests: mode={MODE} (GRPOTrainer = {trainer}){bf16}{compat}"


def _recorded() -> set[str]:
    """Node ids whose outcome PEER_TESTS_RESULTS already holds (a resumed run skips them)."""
    path = os.environ.get("PEER_TESTS_RESULTS")
    done = set()
    if path and os.path.exists(path):
        for line in open(path).read().splitlines():
            try:
                done.add(json.loads(line)["nodeid"])
            except (json.JSONDecodeError, KeyError):
                continue
    return done


def pytest_collection_modifyitems(session, config, items):
    done = _recorded()
    if done:
        kept = [item for item in items if item.nodeid not in done]
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid in done])
        items[:] = kept
    swap = ict_classes() if MODE == "ict" else None
    for item in items:
        for prefix, reason in SKIPS.items():
            if item.nodeid.startswith(prefix):
                item.add_marker(pytest.mark.skip(reason=reason))
        module = getattr(item, "module", None)
        if swap is not None and module is not None and module.__name__ == TEST_MODULE:
            if module.GRPOTrainer is not swap[0]:
                module.GRPOTrainer, module.GRPOConfig = swap


class _Timeout(Exception):
    pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    seconds = int(os.environ.get("PEER_TESTS_TIMEOUT", "0") or 0)
    if seconds <= 0:
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout(f"offline harness: test exceeded {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _summary(report) -> tuple[str, list[str]]:
    """(first line of the failure, the `E ...` lines of the traceback, at most 12)."""
    text = report.longreprtext or ""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]), []
    e_lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
    crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", None)
    first = crash or (e_lines[0] if e_lines else text.strip().splitlines()[-1:] or [""])[0]
    return str(first).splitlines()[0] if first else "", e_lines[:12]


_outcomes: dict[str, dict] = {}


def pytest_runtest_logreport(report):
    entry = _outcomes.setdefault(report.nodeid, {"outcome": None, "duration": 0.0})
    entry["duration"] += report.duration
    xfail = hasattr(report, "wasxfail")
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if report.passed:
            entry["outcome"] = "xpassed" if xfail else "passed"
        elif report.skipped:
            entry["outcome"] = "xfailed" if xfail else "skipped"
        else:
            entry["outcome"] = "failed" if report.when == "call" else "error"
        if not report.passed:
            entry["message"], entry["error_lines"] = _summary(report)
            if xfail:
                entry["xfail_reason"] = report.wasxfail
    elif report.when == "teardown" and report.failed and entry["outcome"] in (None, "passed"):
        entry["outcome"] = "error"
        entry["message"], entry["error_lines"] = _summary(report)
        entry["message"] = "teardown: " + entry["message"]
    path = os.environ.get("PEER_TESTS_RESULTS")
    if path and report.when == "teardown":
        with open(path, "a") as f:
            f.write(json.dumps({"nodeid": report.nodeid, **entry}) + "\n")
