"""The InfoNCE primitive every method's loss is built from (sentence-transformers' ``util`` role).

``info_nce(anchors, candidates, labels, temperature, tile=)``: the mean over anchors of
-log softmax_j(cos(anchor_i, candidate_j) / τ)[labels_i], computed without the (A x C) matrix
(``train.methods.tiled``): a cosine ``Block`` (``normalize=True``: no normalised copy of the batch)
and ``label_logits``, which the other losses combine with their own blocks (hard negatives,
entities, masks). Cosines are computed in (at least) float32.
"""

from __future__ import annotations

import torch

from train.methods.tiled import (
    DEFAULT_LOSS_TILE, NORMALIZE_EPS, Block, cross_entropy_blocks, full, logsumexp_blocks, unit,
)

__all__ = ["full", "cos_logits", "unit", "cosine_rows", "label_logits", "row_index", "info_nce", "Block", "cross_entropy_blocks",
           "logsumexp_blocks"]


def cos_logits(anchors: torch.Tensor, candidates: torch.Tensor, temperature: float) -> torch.Tensor:
    """(A, d) x (C, d) -> (A, C) cosine similarities divided by the temperature (dense: for scoring and
    small matrices; losses go through ``logsumexp_blocks``)."""
    return unit(anchors) @ unit(candidates).T / temperature


def cosine_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(A,) cos(a_i, b_i) in at least float32, as ``unit(a_i)·unit(b_i)`` but without normalised copies."""
    a, b = full(a), full(b)
    return (a * b).sum(-1) / (a.norm(dim=-1).clamp_min(NORMALIZE_EPS) * b.norm(dim=-1).clamp_min(NORMALIZE_EPS))


def label_logits(anchors: torch.Tensor, candidates: torch.Tensor, labels: torch.Tensor | slice,
                 temperature: float) -> torch.Tensor:
    """(A,) cos(anchor_i, candidate_{labels_i}) / τ: each anchor's positive logit, row-wise."""
    return cosine_rows(anchors, candidates[labels]) / temperature


def row_index(rows: torch.Tensor | slice | None, n: int, device) -> tuple[torch.Tensor, torch.Tensor | slice]:
    """Rows of a global batch of ``n`` (None: all) as (indices, selector): the selector is a slice where the
    rows are contiguous (a worker's own rows, ``train.distributed.local_rows``), so that selecting embeddings
    with it gives a view instead of a (rows x d) copy."""
    if rows is None:
        rows = slice(0, n)
    if isinstance(rows, slice):
        start, stop, step = rows.indices(n)
        if step != 1:
            raise ValueError(f"rows {rows} must be a contiguous slice")
        return torch.arange(start, stop, device=device), slice(start, stop)
    index = rows.to(device=device, dtype=torch.long)
    return index, index


def info_nce(
    anchors: torch.Tensor,
    candidates: torch.Tensor,
    labels: torch.Tensor | slice,
    temperature: float,
    *,
    tile: int = DEFAULT_LOSS_TILE,
) -> torch.Tensor:
    """Mean over anchors of -log softmax(cos / τ)[label] (cross-entropy over all candidates). ``labels``:
    one candidate row per anchor, or a slice of them (contiguous labels: no copy)."""
    label_index, label_rows = row_index(labels, candidates.shape[0], anchors.device)
    block = Block(anchors, candidates, scale=1.0 / temperature, normalize=True, label_column=label_index)
    return cross_entropy_blocks([block], label_logits(anchors, candidates, label_rows, temperature), tile).mean()
