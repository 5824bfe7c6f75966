"""RSE: Relational Sentence Embedding (Wang & Li, 2022, "Relational Sentence Embedding for Flexible Semantic Matching").

Reads: the ``relation_triples`` set (``sentence1``, ``relation``, ``sentence2``,
``hard_negative`` (nullable), ``weight``), e.g. built by ``python -m ingest.pairs``
from SNLI / QQP / PAWS / ... with label names mapped to relations.
Batch: B triples; sentence1, sentence2 and the in-relation hard negatives,
encoded column by column. ``pooling: cls`` (CLS + MLP kept at inference, the
reference code).
Heads (:class:`~train.methods.pair_losses.RelationEmbedding`, ``self.relations``):
one vector r_k per relation, N(0, 0.02), trained at its own learning rate
(``relation_lr``, 1e-2, no weight decay: a separate AdamW group).
Loss (:func:`~train.methods.pair_losses.rse_loss`), τ = 0.05, u_i = h_i + r_k(i):

    L_i = -log e^{cos(u_i,h_j(i))/τ} / Σ_m ( e^{cos(u_i,h_m)/τ} + e^{cos(u_i,h_m⁻)/τ} )

m over the GLOBAL batch (every embedding all-gathered with gradient; the
reference code had no cross-GPU gather). Rows without a hard negative have
their column removed from every denominator. ``weighted_loss: true`` weighs
each anchor by the set's ``weight`` column (not in the paper).

Relations: the sorted distinct values of the set's ``relation`` column
(``data_info``), saved with the model, so inference needs no ``--rel_types``
in training order (a reference-code pitfall).

After training (``train.saved_models.load``): ``relation_scores(a, b)`` ->
{relation: cos(h_a + r_k, h_b)}; ``similarity(a, b)`` the weighted relational
score, max over both directions, with ``sts_weights`` (paper: entailment 1.0,
duplicate_question 0.5).

Siblings: ``simcse_sup.py`` (RSE with one relation and r = 0 is supervised SimCSE
with w = 0).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from setformat.io import read_table
from train.batch import present
from train.distributed import gather_nograd, gather_with_grad, local_rows
from train.methods import register
from train.methods.base import Method
from train.methods.pair_losses import RelationEmbedding, relation_scores, relational_similarity, rse_loss


def _default_sts_weights() -> dict:
    return {"entailment": 1.0, "duplicate_question": 0.5}


@register("rse")
class RSE(Method):
    citation = "RSE (Wang & Li, 2022)"
    pair_score_name = "rse_relational"
    eval_tasks = (("link_prediction", "nli", {"MRR": "MRR", "Hits@1": "Hits@1", "Hits@10": "Hits@10"}),)
    dev_metric = "relational_spearman"
    train_set = "relation_triples"
    sets = {"relation_triples": ["sentence1", "relation", "sentence2", "hard_negative", "weight"]}
    text_columns = ("sentence1", "sentence2", "hard_negative")

    @dataclasses.dataclass
    class Options:
        relation_lr: float = 1e-2
        relation_init_std: float = 0.02
        hard_negatives: bool = True
        weighted_loss: bool = False  # weigh anchors by the set's `weight` column
        sts_weights: dict = dataclasses.field(default_factory=_default_sts_weights)  # relation -> weight at inference

    @classmethod
    def validate_options(cls, options, cfg):
        from train.errors import ConfigError

        if not options.relation_lr > 0:
            raise ConfigError(f"rse.relation_lr must be > 0, got {options.relation_lr}")
        if any(not isinstance(w, (int, float)) or w < 0 for w in options.sts_weights.values()):
            raise ConfigError(f"rse.sts_weights must map relation names to weights >= 0, got {options.sts_weights}")

    @classmethod
    def tokenized_columns(cls, options):
        return cls.text_columns if options.hard_negatives else cls.text_columns[:2]

    @classmethod
    def data_info(cls, cfg, set_paths):
        import pyarrow.compute as pc

        col = read_table(set_paths["relation_triples"], ["relation"])["relation"]
        relations = sorted(v for v in pc.unique(col).to_pylist() if v is not None)
        if not relations:
            raise ValueError(f"set 'relation_triples' at {set_paths['relation_triples']} has no relation")
        return {"relations": relations}

    def __init__(self, options, *, hidden_size, temperature, data_info=None):
        super().__init__(options, hidden_size=hidden_size, temperature=temperature, data_info=data_info)
        self.relation_names: list[str] = list(self.data_info["relations"])
        self.relation_index = {r: i for i, r in enumerate(self.relation_names)}
        self.relations = RelationEmbedding(len(self.relation_names), hidden_size, init_std=options.relation_init_std)

    def optimizer_groups(self, lr):
        return self.relations.param_groups(self.options.relation_lr)

    def collate_extra(self, batch):
        try:
            ids = [self.relation_index[r] for r in batch["relation"]]
        except KeyError as e:
            raise ValueError(f"relation {e.args[0]!r} is not among the trained relations {self.relation_names}") from None
        out = {"relation": torch.tensor(ids, dtype=torch.long), "weight": torch.tensor(np.asarray(batch["weight"], dtype=np.float32))}
        if self.options.hard_negatives:
            out["has_hard_negative"] = torch.from_numpy(present(batch, "hard_negative"))
        return out

    def loss_from_embeddings(self, emb, batch):
        rows = local_rows(emb["sentence1"].shape[0])
        h_i = gather_with_grad(emb["sentence1"])
        h_j = gather_with_grad(emb["sentence2"])
        r_k = gather_with_grad(self.relations(batch["relation"]))
        negatives = valid = None
        if self.options.hard_negatives:
            negatives = gather_with_grad(emb["hard_negative"])
            valid = gather_nograd(batch["has_hard_negative"])
        weights = gather_nograd(batch["weight"]) if self.options.weighted_loss else None
        loss = rse_loss(
            h_i, r_k, h_j, negatives, self.temperature, hard_negative_valid=valid, weights=weights, rows=rows,
            tile=self.loss_tile,
        )
        return loss, {"loss_rse": loss.detach()}

    # ------------------------------------------------------------ after training
    def relation_scores(self, h_a: torch.Tensor, h_b: torch.Tensor, direction: str = "forward") -> torch.Tensor:
        """(B, R) cos(h_a + r_k, h_b) for every relation k (columns in ``relation_names`` order)."""
        return relation_scores(h_a, h_b, self.relations.table.detach(), direction)

    def similarity(self, h_a: torch.Tensor, h_b: torch.Tensor, weights: dict | None = None) -> torch.Tensor:
        """(B,) weighted relational score, max over the two directions (RSE STS)."""
        w = weights if weights is not None else self.options.sts_weights
        vec = [float(w.get(r, 0.0)) for r in self.relation_names]
        if not sum(vec):
            raise ValueError(f"no weight for any trained relation {self.relation_names} in {w}")
        return relational_similarity(h_a, h_b, self.relations.table.detach(), vec, "max")

    def pair_score(self, h_a: torch.Tensor, h_b: torch.Tensor) -> torch.Tensor:
        """The relational score with the trained ``sts_weights``."""
        return self.similarity(h_a, h_b)
