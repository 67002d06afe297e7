"""The documentation's code blocks, as the snippet test runs them.

A fenced block's info string is its language and, after it, marks: ```bash gpu, ```python sketch.

Run: `python` blocks (one subprocess each) and `bash` / `sh` / `shell` blocks (each command in
turn). Not run, and so explicitly marked in the docs:
    gpu      needs a GPU (launch scripts, vLLM, the paper's full grid)
    setup    installs or builds an environment (make, pip, venv); `make test` itself does that
    network  downloads from the Hub or the internet (datasets, a TRL clone)
    sketch   an API outline or excerpt, not a program
    bench    a measurement command (benchmarks/*.py), run by `make bench`
Run only by `make test-slow` (pytest -m slow), with the same tiny settings:
    slow     minutes even with tiny settings (a supervised warm start, the embedded SmolLM2)
Other languages (text, yaml, json, ...) are not code to run; a block with no info string must
not start with a command (the test asks for a label).

Tiny settings. Commands run as written except: every `ict train|eval|compare|inspect` gets the
flags of TINY_FLAGS (a flag already there takes the tiny value); an `ict train` or `ict eval`
command that names no model (the embedded SmolLM2's) gets a tiny offline model
(ict.testing.save_tiny_model) for speed. A model a block names is never swapped: a block that
names a Hub model id (`Qwen/...`) needs the hub and must be marked `network`, and Python blocks
run exactly as written (the README's TRL block trains the embedded SmolLM2). The placeholders of PLACEHOLDERS
(`runs/<run>`, `runs/my-run`, `CKPT`, ...) by tiny run directories; `--data-dir data/` by the
benchmark fixtures shipped with ict; a path of this repository (examples/, scripts/, src/) by its
absolute path (commands run in a temporary directory), and so are the relative entries of a
`PYTHONPATH=...` prefix.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN_LANGUAGES = {
    "python": "python",
    "py": "python",
    "bash": "shell",
    "sh": "shell",
    "shell": "shell",
}
SKIP_MARKS = {"gpu", "setup", "network", "sketch", "bench"}
MARKS = SKIP_MARKS | {"slow"}
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S
)
COMMAND_START = re.compile(
    r"^\s*(ict|python3?|make|pip|bash|accelerate|OMP_NUM_THREADS=\S+ python)(\s|$)"
)
HUB_ID = re.compile(r"\b(Qwen|HuggingFaceTB|meta-llama|mistralai|google|microsoft)/[\w.\-]+")


def doc_files() -> list[Path]:
    """README.md, docs/*.md and docs/engines/*.md (not the generated reports)."""
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "docs" / "engines").glob("*.md")),
    ]


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str  # the first word of the info string ("" when none)
    marks: set[str] = field(default_factory=set)
    body: str = ""

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"

    @property
    def kind(self) -> str | None:
        """ "python" or "shell" for code this test runs, else None."""
        return RUN_LANGUAGES.get(self.language)


def blocks(paths=None) -> list[Block]:
    found = []
    for path in paths or doc_files():
        text = path.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            words = m["info"].split()
            body = "\n".join(line[len(m["indent"]) :] for line in m["body"].splitlines())
            found.append(
                Block(
                    path,
                    text.count("\n", 0, m.start()) + 1,
                    words[0].lower() if words else "",
                    set(words[1:]),
                    body,
                )
            )
    return found


def commands(body: str) -> list[str]:
    """The shell commands of a block: continuation lines joined, a quoted argument may span lines,
    comments and blanks dropped."""
    out, pending = [], ""
    for line in re.sub(r"\\\n\s*", " ", body).splitlines():
        pending = f"{pending}\n{line}" if pending else line
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the argument goes on on the next line
            continue
        if words:
            out.append(pending)
        pending = ""
    if pending:
        raise ValueError(f"unterminated quote in: {pending}")
    return out


# ---- tiny settings ---------------------------------------------------------------------------------
# flag -> value (None: a switch); a flag already in the command takes this value
TINY_FLAGS = {
    "train": {
        "--max-steps": "1", "--prompts-per-step": "2", "--num-generations": "2",
        "--max-new-tokens": "4", "--eval-size": "2", "--eval-num-samples": "1",
        "--log-samples-every": "1", "--no-plots": None, "--no-progress": None,
    },
    "eval": {"--limit": "2", "--n": "4", "--k": "1,4", "--max-new-tokens": "4"},
    "compare": {"--steps": "1", "--seeds": "1", "--methods": "grpo,ict"},
    "inspect": {"--max-new-tokens": "4", "--no-terminal": None, "--step": "1"},  # the runs' step
}  # fmt: skip
ICT = "ict"  # tiny_argv's first word for an ict command: the driver calls ict.cli.main in-process
DRIVER = """\
import json, os, subprocess, sys, time
from ict.cli import main
for argv, env in json.load(open(sys.argv[1])):
    start = time.perf_counter()
    print(f"$ {' '.join(argv)}", file=sys.stderr, flush=True)
    if argv[0] == "ict":
        os.environ.update(env)
        try:
            code = main(argv[1:])
        except SystemExit as exit:
            code = exit.code
    else:
        code = subprocess.run(argv, env={**os.environ, **env}).returncode
    print(f"rc={code} ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    if code:
        sys.exit(f"command failed (exit {code}): {' '.join(argv)}")
"""
PLACEHOLDERS = (
    "runs/<run>",
    "runs/<default run>",
    "runs/my-run",
    "runs/my_run",
    "CKPT",
    "runs/a",
    "runs/b",
    "runs/c",
)


def _set_flag(words: list[str], flag: str, value: str | None) -> list[str]:
    if flag in words:
        i = words.index(flag)
        if value is not None and i + 1 < len(words):
            words[i + 1] = value
        return words
    for i, word in enumerate(words):  # --flag=value
        if word.startswith(flag + "="):
            words[i] = f"{flag}={value}" if value is not None else flag
            return words
    return words + ([flag] if value is None else [flag, value])


def tiny_argv(
    command: str,
    *,
    python: str,
    tiny_model: str,
    runs: dict[str, str],
    out_dir: Path,
    fixtures: str,
) -> tuple[list[str], dict]:
    """(argv, extra env) of one documented shell command with the tiny settings."""
    words = shlex.split(command, comments=True)
    env = {}
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        key, value = words.pop(0).split("=", 1)
        if key == "PYTHONPATH":  # relative entries name the repository's folders (src, .)
            value = os.pathsep.join(str((ROOT / v).resolve()) for v in value.split(os.pathsep) if v)
        env[key] = value
    words = [runs.get(w, w) for w in words]
    words = [
        str(ROOT / w) if "/" in w and not w.startswith("-") and (ROOT / w).exists() else w
        for w in words
    ]
    if "--data-dir" in words:
        i = words.index("--data-dir")
        if words[i + 1].rstrip("/") == "data":
            words[i + 1] = fixtures
    if words[0] == "ict":
        sub = words[1] if len(words) > 1 else ""
        words = [ICT, *words[1:]]
        flags = {} if sub == "compare" and "--runs" in words else TINY_FLAGS.get(sub, {})
        for flag, value in flags.items():
            if sub == "train" and "--resume" in words and flag == "--max-steps":
                value = "2"  # continue the 1-step run one step
            words = _set_flag(words, flag, value)
        resuming = "--resume" in words
        if sub == "train" and not resuming:
            words = _set_flag(words, "--output-dir", str(out_dir / "train"))
            if "--model" not in words and "--config" not in words:
                words = _set_flag(words, "--model", tiny_model)
        if sub == "eval":
            if "--model" not in words:
                words = _set_flag(words, "--model", tiny_model)
            words = _set_flag(words, "--out", str(out_dir / "eval"))
        if sub == "compare" and "--runs" not in words:
            words = _set_flag(words, "--out", str(out_dir / "compare"))
        if sub == "compare" and "--runs" in words:
            words = _set_flag(words, "--out", str(out_dir / "report"))
        if sub == "inspect":
            words = _set_flag(words, "--html", str(out_dir / "token_map.html"))
    elif words[0] in ("python", "python3"):
        words = [python, *words[1:]]
    return words, env
