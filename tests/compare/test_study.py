"""A study as data (ict.compare.study): its stages run from a preset's `study` mapping on
synthetic cells, its report sections (ict.report.sections) on synthetic grids, the token-KL grid
metric (ict.compare.grid_metrics) against torch.distributions, and a new study made of a preset
plus one registered rule and one section."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from report.helpers import write_run

from ict.compare import pilot as pilot_rules
from ict.compare.grid_metrics import GRID_METRICS, token_kl
from ict.compare.presets import get_preset
from ict.compare.study import STAGES, StudySpec, run_stage, study_of
from ict.errors import ConfigError
from ict.report import sections
from ict.report.sections import MetricView, StudyView
from ict.train.evaluation import step_eval_path

FALLING = [1.0, 0.9, 0.8, 0.7, 0.5, 0.4, 0.3, 0.2]  # 8 steps: W = 4, ratio 0.35 / 0.85
PRESET = "toy-cot-explore"


def _grid(root: Path, rates: dict, seeds, *, n: int, start: dict, entropy=None, block="A"):
    rng = np.random.default_rng(len(str(root)))
    (root / "runs").mkdir(parents=True, exist_ok=True)
    (root / "warm_start.json").write_text(json.dumps({"path": f"/cache/toy/{block}"}))
    (root / "start_eval.json").write_text(json.dumps({"benchmarks": {"toy": start}}))
    groups = {}
    for seed in seeds:
        for method, rate in rates.items():
            correct = rng.binomial(n, rate, 30).tolist()
            h = (entropy or {}).get(method)
            extra = {"format_rate": 1.0 if method == "grpo" else 0.5}
            run = write_run(root / "runs", method, seed, steps=8, correct=correct, n=n,
                            entropy=h, extra=extra)  # fmt: skip
            groups.setdefault(method, []).append(run)
    return groups


def _view(tmp_path, cells, **fields):
    spec = get_preset(PRESET).study
    return StudyView(
        name="demo", command="ict compare --preset demo --stage", out=tmp_path,
        methods=["grpo", "ict", "random_sequence"], cells=cells, declared_seeds=8, blocks=2,
        settings={**spec, "secondary": {**spec["secondary"]}}, **fields,
    )  # fmt: skip


def test_secondary_section_states_the_declared_endpoints(tmp_path):
    rates = {"grpo": 0.6, "ict": 0.3, "random_sequence": 0.45}
    start = {"pass@1": 0.3, "pass@4": 0.7}
    dirs = _grid(tmp_path / "w0", rates, range(0, 4), n=4, start=start, block="A")
    more = _grid(tmp_path / "w1", rates, range(4, 8), n=4, start=start, block="B")
    cells = {s: [(dirs if s < 4 else more)[m][s % 4] for m in rates] for s in range(8)}
    for i, run in enumerate(dirs["ict"] + more["ict"]):  # the metric's files, on ICT's runs only
        (run / "kl_to_start.json").write_text(json.dumps({"kl_mean_nats": 0.01 * (i + 1)}))
    kl = MetricView("kl_to_start", "kl_mean_nats", "Mean token KL", "Its words.", 4)
    md = sections.SECTIONS["secondary"].write(_view(tmp_path, cells, metrics=[kl]), tmp_path)
    md = md.read_text()
    raw = json.loads((tmp_path / "secondary.json").read_text())
    ni = raw["pass1_non_inferiority"]
    assert (
        ni["verdict"] == "inferior" and ni["seed_level"]["test"] == "paired t, 2 blocks, Welch df"
    )
    assert f"{ni['margin']:.3f}" in md and "**inferior**" in md
    assert raw["pass4"]["ict-grpo"]["verdict"] == "lower"
    assert set(raw["entropy_ratio"]["mean"]) == set(rates)
    assert raw["kl_to_start"]["mean"] == {"ict": pytest.approx(0.045)}  # 0.01..0.08
    assert "## Mean token KL\n\nIts words." in md and "| ict | 8 | 0.0450 [" in md
    assert "## pass@4 (the paper's headline k), two-sided" in md
    assert "(`ict compare --preset demo --stage report`)" in md


def test_token_kl_is_the_mean_categorical_kl_over_response_tokens():
    import torch
    from torch.distributions import Categorical, kl_divergence

    from ict.generation import generate
    from ict.testing import tiny_model_and_tokenizer

    policy, tok = tiny_model_and_tokenizer()
    start, _ = tiny_model_and_tokenizer()
    with torch.no_grad():
        for p in start.parameters():
            p.add_(0.05 * torch.randn_like(p))
    rollout = generate(policy, tok, ["1+1=", "2+3="], num_samples=3, temperature=1.5,
                       max_new_tokens=5, seed=0)  # fmt: skip
    kl, tokens = token_kl(policy, start, rollout, 1.5)
    same, _ = token_kl(policy, policy, rollout, 1.5)
    ids, attn = rollout.input_ids, rollout.attention_mask
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        a = policy(ids, attention_mask=attn, position_ids=pos).logits[:, :-1] / 1.5
        b = start(ids, attention_mask=attn, position_ids=pos).logits[:, :-1] / 1.5
    ref = kl_divergence(Categorical(logits=a), Categorical(logits=b))[rollout.response_mask[:, 1:]]
    assert tokens == int(rollout.response_mask.sum()) and tokens == ref.numel()
    assert kl == pytest.approx(float(ref.mean()), rel=1e-4) and kl > 0
    assert same == pytest.approx(0.0, abs=1e-6)


def test_companion_section_describes_each_arm_and_says_partial(tmp_path):
    root = tmp_path / "companion"
    start = {"problems": 30, "n": 16, "pass@1": 0.3, "pass@16": 0.8, "format_rate": 0.6}
    entropy = {"grpo": FALLING, "ict": [0.5] * 8, "random_sequence": [0.5] * 8}
    rates = {"grpo": 0.6, "ict": 0.4, "random_sequence": 0.4}
    _grid(root, rates, range(2), n=16, start=start, entropy=entropy)
    study = study_of(get_preset(PRESET), tmp_path)
    companion = study.view().companion
    assert companion["seeds"] == 6 and companion["ks"] == [1, 2, 4, 8, 16]
    view = _view(tmp_path, {}, companion=companion)
    md = sections.SECTIONS["companion"].write(view, tmp_path / "dest").read_text()
    assert (
        "PARTIAL: 2 of 6 seeds" in md and "seeds 0, 1; held-out evaluation 30 problems x 16" in md
    )
    rows = {
        line.split(" | ")[0].strip("| "): line for line in md.splitlines() if line.startswith("| ")
    }
    assert "0.600 | 0.300 | 0.800" in rows["start model"]
    assert "entropy ratio (last 4 / first 4 steps)" in md
    assert rows["grpo"].split(" | ")[2].startswith(f"{0.35 / 0.85:.3f}")
    assert rows["ict"].split(" | ")[2].startswith("1.000")
    assert "0 of 2 reached it" in rows["ict"] and "2 of 2 reached it" in rows["grpo"]
    assert (tmp_path / "dest" / "companion" / "report.md").is_file()
    empty = dataclasses.replace(view, companion={**companion, "root": tmp_path / "nothing"})
    assert sections.SECTIONS["companion"].write(empty, tmp_path / "d2") is None


def test_the_companion_preset_is_smollm_with_the_declared_changes(tmp_path):
    base = get_preset("smollm")
    comp = study_of(get_preset(PRESET), tmp_path).companion_preset()
    assert comp.name == "smollm-companion" and comp.methods == ["grpo", "ict", "random_sequence"]
    assert (comp.seeds, comp.primary, comp.eval.size, comp.eval.n) == (6, [], 64, 16)
    assert comp.train == {**base.train, "max_steps": 8, "save_every": 4, "log_samples_every": 4}
    assert comp.method_train == {m: {"dense_warmup_steps": 1} for m in ("ict", "random_sequence")}


# ---- the stages on synthetic pilot cells ------------------------------------------------------
def _result(step, p1, p32, bench="toy:cot"):
    return {"step": step, "benchmarks": {bench: {"pass@1": p1, "pass@32": p32}}}


def _write_pilot(study, curves):
    """Each pilot cell's evaluation files, from {(method, pool, lr): [(p1, p32) at 0, 50, ...]}."""
    for key, cell in study.pilot_cells().items():
        points = curves.get(key, [(0.4, 0.95), (0.41, 0.95), (0.42, 0.95)])
        d = cell.run_dir
        d.mkdir(parents=True)
        (d / "heldout_before.json").write_text(json.dumps(_result(0, *points[0])))
        for i, (p1, p32) in enumerate(points[1:], start=1):
            path = step_eval_path(d, 50 * i)
            path.parent.mkdir(exist_ok=True)
            path.write_text(json.dumps(_result(50 * i, p1, p32)))
        (d / "final_eval.json").write_text(json.dumps(_result(50 * (len(points) - 1), *points[-1])))


