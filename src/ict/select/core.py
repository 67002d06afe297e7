"""`select_tokens`: the selector registry and the top-ratio machinery (scope, granularity, ranks).

A selector is one small function registered with `@register_selector(name, ...)`. Two kinds:
- ratio selector (`default_ratio=` given): returns a score float[B, T]; `select_tokens` keeps the
  top `ratio` of valid positions by it (exact count, see `topk.py`), under `scope`/`granularity`.
- mask selector (no `default_ratio`): returns a keep-mask bool[B, T]; `select_tokens` intersects
  it with `mask`. `scope`, `granularity` and `ratio` do not apply to it.
Keyword-only parameters of the function are its options (`select_tokens(..., prob_below=0.02)`).

Compositions `"a+b"` run every part independently on the same `mask` and keep the intersection, so
`js_top+not_spurious` is ICT's top 10% minus STAPO's spurious tokens (the top-k is taken before removing).
`ratio` goes to every ratio part; an option goes to every part that declares it.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ict.errors import ConfigError, DataError
from ict.select.distributed import gather_concat, resolve_group
from ict.select.topk import topk_per_group, topk_token_ids

SCOPES = ("global", "micro_batch", "sequence")
GRANULARITIES = ("position", "token_id")


@dataclass(frozen=True)
class Selector:
    """A registered selector: `fn(ctx, **options) -> score float[B,T] | keep bool[B,T]`.

    Its facts are the one place engines (native trainer, TRL, verl) read them from:
    default_ratio: None for a mask selector; otherwise the fraction kept by default.
    default_scope: the scope used when the caller does not choose one.
    needs: the TokenStats fields the function reads (e.g. ("js",)); "advantages" when it reads them.
    options: its keyword-only options, with their defaults.
    row_local: the score at (b, t) reads only row b's statistics (and, through a group-local
    reference, its group's), so a per-row top-k of it is the same on any batch holding the row's
    group (ict.step.selection_in_forward). Not `uniform`: its draws depend on the whole
    batch's shape.
    """

    name: str
    fn: Callable[..., Tensor]
    default_ratio: float | None  # None: mask selector
    options: tuple[str, ...] = field(default=())
    default_scope: str = "global"
    needs: tuple[str, ...] = field(default=())
    option_defaults: dict = field(default_factory=dict, compare=False)
    row_local: bool = False

    @property
    def takes_ratio(self) -> bool:
        return self.default_ratio is not None


SELECTORS: dict[str, Selector] = {}


def register_selector(
    name: str,
    *,
    default_ratio: float | None = None,
    default_scope: str = "global",
    needs: tuple[str, ...] = (),
    row_local: bool = False,
):
    """Decorator registering `fn(ctx: SelectionContext, *, option=default, ...)` under `name`.

    With `default_ratio`, fn returns a score (higher = kept first); without, a keep-mask.
    `default_scope`, `needs` and `row_local` are facts engines read (see `Selector`). A selector registered
    here is usable from `ict train --method NAME`, `ICTGRPOTrainer` and the verl plugin.
    """
    if "+" in name or not name:
        raise ValueError(f"selector name {name!r} must be non-empty and must not contain '+'")
    if default_scope not in SCOPES:
        raise ValueError(f"default_scope {default_scope!r} is not one of {SCOPES}")

    def decorate(fn):
        params = inspect.signature(fn).parameters.values()
        keyword = [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
        SELECTORS[name] = Selector(
            name,
            fn,
            default_ratio,
            tuple(p.name for p in keyword),
            default_scope,
            tuple(needs),
            {p.name: p.default for p in keyword if p.default is not inspect.Parameter.empty},
            bool(row_local),
        )
        return fn

    return decorate


def parse_selector(name: str) -> list[Selector]:
    """The registered selectors composed by `name` ("js_top+not_spurious" -> [js_top, not_spurious]); ConfigError
    naming the unknown part and close matches otherwise."""
    return _parse_name(name)


def selector_facts(name: str) -> dict:
    """Facts of a (possibly composed) selector: takes_ratio, default_ratio, default_scope, needs,
    options (name -> default), row_local (one part, a row-local score: `Selector.row_local`).
    For a composition: the first ratio part's ratio and scope."""
    parts = _parse_name(name)
    ratio_parts = [p for p in parts if p.takes_ratio]
    first = ratio_parts[0] if ratio_parts else parts[0]
    return {
        "takes_ratio": bool(ratio_parts),
        "default_ratio": first.default_ratio if ratio_parts else None,
        "default_scope": first.default_scope,
        "needs": tuple(dict.fromkeys(n for p in parts for n in p.needs)),
        "options": {k: v for p in parts for k, v in p.option_defaults.items()},
        "row_local": len(parts) == 1 and parts[0].row_local,
    }


def available_selectors() -> list[str]:
    """Registered selector names (compose them with '+', e.g. 'js_top+not_spurious')."""
    return sorted(SELECTORS)


