"""A study as data: stages declared in a preset's `study` mapping, run by `ict compare --stage`.

A study is a preset (ict/configs/presets/NAME.yaml) with a `study` mapping (`StudySpec`):

    study:
      command: scripts/explore_study.py   # how the reports name the stages' command (optional)
      blocks: 2                # warm starts: block b = warm start seed b, seeds/blocks test seeds
      pilot: {...}             # ict.compare.pilot.PilotSpec; its `rule` names a PILOT_RULES entry
      metrics: {kl_to_start: {problems: 64, samples: 8}}   # ict.compare.grid_metrics.GRID_METRICS
      secondary: {...}         # what the `secondary` section tests (ict.report.sections)
      companion: {extends: smollm, ...}   # an exploratory second grid (a preset's values)
      notes: [...]             # the comparison report's notes
      report: [pilot, secondary, comparison, frontier, companion]   # ict.report.sections.SECTIONS

Its stages (`STAGES`, in the order a study runs them; each resumable, cells claimed so that two
processes may run one stage on one OUT):

- `pilot`: the pilot's cells (method x value x pool, one seed) in OUT/pilot-<pool>/tuning/runs/;
- `decide`: the pilot rule's choice on their validation curves -> OUT/pilot_choice.json;
- `test`: block b's grid (--block) at the choice's overrides in OUT/test-warm<b>/runs/;
- `retest`: block b's final evaluations again on the held-out split where a cell's was made on
  another (kept as <name>_validation.json);
- `metrics`: the declared grid metrics of block b's trained cells (RUN/<metric>.json);
- `companion`: the companion grid in OUT/companion/;
- `report`: the declared sections, in order, into DEST.

`run_stage(preset, stage, out, ...)` runs one (torch is imported by the stages that train). A new
study is a preset; it adds at most one pilot rule (ict.compare.pilot.register_pilot_rule), one
grid metric (ict.compare.grid_metrics.register_metric) or one report section
(ict.report.sections.register_section).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ict.compare.pilot import PILOT_RULES, PilotSpec, curve_of, overrides
from ict.compare.presets import Preset
from ict.errors import ConfigError
from ict.files import read_json, write_json_atomic

CHOICE_FILE = "pilot_choice.json"
VALIDATION_COPY = "{}_validation.json"  # where retest keeps a result made on another split


@dataclass(frozen=True)
class StudySpec:
    """A preset's `study` mapping (module docstring), checked: every named rule, metric and
    section is registered. `values`: the mapping itself (the sections read their own keys)."""

    command: str
    blocks: int
    pilot: PilotSpec | None
    metrics: Mapping[str, dict]
    report: tuple[str, ...]
    companion: dict | None
    notes: tuple[str, ...]
    retest_note: str
    word: str
    values: Mapping = field(default_factory=dict)

    KEYS = ("command", "blocks", "pilot", "metrics", "secondary", "companion", "notes",
            "retest_note", "report", "word")  # fmt: skip

    @classmethod
    def from_values(cls, name: str, values: Mapping) -> StudySpec:
        from ict.compare.grid_metrics import GRID_METRICS
        from ict.report.sections import SECTIONS

        unknown = sorted(set(values) - set(cls.KEYS))
        if unknown:
            raise ConfigError(f"preset {name}: unknown study keys {unknown}; one of {cls.KEYS}")
        metrics = dict(values.get("metrics") or {})
        for registry, names, what in (
            (GRID_METRICS, metrics, "grid metric"),
            (SECTIONS, values.get("report") or (), "report section"),
        ):
            bad = [n for n in names if n not in registry]
            if bad:
                raise ConfigError(
                    f"preset {name}: {what} {bad[0]!r} is not registered; one of {', '.join(registry)}"
                )
        pilot = values.get("pilot")
        return cls(
            command=values.get("command", f"ict compare --preset {name} --stage"),
            blocks=int(values.get("blocks", 1)),
            pilot=None if pilot is None else PilotSpec.from_values(pilot),
            metrics=metrics,
            report=tuple(values.get("report") or ()),
            companion=values.get("companion"),
            notes=tuple(values.get("notes") or ()),
            retest_note=values.get("retest_note", ""),
            word=values.get("word", "problems"),
            values=dict(values),
        )


@dataclass(frozen=True)
class Stage:
    """A registered stage: `run(study, block)`; `needs`: the study key it reads (None: none);
    `blocked`: it runs one block (--block); `text`: what it does (docs/compare.md)."""

    name: str
    run: Callable[[Study, int], object]
    text: str
    needs: str | None = None
    blocked: bool = False


@dataclass
class Study:
    """One study's preset, declaration and directories: `out` (the cells), `dest` (the reports);
    `log` takes one line; `fast`: ict.fast for warm-started cells; `sampler_factory`: how every
    evaluation samples (tests inject one)."""

    preset: Preset
    spec: StudySpec
    out: Path
    dest: Path
    log: Callable[[str], None] = print
    fast: bool = True
    sampler_factory: object = None

    def grid(self, **fields):
        """GridOptions with this study's log and sampler."""
        from ict.compare.grid import GridOptions

        return GridOptions(log=self.log, sampler_factory=self.sampler_factory, fast=self.fast,
                           **fields)  # fmt: skip

    # ---- the pilot -------------------------------------------------------------------------
    def pilot_spec(self) -> PilotSpec:
        if self.spec.pilot is None:
            raise ConfigError(f"preset {self.preset.name} declares no pilot (study.pilot)")
        return self.spec.pilot

    def pilot_cells(self) -> dict:
        """{(method, pool, value): Cell} of the pilot."""
        from ict.compare.grid import tuning_cell
        from ict.compare.tuning import TuningSpec

        p = self.pilot_spec()
        tuning = TuningSpec(
            values=p.values, param=p.param, seeds=(p.seed,), metric=p.metric, grow=0,
            validation_size=p.validation_size, validation_samples=p.validation_samples,
        )  # fmt: skip
        cells = {}
        for pool, size in p.pools.items():
            grid = self.grid(overrides={"train_size": size} if size else {})
            for method in p.methods:
                for value in p.values:
                    cells[(method, pool, value)] = tuning_cell(
                        self.preset, self.out / f"pilot-{pool}", tuning, method, value, p.seed, grid
                    )
        return cells

    def choice(self) -> dict:
        """OUT/pilot_choice.json: {"choice": ..., "cells": [...]}; ConfigError before `decide`."""
        record = read_json(self.out / CHOICE_FILE)
        if record is None:
            raise ConfigError(f"no {self.out}/{CHOICE_FILE}: run the decide stage after the pilot")
        return record

    # ---- the test grid ---------------------------------------------------------------------
    def test_grid(self, block: int):
        """(preset, grid options, grid directory, cells) of test block `block`: warm start seed
        `block`, its share of the seeds, at the pilot's choice (when the study has a pilot)."""
        from ict.compare.grid import plan_cells

        if not 0 <= block < self.spec.blocks:
            raise ConfigError(f"--block {block}: this study has blocks 0..{self.spec.blocks - 1}")
        extra = {}
        if self.spec.pilot is not None and PILOT_RULES[self.spec.pilot.rule].reads == "pilot":
            extra = overrides(self.choice()["choice"], self.spec.pilot)
        preset = self.preset
        if preset.warm is not None:
            preset = dataclasses.replace(preset, warm=dataclasses.replace(preset.warm, seed=block))
        per = self.per_block
        grid = self.grid(seeds=list(range(per * block, per * (block + 1))), overrides=extra)
        target = self.out / f"test-warm{block}"
        return preset, grid, target, plan_cells(preset, target, grid)

    @property
    def per_block(self) -> int:
        return self.preset.seeds // self.spec.blocks

    def finished_cells(self) -> dict[int, list[Path]]:
        """{seed: its cells} for the test seeds whose every arm is done (a balanced design)."""
        out: dict[int, list[Path]] = {}
        for block in range(self.spec.blocks):
            for seed in range(self.per_block * block, self.per_block * (block + 1)):
                dirs = [
                    self.out / f"test-warm{block}" / "runs" / f"{m}_seed{seed}"
                    for m in self.preset.methods
                ]
                if all((d / "final_eval.json").is_file() for d in dirs):
                    out[seed] = dirs
        return out

    # ---- the companion ---------------------------------------------------------------------
    def companion_preset(self):
        """The declared companion: its `extends` preset's values with the study's on top."""
        from ict.compare.presets import merge, preset_from_values, read_preset_file

        values = dict(self.spec.companion or {})
        if not values:
            raise ConfigError(f"preset {self.preset.name} declares no companion (study.companion)")
        base = values.pop("extends")
        own = {k: values[k] for k in values if k not in COMPANION_WORDS}
        return preset_from_values(own.pop("name", f"{base}-companion"),
                                  merge(read_preset_file(base), own))  # fmt: skip

    # ---- what the report sections read -----------------------------------------------------
    def view(self):
        """The ict.report.sections.StudyView of this study's files."""
        from ict.compare.grid import checkpoint_results
        from ict.compare.grid_metrics import GRID_METRICS
        from ict.compare.presets import settings
        from ict.report.sections import MetricView, PilotView, StudyView

        pilot = None
        spec = self.spec.pilot
        record = read_json(self.out / CHOICE_FILE)
        if spec is not None and record is not None:
            rule = PILOT_RULES[spec.rule]
            config = settings(self.preset.train)
            pilot = PilotView(
                record, spec.values, spec.pools,
                lambda m, pts: rule.role(m, [_point(p) for p in pts], spec),
                spec.seed, spec.validation_size, spec.validation_samples, config.temperature,
                config.max_steps, config.eval_every,
            )  # fmt: skip
        metrics = []
        for name, given in self.spec.metrics.items():
            metric = GRID_METRICS[name]
            values = metric.settings(given)
            how = values.get("how", f"`{self.spec.command} metrics`")
            note = values.get("after_the_run")
            text = metric.text.format(**{**values, "how": how})
            metrics.append(MetricView(
                name, metric.value,
                metric.heading + (" (added after the run)" if note else ""),
                f"{note} {text}" if note else text, metric.digits,
            ))  # fmt: skip
        ks = spec.metric if spec is not None else (1, 32)
        cells = self.finished_cells()
        notes = list(self.spec.notes)
        if self.spec.retest_note and any(
            (d / VALIDATION_COPY.format("final_eval")).is_file()
            for ds in cells.values()
            for d in ds
        ):
            notes.insert(0, self.spec.retest_note)
        return StudyView(
            name=self.preset.name, command=self.spec.command, out=self.out,
            methods=list(self.preset.methods), cells=cells, declared_seeds=self.preset.seeds,
            blocks=self.spec.blocks, endpoints=self.preset.declared_endpoints(),
            settings=self.spec.values, pilot=pilot, metrics=metrics,
            curve=lambda d: curve_of(
                [read_json(d / "heldout_before.json"), *checkpoint_results(d)], ks
            ),
            word=self.spec.word, eval_size=self.preset.eval.size,
            companion=self._companion_view(), notes=notes,
        )  # fmt: skip

    def _companion_view(self) -> dict | None:
        if not self.spec.companion:
            return None
        preset = self.companion_preset()
        words = {k: self.spec.companion[k] for k in COMPANION_WORDS if k in self.spec.companion}
        return {
            "root": self.out / "companion", "methods": list(preset.methods),
            "seeds": preset.seeds, "ks": list(preset.eval.ks), **words,
        }  # fmt: skip


