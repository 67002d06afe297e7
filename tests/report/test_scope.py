"""The report's scope (ict.report.scope): stated first from the runs, kept by a re-render, and
the check that fails a text stating a verdict without it."""

import json
import shutil

import pytest
import yaml

from ict.evidence.endpoints import declare
from ict.report.comparison import build_report
from ict.report.rerender import rerender
from ict.report.scope import FIXED, scope_line, scope_problems, scope_rows

from .helpers import write_run

LR = {"grpo": 2e-5, "ict": 6.35e-6}
ENDPOINTS = declare(["ict-grpo@pass@4"], source="the test")


def grid(root, warm: str, seeds, lr=LR):
    """Runs in ROOT/runs of a grid whose warm start is cached as toy-cot/WARM."""
    root.mkdir(parents=True)
    (root / "warm_start.json").write_text(json.dumps({"path": f"/cache/ict/toy-cot/{warm}"}))
    runs = []
    for method, rate in lr.items():
        for s in seeds:
            correct = [4] * (10 + s + 3 * (method == "grpo")) + [0] * (10 - s)
            run = write_run(root / "runs", method, s, correct=correct)
            config = yaml.safe_load((run / "config.yaml").read_text())
            (run / "config.yaml").write_text(yaml.safe_dump({**config, "learning_rate": rate}))
            runs.append(run)
    return runs


@pytest.fixture(scope="module")
def two_warm_starts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scope")
    runs = grid(tmp / "warm0", "aaa", [0, 1, 2]) + grid(tmp / "warm1", "bbb", [3, 4, 5])
    build_report(runs, tmp / "report", endpoints=ENDPOINTS)
    return runs, tmp / "report"


def test_a_report_states_its_scope_first_from_the_runs(two_warm_starts):
    _, report = two_warm_starts
    md = (report / "report.md").read_text()
    scope = json.loads((report / "report.json").read_text())["scope"]
    assert scope["initialisations"].startswith(
        "2 supervised warm starts (toy-cot/aaa for seeds 0-2; toy-cot/bbb for seeds 3-5)"
    )
    assert "not about the method over initialisations" in scope["initialisations"]
    assert scope["learning rate"] == "grpo 2e-05; ict 6.35e-06"
    assert scope["learning rate chosen by"] == FIXED  # no tuning record, no caller's words
    assert md.index("## Scope") < md.index("## Declared endpoints") < md.index("## Answer")
    assert scope_line("learning rate", "grpo 2e-05; ict 6.35e-06") in md
    assert scope_problems(md) == []  # it states verdicts, and its scope before them
    assert "**lower (primary)**" in md or "**higher (primary)**" in md


def test_the_rate_choice_comes_from_the_tuning_record_or_the_caller(two_warm_starts):
    runs, _ = two_warm_starts
    from ict.report.runs import load_run

    loaded = [load_run(r) for r in runs[:3]]  # grpo, one warm start, one rate
    rule = {
        "param": "learning_rate", "seeds": [1000, 1001], "mode": "per_method",
        "name": "smallest_within", "metric": ["pass@1"], "text": "the smallest within 0.02",
    }  # fmt: skip
    rows = dict(scope_rows(loaded, tuning={"rule": rule}))
    assert rows["initialisations"].startswith("1 supervised warm start (toy-cot/aaa for seeds")
    assert rows["learning rate"] == "2e-05 for every method"
    assert rows["learning rate chosen by"].startswith("the grid's tuning stage: Each method's")
    assert "the smallest within 0.02" in rows["learning rate chosen by"]
    said = dict(scope_rows(loaded, tuning={"rule": rule}, lr_choice="the pilot's rule"))
    assert said["learning rate chosen by"] == "the pilot's rule"


def test_a_start_model_without_warm_start_is_named(tmp_path):
    run = write_run(tmp_path / "runs", "grpo", 0)
    (run / "config.yaml").write_text(
        yaml.safe_dump({"model": {"model": "HuggingFaceTB/SmolLM2-135M-Instruct"},
                        "optim": {"learning_rate": 2e-5}, "method": {"method": "grpo"}})
    )  # fmt: skip
    from ict.report.runs import load_run

    rows = dict(scope_rows([load_run(run)]))
    assert rows["initialisations"].startswith(
        "1 start model (HuggingFaceTB/SmolLM2-135M-Instruct): every verdict is about this"
    )
    assert rows["learning rate"] == "2e-05 for every method"
    (run / "config.yaml").write_text(yaml.safe_dump({"model": {"model": None}}))
    assert dict(scope_rows([load_run(run)]))["initialisations"].startswith(
        "1 start model (`ict train`'s default model (config model: null))"
    )


def test_the_check_fails_a_verdict_without_its_scope(two_warm_starts):
    _, report = two_warm_starts
    md = (report / "report.md").read_text()
    bare = "\n".join(line for line in md.split("\n") if not line.startswith("**Scope - "))
    (problem,) = scope_problems(bare)
    assert problem.startswith("states a verdict (line ") and "but no scope" in problem
    no_rule = md.replace("**Scope - learning rate chosen by**:", "**Scope - chosen**:")
    assert scope_problems(no_rule) == [
        f"the scope (line {md.split(chr(10)).index('## Scope') + 5}) does not state "
        "'learning rate chosen by'"
    ]
    late = bare + "\n" + "\n".join(line for line in md.split("\n") if line.startswith("**Scope"))
    (problem,) = scope_problems(late)
    assert "comes after the first verdict" in problem
    wordy = "\n".join(
        "**Scope - initialisations**: the warm starts"
        if line.startswith("**Scope - init")
        else line
        for line in md.split("\n")
    )
    (problem,) = scope_problems(wordy)
    assert "'initialisations' names no number" in problem


def test_prose_bullets_count_and_the_verdict_rule_is_not_a_verdict():
    rule = "**Verdict rule**: **higher** / **lower** only when the seed-level test passes"
    assert scope_problems(rule + "\n\nICT - GRPO: inconclusive (p 0.4).") == []
    prose = "\n".join(
        [
            "- **Scope - initialisations**: 2 warm starts",
            "- **Scope - learning rate**: 6.3e-5 shared",
            "- **Scope - learning rate chosen by**: the pilot's rule on ICT's pass@1",
            "- ICT - GRPO at pass@32: **lower** (-0.066)",
        ]
    )
    assert scope_problems(prose) == []
    assert scope_problems(prose.replace("6.3e-5 shared", "not recorded")) == [
        "the scope (line 1) does not state 'learning rate'"
    ]


def test_a_rerender_keeps_the_scope_first(two_warm_starts, tmp_path):
    _, report = two_warm_starts
    copy = tmp_path / "report"
    shutil.copytree(report, copy)
    md = rerender(copy, ENDPOINTS).read_text()
    assert md.index("## Scope") < md.index("## Declared endpoints") < md.index("## Answer")
    assert md.count("## Scope") == 1 and scope_problems(md) == []
