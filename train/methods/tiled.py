"""The denominator of every contrastive loss, without the (anchors x candidates) matrix.

Every method's loss is, per anchor i, ``logsumexp_j s_ij - s_i,label``: a log-sum-exp over candidate
columns j (the batch's positives, hard negatives, entities, reversed pairs ...) minus one logit. The
label logit is one row-wise product (O(A·d)); only the log-sum-exp needs the whole (A x C) matrix. Here
it is computed over anchor tiles x candidate tiles: the forward keeps a running log-sum-exp per anchor,
the backward recomputes each tile's logits and pushes ``p_ij = exp(s_ij - lse_i)`` (scaled by the
incoming gradient) into the anchors' and the candidates' gradients. Memory is O((A + C)·d + tile²)
instead of O(A·C): at 65,536 x 65,536 the dense fp32 logits, their softmax and its gradient are 17 GB
each. This is the tile-wise scheme of Inf-CL (Cheng et al. 2024, arXiv 2410.17243) and of
sentence-transformers' ``CachedMultipleNegativesRankingLoss`` mini-batched loss, written for this
project's blocks.

A :class:`Block` is one group of candidate columns that share a score: cosine (the anchors and
candidates arrive L2-normalised: ``scale · a·c``), or any differentiable ``score`` of an anchor tile and
a candidate tile (GaussCSE's KL similarity). A block may carry constants: a per-column bias (``-inf``
for a missing hard negative), a log-weight on each anchor's own column (SimCSE's and EASE's hard
negative weight), and a key mask (a column whose key equals the anchor's is left out: EASE's duplicate
entities, DSBATS's own cluster), with one column per anchor exempt (its label). Rows whose columns
are all left out give ``-inf`` and no gradient. :func:`logsumexp_blocks` combines several blocks (their
anchors may differ: GaussCSE's reversed set).

Small blocks (A·C <= tile²) take the dense path: one autograd graph, as fast as it gets there.
``tile <= 0`` is always dense (the oracle the tests compare the tiles with). Under autocast the tiles'
matrix products run in the autocast dtype, as the dense path's do, and the log-sum-exp in float32;
float64 inputs stay float64 (the exactness tests).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F

# rows and columns per tile: on CPU 2,048 was the fastest of 1,024 / 2,048 / 4,096 and beat the dense loss at
# 4,096 and 8,192 pairs (bench/results/gpu-cpu.txt); bench/gpu.py's loss_tiles times it on a GPU (docs/performance.md)
DEFAULT_LOSS_TILE = 2048
# on a GPU (H200, 65,536 pairs, d = 768, forward + backward): 2,048 took 1.44 s, 4,096 0.31 s, 8,192 0.20 s at
# 1.7 GB, 16,384 0.18 s at 3.7 GB (bench/results/gpu-h200.txt): 8,192 is within 13% of the fastest at half its memory
GPU_LOSS_TILE = 8192


def default_loss_tile(device) -> int:
    """``loss_tile`` when the config leaves it unset: by the device the loss runs on."""
    return GPU_LOSS_TILE if getattr(device, "type", device) == "cuda" else DEFAULT_LOSS_TILE


@dataclasses.dataclass(frozen=True, eq=False)
class Block:
    """One group of candidate columns of an InfoNCE denominator.

    ``anchors`` (A, ...) and ``candidates`` (C, ...): tensors, or tuples of tensors for a custom
    ``score``. ``score(anchor_tiles, candidate_tiles) -> (a, c)`` logits; None: ``scale · a @ cᵀ``.
    ``pair_cost``: floats a custom score holds per (anchor, candidate) pair (GaussCSE's per-dimension
    KL: d), so its tiles shrink to hold about tile² floats.
    """

    anchors: torch.Tensor | tuple[torch.Tensor, ...]
    candidates: torch.Tensor | tuple[torch.Tensor, ...]
    scale: float = 1.0
    normalize: bool = False  # cosine: rows are L2-normalised tile by tile (no normalised copy of the batch)
    score: Callable | None = None
    pair_cost: int = 1
    column_bias: torch.Tensor | None = None  # (C,) added to every anchor's logit of column j
    own_column: torch.Tensor | None = None  # (A,) long: the column that gets own_bias
    own_bias: float = 0.0
    row_keys: torch.Tensor | None = None  # (A,) with column_keys (C,): equal keys leave the column out
    column_keys: torch.Tensor | None = None
    keep_column: torch.Tensor | None = None  # (A,) long: the one column per anchor the key mask spares
    label_column: torch.Tensor | None = None  # (A,) long: each anchor's label, if it is in this block
    row_shift: torch.Tensor | None = None  # (A,) constant subtracted from row i (set by cross_entropy_blocks)

    def parts(self) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        as_tuple = lambda x: x if isinstance(x, tuple) else (x,)  # noqa: E731
        return as_tuple(self.anchors), as_tuple(self.candidates)


def full(x: torch.Tensor) -> torch.Tensor:
    """``x`` in at least float32: half types (autocast) are upcast, float64 is kept (exactness tests)."""
    return x if x.dtype == torch.float64 else x.float()


def tile_logits(block: Block, anchors, candidates, a0: int, c0: int, *, inplace: bool = False) -> torch.Tensor:
    """Logits of anchors [a0, a0 + len) x candidates [c0, c0 + len), with the block's constants applied.

    ``inplace``: the constants are applied to the tile in place (no graph: the tiles' forward and the
    cosine backward), so a tile costs one (rows x cols) buffer and a boolean mask. Nothing here reads a
    value back from the device.
    """
    if block.score is None:
        a, c = (unit(anchors[0]), unit(candidates[0])) if block.normalize else (anchors[0], candidates[0])
        s = full(a * block.scale @ c.T)
    else:
        s = full(block.score(anchors, candidates))
    ta, tc = s.shape
    if block.column_bias is not None:
        bias = block.column_bias[c0 : c0 + tc].to(s)[None, :]
        s = s.add_(bias) if inplace else s + bias
    if block.own_column is not None and block.own_bias != 0.0:
        index, inside = _in_tile(block.own_column, a0, ta, c0, tc)
        weight = inside.to(s)[:, None] * block.own_bias
        s = s.scatter_add_(1, index, weight) if inplace else s.scatter_add(1, index, weight)
    if block.row_keys is not None:
        left_out = block.row_keys[a0 : a0 + ta, None] == block.column_keys[None, c0 : c0 + tc]
        if block.keep_column is not None:
            columns = torch.arange(c0, c0 + tc, device=s.device)
            left_out &= columns[None, :] != block.keep_column[a0 : a0 + ta, None]
        s = s.masked_fill_(left_out, float("-inf")) if inplace else s.masked_fill(left_out, float("-inf"))
    if block.row_shift is not None:
        shift = block.row_shift[a0 : a0 + ta, None].to(s)
        s = s.sub_(shift) if inplace else s - shift
    if block.label_column is not None:  # exactly 0 after the shift, its gradient kept (see cross_entropy_blocks)
        index, inside = _in_tile(block.label_column, a0, ta, c0, tc)
        minus_label = torch.where(inside[:, None], -s.gather(1, index).detach(), 0.0)  # (a clamped index may hit -inf)
        s = s.scatter_add_(1, index, minus_label) if inplace else s.scatter_add(1, index, minus_label)
    return s


NORMALIZE_EPS = 1e-12  # F.normalize's


def unit(x: torch.Tensor) -> torch.Tensor:
    """Rows of ``x`` L2-normalised, in at least float32."""
    return F.normalize(full(x), dim=-1, eps=NORMALIZE_EPS)


def _through_normalize_(grad_unit: torch.Tensor, x: torch.Tensor, rows: int = 4096) -> torch.Tensor:
    """∂L/∂x from ∂L/∂u, u = x / max(‖x‖, eps), in place of ``grad_unit``, a block of rows at a time (no
    (rows x d) temporaries of the whole batch): (g - u (u·g)) / ‖x‖, or g / eps where ‖x‖ <= eps."""
    for r0 in range(0, x.shape[0], rows):
        g, xs = grad_unit[r0 : r0 + rows], full(x[r0 : r0 + rows])
        norm = xs.norm(dim=-1, keepdim=True)
        u = xs / norm.clamp_min(NORMALIZE_EPS)
        projected = (g - u * (u * g).sum(-1, keepdim=True)) / norm.clamp_min(NORMALIZE_EPS)
        g.copy_(torch.where(norm > NORMALIZE_EPS, projected, g / NORMALIZE_EPS))
    return grad_unit


def _in_tile(columns: torch.Tensor, a0: int, ta: int, c0: int, tc: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each anchor's column as an index into the tile ((ta, 1), clamped) and whether it falls inside it."""
    local = columns[a0 : a0 + ta] - c0
    return local.clamp(0, tc - 1)[:, None], (local >= 0) & (local < tc)