# the companion's words for its section, not preset values
COMPANION_WORDS = ("format_learned", "baseline", "method", "model", "text")


def _point(p: Mapping):
    from ict.compare.pilot import Point

    return Point(**p)


# ---- the stages ---------------------------------------------------------------------------------
def run_pilot(study: Study, block: int = 0) -> None:
    from ict.compare.grid import prepare_start, run_all
    from ict.fast import fast_path

    spec = study.pilot_spec()
    cells = study.pilot_cells()
    # value-major, so two workers finish whole (pool, value) pairs together
    order = sorted(cells, key=lambda k: (spec.values.index(k[2]), k[1], k[0]))
    with fast_path(study.fast):
        start = prepare_start(study.preset, study.out, study.log)
        run_all([cells[k] for k in order], start, study.preset, study.grid())


def decide(study: Study, block: int = 0):
    """The declared rule's choice on the curves of the cells it reads (the pilot's, or the
    finished test cells') -> OUT/pilot_choice.json."""
    from ict.compare.grid import checkpoint_results

    spec = study.pilot_spec()
    rule = PILOT_RULES[spec.rule]
    if rule.reads == "test":
        dirs = {
            (m, "test", seed): d
            for seed, ds in study.finished_cells().items()
            for m, d in zip(study.preset.methods, ds, strict=True)
        }
        if not dirs:
            raise ConfigError("no finished test cell: run the test stage first")
    else:
        dirs = {key: cell.run_dir for key, cell in study.pilot_cells().items()}
    curves = {}
    for key, run_dir in dirs.items():
        before = read_json(run_dir / "heldout_before.json")
        if before is None or read_json(run_dir / "final_eval.json") is None:
            raise ConfigError(f"pilot cell {run_dir} is not done: run the pilot stage first")
        curves[key] = curve_of([before, *checkpoint_results(run_dir)], spec.metric)
    choice = rule.choose(curves, spec)
    table = [
        {"method": m, "pool": p, "lr": v, "curve": [dataclasses.asdict(pt) for pt in c]}
        for (m, p, v), c in curves.items()
    ]
    write_json_atomic(study.out / CHOICE_FILE, {"choice": choice.as_dict(), "cells": table})
    for (m, p, v), c in curves.items():
        line = " ".join(f"{pt.step}:{pt.pass1:.3f}/{pt.pass32:.3f}" for pt in c)
        study.log(f"{m:5s} pool {p:4s} lr {v:.3g}  step:pass@1/pass@32  {line}")
    study.log(f"choice: {choice.reason}")
    return choice


