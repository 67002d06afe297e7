"""Hierarchical percentile bootstrap for bounded means over seeds and problems.

A method's result is the mean over its seeds of each run's mean over units (problems for pass@k,
logged steps for the training reward). One bootstrap replicate draws the seeds with replacement
and, inside, the units with replacement; the interval is the percentile interval of the replicate
statistic. Every replicate is a mean of observed per-unit values, so the interval never leaves the
range of the data (for pass@k: [0, 1]; for a difference of two such means: [-1, 1]), however few
seeds there are - unlike a Student-t interval over 2 seeds of a proportion.

When every run involved was evaluated on the same units (same problem ids in the same order), the
units are drawn jointly: the same problems for every seed and every method, which is the paired
design of `ict compare` (all cells of a grid see the same held-out problems). Otherwise each run
draws its own units. Differences to a baseline pair the seeds when both methods have the same seed
set (one seed draw for both), else draw each method's seeds on their own.

Strata (`strata` {seed: block}, e.g. the warm start each seed trained from, when a study uses
several): the seeds are drawn with replacement within each block, as many as the block holds, so
every replicate keeps the design's blocks and their sizes (the block-to-block difference is fixed
by the design, not resampled); the method then says "stratified by N blocks". One block, or none,
is the plain draw.

Caveat stated in the report: with 1 seed the interval covers evaluation noise only (problems), and
with few seeds the seed level has few distinct resamples and understates seed-to-seed spread (the
null simulation in tests/evidence measures its coverage; docs/compare.md quotes it). The report
uses it as a description; verdicts come from the seed-level tests (ict.evidence.verdict).
Deterministic for a given `seed`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ict.errors import ConfigError
from ict.evidence.intervals import Interval

DEFAULT_RESAMPLES = 4000


@dataclass(frozen=True)
class RunUnits:
    """Per-unit values of one run: `values` [U] (e.g. pass@k of each problem), `ids` [U] or None."""

    values: np.ndarray
    ids: tuple | None = None

    @property
    def mean(self) -> float:
        return float(self.values.mean())


def run_units(values: Sequence[float], ids: Sequence | None = None) -> RunUnits:
    """Validated RunUnits: finite values, ids (if any) one per value."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ConfigError(f"a run needs >= 1 finite per-unit value, got {v.size} values")
    if ids is not None and len(ids) != v.size:
        raise ConfigError(f"{len(ids)} unit ids for {v.size} values; give one id per value")
    return RunUnits(v, tuple(str(i) for i in ids) if ids is not None else None)


def _joint(runs: Sequence[RunUnits]) -> bool:
    """True when every run has the same units (same ids, or no ids and the same count)."""
    first = runs[0]
    if first.ids is None:
        return all(r.ids is None and r.values.size == first.values.size for r in runs)
    return all(r.ids == first.ids for r in runs)


def _unit_means(runs: Sequence[RunUnits], rng: np.random.Generator, r: int) -> np.ndarray:
    """[R, len(runs)]: each run's mean over its resampled units, one column per run."""
    if _joint(runs):
        u = runs[0].values.size
        weights = rng.multinomial(u, np.full(u, 1.0 / u), size=r)  # [R, U]
        values = np.stack([run.values for run in runs])  # [runs, U]
        return weights @ values.T / u
    cols = []
    for run in runs:
        u = run.values.size
        cols.append(rng.multinomial(u, np.full(u, 1.0 / u), size=r) @ run.values / u)
    return np.stack(cols, axis=1)


def _seed_mean(means: np.ndarray, rng: np.random.Generator, strata=None) -> np.ndarray:
    """[R]: mean over seeds drawn with replacement of the per-run replicate means [R, S];
    `strata` [S] (optional): each column's block, the seeds then drawn within each block."""
    r, s = means.shape
    groups = _strata_groups(strata, s)
    if len(groups) <= 1:
        weights = rng.multinomial(s, np.full(s, 1.0 / s), size=r)  # [R, S]
    else:
        weights = np.zeros((r, s))
        for idx in groups:
            weights[:, idx] = rng.multinomial(idx.size, np.full(idx.size, 1.0 / idx.size), size=r)
    return (weights * means).sum(axis=1) / s


