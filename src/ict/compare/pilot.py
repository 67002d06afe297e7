"""A study's pilot and its declared choice, as registered rules beside the tuning rules (torch-free).

A study (ict.compare.study) may declare a pilot in its preset: `PilotSpec` (methods, the values of
one training option, the training pools, one seed, the validation evaluation), run as tuning cells
(ict.compare.grid.tuning_cell) in OUT/pilot-<pool>/tuning/runs/. Its declared choice is a rule of
`PILOT_RULES` (name -> `PilotRule`), as the tuning stage's are of ict.compare.tuning.RULES: the
`decide` stage applies it to the cells' curves and writes OUT/pilot_choice.json; the `test` stage
runs at the choice's overrides (`PilotChoice.overrides`). A new declared choice is one rule
registered here (`register_pilot_rule`) and named in a preset's `study.rule`.

`narrowing_at_stable_lr` (docs/reports/toy-cot-explore/PROTOCOL.md, declared before any cell ran):

- ICT is *stable* at (pool, lr) when its validation pass@1 is >= its step-0 value at every
  evaluation after step 0;
- GRPO *narrows* at an evaluation when its pass@32 is at least `drop` below its step-0 value while
  its pass@1 is not below its step-0 value;
- for each pool, the shared lr is the largest lr at which ICT is stable; the pool is the first
  pool (in the spec's order) on which GRPO narrows at some evaluation at that pool's shared lr,
  else none: no stable learning rate narrows, which is the finding, and the test stage does not
  run;
- the horizon is the first evaluation at which GRPO narrows, at the chosen pool and lr.

A curve is a list of `Point`s (step, pass@k of the spec's first and second `metric` k), step 0
first; curves are keyed (method, pool, value).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from ict.errors import ConfigError

Curves = Mapping[tuple[str, str, float], Sequence["Point"]]


@dataclass(frozen=True)
class PilotSpec:
    """A declared pilot: `methods` x `values` of `param` x `pools` ({name: training problems, None:
    the task's}; their order is the rule's preference), one `seed`, `metric` (the two k of a
    curve's points), the validation evaluation (`validation_size` problems x
    `validation_samples`), and the choice `rule` (PILOT_RULES) with its `options` (e.g. drop)."""

    methods: tuple[str, ...] = ()
    values: tuple[float, ...] = ()
    pools: Mapping[str, int | None] = field(default_factory=lambda: {"full": None})
    seed: int = 2000
    metric: tuple[int, int] = (1, 32)
    validation_size: int = 128
    validation_samples: int = 32
    param: str = "learning_rate"
    rule: str = "narrowing_at_stable_lr"
    options: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_values(cls, values: Mapping) -> PilotSpec:
        """A preset file's `study.pilot` mapping (lists become tuples); ConfigError naming an
        unknown key or rule."""
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"study.pilot: unknown keys {unknown}; a pilot has {sorted(known)}")
        out = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        out["pools"] = {str(k): v for k, v in (values.get("pools") or {"full": None}).items()}
        spec = cls(**out)
        if spec.rule not in PILOT_RULES:
            raise ConfigError(f"pilot rule {spec.rule!r} is not one of {', '.join(PILOT_RULES)}")
        return spec

    @property
    def pool_order(self) -> tuple[str, ...]:
        return tuple(self.pools)


@dataclass(frozen=True)
class Point:
    """One evaluation of a pilot cell: `step` (0 = the start model), pass@k at the spec's first
    k (`pass1`) and second k (`pass32`)."""

    step: int
    pass1: float
    pass32: float


@dataclass(frozen=True)
class PilotChoice:
    """The declared choice: `pool` (a pool name or None), shared `lr`, `horizon` (RL steps), and
    `reason` in words; `stable_lr` {pool: the largest lr at which ICT is stable, or None}."""

    pool: str | None
    lr: float | None
    horizon: int | None
    reason: str
    stable_lr: dict[str, float | None]

    @property
    def runs_stage_b(self) -> bool:
        return self.pool is not None

    def as_dict(self) -> dict:
        return asdict(self)


def overrides(choice: Mapping, spec: PilotSpec) -> dict:
    """The TrainConfig overrides of the test cells from a choice record (`PilotChoice.as_dict`):
    the chosen value of `spec.param`, the horizon as max_steps, the pool's train_size; ConfigError
    when the pilot chose nothing."""
    if choice.get("pool") is None:
        raise ConfigError(f"the pilot found no stable narrowing regime ({choice['reason']})")
    out = {spec.param: choice["lr"], "max_steps": choice["horizon"]}
    size = spec.pools[choice["pool"]]
    if size:
        out["train_size"] = size
    return out


def ict_stable(curve: Sequence[Point]) -> bool:
    """ICT's validation pass@1 stays >= its step-0 value at every later evaluation."""
    start, later = curve[0], curve[1:]
    return bool(later) and all(p.pass1 >= start.pass1 for p in later)


def narrowing_step(curve: Sequence[Point], drop: float) -> int | None:
    """The first evaluation step at which pass@32 is >= `drop` below the start while pass@1 is not
    below it; None if there is none."""
    start = curve[0]
    for p in curve[1:]:
        if start.pass32 - p.pass32 >= drop - 1e-12 and p.pass1 >= start.pass1:
            return p.step
    return None


def choose_narrowing(curves: Curves, spec: PilotSpec) -> PilotChoice:
    """`narrowing_at_stable_lr` (module docstring) on {(method, pool, lr): curve}. Raises
    KeyError naming a missing cell."""
    drop = spec.options.get("drop", 0.05)
    stable: dict[str, float | None] = {}
    for pool in spec.pool_order:
        ok = [lr for lr in spec.values if ict_stable(curves[("ict", pool, lr)])]
        stable[pool] = max(ok) if ok else None
    for pool in spec.pool_order:
        lr = stable[pool]
        if lr is None:
            continue
        step = narrowing_step(curves[("grpo", pool, lr)], drop)
        if step is not None:
            return PilotChoice(
                pool, lr, step,
                f"GRPO narrows on the {pool} pool at ICT's largest stable lr {lr:g} "
                f"(pass@32 down >= {drop} with pass@1 held at step {step})",
                stable,
            )  # fmt: skip
    unstable = [p for p in spec.pool_order if stable[p] is None]
    why = (
        f"ICT is stable at no pilot lr on the {' and '.join(unstable)} pool(s); "
        if unstable
        else ""
    )
    return PilotChoice(
        None, None, None,
        why + "GRPO narrows at no (pool, ICT-stable lr): no stable learning rate narrows, "
        "so stage B does not run",
        stable,
    )  # fmt: skip


def narrowing_role(method: str, curve: Sequence[Point], spec: PilotSpec) -> str:
    """What the rule says of one cell: ICT's "stable" / "not stable", GRPO's narrowing step."""
    if method == "ict":
        return "stable" if ict_stable(curve) else "not stable"
    step = narrowing_step(curve, spec.options.get("drop", 0.05))
    return f"narrows at step {step}" if step is not None else "does not narrow"


@dataclass(frozen=True)
class PilotRule:
    """A declared choice: `choose` maps the cells' curves and the spec to a PilotChoice (or any
    object with `as_dict()` and `reason`); `role` says what the rule makes of one cell (the pilot
    report's last column); `text`: the rule in words (docs/compare.md); `reads`: the cells it
    reads, "pilot" (the pilot's, keyed (method, pool, value); the test stage then runs at the
    choice) or "test" (the finished test cells of every block, keyed (method, "test", seed): a
    criterion checked on the test grid's own periodic evaluations, e.g. a narrowing screen)."""

    name: str
    choose: Callable[[Curves, PilotSpec], PilotChoice]
    role: Callable[[str, Sequence[Point], PilotSpec], str]
    text: str
    reads: str = "pilot"


PILOT_RULES: dict[str, PilotRule] = {}


def register_pilot_rule(rule: PilotRule) -> PilotRule:
    """Add `rule` to PILOT_RULES under its name (a preset names it in `study.pilot.rule`)."""
    PILOT_RULES[rule.name] = rule
    return rule


register_pilot_rule(
    PilotRule(
        "narrowing_at_stable_lr",
        choose_narrowing,
        narrowing_role,
        "The shared learning rate of each pool is the largest at which ICT's validation pass@1 "
        "stays at or above its step-0 value at every later evaluation; the pool is the first "
        "(in the declared order) on which GRPO, at that learning rate, narrows: its pass@32 "
        "falls at least `drop` below step 0 while its pass@1 does not; the horizon is the first "
        "such evaluation. No such pool: the test stage does not run.",
    )
)


def choose(curves: Curves, spec: PilotSpec) -> PilotChoice:
    """The declared choice of `spec.rule` on the pilot's curves."""
    return PILOT_RULES[spec.rule].choose(curves, spec)


def curve_of(results: Sequence[dict], metric: Sequence[int] = (1, 32)) -> list[Point]:
    """A cell's curve from its evaluation results (ict.eval result schema, one task), sorted by
    step; each result needs `step` and pass@k for both k of `metric`."""
    low, high = metric
    points = []
    for result in results:
        (summary,) = result["benchmarks"].values()
        points.append(Point(int(result["step"]), summary[f"pass@{low}"], summary[f"pass@{high}"]))
    return sorted(points, key=lambda p: p.step)
