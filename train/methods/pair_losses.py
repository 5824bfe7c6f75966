"""Sentence-pair losses and heads: supervised SimCSE, GaussCSE, RSE (pure functions / modules).

No method is registered here: the Method classes (``simcse_sup``, ``gausscse``,
``rse``) wrap these. Everything works on GLOBAL-batch tensors, i.e. after
``train.distributed.gather_with_grad``: row i of every input is triple i of
the global batch, and row i's positive is row i (no other assumption about
batch position). ``rows`` (a LongTensor of global row indices, or a slice:
``local_rows(B)``, which selects by view, not copy) selects the anchors whose
loss this call averages; the default is every row. Both ways give the exact
global-batch gradient under DDP (see ``train.distributed``): all workers
computing every row is redundant work, ``rows=local_rows(B)`` splits it.

No loss builds the (anchors x candidates) matrix of the global batch: each is a log-sum-exp over
blocks of candidate columns (``train.methods.tiled``, tiles of ``tile`` rows and columns) minus the
label logit, computed row-wise; ``tile=0`` computes the same dense.

Similarities are computed in float32 even under autocast. τ = ``temperature``
(0.05 in all three papers). Losses are the MEAN over anchors (the GaussCSE
paper's Eq. 3 writes a sum: the same optimum, a constant learning-rate scale).

* SimCSE supervised (Gao et al., EMNLP 2021: the supervised triplet loss and
  its hard-negative weight α): :func:`simcse_supervised_loss`.
* GaussCSE (Yoda et al., 2023, arXiv 2305.12990, §2.4 Eqs. 2-3):
  :class:`Gaussian`, :class:`GaussianHead`, :func:`kl_diagonal`,
  :func:`asymmetric_similarity`, :func:`symmetric_similarity`,
  :func:`similarity_matrix`, :func:`gausscse_loss`.
* RSE (Wang & Li, "Relational Sentence Embedding for Flexible Semantic Matching", §3 Eqs. 1-2):
  :class:`RelationEmbedding`, :func:`rse_loss`, :func:`relation_scores`,
  :func:`relational_similarity`, :func:`link_prediction_scores`.

Where the reference code differs from the paper, the default follows the paper
and the code's variant is an option (``docs/methods.md`` §1, §2, §4).
Siblings: ``simcse_unsup.simcse_loss`` is :func:`simcse_supervised_loss`
without hard negatives; EASE's entity loss uses the same hard-negative
log-weight.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from train.methods.contrastive import Block, cos_logits, cross_entropy_blocks, full, label_logits, row_index
from train.methods.tiled import DEFAULT_LOSS_TILE


# ====================================================================== SimCSE (supervised)


def simcse_supervised_loss(
    anchor: torch.Tensor,
    positive: torch.Tensor,
    negative: torch.Tensor | None = None,
    temperature: float = 0.05,
    negative_weight: float = 0.0,
    *,
    rows: torch.Tensor | None = None,
    tile: int = DEFAULT_LOSS_TILE,
) -> torch.Tensor:
    """Supervised SimCSE: InfoNCE over [all positives; all hard negatives] of the global batch.

    ``anchor``, ``positive``, ``negative``: (N, d) premise / entailment /
    contradiction embeddings (x_i, x_i⁺, x_i⁻). For each anchor row i in ``rows``:

        L_i = -log e^{cos(h_i,h_i⁺)/τ} / ( Σ_j e^{cos(h_i,h_j⁺)/τ} + Σ_j α^{1[j=i]} e^{cos(h_i,h_j⁻)/τ} )

    with α = e^w, w = ``negative_weight``: a log-weight added to row i's OWN
    hard-negative logit only (the SimCSE paper's α = e^w; the code's
    ``hard_negative_weight``); w = 0 (α = 1) is the paper's main setting.
    ``negative=None`` drops the hard-negative block: the result then equals
    ``contrastive.info_nce(anchor, positive, arange(N), τ)`` (unsupervised
    SimCSE's loss, with other positives).
    """
    r, own = row_index(rows, positive.shape[0], anchor.device)
    a, p = anchor[own], positive
    blocks = [Block(a, p, scale=1.0 / temperature, normalize=True, label_column=r)]
    if negative is not None:
        blocks.append(Block(a, negative, scale=1.0 / temperature, normalize=True, own_column=r,
                            own_bias=negative_weight))
    return cross_entropy_blocks(blocks, label_logits(a, p, own, temperature), tile).mean()


# ====================================================================== GaussCSE


class Gaussian(NamedTuple):
    """A batch of diagonal Gaussians: ``mu`` and ``var`` (= σ², > 0), both (..., d)."""

    mu: torch.Tensor
    var: torch.Tensor

    def log_det(self) -> torch.Tensor:
        """Σ_d log σ²_d, (...,): the 'size' of the distribution (the reference code's ``det_acc`` compares it)."""
        return torch.log(full(self.var)).sum(-1)


def bounded_logvar(x: torch.Tensor, min_logvar: float, max_logvar: float, bound: str = "tanh") -> torch.Tensor:
    """Map a pre-activation to a log-variance in [min_logvar, max_logvar], in float32.

    ``tanh``: c + h·tanh((x - c)/h), c = midpoint, h = half-width (smooth,
    ≈ x near c, gradient everywhere); ``clamp``: hard clip; ``none``: x
    unchanged (the reference code: σ² = exp(W_v v) unbounded, which overflows
    bf16/fp16 for large pre-activations). ±inf pre-activations map to the bounds.
    """
    x = full(x)
    if bound == "none":
        return x
    if bound == "clamp":
        return x.clamp(min_logvar, max_logvar)
    if bound == "tanh":
        c, h = (max_logvar + min_logvar) / 2, (max_logvar - min_logvar) / 2
        return c + h * torch.tanh((x - c) / h)
    raise ValueError(f"unknown log-variance bound {bound!r} (tanh, clamp, none)")


class GaussianHead(nn.Module):
    """μ and σ² of a sentence from its pooled vector v (GaussCSE §2.4): two distinct linear layers.

    Input (..., hidden) (the paper: the [CLS] vector); output :class:`Gaussian`
    with μ, σ² of shape (..., out_dim) (default hidden), float32.

    ``mode``: ``"linear"`` μ = W_μ v (the paper: "fed to two distinct linear
    layers"); ``"tanh"`` μ = tanh(W_μ v) (the reference code).
    Variance: σ² = exp(ℓ), ℓ = ``bounded_logvar(W_v v)`` in [min_logvar,
    max_logvar] (default tanh-bounded to [-10, 10]: σ² ∈ [4.5e-5, 2.2e4], so
    KL terms stay finite in float32 and no bf16 pre-activation can overflow).
    The paper does not say how positivity is obtained; the reference code uses
    exp of an unbounded log-variance (``bound="none"``).
    """

    def __init__(
        self,
        hidden: int,
        mode: str = "linear",
        *,
        out_dim: int | None = None,
        bound: str = "tanh",
        min_logvar: float = -10.0,
        max_logvar: float = 10.0,
    ):
        super().__init__()
        if mode not in ("linear", "tanh"):
            raise ValueError(f"unknown GaussianHead mode {mode!r} (linear, tanh)")
        if not min_logvar < max_logvar:
            raise ValueError(f"min_logvar {min_logvar} must be < max_logvar {max_logvar}")
        bounded_logvar(torch.zeros(1), min_logvar, max_logvar, bound)  # validates ``bound``
        out_dim = out_dim or hidden
        self.mode, self.bound, self.min_logvar, self.max_logvar = mode, bound, min_logvar, max_logvar
        self.mean = nn.Linear(hidden, out_dim)
        self.logvar = nn.Linear(hidden, out_dim)

    def forward(self, v: torch.Tensor) -> Gaussian:
        mu = full(self.mean(v))
        if self.mode == "tanh":
            mu = torch.tanh(mu)
        logvar = bounded_logvar(self.logvar(v), self.min_logvar, self.max_logvar, self.bound)
        return Gaussian(mu, torch.exp(logvar))


def kl_diagonal(
    mu_a: torch.Tensor, var_a: torch.Tensor, mu_b: torch.Tensor, var_b: torch.Tensor, reduce: str = "sum"
) -> torch.Tensor:
    """KL(N_a ‖ N_b) for diagonal Gaussians, broadcasting over leading dims; float32.

    Per dimension (GaussCSE App. A, diagonal case):
        KL_d = ½ [ log σ²_b,d - log σ²_a,d + σ²_a,d/σ²_b,d + (μ_a,d - μ_b,d)²/σ²_b,d - 1 ]
    ``reduce``: ``"sum"`` Σ_d KL_d (the full KL, as the paper's Eq. 1),
    ``"mean"`` Σ_d KL_d / d, ``"none"`` the per-dimension KL_d (..., d).
    Note the reference code's similarity is mean_d 1/(1+KL_d), which is neither
    1/(1+sum) nor 1/(1+mean): use ``asymmetric_similarity(form="per_dim")`` for it.
    """
    mu_a, var_a, mu_b, var_b = full(mu_a), full(var_a), full(mu_b), full(var_b)
    kl = 0.5 * (torch.log(var_b) - torch.log(var_a) + var_a / var_b + (mu_a - mu_b) ** 2 / var_b - 1.0)
    if reduce == "none":
        return kl
    if reduce == "sum":
        return kl.sum(-1)
    if reduce == "mean":
        return kl.mean(-1)
    raise ValueError(f"unknown reduce {reduce!r} (sum, mean, none)")


SIMILARITY_FORMS = ("kl_sum", "kl_mean", "per_dim")


def _sim_from_kl(kl_per_dim: torch.Tensor, form: str) -> torch.Tensor:
    if form == "kl_sum":
        return 1.0 / (1.0 + kl_per_dim.sum(-1))
    if form == "kl_mean":
        return 1.0 / (1.0 + kl_per_dim.mean(-1))
    if form == "per_dim":
        return (1.0 / (1.0 + kl_per_dim)).mean(-1)
    raise ValueError(f"unknown similarity form {form!r} {SIMILARITY_FORMS}")


def asymmetric_similarity(a: Gaussian, b: Gaussian, form: str = "kl_sum") -> torch.Tensor:
    """sim(a ‖ b) = 1 / (1 + KL(N_a ‖ N_b)) (GaussCSE Eq. 2), broadcasting over leading dims.

    Direction: the first argument is the one being "contained". For NLI the
    entailment score is sim(hyp ‖ prem) = ``asymmetric_similarity(hyp, prem)``:
    training makes KL(hyp ‖ prem) small, i.e. the premise (the entailing
    sentence) gets the broader Gaussian. Direction prediction: A is the
    entailing sentence iff sim(B ‖ A) > sim(A ‖ B).

    ``form``: ``"kl_sum"`` the paper (full KL); ``"per_dim"`` the reference
    code, mean_d 1/(1 + KL_d); ``"kl_mean"`` 1/(1 + KL/d), a dimension-
    normalised KL (neither paper nor code; keeps logits/τ away from 0 at d=768).
    """
    return _sim_from_kl(kl_diagonal(a.mu, a.var, b.mu, b.var, reduce="none"), form)


def symmetric_similarity(a: Gaussian, b: Gaussian, form: str = "kl_sum") -> torch.Tensor:
    """1 / (1 + (KL(a‖b) + KL(b‖a))/2) (same ``form`` options): the reference code's STS score.

    The paper evaluates no STS; this symmetrised KL is the reference code's.
    """
    kl = 0.5 * (kl_diagonal(a.mu, a.var, b.mu, b.var, "none") + kl_diagonal(b.mu, b.var, a.mu, a.var, "none"))
    return _sim_from_kl(kl, form)


def similarity_matrix(src: Gaussian, tgt: Gaussian, form: str = "kl_sum") -> torch.Tensor:
    """M[i, j] = sim(src_j ‖ tgt_i), shape (len(tgt), len(src)).

    Memory is O(len(tgt)·len(src)·d) (the per-dimension KL is materialised);
    pass only the anchor rows as ``tgt``.
    """
    a = Gaussian(src.mu[None, :, :], src.var[None, :, :])
    b = Gaussian(tgt.mu[:, None, :], tgt.var[:, None, :])
    return asymmetric_similarity(a, b, form)


GAUSSCSE_VARIANTS = {
    # paper name -> (use contradiction set, use reversed set); reference-code names as aliases
    "ent": (False, False),
    "ent+con": (True, False),
    "ent+rev": (False, True),
    "ent+con+rev": (True, True),
    "pos": (False, False),
    "pos+neg": (True, False),
    "pos+rev": (False, True),
    "pos+rev+neg": (True, True),
}


def parse_gausscse_variant(variant: str) -> tuple[bool, bool]:
    """``"ent+con+rev"`` etc. (or the code's ``pos+rev+neg``) -> (use_con, use_rev)."""
    if variant not in GAUSSCSE_VARIANTS:
        raise ValueError(f"unknown GaussCSE variant {variant!r}; known: {sorted(GAUSSCSE_VARIANTS)}")
    return GAUSSCSE_VARIANTS[variant]


def gausscse_loss(
    prem: Gaussian,
    ent: Gaussian,
    con: Gaussian | None = None,
    *,
    rev: bool = True,
    temperature: float = 0.05,
    variant: str | None = None,
    form: str = "kl_sum",
    rows: torch.Tensor | None = None,
    tile: int = DEFAULT_LOSS_TILE,
) -> torch.Tensor:
    """GaussCSE contrastive loss (Eq. 3): premise s_i, entailment s_i⁺, contradiction s_i⁻, each (N, d).

        V_E = Σ_j e^{sim(s_j⁺ ‖ s_i)/τ}      entailment set (j = i is the positive)
        V_C = Σ_j e^{sim(s_j⁻ ‖ s_i)/τ}      contradiction set
        V_R = Σ_j e^{sim(s_j ‖ s_i⁺)/τ}      reversed set (premises against hypothesis i, j = i included)
        L_i = -log e^{sim(s_i⁺ ‖ s_i)/τ} / (V_E + V_C + V_R)

    ``con=None`` drops V_C, ``rev=False`` drops V_R: ent / ent+con / ent+rev /
    ent+con+rev. ``variant`` (a key of ``GAUSSCSE_VARIANTS``), when given,
    overrides ``rev`` and drops ``con`` unless the variant names it (so
    ``variant="ent"`` ignores a passed ``con``). The reference code's default
    is ent+con+rev; the paper finds ent+con best on NLI, ent+rev best on
    direction. ``form``: see :func:`asymmetric_similarity` (paper: kl_sum).
    """
    if variant is not None:
        use_con, rev = parse_gausscse_variant(variant)
        if use_con and con is None:
            raise ValueError(f"GaussCSE variant {variant!r} needs the contradiction embeddings")
        con = con if use_con else None
    r, own = row_index(rows, prem.mu.shape[0], prem.mu.device)
    anchor_p = Gaussian(prem.mu[own], prem.var[own])
    blocks = [dataclasses.replace(kl_block(anchor_p, ent, form, temperature), label_column=r)]
    if con is not None:
        blocks.append(kl_block(anchor_p, con, form, temperature))
    if rev:
        blocks.append(kl_block(Gaussian(ent.mu[own], ent.var[own]), prem, form, temperature))
    positive = asymmetric_similarity(Gaussian(ent.mu[own], ent.var[own]), anchor_p, form) / temperature
    return cross_entropy_blocks(blocks, positive, tile).mean()


def kl_block(anchor: Gaussian, candidates: Gaussian, form: str, temperature: float) -> Block:
    """The block of logits sim(candidate_j ‖ anchor_i) / τ (a row of :func:`similarity_matrix`), for tiles.

    ``kl_sum`` / ``kl_mean``: KL(N_j ‖ N_i) = ½ (f_i·g_j + α_i + β_j), a matrix product in closed form,
    f_i = [1/σ²_i, μ_i/σ²_i], g_j = [σ²_j + μ_j², -2μ_j], α_i = Σ log σ²_i + Σ μ_i²/σ²_i - d,
    β_j = -Σ log σ²_j (computed in float32 with autocast off: in bf16 the terms would swamp their
    difference). ``per_dim`` (mean_d 1/(1 + KL_d)) has no such form: its tiles hold (rows, cols, d).
    """
    if form not in SIMILARITY_FORMS:
        raise ValueError(f"unknown similarity form {form!r} {SIMILARITY_FORMS}")
    d = anchor.mu.shape[-1]
    if form == "per_dim":
        return Block((full(anchor.mu), full(anchor.var)), (full(candidates.mu), full(candidates.var)),
                     score=functools.partial(_per_dim_logits, scale=1.0 / temperature), pair_cost=d)
    mu_a, var_a, mu_c, var_c = full(anchor.mu), full(anchor.var), full(candidates.mu), full(candidates.var)
    f = torch.cat([1.0 / var_a, mu_a / var_a], dim=-1)
    alpha = torch.log(var_a).sum(-1) + (mu_a**2 / var_a).sum(-1) - d
    g = torch.cat([var_c + mu_c**2, -2.0 * mu_c], dim=-1)
    beta = -torch.log(var_c).sum(-1)
    divide = d if form == "kl_mean" else 1
    return Block((f, alpha), (g, beta), score=functools.partial(_closed_form_logits, divide=divide,
                                                                 scale=1.0 / temperature))


def _closed_form_logits(anchors, candidates, *, divide: float, scale: float) -> torch.Tensor:
    (f, alpha), (g, beta) = anchors, candidates
    with torch.autocast(f.device.type, enabled=False):
        kl = 0.5 * (f @ g.T + alpha[:, None] + beta[None, :])
    return scale / (1.0 + kl / divide)


def _per_dim_logits(anchors, candidates, *, scale: float) -> torch.Tensor:
    (mu_t, var_t), (mu_s, var_s) = anchors, candidates
    kl = kl_diagonal(mu_s[None, :, :], var_s[None, :, :], mu_t[:, None, :], var_t[:, None, :], reduce="none")
    return scale * (1.0 / (1.0 + kl)).mean(-1)


# ====================================================================== RSE


class RelationEmbedding(nn.Module):
    """One learned vector r_k ∈ ℝ^hidden per relation (RSE §3.1), ``nn.Embedding``, init N(0, ``init_std``).

    The paper says "randomly initialized"; the reference code uses N(0, 0.02).
    Its learning rate is separate (reference: 1e-2 vs 5e-5 for the encoder, no
    weight decay): :meth:`param_groups` returns that optimizer group.
    """

    def __init__(self, num_relations: int, hidden: int, *, init_std: float = 0.02):
        super().__init__()
        self.embedding = nn.Embedding(num_relations, hidden)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=init_std)

    @property
    def table(self) -> torch.Tensor:
        """(num_relations, hidden): every r_k (for :func:`relation_scores`)."""
        return self.embedding.weight

    def forward(self, relation_ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(relation_ids)

    def param_groups(self, lr: float = 1e-2, weight_decay: float = 0.0) -> list[dict]:
        """The optimizer parameter group of the relation table (reference: lr 1e-2, no decay)."""
        return [{"params": list(self.parameters()), "lr": lr, "weight_decay": weight_decay, "name": "relations"}]


def rse_loss(
    h_i: torch.Tensor,
    r_k: torch.Tensor,
    h_j: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    temperature: float = 0.05,
    *,
    hard_negative_valid: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
    rows: torch.Tensor | None = None,
    tile: int = DEFAULT_LOSS_TILE,
) -> torch.Tensor:
    """RSE relational contrastive loss (Eq. 2; Eq. 1 without hard negatives).

    ``h_i``, ``h_j``: (N, d) head / tail sentence embeddings of triples
    (s_i, r_k, s_j); ``r_k``: (N, d) each row's relation vector
    (``RelationEmbedding(relation_ids)``); ``hard_negatives``: (N, d) the
    in-relation negative s_j⁻ of each row. With u_i = h_i + r_k(i):

        L_i = -log e^{cos(u_i,h_j(i))/τ} / Σ_m ( e^{cos(u_i,h_m)/τ} + e^{cos(u_i,h_m⁻)/τ} )

    Every row's tail and every row's hard negative are candidates for every
    anchor (other relations' tails included, as in the paper; no weight on the
    own hard negative). ``hard_negative_valid`` (N,) bool removes the hard
    negatives of rows that have none (the set's nullable ``hard_negative``;
    put any vector, e.g. zeros, in those rows). ``weights`` (N,) gives a
    weighted mean Σ w_i L_i / Σ w_i over the anchors (not in the paper;
    default: plain mean); on W workers (``rows`` this worker's N/W anchors,
    ``weights`` every worker's), the sum over this worker's anchors is divided
    by the GLOBAL Σ w and multiplied by W, so that DDP's mean over workers is
    the weighted mean over the global batch, as on one worker.
    """
    n = h_j.shape[0]
    r, own = row_index(rows, n, h_i.device)
    u, tails = full(h_i[own]) + full(r_k[own]), h_j
    blocks = [Block(u, tails, scale=1.0 / temperature, normalize=True, label_column=r)]
    if hard_negatives is not None:
        absent = None
        if hard_negative_valid is not None:
            valid = hard_negative_valid.bool().to(u.device)
            absent = torch.zeros(n, device=u.device, dtype=u.dtype).masked_fill(~valid, float("-inf"))
        blocks.append(Block(u, hard_negatives, scale=1.0 / temperature, normalize=True, column_bias=absent))
    losses = cross_entropy_blocks(blocks, label_logits(u, tails, own, temperature), tile)
    if weights is None:
        return losses.mean()
    every = weights.to(losses)
    w = every[own]
    return (losses * w).sum() * (n / w.numel()) / every.sum()


def relation_scores(
    h_a: torch.Tensor, h_b: torch.Tensor, relation_table: torch.Tensor, direction: str = "forward"
) -> torch.Tensor:
    """(B, R): score of pair (a, b) under each relation k, f(a, b, r_k) = cos(h_a + r_k, h_b) (RSE §3.3).

    ``direction``: ``"forward"`` a→b (the paper's f(s_i, s_j, r_k));
    ``"backward"`` cos(h_b + r_k, h_a); ``"max"`` the larger of the two per relation.
    """
    a, b, t = full(h_a), full(h_b), full(relation_table)
    fwd = F.cosine_similarity(a[:, None, :] + t[None, :, :], b[:, None, :], dim=-1)
    if direction == "forward":
        return fwd
    bwd = F.cosine_similarity(b[:, None, :] + t[None, :, :], a[:, None, :], dim=-1)
    if direction == "backward":
        return bwd
    if direction == "max":
        return torch.maximum(fwd, bwd)
    raise ValueError(f"unknown direction {direction!r} (forward, backward, max)")


def relational_similarity(
    h_a: torch.Tensor,
    h_b: torch.Tensor,
    relation_table: torch.Tensor,
    weights,
    direction: str = "max",
) -> torch.Tensor:
    """(B,): the weighted relational score used for STS / retrieval (RSE §3.3, §4.1).

    s(a→b) = Σ_k w̃_k cos(h_a + r_k, h_b), w̃ = w / Σw (the paper's STS weights
    1.0 entailment, 0.5 duplicate_question give 2/3, 1/3; weight 0 skips a
    relation). ``direction="max"`` returns max(s(a→b), s(b→a)), the max of the
    two weighted sums (the reference code's ``sim_rel_func``; STS pairs have no
    order, and the paper's formula leaves the direction open); ``"forward"`` s(a→b).
    """
    w = torch.as_tensor(weights, dtype=torch.float32, device=h_a.device)
    w = w / w.sum()
    fwd = relation_scores(h_a, h_b, relation_table, "forward") @ w
    if direction == "forward":
        return fwd
    if direction == "max":
        return torch.maximum(fwd, relation_scores(h_a, h_b, relation_table, "backward") @ w)
    raise ValueError(f"unknown direction {direction!r} (forward, max)")


def link_prediction_scores(h_head: torch.Tensor, r: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """(Q, C): cos(h_head + r, candidate) for relation prediction (RSE App. B, tail retrieval).

    ``h_head``, ``r``: (Q, d) query sentences and their relation vectors;
    ``candidates``: (C, d) every unique sentence of the split. Rank with
    ``score.metrics.rank_of_true`` (excluding the query sentence itself).
    """
    return cos_logits(full(h_head) + full(r), candidates, 1.0)