def run_test(study: Study, block: int) -> None:
    from ict.compare.grid import evaluate_start, prepare_start, run_all, write_grid_record
    from ict.fast import fast_path

    preset, grid, target, cells = study.test_grid(block)
    with fast_path(study.fast):
        start = prepare_start(preset, target, study.log)
        write_grid_record(target, preset, cells, grid)
        evaluate_start(cells[0], start, preset, grid)
        run_all(cells, start, preset, grid)


def _set_aside(path: Path) -> bool:
    """Move a final result made off the held-out split to <name>_validation.json; True when
    `path` must be evaluated (again)."""
    from ict.data import HELDOUT_SPLIT

    result = read_json(path)
    if result is not None and result.get("settings", {}).get("split") == HELDOUT_SPLIT:
        return False
    if result is not None:
        os.replace(path, path.with_name(VALIDATION_COPY.format(path.stem)))
    return True


def run_retest(study: Study, block: int) -> None:
    """Block `block`'s start and final evaluations again on the held-out split where they were
    made on another (the earlier result kept beside, VALIDATION_COPY). Resumable: a result already
    on the held-out split is kept."""
    from ict.compare.grid import evaluate_cell, evaluate_start, prepare_start
    from ict.fast import fast_path

    preset, grid, target, cells = study.test_grid(block)
    with fast_path(study.fast):
        start = prepare_start(preset, target, study.log)
        if _set_aside(target / "start_eval.json"):
            evaluate_start(cells[0], start, preset, grid)
        for cell in cells:
            if not (cell.run_dir / "summary.json").is_file():
                study.log(f"{cell.tag} not trained: skipped")
                continue
            if _set_aside(cell.run_dir / "final_eval.json"):
                evaluate_cell(cell, preset, grid)


