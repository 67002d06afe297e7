"""Run outputs: metrics.jsonl / samples.jsonl writers, optional TensorBoard / W&B, entropy health
and learning signal (judged over windows by ict.evidence.health).

metrics.jsonl has one JSON object per step, flushed each step; on resume the lines after the
checkpoint's step are dropped so that the resumed file matches an uninterrupted run (the writer
and the truncation are ict.files').
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

from ict.errors import ConfigError
from ict.evidence.health import (
    NO_SIGNAL_SHARE,
    HealthCriterion,
    HealthJudgement,
    PhaseHealth,
    judge_health,
    judge_phases,
    judge_signal,
)

HEALTH = HealthCriterion()  # the defaults (ict.evidence.health)

logger = logging.getLogger("ict.train")


# --report-to NAME -> (module that must import, the ict extra that installs it)
LOGGER_PACKAGES = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb")}


WANDB_ID_FILE = "wandb_run_id"  # RUN_DIR/wandb_run_id: the W&B run a resumed run continues
_WANDB_LOCAL_MODES = ("offline", "dryrun", "disabled")  # modes that need no W&B login


def check_report_to(kind: str, wandb_mode: str | None = None) -> None:
    """Raise ConfigError (one line: the missing package and the extra that installs it) when the
    logger `kind` cannot be imported, or, for W&B in online mode (`wandb_mode`, else $WANDB_MODE),
    when no W&B credentials are set (ict.train.outputs.wandb_logged_in). Cheap (no import): call
    it before any task or model loads."""
    import importlib.util

    if kind in (None, "none"):
        return
    if kind not in LOGGER_PACKAGES:
        raise ConfigError(f"report_to={kind!r} is not one of none, {', '.join(LOGGER_PACKAGES)}")
    if importlib.util.find_spec(LOGGER_PACKAGES[kind][0]) is None:
        raise _missing(kind)
    mode = wandb_mode or os.environ.get("WANDB_MODE") or "online"
    if kind == "wandb" and mode not in _WANDB_LOCAL_MODES and not wandb_logged_in():
        raise ConfigError(
            "--report-to wandb logs online but no W&B credentials are set: run `wandb login` "
            "(or set WANDB_API_KEY), or pass --wandb-mode offline to write RUN_DIR/wandb/ for "
            "`wandb sync`"
        )


def wandb_logged_in() -> bool:
    """Whether W&B credentials are set where wandb reads them: $WANDB_API_KEY, or the netrc file
    ($NETRC, else ~/.netrc) entry of its host ($WANDB_BASE_URL, else api.wandb.ai). Reads no
    network and imports no wandb."""
    import netrc
    from urllib.parse import urlparse

    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname
    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        entry = netrc.netrc(path).authenticators(host or "")
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(entry and entry[2])


def _missing(kind: str) -> ConfigError:
    module, extra = LOGGER_PACKAGES[kind]
    return ConfigError(
        f"--report-to {kind} needs the {module} package, which is not installed: "
        f'pip install -e ".[{extra}]" in a clone of ict (or pip install {module})'
    )


class ExternalLogger:
    """Forward a run's metrics to TensorBoard or Weights & Biases (imported lazily).

    `log(metrics, step)`: the step's scalars (non-numeric values and None are left out).
    `log_media(step, images=..., html=...)`: PNG files as images (TensorBoard `add_image`, W&B
    `wandb.Image`) and HTML files (W&B `wandb.Html`; TensorBoard has no HTML panel: skipped, with
    a debug line). The trainer calls it once at the end with the run's plots and token map.

    TensorBoard writes RUN_DIR/tensorboard/. W&B: `project` (None: $WANDB_PROJECT, else "ict"),
    `name` (None: the run directory's name), `mode` (None: $WANDB_MODE, else wandb's default,
    online; "offline" writes RUN_DIR/wandb/ for `wandb sync`; "disabled" logs nothing), files under
    RUN_DIR; `config` becomes the W&B run's config. The W&B run id is kept in RUN_DIR/wandb_run_id,
    so a resumed run continues the same W&B run (`resume="allow"`) instead of starting another.
    """

    def __init__(
        self,
        kind: str,
        run_dir: Path,
        config: dict,
        *,
        project: str | None = None,
        name: str | None = None,
        mode: str | None = None,
    ):
        check_report_to(kind, mode)
        self.kind, self._writer, self._wandb = kind, None, None
        run_dir = Path(run_dir)
        if kind == "tensorboard":
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as err:
                raise _missing(kind) from err
            self._writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
        elif kind == "wandb":
            try:
                import wandb
            except ImportError as err:
                raise _missing(kind) from err
            from ict.files import write_atomic

            id_file = run_dir / WANDB_ID_FILE
            run_id = id_file.read_text().strip() if id_file.is_file() else ""
            if not run_id:
                run_id = secrets.token_hex(4)  # W&B ids: lower-case letters and digits
                write_atomic(id_file, run_id + "\n")
            self._wandb = wandb.init(
                project=project or os.environ.get("WANDB_PROJECT") or "ict",
                name=name or run_dir.name,
                mode=mode or os.environ.get("WANDB_MODE") or None,
                dir=str(run_dir),
                config=config,
                id=run_id,
                resume="allow",
            )

    def log(self, metrics: dict, step: int) -> None:
        scalars = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
        if self._writer is not None:
            for key, value in scalars.items():
                self._writer.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(scalars, step=step)

    def log_media(
        self,
        step: int,
        *,
        images: dict[str, str | Path] | None = None,
        html: dict[str, str | Path] | None = None,
    ) -> None:
        """Log PNG files (`images`: {key: path}) and HTML files (`html`: {key: path}) at `step`."""
        images, html = images or {}, html or {}
        if self._writer is not None:
            for key, path in images.items():
                self._writer.add_image(key, _read_rgb(path), step, dataformats="HWC")
            if html:
                logger.debug("tensorboard shows no HTML: %s not logged", ", ".join(html))
            self._writer.flush()
        if self._wandb is not None:
            import wandb

            media = {key: wandb.Image(str(path)) for key, path in images.items()}
            media |= {
                key: wandb.Html(Path(path).read_text(encoding="utf-8"))
                for key, path in html.items()
            }
            if media:
                self._wandb.log(media, step=step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._wandb is not None:
            self._wandb.finish()
        self._writer = self._wandb = None


def _read_rgb(path: str | Path):
    """A PNG file as an [H, W, 3] uint8 array (alpha dropped)."""
    import numpy as np
    from matplotlib.image import imread

    image = imread(str(path))  # PNG: float32 in [0, 1], [H, W, 3 or 4]
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    return (np.clip(image[..., :3], 0, 1) * 255).round().astype(np.uint8)


class EntropyHealth:
    """Entropy collapse / explosion over windows (ict.evidence.health, METHOD.md): the verdict
    compares the mean `valid/entropy` (and `format_rate`) of the last `window` steps with the
    first `window`. A single step beyond the thresholds (against the first window's mean) is a
    blip: a warning in the log, never a verdict."""

    def __init__(
        self,
        window: int = HEALTH.window,
        collapse_fraction: float = HEALTH.collapse_fraction,
        explosion_multiple: float = HEALTH.explosion_multiple,
        format_drop_fraction: float = HEALTH.format_drop_fraction,
    ):
        self.criterion = HealthCriterion(
            window, collapse_fraction, explosion_multiple, format_drop_fraction
        )
        self.entropies: list[float] = []
        self.formats: list[float] = []
        self.steps: list[int] = []
        self.dense: list[bool | None] = []  # whether each step was a dense warm-up step
        self._in_blip = False

    def state_dict(self) -> dict:
        return {
            "entropies": self.entropies, "formats": self.formats, "steps": self.steps,
            "dense": self.dense,
        }  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.entropies, self.formats = list(state["entropies"]), list(state["formats"])
        n = len(self.entropies)  # a checkpoint written before the phases: steps 1..n, unknown
        self.steps = list(state.get("steps", range(1, n + 1)))
        self.dense = list(state.get("dense", [None] * n))

    def phases(self) -> PhaseHealth | None:
        """The judgement of the dense warm-up and of the method's own steps, each apart (None
        without both phases, or when a step's phase is unknown)."""
        if any(d is None for d in self.dense) or len(self.dense) != len(self.entropies):
            return None
        formats = self.formats if len(self.formats) == len(self.entropies) else None
        return judge_phases(self.steps, self.entropies, self.dense, formats, self.criterion)

    def judgement(self) -> HealthJudgement | None:
        """The window judgement of the steps so far (None before 2 steps)."""
        return judge_health(self.entropies, self.formats or None, self.criterion)

    def update(
        self, step: int, entropy: float, format_rate: float | None, dense: bool | None = None
    ) -> dict:
        """Record one step; return the window judgement so far: {"health/entropy_collapse",
        "health/entropy_explosion" (bools), "health/entropy_ratio" (last-W / first-W mean H)},
        the flags False until two whole windows are logged (summary() judges short runs with
        shrunk windows). `dense`: whether the step was a dense warm-up step (its phase). Logs a
        warning when this one step leaves the bounds."""
        self.entropies.append(float(entropy))
        self.steps.append(int(step))
        self.dense.append(None if dense is None else bool(dense))
        if format_rate is not None:
            self.formats.append(float(format_rate))
        self._warn_blip(step, float(entropy))
        j = self.judgement()
        if j is None or len(self.entropies) < 2 * self.criterion.window:
            return {"health/entropy_collapse": False, "health/entropy_explosion": False}
        return {
            "health/entropy_collapse": j.collapse,
            "health/entropy_explosion": j.explosion,
            "health/entropy_ratio": j.ratio,
        }

    def _warn_blip(self, step: int, entropy: float) -> None:
        """A warning (once per excursion) when one step's entropy leaves the bounds set by the
        first window's mean; it is not a verdict."""
        c = self.criterion
        if len(self.entropies) <= c.window:
            return
        base = sum(self.entropies[: c.window]) / c.window
        out = entropy < c.collapse_fraction * base or entropy > c.explosion_multiple * base
        if out and not self._in_blip:
            logger.warning(
                "step %d: mean entropy %.4f is %.2fx the first-%d-step mean %.4f (one step: a "
                "warning, not a verdict; collapse and explosion are judged over windows)",
                step, entropy, entropy / base if base > 0 else float("nan"), c.window, base,
            )  # fmt: skip
        self._in_blip = out

    def summary(self, method: str = "the method") -> dict:
        """summary.json's "health": the window judgement with its criterion as text, and, for a
        run with a dense warm-up, each phase's judgement ("phases"), the phase each flag is
        attributed to ("collapse_in", "explosion_in": "warm-up", "method", or both) and, for a
        flag, its sentence naming the phase ("entropy_collapse_text": `method` names the
        method's own steps; ict.evidence.health.PhaseHealth.text)."""
        j = self.judgement()
        if j is None:
            return {
                "entropy_collapse": False,
                "entropy_explosion": False,
                "criterion": "fewer than 2 logged steps: not judged",
            }
        out = j.as_dict()
        phases = self.phases()
        if phases is not None:
            out["phases"] = phases.as_dict()
            out["collapse_in"], out["explosion_in"] = phases.collapse_in, phases.explosion_in
            for flag in ("collapse", "explosion"):
                if phases.where(flag):
                    out[f"entropy_{flag}_text"] = phases.text(flag, method)
        return out


class SignalHealth:
    """The run's learning signal (ict.evidence.health.judge_signal): the share of groups whose
    rewards were all equal, over the last `window` steps during the run (a console warning when a
    window reaches the threshold, then none for the next `window` steps) and over every step at
    the end (`summary`)."""

    def __init__(
        self,
        window: int = HEALTH.window,
        threshold: float = NO_SIGNAL_SHARE,
        *,
        dynamic_sampling: bool = False,
    ):
        self.window, self.threshold, self.dynamic_sampling = window, threshold, dynamic_sampling
        self.shares: list[float] = []
        self._warned_at: int | None = None  # the step of the last warning

    def replay(self, history: list[dict]) -> None:
        """Rebuild the state from a resumed run's metrics lines (no warnings)."""
        self.shares, self._warned_at = [], None
        for row in history:
            self._record(int(row["step"]), row.get("zero_variance_share"))

    def _record(self, step: int, share: float | None):
        """Append one step; returns (the last window's judgement or None, whether to warn)."""
        if share is not None:
            self.shares.append(float(share))
        if len(self.shares) < self.window:
            return None, False
        j = judge_signal(self.shares[-self.window :], self.threshold)
        quiet = self._warned_at is not None and step - self._warned_at < self.window
        warn = j is not None and j.flagged and not quiet
        if warn:
            self._warned_at = step
        return j, warn

    def update(self, step: int, share: float | None) -> dict:
        """Record one step's `zero_variance_share`; return {"health/no_signal_share": the last
        window's mean share (fewer steps: theirs), "health/no_signal": its verdict (False until
        a whole window is logged)}. Warns when a window reaches the threshold (see the class)."""
        j, warn = self._record(step, share)
        if warn:
            logger.warning(
                "steps %d-%d: %s", step - self.window + 1, step, j.text(self.dynamic_sampling)
            )
        recent = judge_signal(self.shares[-self.window :], self.threshold)
        return {
            "health/no_signal_share": recent.share if recent else None,
            "health/no_signal": bool(j is not None and j.flagged),
        }

    def judgement(self):
        """The judgement over every logged step (None before the first)."""
        return judge_signal(self.shares, self.threshold)

    def summary(self) -> dict:
        """summary.json's "health" entries of the learning signal, with the text when flagged."""
        j = self.judgement()
        if j is None:
            return {"no_signal": False}
        out = j.as_dict()
        if j.flagged:
            out["no_signal_text"] = j.text(self.dynamic_sampling)
        return out