@dataclass
class SelectionContext:
    """What a selector function may read. All tensors [B, T]; `mask` is bool."""

    mask: Tensor
    stats: object | None
    advantages: Tensor | None  # broadcast to [B, T]
    tokens: Tensor | None
    seed: int
    rank: int
    group: object | None  # data-parallel process group, None in one process

    def require_stats(self, selector: str, *fields: str):
        """`stats`, checked to have each field as a [B, T] tensor."""
        if self.stats is None:
            raise ConfigError(
                f"selector {selector!r} needs token statistics: pass stats=ict.stats.token_stats(...)"
            )
        for name in fields:
            value = getattr(self.stats, name, None)
            if not isinstance(value, Tensor) or value.shape != self.mask.shape:
                raise DataError(
                    f"selector {selector!r} needs stats.{name} as a tensor of shape "
                    f"{tuple(self.mask.shape)} (the mask's), got {_describe(value)}"
                )
        return self.stats

    def require_advantages(self, selector: str) -> Tensor:
        if self.advantages is None:
            raise ConfigError(
                f"selector {selector!r} needs advantages: pass advantages= ([B] or [B, T], "
                "from ict.loss.compute_advantages)"
            )
        return self.advantages

    def valid_values(self, values: Tensor) -> Tensor:
        """values[mask] as 1-D, concatenated over ranks when distributed (rank order)."""
        local = values[self.mask]
        return local if self.group is None else gather_concat(local, self.group)[0]


def select_tokens(
    name: str,
    mask: Tensor,
    *,
    stats=None,
    advantages: Tensor | None = None,
    tokens: Tensor | None = None,
    ratio: float | None = None,
    scope: str | None = None,
    granularity: str = "position",
    micro_batch_size: int | None = None,
    seed: int = 0,
    process_group=None,
    micro_batch_ids: Tensor | None = None,
    **selector_options,
) -> Tensor:
    """Select response tokens to update. Returns bool[B, T], always a subset of `mask`.

    mask: bool[B, T] valid response positions. stats: TokenStats-like (fields entropy, renyi2,
    logprob, js, each [B, T]). advantages: [B] or [B, T]. tokens: long[B, T] (token_id granularity).
    ratio: fraction in (0, 1] kept by ratio selectors (default: the selector's: ict 0.10,
    entropy 0.20, random 0.10). scope (None: each selector's `default_scope`, e.g. ict "sequence",
    entropy "global"): "global" (whole batch, across ranks of `process_group`,
    default the world group when torch.distributed is initialised), "micro_batch" (each block of
    `micro_batch_size` consecutive rows) or "sequence" (each row, at least one token per row with
    valid tokens). granularity: "position" or "token_id". seed: for `uniform` (offset per rank).
    micro_batch_ids: long [B], the micro-batch of each row, in place of `micro_batch_size` when
    micro-batches are not blocks of consecutive rows (TRL shuffles before it splits).
    """
    parts = _parse_name(name)
    mask = _check_mask(mask)
    if micro_batch_ids is not None:
        micro_batch_ids = torch.as_tensor(micro_batch_ids, device=mask.device).long()
        if micro_batch_ids.shape != mask.shape[:1]:
            raise DataError(
                f"micro_batch_ids must be [B] = {tuple(mask.shape[:1])}, got "
                f"{tuple(micro_batch_ids.shape)}"
            )
    blocks = micro_batch_size if micro_batch_ids is None else 1
    for part in parts if scope is None else ():
        if part.takes_ratio:
            _check_choices(part.default_scope, granularity, blocks, tokens, mask)
    _check_choices(scope or "global", granularity, blocks, tokens, mask)
    ratio_parts = [p for p in parts if p.default_ratio is not None]
    if ratio is not None:
        if not ratio_parts:
            raise ConfigError(
                f"selector {name!r} takes no ratio; drop ratio or use one of the ratio selectors "
                f"{sorted(n for n, s in SELECTORS.items() if s.default_ratio is not None)}"
            )
        _check_ratio(ratio)
    _check_options(name, parts, selector_options)

    group = resolve_group(process_group)
    rank = 0
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank = torch.distributed.get_rank()
    ctx = SelectionContext(
        mask=mask,
        stats=stats,
        advantages=_broadcast_advantages(advantages, mask),
        tokens=tokens,
        seed=int(seed),
        rank=rank,
        group=group,
    )
    selected = mask.clone()
    for part in parts:
        options = {k: v for k, v in selector_options.items() if k in part.options}
        out = part.fn(ctx, **options)
        if part.default_ratio is None:
            keep = out.to(torch.bool) & mask
        else:
            part_ratio = part.default_ratio if ratio is None else ratio
            part_scope = part.default_scope if scope is None else scope
            keep = _top_ratio(
                part.name, out, ctx, part_ratio, part_scope, granularity, micro_batch_size,
                micro_batch_ids,
            )  # fmt: skip
        selected &= keep
    return selected