def run_metrics(study: Study, block: int) -> None:
    """Every declared grid metric over block `block`'s trained cells (RUN/<metric>.json)."""
    from ict.compare.grid import prepare_start
    from ict.compare.grid_metrics import GRID_METRICS
    from ict.fast import fast_path

    preset, _, target, cells = study.test_grid(block)
    with fast_path(study.fast):
        start = prepare_start(preset, target, study.log)
        for name, given in study.spec.metrics.items():
            metric = GRID_METRICS[name]
            metric.run(cells, start, metric.settings(given), study.log)


def run_companion(study: Study, block: int = 0) -> None:
    from ict.compare.grid import run_grid

    run_grid(study.companion_preset(), study.out / "companion", tuning="off", log=study.log,
             sampler_factory=study.sampler_factory)  # fmt: skip


def report(study: Study, block: int = 0) -> list[Path]:
    """Every declared section, in order, into DEST; returns the files they wrote."""
    from ict.report.sections import SECTIONS

    view = study.view()
    written = []
    for name in study.spec.report:
        path = SECTIONS[name].write(view, study.dest)
        study.log(f"{name}: {path}")
        if path is not None:
            written.append(path)
    return written


STAGES: dict[str, Stage] = {}


def register_stage(stage: Stage) -> Stage:
    STAGES[stage.name] = stage
    return stage


