"""Token selectors: which response tokens a policy update trains on.

    from ict.select import select_tokens
    selected = select_tokens("js_top", mask, stats=stats)              # top 10% of each response by JS
    selected = select_tokens("entropy_top+not_spurious", mask, stats=stats, advantages=adv)

The built-ins are `SELECTORS` (`available_selectors()`; listed, generated, in docs/ARCHITECTURE.md
and `ict train --help`); compose with '+'. Add one with `register_selector`. A selector says which tokens; a method (ict.methods) is a
selector plus a paper's reference, scope, loss and warm-up.
"""

from ict.select import selectors as _selectors  # noqa: F401  (registers the built-ins)
from ict.select.core import (
    GRANULARITIES,
    SCOPES,
    SELECTORS,
    SelectionContext,
    Selector,
    available_selectors,
    register_selector,
    select_tokens,
)
from ict.select.overlap import jaccard
from ict.select.topk import keep_count, topk_per_group, topk_token_ids

__all__ = [
    "GRANULARITIES",
    "SCOPES",
    "SELECTORS",
    "SelectionContext",
    "Selector",
    "available_selectors",
    "jaccard",
    "keep_count",
    "register_selector",
    "select_tokens",
    "topk_per_group",
    "topk_token_ids",
]
