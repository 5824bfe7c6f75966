"""The InfoNCE primitive every method's loss is built from (sentence-transformers' ``util`` role).

``info_nce(anchors, candidates, labels, temperature, tile=)``: the mean over anchors of
-log softmax_j(cos(anchor_i, candidate_j) / τ)[labels_i], computed without the (A x C) matrix
(``train.methods.tiled``). ``cosine_blocks`` / ``label_logits`` are its two halves, which the other
losses combine with their own blocks (hard negatives, entities, masks). Cosines are computed in (at
least) float32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from train.methods.tiled import DEFAULT_LOSS_TILE, Block, cross_entropy_blocks, full, logsumexp_blocks

__all__ = ["full", "cos_logits", "unit", "label_logits", "info_nce", "Block", "cross_entropy_blocks",
           "logsumexp_blocks"]


def unit(x: torch.Tensor) -> torch.Tensor:
    """Rows of ``x`` L2-normalised, in at least float32."""
    return F.normalize(full(x), dim=-1)


def cos_logits(anchors: torch.Tensor, candidates: torch.Tensor, temperature: float) -> torch.Tensor:
    """(A, d) x (C, d) -> (A, C) cosine similarities divided by the temperature (dense: for scoring and
    small matrices; losses go through ``logsumexp_blocks``)."""
    return unit(anchors) @ unit(candidates).T / temperature


def label_logits(anchors_unit: torch.Tensor, candidates_unit: torch.Tensor, labels: torch.Tensor,
                 temperature: float) -> torch.Tensor:
    """(A,) cos(anchor_i, candidate_{labels_i}) / τ of unit rows: each anchor's positive logit, row-wise."""
    return (anchors_unit * candidates_unit[labels]).sum(-1) / temperature


def info_nce(
    anchors: torch.Tensor,
    candidates: torch.Tensor,
    labels: torch.Tensor,
    temperature: float,
    *,
    tile: int = DEFAULT_LOSS_TILE,
) -> torch.Tensor:
    """Mean over anchors of -log softmax(cos / τ)[label] (cross-entropy over all candidates)."""
    a, c, labels = unit(anchors), unit(candidates), labels.to(anchors.device)
    block = Block(a, c, scale=1.0 / temperature, label_column=labels)
    return cross_entropy_blocks([block], label_logits(a, c, labels, temperature), tile).mean()