for _stage in (
    Stage("pilot", run_pilot, "train the pilot's cells (one seed each)", needs="pilot"),
    Stage("decide", decide, "apply the pilot's declared rule -> OUT/pilot_choice.json",
          needs="pilot"),
    Stage("test", run_test, "train one block of the test grid at the choice", blocked=True),
    Stage("retest", run_retest, "redo one block's final evaluations made off the held-out split",
          blocked=True),
    Stage("metrics", run_metrics, "compute the declared grid metrics of one block's cells",
          needs="metrics", blocked=True),
    Stage("companion", run_companion, "run the exploratory companion grid", needs="companion"),
    Stage("report", report, "write the declared report sections into DEST", needs="report"),
):  # fmt: skip
    register_stage(_stage)


def study_of(preset, out: str | os.PathLike, dest: str | os.PathLike | None = None,
             **options) -> Study:  # fmt: skip
    """The Study of a preset that declares one (ConfigError naming the presets that do)."""
    if not getattr(preset, "study", None):
        from ict.compare.presets import PRESETS, read_preset_file

        studies = [n for n in PRESETS if read_preset_file(n).get("study")]
        raise ConfigError(
            f"preset {preset.name} declares no study; --stage needs one of {', '.join(studies)}"
        )
    spec = StudySpec.from_values(preset.name, preset.study)
    out = Path(out)
    return Study(preset, spec, out, Path(dest) if dest is not None else out / "report", **options)


def run_stage(preset, stage: str, out, *, dest=None, block: int = 0, **options):
    """Run study stage `stage` (STAGES) of `preset` on the study directory `out` (reports into
    `dest`, default OUT/report); `block`: the test block of a blocked stage. ConfigError for an
    unknown stage or one the study does not declare."""
    if stage not in STAGES:
        raise ConfigError(f"unknown study stage {stage!r}; choose one of {', '.join(STAGES)}")
    entry = STAGES[stage]
    if block and not entry.blocked:
        blocked = ", ".join(n for n, s in STAGES.items() if s.blocked)
        raise ConfigError(f"--block belongs to the stages {blocked}, not {stage}")
    study = study_of(preset, out, dest, **options)
    if entry.needs and not study.spec.values.get(entry.needs):
        raise ConfigError(
            f"preset {preset.name}'s study declares no {entry.needs}: stage {stage} has nothing "
            "to run"
        )
    return entry.run(study, block)
