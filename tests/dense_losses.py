"""The losses as they were before tiling: every (anchors x candidates) logit materialised, then
``F.cross_entropy`` (or an explicit log-sum-exp). The oracle ``tests/test_tiled_losses.py`` compares the
tiled losses of ``train.methods`` with; kept verbatim in what they compute, so a tiling error cannot hide
in shared code (only the primitives ``cos_logits`` and ``similarity_matrix`` are shared, and those are
dense)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from train.distributed import gather_nograd, gather_with_grad, local_labels
from train.methods.contrastive import cos_logits, full
from train.methods.pair_losses import Gaussian, parse_gausscse_variant, similarity_matrix


def _rows(rows, n, device):
    return torch.arange(n, device=device) if rows is None else rows.to(device=device, dtype=torch.long)


def info_nce(anchors, candidates, labels, temperature):
    return F.cross_entropy(cos_logits(anchors, candidates, temperature), labels)


def simcse_supervised_loss(anchor, positive, negative=None, temperature=0.05, negative_weight=0.0, *, rows=None):
    n = positive.shape[0]
    r = _rows(rows, n, anchor.device)
    candidates = positive if negative is None else torch.cat([positive, negative], dim=0)
    logits = cos_logits(anchor[r], candidates, temperature)
    if negative is not None and negative_weight != 0.0:
        bias = torch.zeros_like(logits)
        bias[torch.arange(r.numel(), device=logits.device), n + r] = negative_weight
        logits = logits + bias
    return F.cross_entropy(logits, r)


def gausscse_loss(prem, ent, con=None, *, rev=True, temperature=0.05, variant=None, form="kl_sum", rows=None):
    if variant is not None:
        use_con, rev = parse_gausscse_variant(variant)
        con = con if use_con else None
    n = prem.mu.shape[0]
    r = _rows(rows, n, prem.mu.device)
    anchor_p = Gaussian(prem.mu[r], prem.var[r])
    blocks = [similarity_matrix(ent, anchor_p, form)]
    if con is not None:
        blocks.append(similarity_matrix(con, anchor_p, form))
    if rev:
        blocks.append(similarity_matrix(prem, Gaussian(ent.mu[r], ent.var[r]), form))
    return F.cross_entropy(torch.cat(blocks, dim=1) / temperature, r)


def rse_loss(h_i, r_k, h_j, hard_negatives=None, temperature=0.05, *, hard_negative_valid=None, weights=None,
             rows=None):
    n = h_j.shape[0]
    r = _rows(rows, n, h_i.device)
    u = full(h_i[r]) + full(r_k[r])
    candidates = h_j if hard_negatives is None else torch.cat([h_j, hard_negatives], dim=0)
    logits = cos_logits(u, candidates, temperature)
    if hard_negatives is not None and hard_negative_valid is not None:
        keep = torch.cat([torch.ones(n, dtype=torch.bool, device=hard_negative_valid.device), hard_negative_valid.bool()])
        logits = logits.masked_fill(~keep[None, :], float("-inf"))
    losses = F.cross_entropy(logits, r, reduction="none")
    if weights is None:
        return losses.mean()
    every = weights.to(losses)
    w = every[r]  # this worker's anchors; their weighted sum over every worker's weights, times the world size
    return (losses * w).sum() * (n / w.numel()) / every.sum()


def entity_logits(
    z: torch.Tensor,
    pos_emb: torch.Tensor,
    neg_emb: torch.Tensor,
    pos_ids: torch.Tensor,
    neg_ids: torch.Tensor,
    *,
    temperature: float,
    hard_negative_weight: float,
    mask_duplicates: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (B, 2N) of local anchors against the gathered [positives | hard negatives], and labels.

    N = global batch. Masked (false-negative) entries are -inf. The dense form of
    ``train.methods.ease.entity_loss`` (which never builds it).
    """
    b = z.shape[0]
    pos_all = gather_with_grad(pos_emb)
    neg_all = gather_with_grad(neg_emb)
    n = pos_all.shape[0]
    labels = local_labels(b, z.device)
    rows = torch.arange(b, device=z.device)
    logits = cos_logits(z, torch.cat([pos_all, neg_all], dim=0), temperature)
    bias = torch.zeros_like(logits)
    bias[rows, n + labels] = hard_negative_weight
    logits = logits + bias
    if mask_duplicates:
        pos_ids_all = gather_nograd(pos_ids)
        neg_ids_all = gather_nograd(neg_ids)
        same_pos = pos_ids[:, None] == pos_ids_all[None, :]
        same_pos[rows, labels] = False
        same_neg = pos_ids[:, None] == neg_ids_all[None, :]
        logits = logits.masked_fill(torch.cat([same_pos, same_neg], dim=1), float("-inf"))
    return logits, labels


def entity_loss(z, pos_emb, neg_emb, pos_ids, neg_ids, **kw):
    logits, labels = entity_logits(z, pos_emb, neg_emb, pos_ids, neg_ids, **kw)
    return F.cross_entropy(logits, labels)


def dsbats_loss(anchor, positive, negatives, temperature=0.05, positive_in_denominator=False,
                other_negatives=None, other_mask=None):
    a, p = F.normalize(full(anchor), dim=-1), F.normalize(full(positive), dim=-1)
    numerator = (a * p).sum(-1) / temperature
    logits = cos_logits(a, negatives, temperature)
    if other_negatives is not None:
        others = cos_logits(a, other_negatives, temperature).masked_fill(other_mask, float("-inf"))
        logits = torch.cat([logits, others], dim=1)
    if positive_in_denominator:
        logits = torch.cat([numerator[:, None], logits], dim=1)
    return (torch.logsumexp(logits, dim=1) - numerator).mean()
