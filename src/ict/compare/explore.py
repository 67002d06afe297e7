"""The exploration study's pilot (stage A) and its declared choice (torch-free).

docs/reports/toy-cot-explore/PROTOCOL.md declares it before any cell ran. The pilot trains GRPO
and the paper's ICT from the toy-cot warm start at sampling temperature 1.5, at every learning
rate of `PILOT_LRS` and both training pools of `PILOT_POOLS`, one seed (`PILOT_SEED`), 300 steps,
with a validation evaluation (128 pairs x 32 samples) at step 0 and every 50 steps. The choice:

- ICT is *stable* at (pool, lr) when its validation pass@1 is >= its step-0 value at every
  evaluation after step 0;
- GRPO *narrows* at an evaluation when its pass@32 is at least `NARROWING_DROP` below its step-0
  value while its pass@1 is not below its step-0 value;
- for each pool, the shared lr is the largest lr at which ICT is stable; the pool is the full one
  if GRPO narrows at some evaluation there (at that pool's shared lr), else the 16-pair pool if GRPO
  narrows there, else none: no stable learning rate narrows, which is the finding, and stage B does
  not run;
- the horizon is the first evaluation at which GRPO narrows, at the chosen pool and lr.

A curve is a list of `Point`s (step, pass@1, pass@32), step 0 first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

PILOT_METHODS = ("grpo", "ict")
PILOT_LRS = (2.0e-5, 4.0e-5, 6.3e-5)
PILOT_POOLS: dict[str, int | None] = {"full": None, "16": 16}  # training pairs (None: the task's)
POOL_ORDER = ("full", "16")  # the full pool is preferred when GRPO narrows on both
PILOT_SEED = 2000
NARROWING_DROP = 0.05  # pass@32 below its start by at least this
PILOT_K = (1, 32)


@dataclass(frozen=True)
class Point:
    """One evaluation of a pilot cell: `step` (0 = the start model), pass@1 and pass@32."""

    step: int
    pass1: float
    pass32: float


@dataclass(frozen=True)
class PilotChoice:
    """The declared choice: `pool` ("full", "16" or None), shared `lr`, `horizon` (RL steps), and
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


def ict_stable(curve: Sequence[Point]) -> bool:
    """ICT's validation pass@1 stays >= its step-0 value at every later evaluation."""
    start, later = curve[0], curve[1:]
    return bool(later) and all(p.pass1 >= start.pass1 for p in later)


def narrowing_step(curve: Sequence[Point], drop: float = NARROWING_DROP) -> int | None:
    """The first evaluation step at which pass@32 is >= `drop` below the start while pass@1 is not
    below it; None if there is none."""
    start = curve[0]
    for p in curve[1:]:
        if start.pass32 - p.pass32 >= drop - 1e-12 and p.pass1 >= start.pass1:
            return p.step
    return None


def choose(curves: Mapping[tuple[str, str, float], Sequence[Point]]) -> PilotChoice:
    """The declared choice (module docstring) from the pilot's curves {(method, pool, lr): curve}.
    Raises KeyError naming a missing cell."""
    stable: dict[str, float | None] = {}
    for pool in POOL_ORDER:
        ok = [lr for lr in PILOT_LRS if ict_stable(curves[("ict", pool, lr)])]
        stable[pool] = max(ok) if ok else None
    for pool in POOL_ORDER:
        lr = stable[pool]
        if lr is None:
            continue
        step = narrowing_step(curves[("grpo", pool, lr)])
        if step is not None:
            return PilotChoice(
                pool, lr, step,
                f"GRPO narrows on the {pool} pool at ICT's largest stable lr {lr:g} "
                f"(pass@32 down >= {NARROWING_DROP} with pass@1 held at step {step})",
                stable,
            )  # fmt: skip
    unstable = [p for p in POOL_ORDER if stable[p] is None]
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


def curve_of(results: Sequence[dict]) -> list[Point]:
    """A cell's curve from its evaluation results (ict.eval result schema, one task), sorted by
    step; each result needs `step` and pass@1 and pass@32."""
    points = []
    for result in results:
        (summary,) = result["benchmarks"].values()
        points.append(Point(int(result["step"]), summary["pass@1"], summary["pass@32"]))
    return sorted(points, key=lambda p: p.step)
