"""The loss's token masks and its normaliser, written once for every engine (METHOD.md, "Policy
loss").

    M, D, K, D_K = loss_masks(mask, selected, normalize_by="selected", kl_on="selected")
    counts = row_counts(mask, selected, loss=config)   # RowCounts, float [B] each
    counts.tokens   # D per row: the normaliser's tokens (selected, or valid)
    counts.rows     # 1 where a row has a normaliser token
    counts.loss     # the row's share of the loss's normaliser (the ladder below), None without a
                    # LossConfig; `kl_tokens`, `kl_loss`: the KL term's (D_K)

The ladder (`normaliser_shares`): token_mean counts D tokens, seq_mean_token_mean the rows with
one, seq_mean_token_sum_norm max_response_length (or T) per row. Sums of the shares over any rows
(an update's micro-batches, every process's rows) are the normaliser of those rows, so an engine
sums `counts` over what one optimizer update sees: `LossConfig.count` is that sum, the native
update's, TRL's and verl's normaliser alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


def loss_masks(
    mask: Tensor, selected: Tensor | None = None, *, normalize_by: str = "selected",
    kl_on: str = "selected",
) -> tuple[Tensor, Tensor, Tensor, Tensor]:  # fmt: skip
    """The loss's token masks, bool [B, T] each: (M, D, K, D_K).

    M = valid & selected, the policy and entropy terms' tokens; D their normaliser's tokens (M for
    normalize_by="selected", valid for "valid"); K the KL term's tokens (M, or valid for
    kl_on="valid"); D_K its normaliser's tokens (D, or valid). selected None: every valid token.
    The one definition every engine's loss and normaliser count from."""
    valid = mask.bool()
    M = valid if selected is None else valid & selected.bool().to(valid.device)
    D = M if normalize_by == "selected" else valid
    K, D_K = (M, D) if kl_on == "selected" else (valid, valid)
    return M, D, K, D_K


def normaliser_shares(tokens: Tensor, loss_agg: str, width: int) -> Tensor:
    """Each row's share of an aggregation's normaliser, float [B], from its normaliser tokens
    `tokens` (float [B]): token_mean the tokens; seq_mean_token_mean 1 where a row has one;
    seq_mean_token_sum_norm `width` (max_response_length, or T). The one ladder."""
    if loss_agg == "token_mean":
        return tokens
    if loss_agg == "seq_mean_token_mean":
        return (tokens > 0).float()
    return tokens.new_full(tokens.shape, float(width))


@dataclass(frozen=True)
class RowCounts:
    """A selection's normaliser counts per row, float [B] each, to be summed by an engine over the
    rows of one optimizer update (and its processes): `tokens` the normaliser's tokens D, `rows`
    1 where a row has one, `loss` the row's share of `LossConfig.count` (None without a
    LossConfig); `kl_tokens` / `kl_loss` the KL term's (D_K; None without a LossConfig)."""

    tokens: Tensor
    rows: Tensor
    loss: Tensor | None = None
    kl_tokens: Tensor | None = None
    kl_loss: Tensor | None = None

    def take(self, index: Tensor) -> RowCounts:
        """The counts of rows `index` (long [n]), in that order."""
        return RowCounts(*(None if v is None else v[index] for v in self._values()))

    def split(self, sizes: list[int]) -> list[RowCounts]:
        """The counts of consecutive blocks of `sizes` rows (an engine's micro-batches)."""
        parts = [[None] * len(sizes) if v is None else v.split(sizes) for v in self._values()]
        return [RowCounts(*block) for block in zip(*parts, strict=True)]

    def _values(self) -> tuple:
        return self.tokens, self.rows, self.loss, self.kl_tokens, self.kl_loss


def row_counts(
    mask: Tensor, selected: Tensor | None = None, *, normalize_by: str | None = None, loss=None
) -> RowCounts:
    """Per-row normaliser counts of `selected` (bool [B, T]; None: every valid token) on the
    valid `mask` (bool [B, T]). With a LossConfig `loss`: its normalize_by and kl_on, and each
    row's shares (`normaliser_shares`) of the policy and KL terms; without, `normalize_by`
    ("selected" by default) and tokens and rows only."""
    if loss is not None:
        normalize_by, kl_on = loss.normalize_by, loss.kl_on
    else:
        normalize_by, kl_on = normalize_by or "selected", "selected"
    _, D, _, D_K = loss_masks(mask, selected, normalize_by=normalize_by, kl_on=kl_on)
    tokens = D.sum(-1).float()
    rows = (tokens > 0).float()
    if loss is None:
        return RowCounts(tokens, rows)
    width = loss.max_response_length or mask.shape[1]
    kl_tokens = D_K.sum(-1).float()
    return RowCounts(
        tokens, rows, normaliser_shares(tokens, loss.loss_agg, width), kl_tokens,
        normaliser_shares(kl_tokens, loss.loss_agg, width),
    )  # fmt: skip


__all__ = ["RowCounts", "loss_masks", "normaliser_shares", "row_counts"]
