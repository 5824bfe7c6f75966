"""The InfoNCE primitive every method's loss is built from (sentence-transformers' ``util`` role).

``info_nce(anchors, candidates, labels, temperature, logit_bias, mask)``:
logits_ij = cos(anchor_i, candidate_j) / temperature + logit_bias_ij, with
masked entries set to -inf, then cross-entropy with target ``labels[i]``.
Cosines are computed in (at least) float32 even under autocast.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def full(x: torch.Tensor) -> torch.Tensor:
    """``x`` in at least float32: half types (autocast) are upcast, float64 is kept (exactness tests)."""
    return x if x.dtype == torch.float64 else x.float()


def cos_logits(anchors: torch.Tensor, candidates: torch.Tensor, temperature: float) -> torch.Tensor:
    """(A, d) x (C, d) -> (A, C) cosine similarities divided by the temperature."""
    a = F.normalize(full(anchors), dim=-1)
    c = F.normalize(full(candidates), dim=-1)
    return a @ c.T / temperature


def info_nce(
    anchors: torch.Tensor,
    candidates: torch.Tensor,
    labels: torch.Tensor,
    temperature: float,
    logit_bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean over anchors of -log softmax(logits)[label].

    ``logit_bias`` (A, C) is added after the temperature (a log-weight, as
    SimCSE's ``hard_negative_weight``); ``mask`` (A, C) bool marks entries
    removed from the denominator (false negatives). Label entries must not be
    masked.
    """
    logits = cos_logits(anchors, candidates, temperature)
    if logit_bias is not None:
        logits = logits + logit_bias
    if mask is not None:
        logits = logits.masked_fill(mask, float("-inf"))
    return F.cross_entropy(logits, labels)
