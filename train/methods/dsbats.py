"""DSBATS-sn (Zhang Qixuan, Waseda, slides of 17 July 2023; ``docs/methods.md`` §6): sentence relationships
from word analogies, learned with only the reversed pairs as negatives.

Reads: the ``dsbats4cl`` set (``setformat.schemas.DSBATS4CL``; columns
``anchor_first``, ``anchor_second``, ``positive_first``, ``positive_second``):
p_i = (anchor_first, anchor_second) and p_i⁺ = (positive_first,
positive_second) are two definition-sentence pairs of one BATS cluster (same
relationship: def(dog) : def(bark) :: def(cat) : def(meow)); p_i⁻ is p_i⁺
reversed, (positive_second, positive_first): the slides' "intra-cluster data
augmentation" as their figure draws it (duck:quack with cat:meow gives
meow:cat), implicit in the set (not stored). ``reversed_pair: anchor`` takes
the anchor reversed, (anchor_second, anchor_first), the slides' text read the
other way (the reading of the figures measured before 2026-11-26).
Batch: B rows; the four text columns are encoded row-wise, each padded to its
own longest row (``base.encode_columns``), so the loop's GradCache splits them
by rows like any other method. ``pooling: mean`` (definitions are one
sentence; the slides do not say which pooling).

Pair representation r(p) (``pair_representation``; the slides do not say how a
pair is embedded, methods.md §6):

* ``offset`` (default): r(p) = e(second) − e(first), the word-analogy offset
  (king − queen ≈ man − woman); the reversed pair is then exactly −r(p). No
  parameters.
* ``concat_mlp``: r(p) = MLP([e(first); e(second)]), a trained head
  (Linear(2h, h) → tanh → Linear(h, h); our choice), saved with
  ``save_heads``; the reversed pair is MLP([e(second); e(first)]).

Loss (the slides, "Our loss"), sim = cosine, τ = ``temperature``:

    loss_i = −log( e^{sim(p_i, p_i⁺)/τ} / Σ_{j=1..S} e^{sim(p_i, p_j⁻)/τ} )

Only the augmented negatives p_j⁻ are in the denominator, not the other rows'
positives (those may share the cluster: false negatives). Written literally,
as here, the numerator's term is NOT in the denominator (unlike InfoNCE), so
the loss is not a cross-entropy and can be negative; it is bounded below by
log S − 2/τ because cosines lie in [−1, 1]. ``positive_in_denominator: true``
adds the own positive to the denominator (the InfoNCE reading; not the
slides). Under ``offset`` with ``reversed_pair: anchor`` the j = i term is sim(p_i, −p_i) = −1, a
constant; with the positive reversed it is −sim(p_i, p_i⁺), which the numerator already raises.
j runs over the GLOBAL batch: the p⁻ representations are all-gathered with
gradient (``train.distributed``); anchors and positives stay local (loss_i
uses only row i's). τ: the slides give none; 0.05 (SimCSE's) is our choice.

``negatives`` (what the denominator holds):

* ``reversed`` (default, the slides): the p_j⁻ only. Under ``offset`` every
  term e^{sim(r_i, −r_j)/τ} is smallest when r_i points the way r_j does, for
  every j of the batch, whatever its cluster: the loss has no term that keeps
  two relationships apart, and its minimum is all offsets collapsed onto one
  direction (measured: SRSD rises for ~40 steps, then falls below the
  untrained encoder's, ``bench/results/dsbats-2core*.txt``).
* ``reversed+other_clusters``: also the other rows' positives p_j⁺ whose
  cluster differs from row i's (the ``cluster`` column). The slides leave the
  other rows' positives out because some share the anchor's cluster (false
  negatives); masking exactly those keeps that reason and restores the
  repulsion between relationships that SRSD measures. Our addition, not the
  slides'; ``configs/dsbats_other_clusters.yaml``. Measured on MiniLM, 200
  steps (``bench/results/dsbats-2core.txt``): SRSD on held-out BATS lines
  0.684 -> 0.759 (the slides' loss alone: 0.725 at step 40, then falling);
  on held-out words (no test word trained on) neither lifts it (0.68 -> 0.65).

After training, ``score.model.TrainedModel.pair_vectors`` gives r(p) under the model's representation
(``pair_representation``; ``offset`` for any model without a pair head); ``score.srsd.score_srsd_items``
uses it (the ``srsd`` dev metric and ``eval.srsd``).

Siblings: ``simcse_sup.py`` (InfoNCE over all positives and hard negatives of
the batch), ``rse.py`` (relations as learned vectors added to a sentence,
instead of a pair's own offset).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from setformat.io import stable_hash
from train.distributed import gather_nograd, gather_with_grad
from train.methods import register
from train.methods.base import Method
from train.methods.contrastive import Block, cosine_rows, full, logsumexp_blocks
from train.methods.tiled import DEFAULT_LOSS_TILE

PAIR_REPRESENTATIONS = ("offset", "concat_mlp")
NEGATIVES = ("reversed", "reversed+other_clusters")
REVERSED_PAIRS = ("positive", "anchor")
COLUMNS = ("anchor_first", "anchor_second", "positive_first", "positive_second")


class ConcatPairHead(nn.Module):
    """r(p) = MLP([e(first); e(second)]): Linear(2h, h) → tanh → Linear(h, h) (our choice; the slides give none)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.Tanh(), nn.Linear(hidden, hidden))

    def forward(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([first, second], dim=-1))


