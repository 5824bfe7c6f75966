"""EASE: Entity-Aware contrastive learning of Sentence Embeddings (Nishikawa et al., NAACL 2022, arXiv 2205.04260).

Reads: ``entity_pairs`` (``sentence``, ``positive_entity``, ``negative_entity``:
row indices of the entity table) and ``entities`` (``entity_index``, ``title``:
the vocabulary size, and the titles that map Wikipedia2Vec vectors to rows).
Batch: B sentences, tokenized and encoded twice in one forward ([x; x], two
dropout views), plus the two entity ids of each row.
Heads (:class:`EntityHead`): a trainable entity table E (``nn.Embedding``,
row 0 = padding, kept zero) and a projection ẽ = tanh(W·E[e] + b) to the
encoder dimension (the paper's "learnable matrix"; the reference code's
Linear+tanh ``entity_transformation``).
Loss: L = L_SimCSE(z1, z2; τ) + λ·L_ent with λ = ``ease_loss_ratio`` (0.01) and

    L_ent,i = -log( e^{cos(z_i,ẽ_i)/τ_e} /
                    [ Σ_j e^{cos(z_i,ẽ_j)/τ_e} + Σ_j e^{cos(z_i,ẽ_j⁻)/τ_e + w·1[j=i]} ] )

z_i is the train-time sentence embedding of the first view; j runs over the
GLOBAL batch: positive and hard-negative entity embeddings are all-gathered
with gradient (the reference repo gathered z1 but not the entities, so its
labels and hard-negative weights no longer matched the logits under DDP).
w = ``hard_negative_weight`` (1.0) is a log-weight added to the anchor's OWN
hard-negative logit after the temperature, as in SimCSE.

Entity temperature τ_e (decision). The paper's Eq. 1 is the SimCLR softmax
(Chen et al. 2020) with "τ a temperature hyperparameter": logits are cos/τ_e,
a temperature in (0, 1]. The reference repo's config sets ``ease_temp: 100``
(10 multilingual) and *divides* by it, so its entity logits are ~±0.01: the
softmax is nearly uniform, the hard-negative weight w = 1 dominates every row,
and the entity loss's gradient is ~1e-4 of SimCSE's after λ. That is a
repo/paper mismatch, and we follow the paper: ``entity_temperature`` divides
the cosine and defaults to 0.05 (SimCSE's τ; the numeric value in our copy of
the paper did not survive text extraction, so treat 0.05 as a default to tune
in the 0.02-0.1 range, not as the paper's number). Setting
``entity_temperature: 100`` reproduces the reference code exactly (same formula).

Duplicate entities (an improvement over the reference, methods.md §8): when
the same entity is the positive of several rows of the global batch, it is a
false negative for the others. With ``mask_duplicate_entities`` (default on)
a column j is removed from anchor i's denominator when its entity id equals
i's positive entity (positive block, j ≠ i; hard-negative block, any j).

Entity table init: ``entity_vectors`` is a Wikipedia2Vec text file, a path or a URI (``title
v1 … vd`` per line, optional ``count dim`` header, ``ENTITY/Title_with_underscores``
names as written by ``wikipedia2vec save_text``). Matched rows get the vector,
missing entities U(-0.05, 0.05), the padding row 0 zero. Loaded by rank 0 on a
fresh start only; DDP broadcasts rank 0's parameters and a resume restores the
trained table from the checkpoint.

Sibling: ``simcse_unsup.py`` (L_SimCSE is reused unchanged).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Optional

import torch
from torch import nn

from setformat.io import read_table
from train.distributed import gather_nograd, gather_with_grad, local_rows
from train.methods import register
from train.methods.base import Method, double
from train.methods.contrastive import Block, cross_entropy_blocks, label_logits, row_index
from train.methods.simcse_unsup import simcse_loss
from train.methods.tiled import DEFAULT_LOSS_TILE

log = logging.getLogger(__name__)
INIT_RANGE = 0.05


class EntityHead(nn.Module):
    """Entity table (row 0 = padding) + Linear+tanh projection to the encoder dimension."""

    def __init__(self, num_entities: int, entity_dim: int, hidden_size: int):
        super().__init__()
        self.embedding = nn.Embedding(num_entities, entity_dim, padding_idx=0)
        self.projection = nn.Linear(entity_dim, hidden_size)
        with torch.no_grad():
            self.embedding.weight.uniform_(-INIT_RANGE, INIT_RANGE)
            self.embedding.weight[0].zero_()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.projection(self.embedding(ids)))


def entity_loss(
    z: torch.Tensor,
    pos_emb: torch.Tensor,
    neg_emb: torch.Tensor,
    pos_ids: torch.Tensor,
    neg_ids: torch.Tensor,
    *,
    temperature: float,
    hard_negative_weight: float,
    mask_duplicates: bool = True,
    tile: int = DEFAULT_LOSS_TILE,
) -> torch.Tensor:
    """L_ent (module docstring) as a log-sum-exp over two blocks: positives (duplicates of the own positive
    left out) and hard negatives (the own one weighted). Its dense form, every logit built, is
    ``tests/dense_losses.entity_logits``, the oracle it is tested against."""
    anchors, positives, negatives = z, gather_with_grad(pos_emb), gather_with_grad(neg_emb)
    labels, own = row_index(local_rows(z.shape[0]), positives.shape[0], z.device)
    same_positive, same_as_negative = {}, {}
    if mask_duplicates:
        same_positive = dict(row_keys=pos_ids, column_keys=gather_nograd(pos_ids), keep_column=labels)
        same_as_negative = dict(row_keys=pos_ids, column_keys=gather_nograd(neg_ids))
    blocks = [
        Block(anchors, positives, scale=1.0 / temperature, normalize=True, label_column=labels, **same_positive),
        Block(anchors, negatives, scale=1.0 / temperature, normalize=True, own_column=labels,
              own_bias=hard_negative_weight, **same_as_negative),
    ]
    return cross_entropy_blocks(blocks, label_logits(anchors, positives, own, temperature), tile).mean()


@register("ease")
class EASE(Method):
    citation = "EASE (Nishikawa et al., NAACL 2022)"
    train_set = "entity_pairs"
    sets = {
        "entity_pairs": ["sentence", "positive_entity", "negative_entity"],
        "entities": ["entity_index", "title"],
    }

    @dataclasses.dataclass
    class Options:
        ease_loss_ratio: float = 0.01  # λ
        entity_temperature: float = 0.05  # τ_e: divides the cosine (see module docstring)
        hard_negative_weight: float = 1.0  # w, log-weight on the anchor's own hard negative
        entity_dim: Optional[int] = None  # None: the encoder's hidden size (768 for BERT-base, as the paper)
        entity_vectors: Optional[str] = None  # Wikipedia2Vec text file to initialise the table
        mask_duplicate_entities: bool = True

    @classmethod
    def validate_options(cls, options, cfg):
        from train.errors import ConfigError

        if not options.entity_temperature > 0:
            raise ConfigError(f"ease.entity_temperature must be > 0, got {options.entity_temperature}")
        if options.ease_loss_ratio < 0:
            raise ConfigError(f"ease.ease_loss_ratio must be >= 0, got {options.ease_loss_ratio}")
        if options.entity_dim is not None and options.entity_dim < 1:
            raise ConfigError(f"ease.entity_dim must be >= 1, got {options.entity_dim}")
        if options.entity_vectors and not _is_file(options.entity_vectors):
            from infra.secrets import redact_text

            raise ConfigError(f"ease.entity_vectors: file {redact_text(options.entity_vectors)!r} does not exist")

    @classmethod
    def data_info(cls, cfg, set_paths):
        import pyarrow.compute as pc

        col = read_table(set_paths["entities"], ["entity_index"])["entity_index"]
        if len(col) == 0:
            raise ValueError(f"set 'entities' at {set_paths['entities']} is empty")
        return {"num_entities": int(pc.max(col).as_py()) + 1}

    def __init__(self, options, *, hidden_size, temperature, data_info=None):
        super().__init__(options, hidden_size=hidden_size, temperature=temperature, data_info=data_info)
        self.num_entities = int(self.data_info["num_entities"])
        self.entity_dim = options.entity_dim or hidden_size
        self.entities = EntityHead(self.num_entities, self.entity_dim, hidden_size)

    def init_pretrained(self, set_paths):
        if not self.options.entity_vectors:
            return
        table = read_table(set_paths["entities"], ["entity_index", "title"])
        title_to_row = dict(zip(table["title"].to_pylist(), table["entity_index"].to_pylist()))
        rows, vectors = load_entity_vectors(self.options.entity_vectors, title_to_row, self.entity_dim)
        with torch.no_grad():
            w = self.entities.embedding.weight
            if rows:
                w[torch.tensor(rows)] = torch.tensor(vectors, dtype=w.dtype)
            w[0].zero_()
        log.info(
            f"[ease] entity vectors: {len(rows)} of {len(title_to_row)} entities found in {self.options.entity_vectors}"
        )

    text_columns = ("sentence",)

    def collate_extra(self, batch):
        pos = torch.tensor(batch["positive_entity"], dtype=torch.long)  # copies (Ray's arrays are read-only)
        neg = torch.tensor(batch["negative_entity"], dtype=torch.long)
        top = int(max(pos.max(), neg.max()))
        if top >= self.num_entities or int(min(pos.min(), neg.min())) < 0:
            raise ValueError(
                f"entity id {top} outside the entity table (size {self.num_entities} from the entities set)"
            )
        return {"positive_entity": pos, "negative_entity": neg}

    def embed(self, encoder, batch):
        z1, z2 = encoder(**double(batch["sentence"])).chunk(2)
        return {"z1": z1, "z2": z2}

    def loss_from_embeddings(self, emb, batch):
        pos_ids, neg_ids = batch["positive_entity"], batch["negative_entity"]
        z1 = emb["z1"]
        l_simcse = simcse_loss(z1, emb["z2"], self.temperature, self.loss_tile)
        opt = self.options
        l_ent = entity_loss(
            z1,
            self.entities(pos_ids),
            self.entities(neg_ids),
            pos_ids,
            neg_ids,
            temperature=opt.entity_temperature,
            hard_negative_weight=opt.hard_negative_weight,
            mask_duplicates=opt.mask_duplicate_entities,
            tile=self.loss_tile,
        )
        loss = l_simcse + opt.ease_loss_ratio * l_ent
        return loss, {"loss_simcse": l_simcse.detach(), "loss_entity": l_ent.detach()}

    def describe(self):
        info = super().describe()
        info.update(num_entities=self.num_entities, entity_dim=self.entity_dim)
        return info

    def embed_entities(self, ids: torch.Tensor) -> torch.Tensor:
        """Projected entity embeddings ẽ (comparable by cosine with the train-time sentence embedding)."""
        return self.entities(ids)


def _is_file(path: str | Path) -> bool:
    """A local file, or an object at a URI (``s3://``, ``gs://``, ``file://``: infra.storage's filesystems)."""
    from infra.storage import filesystem

    fs, inner = filesystem(path)  # a local path too (``~`` expanded), as load_entity_vectors reads it
    return fs.isfile(inner)


def load_entity_vectors(
    path: str | Path, title_to_row: dict[str, int], dim: int
) -> tuple[list[int], list[list[float]]]:
    """Rows and vectors of the entities of ``title_to_row`` found in a Wikipedia2Vec text file.

    ``path`` is a local path or a URI (read through infra.storage, streamed: never copied whole), plain or
    compressed as its name says (``.bz2``, ``.gz``, ``.xz``: Wikipedia2Vec's pretrained
    ``enwiki_20180420_300d.txt.bz2`` as downloaded).

    Lines are ``name v1 … v_dim`` (the name may contain spaces: the last
    ``dim`` fields are the vector). A ``count dim`` header is checked against
    ``dim``. When the file has ``ENTITY/``-prefixed names (word + entity
    files), only those lines are used; ``_`` in names reads as a space.
    Blank lines are skipped; a line without a name and ``dim`` values, or a
    used vector with a value that is not a number, is a ValueError naming
    ``file:line`` (never a silently missing vector).
    """
    wanted = {t.replace("_", " "): r for t, r in title_to_row.items()}
    plain: dict[int, list[float]] = {}
    prefixed: dict[int, list[float]] = {}
    seen_prefix = False
    from infra.storage import open_file

    with open_file(os.fspath(path), "rt", encoding="utf-8", compression="infer") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.rstrip("\n").rstrip().split(" ")
            if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                if int(parts[1]) != dim:
                    raise ValueError(f"{path}: vectors have dimension {parts[1]}, but ease.entity_dim is {dim}")
                continue
            if parts == [""]:
                continue
            if len(parts) <= dim:
                raise ValueError(f"{path}:{lineno}: {len(parts)} fields, not a name and {dim} vector values "
                                 f"(ease.entity_dim): {line.strip()[:80]!r}")
            name = " ".join(parts[:-dim])
            is_entity = name.startswith("ENTITY/")
            if is_entity:
                seen_prefix = True
                name = name[len("ENTITY/") :]
            row = wanted.get(name.replace("_", " "))
            if row is None:
                continue
            try:
                (prefixed if is_entity else plain)[row] = [float(x) for x in parts[-dim:]]
            except ValueError as e:
                raise ValueError(f"{path}:{lineno}: a vector value is not a number ({e})") from None
    found = prefixed if seen_prefix else plain
    rows = sorted(found)
    return rows, [found[r] for r in rows]
