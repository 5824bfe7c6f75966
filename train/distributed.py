"""Cross-worker negatives: all-gather WITH gradient, and the label offset that goes with it.

Every worker computes the loss of its own anchors against the candidates of
*all* workers. ``gather_with_grad`` is differentiable: its backward sums, into
each worker's local slice, the gradients that every worker's loss sends to
that slice. DDP then averages
parameter gradients over the W workers, so the update equals the gradient of
the mean loss over the global batch exactly (no 1/W error, unlike gathering
without gradient and putting the local slice back).

Without a process group (local mode, a single process, tests) every function
here is the identity / rank 0 of 1.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def world() -> tuple[int, int]:
    """(rank, world_size) of the default process group, (0, 1) without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """Concatenate ``x`` from every worker along dim 0, keeping the autograd graph.

    All workers must pass the same shape (the loop drops the last partial
    batch for this reason).
    """
    if not (dist.is_available() and dist.is_initialized()):
        return x
    return _GatherWithGrad.apply(x)  # also at world size 1 (a no-op collective), so that path is tested


class _GatherWithGrad(torch.autograd.Function):
    """all_gather forward; backward sums every worker's gradient w.r.t. the gathered tensor
    (all_reduce) and keeps this worker's slice. (``torch.distributed.nn.functional.all_gather``
    does the same but is deprecated in torch 2.13; this works with gloo and nccl alike.)"""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        rank, size = world()
        ctx.rank, ctx.n = rank, x.shape[0]
        parts = [torch.empty_like(x) for _ in range(size)]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.n : (ctx.rank + 1) * ctx.n]


@torch.no_grad()
def gather_nograd(x: torch.Tensor) -> torch.Tensor:
    """Concatenate ``x`` (e.g. entity ids) from every worker along dim 0, no gradient."""
    rank, size = world()
    if size == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(size)]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts, dim=0)


def local_rows(local_batch: int) -> slice:
    """:func:`local_labels` as a slice: selecting with it gives a view of the gathered rows, not a copy."""
    rank, _ = world()
    return slice(rank * local_batch, (rank + 1) * local_batch)


def local_labels(local_batch: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Positions of this worker's positives among the gathered candidates: rank*B + arange(B)."""
    rank, _ = world()
    return torch.arange(local_batch, device=device) + rank * local_batch