def _top_ratio(
    name, scores, ctx, ratio, scope, granularity, micro_batch_size, micro_batch_ids=None
) -> Tensor:
    """Top `ratio` of valid positions by `scores` [B, T] under scope/granularity -> bool[B, T]."""
    mask = ctx.mask
    if scores.shape != mask.shape:
        raise DataError(
            f"selector {name!r} returned shape {tuple(scores.shape)}, expected {tuple(mask.shape)}"
        )
    values = scores[mask]
    if not torch.isfinite(values).all():
        raise DataError(
            f"selector {name!r}: scores are NaN or infinite on valid positions; check the token "
            "statistics (logits with NaN?) before selecting"
        )
    rows = torch.nonzero(mask, as_tuple=True)[0]
    if scope == "global":
        groups = None
    elif scope == "micro_batch":
        groups = rows // micro_batch_size if micro_batch_ids is None else micro_batch_ids[rows]
    else:
        groups = rows
    ids = ctx.tokens[mask].to(torch.long) if granularity == "token_id" else None
    if ids is not None and (ids < 0).any():
        raise DataError("granularity='token_id' needs non-negative token ids on valid positions")

    across_ranks = scope == "global" and ctx.group is not None
    if across_ranks:  # the same computation on every rank, on the concatenation of all ranks
        n_local = values.numel()
        values, offset = gather_concat(values, ctx.group)
        if ids is not None:
            ids = gather_concat(ids, ctx.group)[0]
    if ids is None:
        keep = topk_per_group(values, ratio, groups)
    else:
        keep = topk_token_ids(values, ids, ratio, groups)
    if across_ranks:
        keep = keep[offset : offset + n_local]

    out = torch.zeros_like(mask)
    out[mask] = keep
    return out


def _parse_name(name) -> list[Selector]:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(
            f"selector must be a name, got {name!r}; choose from {available_selectors()}"
        )
    parts = []
    for part in name.split("+"):
        part = part.strip().lower()
        if part not in SELECTORS:
            close = difflib.get_close_matches(part, SELECTORS, n=2)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise ConfigError(
                f"unknown selector {part!r} in {name!r}{hint}; choose from "
                f"{available_selectors()} or a composition such as 'js_top+not_spurious'"
            )
        parts.append(SELECTORS[part])
    return parts


def _check_mask(mask) -> Tensor:
    if not isinstance(mask, Tensor) or mask.dim() != 2:
        raise DataError(f"mask must be a [B, T] tensor, got {_describe(mask)}")
    return mask if mask.dtype == torch.bool else mask != 0


def _check_choices(scope, granularity, micro_batch_size, tokens, mask) -> None:
    if scope not in SCOPES:
        raise ConfigError(f"unknown scope {scope!r}; choose from {list(SCOPES)}")
    if granularity not in GRANULARITIES:
        raise ConfigError(f"unknown granularity {granularity!r}; choose from {list(GRANULARITIES)}")
    if scope == "micro_batch" and (
        isinstance(micro_batch_size, bool)
        or not isinstance(micro_batch_size, int)
        or micro_batch_size < 1
    ):
        raise ConfigError(
            f"scope='micro_batch' needs micro_batch_size as a positive int (rows per micro-batch), "
            f"got {micro_batch_size!r}"
        )
    if granularity == "token_id":
        if tokens is None:
            raise ConfigError("granularity='token_id' needs tokens= (the [B, T] token ids)")
        if not isinstance(tokens, Tensor) or tokens.shape != mask.shape:
            raise DataError(
                f"tokens must have the mask's shape {tuple(mask.shape)}, got {_describe(tokens)}"
            )


def _check_ratio(ratio) -> None:
    ok = isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and 0 < ratio <= 1
    if not ok:
        raise ConfigError(f"ratio must be a fraction in (0, 1] (e.g. 0.1 keeps 10%), got {ratio!r}")


def _check_options(name, parts, options) -> None:
    known = sorted({o for p in parts for o in p.options})
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(
            f"selector {name!r} has no option(s) {unknown}; its options are {known or 'none'}"
        )


def _broadcast_advantages(advantages, mask) -> Tensor | None:
    if advantages is None:
        return None
    adv = torch.as_tensor(advantages, device=mask.device)
    if adv.shape == mask.shape[:1]:
        return adv[:, None].expand(mask.shape)
    if adv.shape == mask.shape:
        return adv
    raise DataError(
        f"advantages must have shape [B] = {tuple(mask.shape[:1])} or [B, T] = "
        f"{tuple(mask.shape)}, got {tuple(adv.shape)}"
    )


def _describe(value) -> str:
    if isinstance(value, Tensor):
        return f"tensor of shape {tuple(value.shape)}"
    return type(value).__name__
