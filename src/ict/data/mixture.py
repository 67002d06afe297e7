"""Task mixtures: several task specs with weights, sampled into one seeded, deterministic list.

Spec: `mix:<spec>@<weight>,<spec>@<weight>,...`, e.g. `mix:gsm8k@0.5,math@0.5` (the paper's
training data: GSM8K train + MATH train). A weight is a positive number (default 1; weights are
normalised); commas inside brackets of a component (rg list values) do not split it. Each item
keeps its own prompt and verifier and records its component in `metadata["mix_component"]`.

Sampling, for `size` items in total: component i gets n_i = round(size * w_i / sum w) items
(largest remainder, ties to the earlier component), drawn from its pool in a seeded permutation
(a pool smaller than n_i is repeated in fresh permutations); the result is shuffled with the same
seed. Without `size`, the largest size for which no pool repeats is used. Benchmark components
are decontaminated against their evaluation sets before sampling (see ict.data.decontam).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ict.data.benchmarks import BENCHMARKS
from ict.data.items import Item
from ict.data.rg import rg_task_names
from ict.errors import DataError

MIX_PREFIX = "mix:"


def split_specs(text: str) -> list[str]:
    """Split on the commas that separate specs, not those inside [...] or {...} (rg list values)."""
    specs, depth, current = [], 0, ""
    for char in text:
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        if char == "," and depth == 0:
            specs.append(current)
            current = ""
        else:
            current += char
    specs.append(current)
    return [s.strip() for s in specs if s.strip()]


def parse_mixture(spec: str) -> list[tuple[str, float]]:
    """ "mix:gsm8k@0.5,math@0.5" -> [("gsm8k", 0.5), ("math", 0.5)]; DataError on bad weights."""
    body = spec.strip().removeprefix(MIX_PREFIX)
    components = []
    for part in split_specs(body):
        head, at, tail = part.rpartition("@")
        weight = 1.0
        if at:
            try:
                weight = float(tail)
            except ValueError as err:
                raise DataError(
                    f"mixture component {part!r}: weight {tail!r} is not a number; "
                    "write <spec>@<weight>, e.g. gsm8k@0.5"
                ) from err
            part = head.strip()
        if not math.isfinite(weight) or weight <= 0:
            raise DataError(f"mixture component {part!r}: weight must be > 0, got {weight}")
        if part.startswith(MIX_PREFIX):
            raise DataError(f"mixture {spec!r}: a mixture cannot contain another mixture")
        components.append((part, weight))
    if not components:
        raise DataError(f"mixture {spec!r} has no components; write mix:gsm8k@0.5,math@0.5")
    return components


def apportion(size: int, weights: Sequence[float]) -> list[int]:
    """Integer counts summing to `size`, proportional to `weights` (largest remainder)."""
    total = sum(weights)
    exact = [size * w / total for w in weights]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: size - sum(counts)]:
        counts[i] += 1
    return counts


def draw(pool: Sequence[Item], count: int, rng: np.random.Generator) -> list[Item]:
    """`count` items of `pool` in seeded permutations (repeating the pool when it is too small)."""
    out: list[Item] = []
    while len(out) < count:
        order = rng.permutation(len(pool))[: count - len(out)]
        out.extend(pool[int(i)] for i in order)
    return out


def mix_items(
    pools: Sequence[tuple[str, float, Sequence[Item]]], size: int | None, seed: int
) -> list[Item]:
    """The mixture of `pools` = [(component spec, weight, items)] (see the module docstring)."""
    for spec, _, pool in pools:
        if not pool:
            raise DataError(f"mixture component {spec!r} has no items")
    weights = [w for _, w, _ in pools]
    if size is None:
        total = sum(weights)
        size = int(min(len(pool) * total / w for _, w, pool in pools))
    counts = apportion(size, weights)
    rng = np.random.default_rng([seed, 0x6D6978])
    mixed = []
    for (spec, _, pool), count in zip(pools, counts, strict=True):
        for item in draw(pool, count, rng):
            mixed.append(_tagged(item, spec))
    return [mixed[int(i)] for i in rng.permutation(len(mixed))]


def _tagged(item: Item, spec: str) -> Item:
    return Item(
        id=item.id,
        task=item.task,
        question=item.question,
        answer=item.answer,
        messages=item.messages,
        verifier=item.verifier,
        metadata={**item.metadata, "mix_component": spec},
    )


def load_mixture(
    components: str | Sequence[tuple[str, float]],
    load: Callable[..., list[Item]],
    split: str = "train",
    seed: int = 0,
    size: int | None = None,
    *,
    data_dir=None,
) -> list[Item]:
    """Items of a mixture spec (or a list of (spec, weight)), each component read by `load`
    (`ict.data.load_task`: load(spec, split, seed, size, data_dir=...)).

    Procedural components (reasoning-gym) are generated with n_i items; dataset components are
    read in full and sampled.
    """
    if isinstance(components, str):
        components = parse_mixture(components)
    if not components:
        raise DataError("a mixture needs at least one (spec, weight) component")
    counts = apportion(size, [w for _, w in components]) if size is not None else None
    pools = []
    for index, (spec, weight) in enumerate(components):
        want = counts[index] if counts is not None and _is_rg(spec) else None
        pool = load(spec, split, seed, want, data_dir=data_dir)
        pools.append((spec, float(weight), pool))
    return mix_items(pools, size, seed)


def _is_rg(spec: str) -> bool:

    name = spec.split("?", 1)[0]
    return name.startswith("rg:") or (name not in BENCHMARKS and name in rg_task_names())
