"""Supervised SimCSE (Gao, Yao & Chen, EMNLP 2021, arXiv 2104.08821, §4) — and MNRL.

Reads: the ``nli_triplets`` set (``premise``, ``entailment``, ``contradiction``),
e.g. built by ``python -m ingest.pairs`` from SNLI+MNLI or SimCSE's
``nli_for_simcse.csv``.
Batch: B triplets; premise, entailment and contradiction are encoded column by
column, each padded to its own longest row (``base.encode_columns``).
Heads: none (``pooling: cls``: CLS + MLP, kept at inference, the paper's
supervised setting).
Loss (:func:`~train.methods.pair_losses.simcse_supervised_loss`), τ = 0.05:

    L_i = -log e^{cos(h_i,h_i⁺)/τ} / ( Σ_j e^{cos(h_i,h_j⁺)/τ} + Σ_j α^{1[j=i]} e^{cos(h_i,h_j⁻)/τ} )

j runs over the GLOBAL batch: entailment and contradiction embeddings are
all-gathered with gradient, so B×N rows give every anchor B×N−1 in-batch
negatives and B×N hard negatives. α = e^w, w = ``hard_negative_weight``
(code's log-weight; 0 = the paper's main setting).

``hard_negatives: false`` drops the contradiction column: the loss is then
sentence-transformers' MultipleNegativesRankingLoss on (premise, entailment)
pairs (scale 20 = 1/τ), which ``bench/train.py`` compares against.

Siblings: ``simcse_unsup.py`` (same loss, the positive is the sentence itself
under another dropout mask), ``rse.py`` (adds a relation vector to the
anchor), ``gausscse.py`` (same triplets, Gaussian embeddings).
"""

from __future__ import annotations

import dataclasses

from train.distributed import gather_with_grad, local_rows
from train.methods import register
from train.methods.base import Method
from train.methods.pair_losses import simcse_supervised_loss


@register("simcse_sup")
class SimCSESup(Method):
    citation = "SimCSE, supervised (Gao, Yao & Chen, EMNLP 2021)"
    train_set = "nli_triplets"
    sets = {"nli_triplets": ["premise", "entailment", "contradiction"]}
    text_columns = ("premise", "entailment", "contradiction")

    @dataclasses.dataclass
    class Options:
        hard_negatives: bool = True  # false: (premise, entailment) pairs only = MNRL
        hard_negative_weight: float = 0.0  # w (log α) on the anchor's own contradiction

    @classmethod
    def tokenized_columns(cls, options):
        return cls.text_columns if options.hard_negatives else cls.text_columns[:2]

    def loss_from_embeddings(self, emb, batch):
        # every embedding is gathered; this worker's loss averages over its own anchors (rows)
        rows = local_rows(emb["premise"].shape[0])
        anchor = gather_with_grad(emb["premise"])
        positive = gather_with_grad(emb["entailment"])
        negative = gather_with_grad(emb["contradiction"]) if self.options.hard_negatives else None
        loss = simcse_supervised_loss(
            anchor, positive, negative, self.temperature, self.options.hard_negative_weight, rows=rows,
            tile=self.loss_tile,
        )
        return loss, {"loss_simcse_sup": loss.detach()}
