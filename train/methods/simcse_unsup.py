"""Unsupervised SimCSE (Gao, Yao & Chen, EMNLP 2021, arXiv 2104.08821).

Reads: the ``sentences`` set, column ``sentence``.
Batch: B sentences, tokenized; the encoder sees [x; x] (2B rows) in one
forward pass, so the two copies of a sentence differ only by their dropout
masks (p = ``dropout``, 0.1).
Heads: none (the CLS MLP belongs to the encoder's pooling; the paper's
recipe is ``pooling: cls_mlp``, i.e. MLP at train time only).
Loss: InfoNCE with τ = ``temperature`` (0.05):
    L_i = -log( e^{cos(h_i, h_i⁺)/τ} / Σ_j e^{cos(h_i, h_j⁺)/τ} )
where j runs over the positives of the GLOBAL batch: z2 is all-gathered with
gradient across workers and labels are offset by rank·B
(``train.distributed``).

Siblings: EASE (``ease.py``) adds an entity loss to exactly this loss; every
supervised method is this loss with other positives / hard negatives.
"""

from __future__ import annotations

import dataclasses

import torch

from train.distributed import gather_with_grad, local_rows
from train.methods import register
from train.methods.base import Method, double
from train.methods.contrastive import info_nce
from train.methods.tiled import DEFAULT_LOSS_TILE


def simcse_loss(z1: torch.Tensor, z2: torch.Tensor, temperature: float, tile: int = DEFAULT_LOSS_TILE) -> torch.Tensor:
    """InfoNCE of local anchors ``z1`` (B, d) against the gathered positives ``z2`` of all workers."""
    return info_nce(z1, gather_with_grad(z2), local_rows(z1.shape[0]), temperature, tile=tile)


@register("simcse_unsup")
class SimCSEUnsup(Method):
    citation = "SimCSE, unsupervised (Gao, Yao & Chen, EMNLP 2021)"
    train_set = "sentences"
    sets = {"sentences": ["sentence"]}

    @dataclasses.dataclass
    class Options:
        pass

    text_columns = ("sentence",)

    def embed(self, encoder, batch):
        z1, z2 = encoder(**double(batch["sentence"])).chunk(2)
        return {"z1": z1, "z2": z2}

    def loss_from_embeddings(self, emb, batch):
        loss = simcse_loss(emb["z1"], emb["z2"], self.temperature, self.loss_tile)
        return loss, {"loss_simcse": loss.detach()}