def test_decide_then_test_grid_then_pilot_section(tmp_path):
    """decide applies the declared rule to the pilot cells' files; the test grid of a block runs
    at its choice; the pilot section reports it."""
    preset = get_preset(PRESET)
    study = study_of(preset, tmp_path / "out", tmp_path / "dest", log=lambda line: None)
    with pytest.raises(ConfigError, match="is not done: run the pilot stage first"):
        run_stage(preset, "decide", study.out)
    narrow = [(0.4, 0.95), (0.42, 0.93), (0.43, 0.89)]  # pass@32 -0.06 at step 100, pass@1 up
    _write_pilot(study, {("grpo", "full", 6.3e-5): narrow})
    choice = run_stage(preset, "decide", study.out, log=lambda line: None)
    assert (choice.pool, choice.lr, choice.horizon) == ("full", 6.3e-5, 100)
    record = json.loads((study.out / "pilot_choice.json").read_text())
    assert record["choice"] == choice.as_dict() and len(record["cells"]) == 12
    preset_b, grid, target, cells = study.test_grid(1)
    assert target == study.out / "test-warm1" and preset_b.warm.seed == 1
    assert grid.seeds == list(range(10, 20)) and len(cells) == 30
    assert {c.config.learning_rate for c in cells} == {6.3e-5}
    assert {c.config.max_steps for c in cells} == {100}
    md = sections.SECTIONS["pilot"].write(study.view(), study.dest).read_text()
    assert f"**{choice.reason}**." in md and "ran in full: 12 cells" in md
    assert (
        "| grpo | full | 6.3e-05 | 0.400 -> 0.430 | 0.420 | 0.950 -> 0.890 | 0.890 | narrows at step 100 |"
        in md
    )
    assert (study.dest / "pilot" / "plots" / "frontier.png").is_file()
    assert study.finished_cells() == {}  # no test cell done: the comparison sections wait
    assert sections.SECTIONS["comparison"].write(study.view(), study.dest) is None