def _strata_groups(strata, s: int) -> list[np.ndarray]:
    """[column indices of each block] in order of first appearance; [] without strata."""
    if strata is None:
        return []
    labels = list(strata)
    if len(labels) != s:
        raise ConfigError(f"{len(labels)} block labels for {s} seeds; give one per seed")
    return [np.array([i for i, x in enumerate(labels) if x == b]) for b in dict.fromkeys(labels)]


def _stratified(method: str, strata, s: int) -> str:
    n = len(_strata_groups(strata, s))
    return f"{method}, stratified by {n} blocks" if n > 1 else method


def _method(n_seeds: int) -> str:
    return "bootstrap over problems" if n_seeds == 1 else "hierarchical bootstrap"


def _interval(point: float, stats: np.ndarray, n: int, confidence: float, method: str):
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return Interval(point, float(low), float(high), n, method, confidence)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence}")


def bootstrap_mean(
    runs: Sequence[RunUnits],
    confidence: float = 0.95,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    strata: Sequence | None = None,
) -> Interval:
    """Mean over runs (seeds) of each run's mean over units, with its hierarchical bootstrap
    interval (`method` "hierarchical bootstrap", or "bootstrap over problems" for one run).

    `runs`: one RunUnits per seed; `strata` (optional): each run's block, seeds drawn within
    blocks (module docstring). Bounds lie within [min, max] of all unit values."""
    _check_confidence(confidence)
    if not runs:
        return Interval(math.nan, math.nan, math.nan, 0, "hierarchical bootstrap", confidence)
    rng = np.random.default_rng(seed)
    means = _unit_means(runs, rng, n_resamples)
    stats = _seed_mean(means, rng, strata) if len(runs) > 1 else means[:, 0]
    point = float(np.mean([r.mean for r in runs]))
    method = _stratified(_method(len(runs)), strata, len(runs))
    return _interval(point, stats, len(runs), confidence, method)


def bootstrap_difference(
    values: Mapping[object, RunUnits],
    baseline: Mapping[object, RunUnits],
    confidence: float = 0.95,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    strata: Mapping | None = None,
) -> Interval:
    """mean(values) - mean(baseline) over seeds, each a mean over units, with a bootstrap interval.

    `values`, `baseline`: {seed: RunUnits}. Same seed sets: seeds are paired (one draw for both,
    method "paired hierarchical bootstrap"); else each side draws its own seeds. Units are drawn
    jointly for all runs when they share them (see the module docstring). `strata` {seed: block}
    (optional, covering every seed): seeds are drawn within blocks."""
    _check_confidence(confidence)
    if not values or not baseline:
        return Interval(
            math.nan, math.nan, math.nan, 0, "paired hierarchical bootstrap", confidence
        )
    rng = np.random.default_rng(seed)
    a_keys, b_keys = sorted(values, key=str), sorted(baseline, key=str)
    paired = a_keys == b_keys
    runs = [values[k] for k in a_keys] + [baseline[k] for k in b_keys]
    means = _unit_means(runs, rng, n_resamples)
    ma, mb = means[:, : len(a_keys)], means[:, len(a_keys) :]
    point = float(np.mean([r.mean for r in runs[: len(a_keys)]])) - float(
        np.mean([r.mean for r in runs[len(a_keys) :]])
    )
    n = min(len(a_keys), len(b_keys))
    sa_strata = [strata[k] for k in a_keys] if strata else None
    sb_strata = [strata[k] for k in b_keys] if strata else None
    if paired:
        diffs = ma - mb
        stats = _seed_mean(diffs, rng, sa_strata) if n > 1 else diffs[:, 0]
        method = _stratified("paired " + _method(n), sa_strata, n)
    else:
        sa = _seed_mean(ma, rng, sa_strata) if ma.shape[1] > 1 else ma[:, 0]
        sb = _seed_mean(mb, rng, sb_strata) if mb.shape[1] > 1 else mb[:, 0]
        stats = sa - sb
        method = "unpaired " + _method(max(len(a_keys), len(b_keys)))
        if len(_strata_groups(sa_strata, len(a_keys))) > 1:
            method = _stratified(method, sa_strata, len(a_keys))
    return _interval(point, stats, n, confidence, method)
