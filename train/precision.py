"""bf16 weights for the encoder's forwards, cast from the fp32 master weights once per step.

``mixed_precision: bf16`` runs the step under ``torch.autocast``: every op casts its inputs, so
every Linear casts its fp32 weight and its (fp32, after LayerNorm) input to bf16, each time it
runs, and the backward casts each gradient back. On an H100 (BERT-base, 512 x 128 rows x tokens)
those casts were 17% of the step (425 a step: ``docs/performance.md``). ``mixed_precision:
bf16_weights`` takes the usual alternative of large-model training (fp32 master weights, bf16
compute): ``Bf16Weights.step()`` copies the encoder's weights to bf16 once per optimizer step
(one multi-tensor copy into buffers kept across steps), swaps them in for that step's forwards,
and the encoder runs with no autocast at all: activations stay bf16 from the embeddings to the
last layer, LayerNorm keeps its float32 statistics inside the kernel. After each backward,
``flush()`` adds the bf16 gradients to the fp32 ``.grad`` of the master weights (one flat add);
GradCache's per-chunk backwards so sum in float32, as autocast's do. The optimizer, gradient
clipping, checkpoints and the saved model see the fp32 parameters only, as with autocast.

The method's heads (projection MLPs, relation embeddings, ...) and the loss stay under autocast:
they are small, and the tiled losses accumulate in float32 either way.

Parameters are swapped in place (``module._parameters``, as ``torch.func.functional_call`` does):
the copies are leaves of their own, so DDP's hooks on the master weights never fire; the step calls
the trainee outside DDP and averages the gradients itself (``train.step.sync_gradients``).

``mixed_precision: auto`` (the default) is ``bf16_weights`` on a CUDA device with bf16 (Ampere and
later) and ``none`` elsewhere (CPU, older GPUs, float64 runs): `resolve_precision`.
"""

from __future__ import annotations

import contextlib

import torch


def resolve_precision(mode: str, device: torch.device, dtype: str = "float32") -> str:
    """The ``mixed_precision`` a worker runs with on ``device``: ``auto`` made concrete."""
    if mode != "auto":
        return mode
    if dtype == "float32" and device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False):
        return "bf16_weights"
    return "none"


class Bf16Weights:
    def __init__(self, module: torch.nn.Module, dtype: torch.dtype = torch.bfloat16):
        self.dtype = dtype
        # (owner module, name, master parameter) for every floating parameter, shared ones once
        seen, self.slots = set(), []
        for owner in module.modules():
            for name, param in owner._parameters.items():
                if param is not None and param.is_floating_point() and id(param) not in seen:
                    seen.add(id(param))
                    self.slots.append((owner, name, param))
        self.masters = [p for _, _, p in self.slots]
        self.trained = [i for i, p in enumerate(self.masters) if p.requires_grad]
        self.copies: list[torch.Tensor] = []

    def _allocate(self) -> None:
        """The bf16 copies (leaves), their gradients as views of one flat bf16 buffer (autograd adds into
        a leaf's existing ``.grad`` in place), and one flat fp32 buffer for the masters' gradients."""
        device = self.masters[0].device
        numel = sum(self.masters[i].numel() for i in self.trained)
        self.flat_grad = torch.zeros(numel, dtype=self.dtype, device=device)
        self.flat_master_grad = torch.zeros(numel, dtype=self.masters[0].dtype, device=device)
        self.copies = [torch.empty_like(p, dtype=self.dtype).requires_grad_(p.requires_grad) for p in self.masters]
        self.master_grads, offset = [], 0
        for i in self.trained:
            n = self.masters[i].numel()
            self.copies[i].grad = self.flat_grad[offset : offset + n].view_as(self.masters[i])
            self.master_grads.append(self.flat_master_grad[offset : offset + n].view_as(self.masters[i]))
            offset += n

    @contextlib.contextmanager
    def step(self):
        """The bf16 copies in place of the master weights for the block (one optimizer step's forwards
        and backwards; ``flush()`` after each backward)."""
        if not self.copies or self.copies[0].device != self.masters[0].device:
            self._allocate()
        with torch.no_grad():
            torch._foreach_copy_(self.copies, self.masters)
        for (owner, name, _), copy in zip(self.slots, self.copies):
            owner._parameters[name] = copy
        try:
            yield self
        finally:
            for owner, name, master in self.slots:
                owner._parameters[name] = master

    def flush(self) -> None:
        """Add the bf16 gradients of the last backward to the masters' fp32 ``.grad`` (views of one
        buffer, zeroed when a master's ``.grad`` was cleared since) and zero the bf16 ones."""
        if any(self.masters[i].grad is not grad for i, grad in zip(self.trained, self.master_grads)):
            if all(self.masters[i].grad is None for i in self.trained):
                self.flat_master_grad.zero_()
            else:  # some hold gradients of their own (set outside this class): keep them
                for i, grad in zip(self.trained, self.master_grads):
                    master = self.masters[i]
                    grad.copy_(master.grad) if master.grad is not None else grad.zero_()
            for i, grad in zip(self.trained, self.master_grads):
                self.masters[i].grad = grad
        self.flat_master_grad.add_(self.flat_grad)
        self.flat_grad.zero_()