def test_stages_refuse_what_the_study_does_not_declare(tmp_path):
    preset = get_preset(PRESET)
    with pytest.raises(ConfigError, match="unknown study stage 'nope'; choose one of pilot"):
        run_stage(preset, "nope", tmp_path)
    with pytest.raises(ConfigError, match="--block belongs to the stages test, retest, metrics"):
        run_stage(preset, "report", tmp_path, block=1)
    with pytest.raises(ConfigError, match="preset toy declares no study"):
        run_stage(get_preset("toy"), "report", tmp_path)
    bare = dataclasses.replace(preset, study={"report": ["comparison"]})
    with pytest.raises(ConfigError, match="declares no pilot: stage decide has nothing"):
        run_stage(bare, "decide", tmp_path)
    with pytest.raises(ConfigError, match="no .*pilot_choice.json: run the decide stage"):
        study_of(preset, tmp_path).test_grid(0)
    for values, match in (
        ({"report": ["nope"]}, "report section 'nope' is not registered"),
        ({"metrics": {"nope": {}}}, "grid metric 'nope' is not registered"),
        ({"stages": []}, r"unknown study keys \['stages'\]"),
    ):
        with pytest.raises(ConfigError, match=match):
            StudySpec.from_values("demo", values)
    assert list(STAGES) == ["pilot", "decide", "test", "retest", "metrics", "companion", "report"]
    assert list(GRID_METRICS) == ["kl_to_start"]


def test_a_new_study_is_a_preset_plus_one_rule_and_one_section(tmp_path, monkeypatch):
    """A study declaring its own pilot rule and report section, both registered from outside the
    library, runs through the same stages."""
    monkeypatch.setitem(pilot_rules.PILOT_RULES, "first_pool", pilot_rules.PilotRule(
        "first_pool",
        lambda curves, spec: pilot_rules.PilotChoice(
            spec.pool_order[0], min(spec.values), 50, "the first pool, smallest lr", {}
        ),
        lambda method, curve, spec: "-",
        "Always the first pool at the smallest value.",
    ))  # fmt: skip
    seen = []
    monkeypatch.setitem(sections.SECTIONS, "choice_line", sections.Section(
        "choice_line", lambda study, dest: seen.append(study.pilot.record["choice"]), "one line"
    ))  # fmt: skip
    base = get_preset(PRESET)
    values = {**base.study, "pilot": {**base.study["pilot"], "rule": "first_pool"},
              "report": ["choice_line"]}  # fmt: skip
    preset = dataclasses.replace(base, name="demo", study=values)
    study = study_of(preset, tmp_path)
    _write_pilot(study, {})
    choice = run_stage(preset, "decide", tmp_path, log=lambda line: None)
    assert (choice.pool, choice.lr, choice.horizon) == ("full", 2e-5, 50)
    run_stage(preset, "report", tmp_path, log=lambda line: None)
    assert seen == [choice.as_dict()]