def dsbats_loss(
    anchor: torch.Tensor,
    positive: torch.Tensor,
    negatives: torch.Tensor,
    temperature: float = 0.05,
    positive_in_denominator: bool = False,
    other_negatives: torch.Tensor | None = None,
    anchor_clusters: torch.Tensor | None = None,
    other_clusters: torch.Tensor | None = None,
    *,
    tile: int = DEFAULT_LOSS_TILE,
) -> torch.Tensor:
    """Mean over anchors i of −sim(p_i,p_i⁺)/τ + log Σ_j e^{sim(p_i,p_j⁻)/τ} (the slides' loss, literally).

    ``anchor``, ``positive``: (B, d) r(p_i), r(p_i⁺) of the rows whose loss is
    averaged; ``negatives``: (S, d) r(p_j⁻) of the whole (global) batch.
    ``positive_in_denominator``: add e^{sim(p_i,p_i⁺)/τ} to the denominator
    (InfoNCE's form; not the slides). ``other_negatives`` (S, d): further denominator terms
    (``negatives: reversed+other_clusters``: the batch's p_j⁺), each left out of anchor i's
    denominator where ``other_clusters[j] == anchor_clusters[i]`` (the same relationship).
    Cosines in float32 (float64 kept); the denominator in tiles (``train.methods.tiled``).
    """
    numerator = cosine_rows(anchor, positive) / temperature
    shift = numerator.detach()  # rows shifted by their numerator, as cross-entropy computes (tiled.cross_entropy_blocks)
    blocks = [Block(anchor, negatives, scale=1.0 / temperature, normalize=True, row_shift=shift)]
    if other_negatives is not None:
        blocks.append(Block(anchor, other_negatives, scale=1.0 / temperature, normalize=True,
                            row_keys=anchor_clusters, column_keys=other_clusters, row_shift=shift))
    denominator = logsumexp_blocks(blocks, tile)
    if positive_in_denominator:
        denominator = torch.logaddexp(denominator, numerator - shift)  # the numerator's own term: 0, with its gradient
    return (denominator - (numerator - shift)).mean()


@register("dsbats")
class DSBATS(Method):
    citation = "DSBATS-sn (Zhang, Waseda, 2023)"
    eval_tasks = (("srsd", "srsd", {"accuracy": "SRSD acc", "accuracy_reversed": "SRSD reversed"}),)
    dev_metric = "srsd"
    train_set = "dsbats4cl"
    sets = {"dsbats4cl": [*COLUMNS, "cluster"]}
    text_columns = COLUMNS

    @dataclasses.dataclass
    class Options:
        pair_representation: str = "offset"  # offset: e(second) − e(first) | concat_mlp: MLP([e(first); e(second)])
        positive_in_denominator: bool = False  # the slides: only the p_j⁻ in the denominator
        negatives: str = "reversed"  # the slides | reversed+other_clusters: also other clusters' p_j⁺
        # p_j⁻ is row j's positive reversed (the slides' augmentation figure: duck:quack with cat:meow gives
        # meow:cat) | anchor: row j's anchor reversed (the slides' text read the other way; the reading the
        # figures in bench/results/dsbats-2core*.txt before 2026-11-26 used)
        reversed_pair: str = "positive"

    @classmethod
    def validate_options(cls, options, cfg):
        from train.errors import ConfigError

        if options.pair_representation not in PAIR_REPRESENTATIONS:
            raise ConfigError(
                f"dsbats.pair_representation {options.pair_representation!r} is not one of {list(PAIR_REPRESENTATIONS)}"
            )
        if options.negatives not in NEGATIVES:
            raise ConfigError(f"dsbats.negatives {options.negatives!r} is not one of {list(NEGATIVES)}")
        if options.reversed_pair not in REVERSED_PAIRS:
            raise ConfigError(f"dsbats.reversed_pair {options.reversed_pair!r} is not one of {list(REVERSED_PAIRS)}")

    def __init__(self, options, *, hidden_size, temperature, data_info=None):
        super().__init__(options, hidden_size=hidden_size, temperature=temperature, data_info=data_info)
        if options.pair_representation not in PAIR_REPRESENTATIONS:
            raise ValueError(f"unknown pair_representation {options.pair_representation!r} {PAIR_REPRESENTATIONS}")
        self.pair_head = ConcatPairHead(hidden_size) if options.pair_representation == "concat_mlp" else None

    def pair_representation(self) -> str:
        return self.options.pair_representation

    def pair(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        """r(p) of pairs (first[k], second[k]) under this model's representation."""
        if self.pair_head is None:
            return full(second) - full(first)
        return self.pair_head(first, second)

    def collate_extra(self, batch):
        if self.options.negatives == "reversed":
            return {}
        # the column is in every batch: ``sets`` lists it, so the driver's set check requires it. A cluster name as a 63-bit id, equal on every worker (all-gathered as a tensor)
        return {"cluster": torch.tensor([stable_hash(str(c)) >> 1 for c in batch["cluster"]], dtype=torch.long)}

    def loss_from_embeddings(self, emb, batch):
        a1, a2 = emb["anchor_first"], emb["anchor_second"]
        anchor = self.pair(a1, a2)
        positive = self.pair(emb["positive_first"], emb["positive_second"])
        if self.options.reversed_pair == "positive":  # p_j⁻: row j's positive reversed, every worker's rows
            reversed_pairs = self.pair(emb["positive_second"], emb["positive_first"])
        else:
            reversed_pairs = self.pair(a2, a1)
        negatives = gather_with_grad(reversed_pairs)
        other = clusters = other_clusters = None
        if self.options.negatives == "reversed+other_clusters":
            other = gather_with_grad(positive)
            clusters = batch["cluster"].to(anchor.device)
            other_clusters = gather_nograd(clusters)  # same relationship as the anchor: not a negative
        loss = dsbats_loss(anchor, positive, negatives, self.temperature, self.options.positive_in_denominator,
                           other, clusters, other_clusters, tile=self.loss_tile)
        return loss, {"loss_dsbats": loss.detach()}
