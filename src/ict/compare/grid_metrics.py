"""Per-run numbers a study computes after its cells trained: registered metrics of the grid.

A study (ict.compare.study) names metrics in its preset (`study.metrics: {NAME: settings}`); its
`metrics` stage runs each over the trained cells of a block and writes RUN/<NAME>.json (resumable:
a cell with the file is skipped). The report reads `GridMetric.value` of that file per run
(ict.report.secondary.arm_values) and prints it under `heading` with `text` (formatted with the
settings). A new per-run number is one `GridMetric` registered here (`register_metric`).

`kl_to_start`: the mean token KL of a cell's final policy to the start model, KL(pi || pi_start)
in nats at the cells' sampling temperature, over the response tokens of `samples` samples of the
final policy on each of the first `problems` held-out problems (`seed`: the sampling seed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ict.data import HELDOUT_SPLIT
from ict.files import write_json_atomic


@dataclass(frozen=True)
class GridMetric:
    """A registered per-run number: `run(cells, start, settings, log)` writes RUN/<name>.json for
    each trained cell without one; `value` is the number's key in that file; `heading` and `text`
    (a str.format template over the settings and `how`, the command that ran it) are what the
    report prints; `digits`: decimals in the report."""

    name: str
    run: Callable[[Sequence[Any], Any, Mapping, Callable[[str], None]], None]
    value: str
    heading: str
    text: str
    digits: int = 3
    defaults: Mapping[str, Any] = None  # type: ignore[assignment]

    def settings(self, given: Mapping | None) -> dict:
        """The metric's settings: its defaults with the preset's on top (a preset may add `how`,
        the command its report names, and `after_the_run`, a note that the metric was not
        declared before the cells ran)."""
        return {**(self.defaults or {}), **(given or {})}

    def path(self, run_dir: Path) -> Path:
        return Path(run_dir) / f"{self.name}.json"


GRID_METRICS: dict[str, GridMetric] = {}


def register_metric(metric: GridMetric) -> GridMetric:
    """Add `metric` to GRID_METRICS under its name (a preset names it in `study.metrics`)."""
    GRID_METRICS[metric.name] = metric
    return metric


def token_kl(policy, start, rollout, temperature: float) -> tuple[float, int]:
    """(mean over response tokens of KL(pi || pi_start) in nats, the number of tokens), both
    distributions at the sampling `temperature`, on `rollout` (ict.generation.Rollout: [N, P + R],
    responses sampled from `policy`)."""
    import torch

    ids, attn = rollout.input_ids, rollout.attention_mask
    positions = (attn.long().cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        lp, lq = (
            torch.log_softmax(
                m(ids, attention_mask=attn, position_ids=positions).logits[:, :-1].float()
                / temperature,
                dim=-1,
            )
            for m in (policy, start)
        )
        kl = (lp.exp() * (lp - lq)).sum(-1)  # [N, P + R - 1]: the token at t + 1 given t
    mask = rollout.response_mask[:, 1:]
    return float(kl[mask].mean()), int(mask.sum())


def run_kl_to_start(cells, start, settings: Mapping, log: Callable[[str], None]) -> None:
    """RUN/kl_to_start.json for every trained cell of `cells` (one block: they differ in method and
    seed only) without one; `start`: the block's ict.compare.grid.StartPoint. The problems load
    once."""
    from ict.compare.grid import load_for
    from ict.data import load_task
    from ict.generation import generate
    from ict.models import format_prompt
    from ict.train.problems import task_spec

    metric = GRID_METRICS["kl_to_start"]
    todo = [
        c for c in cells
        if not metric.path(c.run_dir).is_file() and (c.run_dir / "summary.json").is_file()
    ]  # fmt: skip
    if not todo:
        return
    cfg = todo[0].config
    problems, samples, seed = settings["problems"], settings["samples"], settings["seed"]
    base, tokenizer = start.start_model(cfg)
    items = load_task(task_spec(cfg), split=HELDOUT_SPLIT, size=problems)
    prompts = [
        format_prompt(tokenizer, it.messages, system=cfg.system_prompt,
                      chat_template=cfg.chat_template)
        for it in items
    ]  # fmt: skip
    for cell in todo:
        policy, _ = load_for(cell.config, cell.run_dir)
        rollout = generate(
            policy, tokenizer, prompts, num_samples=samples, temperature=cfg.temperature,
            top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens, batch_size=256, seed=seed,
            stop=cfg.stop,
        )  # fmt: skip
        kl, tokens = token_kl(policy, base, rollout, cfg.temperature)
        write_json_atomic(
            metric.path(cell.run_dir),
            {"kl_mean_nats": kl, "tokens": tokens, "problems": len(items), "samples": samples,
             "temperature": cfg.temperature, "split": HELDOUT_SPLIT, "seed": seed,
             "step": cfg.max_steps},
        )  # fmt: skip
        log(f"{cell.tag} KL to the start {kl:.4f} nats over {tokens} tokens")


register_metric(
    GridMetric(
        "kl_to_start",
        run_kl_to_start,
        value="kl_mean_nats",
        heading="Mean token KL of the final policy to the start model",
        text="KL(pi_final || pi_start) in nats at the sampling temperature, averaged over the "
        "response tokens of {samples} samples of the final policy on each of the first "
        "{problems} test problems ({how}).",
        digits=4,
        defaults={"problems": 64, "samples": 8, "seed": 1234},
    )
)
