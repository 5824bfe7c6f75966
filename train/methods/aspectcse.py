"""AspectCSE (Schopf, Gerber, Ostendorff & Matthes, RANLP 2023, arXiv 2307.07851, §3.1) — and its MNRL baseline.

Reads: the ``aspect_triplets`` set (``setformat.schemas.ASPECT_TRIPLETS``;
columns ``anchor``, ``positive``, ``negative``): Wikipedia intros where the
positive shares a label with the anchor on the row's aspect(s) (one Wikidata
property, or the intersection / union of several) and the negative shares
none (or is a random unlabelled article).
Batch: B triplets, each column encoded on its own (``base.encode_columns``);
intros are long, so ``max_len`` is 320 (Table 4) and GradCache
(``chunk_size``) is what makes large batches fit.
Heads: none (``pooling: cls``: CLS + MLP kept at inference, as SimCSE-sup;
Table 4 "Pooler type CLS").
Loss, τ = 0.05 (§3.1, Eq. 1) — supervised SimCSE's, unchanged:

    L_i = -log e^{cos(h_i,h_i⁺)/τ} / Σ_j ( e^{cos(h_i,h_j⁺)/τ} + e^{cos(h_i,h_j⁻)/τ} )

This class IS :class:`~train.methods.simcse_sup.SimCSESup` on another set:
only the set and its column names differ; ``loss_from_embeddings`` renames
the columns and calls SimCSE-sup's, so the loss
(``pair_losses.simcse_supervised_loss``), the cross-worker all-gather with
gradient (j runs over the GLOBAL batch), GradCache, checkpoints and saving
are all inherited. ``hard_negative_weight`` (SimCSE's α = e^w) stays
available, 0 = the paper.

Baseline (§3.2, Ostendorff et al. 2022): MultipleNegativesRankingLoss on
(anchor, positive) pairs only, MEAN pooling, scale 20 = 1/τ:
``configs/aspectcse_mnrl.yaml`` = this method with ``aspectcse.hard_negatives:
false`` + ``pooling: mean`` — exactly how ``simcse_sup`` already spells MNRL,
so both papers' baselines are one switch of one loss rather than a second
method class (the negative column is then not tokenized; the run's
``structcse_method.json`` records ``hard_negatives: false``).
"""

from __future__ import annotations

import dataclasses

from train.methods import register
from train.methods.simcse_sup import SimCSESup

# our columns -> the names SimCSE-sup's loss reads
_AS_SIMCSE = {"anchor": "premise", "positive": "entailment", "negative": "contradiction"}


@register("aspectcse")
class AspectCSE(SimCSESup):
    citation = "AspectCSE (Schopf et al., RANLP 2023)"
    eval_tasks = (("aspect_retrieval", "aspects", {"P@10": "P@10", "MRR@10": "MRR@10"}),)
    dev_metric = "aspect_p10"
    train_set = "aspect_triplets"
    sets = {"aspect_triplets": ["anchor", "positive", "negative"]}
    text_columns = ("anchor", "positive", "negative")

    @dataclasses.dataclass
    class Options(SimCSESup.Options):
        """hard_negatives: false = the MNRL baseline (anchor-positive pairs, in-batch negatives only);
        hard_negative_weight: w = log α on the anchor's own negative (AspectCSE: 0)."""

    def loss_from_embeddings(self, emb, batch):
        loss, _ = super().loss_from_embeddings({_AS_SIMCSE[k]: v for k, v in emb.items()}, batch)
        name = "loss_aspectcse" if self.options.hard_negatives else "loss_mnrl"
        return loss, {name: loss.detach()}
