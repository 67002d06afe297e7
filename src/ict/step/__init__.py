"""The step core: what one rollout batch's step is, the same on every engine (native, TRL, verl).

- `selection`: `select_step`, one rollout batch's selection (warm-up, seed, diagnostics), its
  metrics (`step_metrics`) and when the single forward can make it (`selection_in_forward`).
- `plan`: `StepPlan`, the method's step of a run resolved once from the options, the engine's
  `StepLayout` and its loss rule (`with_method` re-derives what depends on the method);
  `SeedStreams`, the run's named seeds.
- `run`: `StepRun`, one rollout batch's step as every engine drives it: `plan.begin(...)`,
  `run.counts` (the normaliser), `run.observe(...)` per micro-batch on the single forward,
  `run.finish()` (docs/engines/CONTRACT.md).

The registry and the method options stay in `ict.methods`; the normaliser in `ict.loss`.
"""

from ict.step.plan import SeedStreams, StepLayout, StepPlan, one_forward_off
from ict.step.run import StepResult, StepRun
from ict.step.selection import (
    DIAGNOSTIC_METHODS,
    StepInputs,
    StepSelection,
    is_dense,
    run_warmup,
    select_method,
    select_step,
    selection_in_forward,
    selection_seed,
    step_metrics,
    warmup_warning,
)

__all__ = [
    "DIAGNOSTIC_METHODS",
    "SeedStreams",
    "StepInputs",
    "StepLayout",
    "StepPlan",
    "StepResult",
    "StepRun",
    "StepSelection",
    "is_dense",
    "one_forward_off",
    "run_warmup",
    "select_method",
    "select_step",
    "selection_in_forward",
    "selection_seed",
    "step_metrics",
    "warmup_warning",
]