def test_a_screen_rule_reads_the_test_cells(tmp_path, monkeypatch):
    """A rule with reads="test" (a narrowing screen on a GRPO-only grid) is checked on the finished
    test cells' periodic evaluations, at its declared k; the test grid needs no choice."""
    seen = {}

    def screen(curves, spec):
        seen.update(curves)
        drops = [c[0].pass32 - min(p.pass32 for p in c[1:]) for c in curves.values()]
        return pilot_rules.PilotChoice(None, None, None, f"largest drop {max(drops):.2f}", {})

    monkeypatch.setitem(pilot_rules.PILOT_RULES, "screen", pilot_rules.PilotRule(
        "screen", screen, lambda method, curve, spec: "-", "The largest pass@k drop.", reads="test"
    ))  # fmt: skip
    base = get_preset(PRESET)
    study_values = {"blocks": 1, "pilot": {"metric": [1, 256], "rule": "screen"}, "report": []}
    preset = dataclasses.replace(base, methods=["grpo"], seeds=2, study=study_values)
    _, grid, target, cells = study_of(preset, tmp_path).test_grid(0)  # no pilot_choice.json
    assert grid.seeds == [0, 1] and [c.method for c in cells] == ["grpo", "grpo"]
    with pytest.raises(ConfigError, match="no finished test cell"):
        run_stage(preset, "decide", tmp_path, log=lambda line: None)
    for seed, low in ((0, 0.90), (1, 0.70)):
        d = target / "runs" / f"grpo_seed{seed}"
        d.mkdir(parents=True)
        result = {"step": 0, "benchmarks": {"t": {"pass@1": 0.2, "pass@256": 0.95}}}
        (d / "heldout_before.json").write_text(json.dumps(result))
        path = step_eval_path(d, 50)
        path.parent.mkdir()
        path.write_text(
            json.dumps({"step": 50, "benchmarks": {"t": {"pass@1": 0.4, "pass@256": low}}})
        )
        (d / "final_eval.json").write_text(json.dumps({**result, "step": 50}))
    choice = run_stage(preset, "decide", tmp_path, log=lambda line: None)
    assert set(seen) == {("grpo", "test", 0), ("grpo", "test", 1)}
    assert choice.reason == "largest drop 0.25"
    assert (
        json.loads((tmp_path / "pilot_choice.json").read_text())["choice"]["reason"]
        == choice.reason
    )


def test_the_declared_metric_and_notes_say_what_the_committed_report_says(tmp_path):
    """The KL metric's heading and paragraph, and the comparison's notes, as the study's view
    words them from the preset, are the committed report's (the slow re-derivation checks the
    rest)."""
    committed = Path(__file__).resolve().parents[2] / "docs" / "reports" / "toy-cot-explore"
    view = study_of(get_preset(PRESET), tmp_path).view()
    (kl,) = view.metrics
    secondary = (committed / "secondary.md").read_text()
    assert f"## {kl.heading}\n\n{kl.text}\n" in secondary
    assert kl.heading.endswith("(added after the run)") and "64 test problems" in kl.text
    report = (committed / "report.md").read_text()
    assert all(note in report for note in view.notes)


def test_the_comparison_scope_names_the_pilot_rule_that_chose_the_rate():
    from ict.report.scope import scope_line, scope_problems
    from ict.report.sections import PilotView, pilot_lr_choice

    pilot = PilotView(
        record={"choice": {"pool": "full", "lr": 6.3e-05, "horizon": 200}},
        values=(2e-5, 4e-5, 6.3e-5), pools={"full": None}, role=lambda m, c: "", seed=2000,
        validation_size=128, validation_samples=32, temperature=1.5, steps=300, every=50,
    )  # fmt: skip
    text = pilot_lr_choice(pilot)
    assert text.startswith("stage A's declared rule (PROTOCOL.md), one rate shared by every arm")
    assert "the largest of 2e-05, 4e-05, 6.3e-05 at which ICT's validation pass@1" in text
    assert "(6.3e-05 on the full pool;" in text and "were not part of the choice" in text
    assert pilot_lr_choice(None) is None
    lines = [
        scope_line("initialisations", "2 supervised warm starts"),
        scope_line("learning rate", "6.3e-05 for every method"),
        scope_line("learning rate chosen by", text),
        "| 32 | -0.066; **lower (primary)** |",
    ]
    assert scope_problems("\n".join(lines)) == []
