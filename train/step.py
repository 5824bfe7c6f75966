"""One optimisation step's forward + backward, plain or with GradCache, for every method.

``forward_backward(model, trainee, batch, chunk_size, backward_scale)``:

* ``chunk_size=None``: ``loss = model(batch)`` (through DDP, which syncs
  gradients), ``backward``.
* ``chunk_size=c`` (GradCache, Gao et al. 2021, "Scaling Deep Contrastive
  Learning Batch Size under Memory Limited Setup"):

  1. the rows are cut into chunks of ``c``; every chunk but the last is
     encoded under ``no_grad`` and the RNG state before it is recorded;
     the last chunk is encoded WITH grad and its graph kept (its
     re-forward would redo exactly this work, so it is skipped: the
     overhead is (k-1)/k of one forward, not one whole forward);
  2. the loss is computed on the concatenated embeddings (the no-grad ones
     as leaf tensors) — the method's heads and the cross-worker gathers run
     here, unchanged — and back-propagated once: this fills the heads'
     gradients, the last chunk's encoder gradients, and the leaves' ∂L/∂z;
  3. each earlier chunk is encoded again with its RNG state restored (the
     same dropout masks) and ``backward(z, ∂L/∂z)``.

  The word embeddings' gradient is written once per step, from all chunks'
  rows (``Encoder.one_word_embedding_backward``), as in the uncached step: one
  dense (vocabulary x d) buffer per backward was the largest single excess of
  the k backwards (MiniLM, batch 32, one CPU thread: a GradCache step over the
  uncached one 1.279 -> 1.248 with 2 chunks, 1.655 -> 1.572 with 4).

  Gradients equal those of encoding the same chunks with grad and one
  backward (``tests/test_train_scale.py``), activation memory is one chunk's.
  The encoder is called outside DDP's forward, so gradients are averaged
  over workers here (one flat all-reduce), not by DDP hooks.

``backward_scale`` is fp16's ``GradScaler.scale`` (identity otherwise). Nothing here reads a
value back from the device (no per-step synchronisation); the loop checks the loss is finite
when it logs or reports.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
import torch.distributed as dist

from train.batch import cat_rows, num_rows, slice_rows
from train.precision import Bf16Weights


class RandomState:
    """CPU + (current) CUDA RNG state, to replay a chunk's dropout masks."""

    def __init__(self, device: torch.device):
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        self.device = device

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, self.device)


def forward_backward(
    model: torch.nn.Module,
    trainee: torch.nn.Module,
    batch: dict,
    chunk_size: int | None = None,
    backward_scale: Callable[[torch.Tensor], torch.Tensor] = lambda loss: loss,
    autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
    bf16_weights: Bf16Weights | None = None,
) -> tuple[torch.Tensor, dict]:
    """Forward and backward of one step; returns (loss, metrics). ``model`` is ``trainee`` as
    wrapped by ``prepare_model`` (DDP) or ``trainee`` itself. ``bf16_weights``: the encoder's
    forwards run on its bf16 copies (``train.precision``); the fp32 ``.grad`` are filled after each
    backward, and averaged over workers here (DDP's hooks are on the fp32 weights)."""
    n = num_rows(batch)
    if not chunk_size or chunk_size >= n:
        if bf16_weights is None:
            with autocast():
                loss, parts = model(batch)
            backward_scale(loss).backward()
            return loss, parts
        with bf16_weights.step():
            with autocast():
                loss, parts = trainee(batch)
            backward_scale(loss).backward()
            bf16_weights.flush()
        sync_gradients(trainee)
        return loss, parts
    return _grad_cache(trainee, batch, chunk_size, backward_scale, autocast, bf16_weights)


def _grad_cache(trainee, batch, chunk_size, backward_scale, autocast, bf16_weights=None):
    method, encoder = trainee.method, trainee.encoder
    n = num_rows(batch)
    bounds = [(s, min(s + chunk_size, n)) for s in range(0, n, chunk_size)]
    chunks = [slice_rows(batch, s, e) for s, e in bounds]
    device = next(trainee.parameters()).device
    flush = bf16_weights.flush if bf16_weights is not None else (lambda: None)
    # one dense word-embedding gradient per step, not one per chunk (entered first: it sums into the fp32 weight)
    with encoder.one_word_embedding_backward(), bf16_weights.step() if bf16_weights else contextlib.nullcontext():
        # 1. embeddings of every chunk; RNG recorded; the last chunk keeps its graph
        states, cached = [], []
        with torch.no_grad():
            for chunk in chunks[:-1]:
                states.append(RandomState(device))
                with autocast():
                    cached.append(method.embed(encoder, chunk))
        with autocast():
            last = method.embed(encoder, chunks[-1])
        after = RandomState(device)
        leaves = [{k: v.detach().requires_grad_() for k, v in e.items()} for e in cached]
        # 2. the loss of the whole batch, once
        with autocast():
            loss, parts = method.loss_from_embeddings(cat_rows(leaves + [last]), batch)
        backward_scale(loss).backward()
        flush()
        # 3. replay each earlier chunk with its dropout masks and push its cached gradient through
        for chunk, state, leaf in zip(chunks[:-1], states, leaves):
            state.restore()
            with autocast():
                z = method.embed(encoder, chunk)
            keys = [k for k in z if leaf[k].grad is not None]
            torch.autograd.backward([z[k] for k in keys], [leaf[k].grad for k in keys])
            flush()
        after.restore()
    sync_gradients(trainee)
    return loss, parts


def sync_gradients(module: torch.nn.Module) -> None:
    """Average ``.grad`` over workers (what DDP does), as one flat all-reduce; no-op on one process."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    params = [p for p in module.parameters() if p.requires_grad]
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    offset = 0
    for p, g in zip(params, grads):
        p.grad = flat[offset : offset + g.numel()].view_as(g).clone()
        offset += g.numel()


class ActivationMeter:
    """Peak bytes of tensors saved for backward (the activation memory GradCache bounds), on any
    device: a ``saved_tensors_hooks`` context that counts each storage once while some graph
    holds it. ``torch.cuda.max_memory_allocated`` says the same on a GPU; this works on CPU too."""

    def __init__(self):
        self.current = 0
        self.peak = 0
        self._refs: dict[int, list] = {}

    def __enter__(self):
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)

    def _pack(self, t: torch.Tensor):
        key = t.untyped_storage().data_ptr()
        entry = self._refs.get(key)
        if entry is None:
            nbytes = t.untyped_storage().nbytes()
            self._refs[key] = [nbytes, 1]
            self.current += nbytes
            self.peak = max(self.peak, self.current)
        else:
            entry[1] += 1
        return _Held(t, key, self)

    @staticmethod
    def _unpack(held: _Held) -> torch.Tensor:
        return held.tensor

    def _release(self, key: int) -> None:
        entry = self._refs.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self._refs[key]


class _Held:
    __slots__ = ("key", "meter", "tensor")

    def __init__(self, tensor, key, meter):
        self.tensor, self.key, self.meter = tensor, key, meter

    def __del__(self):
        self.meter._release(self.key)