def _logsumexp_(s: torch.Tensor) -> torch.Tensor:
    """Row-wise log-sum-exp that overwrites ``s`` (no second tile); a row of -inf gives -inf."""
    top = s.amax(dim=1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    return torch.log(s.sub_(top).exp_().sum(dim=1)) + top[:, 0]


def _tile_side(block: Block, tile: int) -> int:
    """Rows (= columns) of the block's tiles: about tile² pairs' worth of floats, ``pair_cost`` floats a pair."""
    return max(1, int(tile / block.pair_cost**0.5))


def block_logsumexp(block: Block, tile: int = DEFAULT_LOSS_TILE) -> torch.Tensor:
    """(A,) log Σ_j exp(s_ij) over the block's columns: dense when A·C <= tile², else tiled."""
    anchors, candidates = block.parts()
    a, c = anchors[0].shape[0], candidates[0].shape[0]
    side = _tile_side(block, tile)
    if tile <= 0 or a * c <= side * side:
        return torch.logsumexp(tile_logits(block, anchors, candidates, 0, 0), dim=1)
    return _TiledLogSumExp.apply(block, tile, len(anchors), *anchors, *candidates)


def logsumexp_blocks(blocks: list[Block], tile: int = DEFAULT_LOSS_TILE) -> torch.Tensor:
    """(A,) log-sum-exp over the columns of all ``blocks`` (each anchor row i is the same anchor in every block)."""
    parts = [block_logsumexp(b, tile) for b in blocks]
    return parts[0] if len(parts) == 1 else torch.logsumexp(torch.stack(parts), dim=0)


def cross_entropy_blocks(blocks: list[Block], label_logits: torch.Tensor, tile: int = DEFAULT_LOSS_TILE) -> torch.Tensor:
    """(A,) -log softmax of each anchor's label over all blocks' columns: LSE_j s_ij - s_i,label.

    ``label_logits`` (A,): s_i,label computed row-wise (with gradient); the block holding the label marks
    it (``label_column``). Every row is shifted by its label logit, and the label entry is set to exactly 0
    (its gradient kept), so the result is log(1 + Σ_{j≠label} e^{s_ij - s_i,label}) as cross-entropy
    computes it: the error of a small loss stays small (subtracting two ~1/τ-sized numbers would not).
    """
    shift = label_logits.detach()
    lse = logsumexp_blocks([dataclasses.replace(b, row_shift=shift) for b in blocks], tile)
    return lse - (label_logits - shift)


class _TiledLogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, block: Block, tile: int, num_anchor_parts: int, *tensors):
        anchors, candidates = tensors[:num_anchor_parts], tensors[num_anchor_parts:]
        n_a, n_c = anchors[0].shape[0], candidates[0].shape[0]
        rows = cols = _tile_side(block, tile)
        device = anchors[0].device
        dtype = torch.float64 if anchors[0].dtype == torch.float64 else torch.float32
        lse = torch.empty(n_a, device=device, dtype=dtype)
        for a0 in range(0, n_a, rows):
            a_tile = tuple(t[a0 : a0 + rows] for t in anchors)
            running = torch.full((a_tile[0].shape[0],), float("-inf"), device=device, dtype=dtype)
            for c0 in range(0, n_c, cols):
                s = tile_logits(block, a_tile, tuple(t[c0 : c0 + cols] for t in candidates), a0, c0, inplace=True)
                running = torch.logaddexp(running, _logsumexp_(s))
            lse[a0 : a0 + rows] = running
        ctx.block, ctx.tile, ctx.num_anchor_parts = block, tile, num_anchor_parts
        ctx.autocast = (device.type, torch.is_autocast_enabled(device.type), torch.get_autocast_dtype(device.type))
        ctx.save_for_backward(lse, *tensors)
        return lse

    @staticmethod
    def backward(ctx, grad_lse):
        lse, *tensors = ctx.saved_tensors
        block, k = ctx.block, ctx.num_anchor_parts
        anchors, candidates = tuple(tensors[:k]), tuple(tensors[k:])
        wanted = ctx.needs_input_grad[3:]
        # accumulated in at least float32 (the embeddings may be bf16 under autocast), cast back at the end
        grads = [torch.zeros_like(t, dtype=full(t[:0]).dtype) if need else None for t, need in zip(tensors, wanted)]
        rows = cols = _tile_side(block, ctx.tile)
        device_type, enabled, dtype = ctx.autocast
        # a row whose every column is left out has lse = -inf: no gradient (exp(-inf - -inf) would be nan)
        weight = torch.where(torch.isfinite(lse), grad_lse.to(lse), torch.zeros_like(lse))
        finite_lse = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
        with torch.autocast(device_type, dtype=dtype, enabled=enabled):
            for a0 in range(0, anchors[0].shape[0], rows):
                a_tile = tuple(t[a0 : a0 + rows] for t in anchors)
                ta = a_tile[0].shape[0]
                for c0 in range(0, candidates[0].shape[0], cols):
                    c_tile = tuple(t[c0 : c0 + cols] for t in candidates)
                    tc = c_tile[0].shape[0]
                    if block.score is None:  # s = scale · a·c (of unit rows): the gradient by hand
                        s = tile_logits(block, a_tile, c_tile, a0, c0, inplace=True)
                        p = s.sub_(finite_lse[a0 : a0 + ta, None]).exp_().mul_(weight[a0 : a0 + ta, None])
                        a, c = a_tile[0], c_tile[0]
                        if block.normalize:
                            a, c = unit(a), unit(c)
                        if grads[0] is not None:
                            grads[0][a0 : a0 + ta] += full(p @ c.to(p)) * block.scale
                        if grads[k] is not None:
                            grads[k][c0 : c0 + tc] += full(p.T @ a.to(p)) * block.scale
                        continue
                    with torch.enable_grad():
                        leaves = [t.detach().requires_grad_(need) for t, need in zip(a_tile + c_tile, wanted)]
                        s = tile_logits(block, tuple(leaves[:k]), tuple(leaves[k:]), a0, c0)
                        p = torch.exp(s.detach() - finite_lse[a0 : a0 + ta, None]) * weight[a0 : a0 + ta, None]
                        inputs = [leaf for leaf, need in zip(leaves, wanted) if need]
                        tile_grads = iter(torch.autograd.grad(s, inputs, p, allow_unused=True))
                    for i, need in enumerate(wanted):
                        if not need:
                            continue
                        g = next(tile_grads)
                        if g is not None:
                            start = a0 if i < k else c0
                            grads[i][start : start + g.shape[0]] += g
        if block.score is None and block.normalize:  # the gradients above are the unit rows'
            for i in (0, k):
                if grads[i] is not None:
                    _through_normalize_(grads[i], tensors[i])
        grads = [g if g is None else g.to(t.dtype) for g, t in zip(grads, tensors)]
        return (None, None, None, *grads)
