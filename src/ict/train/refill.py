"""DAPO's dynamic sampling with refill (Yu et al. 2025; verl's `algorithm.filter_groups`): steps 1-3
of a training step repeated until the batch holds B groups whose rewards differ.

A group whose G rewards are all equal has advantage 0 on every row: it carries no policy-gradient
signal. With `dynamic_sampling`, round r = 0, 1, ... of step k draws the next B prompts of the
run's prompt order (ict.train.problems.PromptSampler, whose state, the number of prompts consumed,
is in the checkpoint: a resumed run draws the same prompts), samples G responses to each with seed
`round_seed(plan, k, r)` (round 0: the seed of a step without refill, so a step whose first round
holds B informative groups is exactly that step) and scores them. Rounds stop once B informative
groups are in hand, or after `max_generation_rounds`. The step's batch is then, in draw order:

- the first B informative groups drawn. Informative groups drawn beyond them (the last round's
  surplus) are dropped, their prompts consumed, as verl's DAPO trainer drops them
  (`batch[:train_batch_size * n]`);
- when the cap is hit with k < B informative groups (`dynamic/cap_hit`), those k and the first
  B - k groups without signal drawn, so that the step still trains on B groups of G rows (their
  advantages are 0: no gradient of the policy loss; `drop_zero_variance_groups` leaves them out of
  the update altogether). verl raises an error there instead.

Every method and the dense warm-up then run on this batch as on any other. The step's metrics
(`refill_metrics`): `dynamic/rounds`, `dynamic/prompts` (drawn), `dynamic/cap_hit`,
`dynamic/informative_groups` (in the batch), `dynamic/surplus_groups` (informative, dropped) and
`dynamic/sampled_zero_variance_share` (of every group drawn); the sampling metrics
(`ict.train.rollout.rollout_metrics`, `rollout/sequences`: the cost) run over every round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ict.generation import Rollout
from ict.loss import zero_variance_rows
from ict.train.rollout import RolloutBatch, rollout_metrics


def round_seed(plan, step: int, round_: int) -> int:
    """The sampling seed of generation round `round_` (0-based) of `step`: the plan's named
    refill stream (ict.step.SeedStreams.refill; round 0 is the step's sampling seed)."""
    return plan.seeds.refill(step, round_)


def informative_groups(batch: RolloutBatch, group_size: int) -> list[bool]:
    """Per group of `group_size` consecutive rows: whether its rewards differ (not all equal)."""
    zero = zero_variance_rows(batch.rewards, batch.rollout.prompt_index.cpu())
    return (~zero.view(-1, group_size)[:, 0]).tolist()


def choose_groups(informative: list[bool], count: int) -> tuple[list[int], int]:
    """The groups a step trains on, from the flags of every group drawn (in draw order): the
    first `count` informative ones, topped up with the first groups without signal when fewer
    are informative. Returns (their indices in draw order, the informative groups left over)."""
    signal = [i for i, flag in enumerate(informative) if flag]
    picked = signal[:count]
    if len(picked) < count:
        silent = [i for i, flag in enumerate(informative) if not flag]
        picked += silent[: count - len(picked)]
    return sorted(picked), max(0, len(signal) - count)


@dataclass
class Refill:
    """What `gather` needs from its trainer. draw(n): the next n problems of the run's prompt
    order; sample(problems, seed): (RolloutBatch, metrics) of G responses each, scored (the
    trainer's `collect_rollout`); groups: B; group_size: G; max_rounds: the cap; pad_id: the
    tokenizer's pad token id (merging rounds of different widths)."""

    draw: Callable[[int], list]
    sample: Callable[[list, int], tuple[RolloutBatch, dict]]
    groups: int
    group_size: int
    max_rounds: int
    pad_id: int

    def gather(self, plan, step: int) -> tuple[RolloutBatch, dict]:
        """The step's batch of B groups (see the module docstring) and its metrics: the
        sampling metrics over every round and the `dynamic/*` counts."""
        rounds: list[RolloutBatch] = []
        flags: list[bool] = []
        while len(rounds) < self.max_rounds and sum(flags) < self.groups:
            batch, _ = self.sample(self.draw(self.groups), round_seed(plan, step, len(rounds)))
            rounds.append(batch)
            flags += informative_groups(batch, self.group_size)
        picked, surplus = choose_groups(flags, self.groups)
        merged = take_groups(rounds, picked, self.groups, self.group_size, self.pad_id)
        kept = sum(flags[i] for i in picked)
        metrics = rollout_metrics(rounds) | {
            "dynamic/rounds": len(rounds),
            "dynamic/prompts": len(flags),
            "dynamic/cap_hit": kept < self.groups,
            "dynamic/informative_groups": kept,
            "dynamic/surplus_groups": surplus,
            "dynamic/sampled_zero_variance_share": 1.0 - sum(flags) / max(1, len(flags)),
        }
        return merged, metrics


def take_groups(
    rounds: list[RolloutBatch], picked: list[int], per_round: int, group_size: int, pad_id: int
) -> RolloutBatch:
    """One RolloutBatch of the groups `picked` (indices over the rounds' groups in draw order,
    `per_round` groups a round), prompt i of the result being the i-th picked. Prompts are
    left-padded and responses right-padded (with `pad_id`, attention 0) to the widest round's."""
    where = [(i // per_round, i % per_round) for i in picked]
    used = sorted({r for r, _ in where})
    if used == [0] and len(picked) == per_round and len(rounds) == 1:
        return rounds[0]  # the first round as it is (a step without refill)
    width_p = max(rounds[r].rollout.prompt_length for r in used)
    width_r = max(
        rounds[r].rollout.input_ids.shape[1] - rounds[r].rollout.prompt_length for r in used
    )
    ids, attn, resp, texts, prompts, rewards, formatted = [], [], [], [], [], [], []
    for r, g in where:
        batch, rollout = rounds[r], rounds[r].rollout
        rows = slice(g * group_size, (g + 1) * group_size)
        p = rollout.prompt_length
        pad = (width_p - p, width_r - (rollout.input_ids.shape[1] - p))
        ids.append(torch.nn.functional.pad(rollout.input_ids[rows], pad, value=pad_id))
        attn.append(torch.nn.functional.pad(rollout.attention_mask[rows], pad, value=0))
        resp.append(torch.nn.functional.pad(rollout.response_mask[rows], pad, value=False))
        texts += rollout.texts[rows]
        prompts.append(batch.prompts[g])
        rewards.append(batch.rewards[rows])
        formatted += batch.formatted[rows] if batch.formatted else [None] * group_size
    first = rounds[used[0]].rollout
    rollout = Rollout(
        prompt_index=torch.arange(len(picked), device=first.prompt_index.device).repeat_interleave(
            group_size
        ),
        input_ids=torch.cat(ids),
        attention_mask=torch.cat(attn),
        response_mask=torch.cat(resp),
        prompt_length=width_p,
        texts=texts,
        prompts=prompts,
    )
    return RolloutBatch(
        rollout, torch.cat(rewards), prompts, formatted,
        sum(b.errors for b in rounds), sum(b.timeouts for b in rounds),
        sum(b.seconds for b in rounds),
    )  # fmt: skip
