"""What a method is: the set(s) it reads, how a batch is built, its extra heads, its loss.

A method is an ``nn.Module`` subclass of :class:`Method` registered with
``@register("name")`` in its own file under ``train/methods/``; the loop, the
checkpointing, the cross-worker gather and the saving are shared. Adding a
method = one file here + one YAML in ``configs/``.

Life cycle:

* driver (``train.plan``, the run's preflight), before any worker starts: ``validate_options``,
  ``check_set`` of every set in ``sets`` (only the listed columns),
  ``data_info(cfg, set_paths)`` (small facts such as an entity vocabulary size);
  the Ray dataset is ``read_parquet(set_paths[train_set], columns=sets[train_set])``,
  optionally tokenized by Ray Data workers (``train.batch.pretokenize``);
* every worker: ``Method(options, hidden_size=, temperature=, data_info=)``;
  on a fresh start, rank 0 calls ``init_pretrained(set_paths)`` (DDP then
  broadcasts rank 0's parameters); per step ``collate`` (numpy batch ->
  nested dict of tensors: one token dict per text column + ``collate_extra``),
  then the loss in two halves, so that the loop can run GradCache for every
  method (``train.step``):

  - ``embed(encoder, batch) -> {name: (rows, d) tensor}``: every encoder
    forward of the step, row-wise (a chunk of rows in, the same rows out);
  - ``loss_from_embeddings(embeddings, batch) -> (loss, metrics)``: the heads,
    the cross-worker gathers (``train.distributed``) and the loss. It may use
    parameters of the method (heads) but not the encoder.

* saving (``train.saved_models.save_model``): the SentenceTransformer folder ends in
  ``embedding_modules()`` (the method's sentence embedding as standard modules, so
  ``SentenceTransformer(path).encode`` is the embedding the paper evaluates: GaussCSE's μ);
  ``save_heads(model_dir)`` writes the extra parameters (``structcse_heads.pt``) and
  ``structcse_method.json`` beside them; ``train.methods.load_method_heads(model_dir)``
  rebuilds the module.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from score.model import HEADS_FILE, METHOD_FILE
from train.methods.tiled import DEFAULT_LOSS_TILE


class Method(nn.Module):
    name: ClassVar[str] = ""
    train_set: ClassVar[str] = ""
    sets: ClassVar[dict[str, list[str]]] = {}
    text_columns: ClassVar[tuple[str, ...]] = ()  # columns of the train set that are tokenized
    citation: ClassVar[str] = ""  # the paper, as the model card and the report cite it
    dev_metric: ClassVar[str] = "sts_spearman"  # what checkpoints and Tune trials are selected on (score.dev_metrics)
    pair_score_name: ClassVar[str] = "cosine"  # what pair_score computes (reports name it)
    # the method's own evaluation tasks (python -m eval report's method tables): (task, data flag, {key: header})
    eval_tasks: ClassVar[tuple[tuple[str, str, dict[str, str]], ...]] = ()
    # rows and columns per tile of the loss's log-sum-exp (train.methods.tiled); the run sets its config's
    loss_tile: int = DEFAULT_LOSS_TILE

    @dataclasses.dataclass
    class Options:
        pass

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # TrainedModel.similarity scores by cosine while pair_score_name says "cosine": an own pair score
        # needs its own name, or it would never be used
        if cls.pair_score is not Method.pair_score and cls.pair_score_name == "cosine":
            raise TypeError(f"{cls.__qualname__} overrides pair_score: give it a pair_score_name other than 'cosine'")

    def __init__(self, options: Any, *, hidden_size: int, temperature: float, data_info: dict | None = None):
        super().__init__()
        self.options = options
        self.hidden_size = hidden_size
        self.temperature = temperature
        self.data_info = dict(data_info or {})

    # ---------------------------------------------------------- driver side
    @classmethod
    def validate_options(cls, options: Any, cfg: Any) -> None:
        """Raise ``ConfigError`` for bad option values."""

    @classmethod
    def tokenized_columns(cls, options: Any) -> tuple[str, ...]:
        """The text columns this configuration reads (e.g. no contradictions without hard negatives)."""
        return cls.text_columns

    @classmethod
    def data_info(cls, cfg: Any, set_paths: dict[str, Path]) -> dict:
        """Small JSON-able facts the workers need about the data (computed once on the driver)."""
        return {}

    # ---------------------------------------------------------- worker side
    def init_pretrained(self, set_paths: dict[str, str]) -> None:
        """Initialise heads from external files on a fresh start (rank 0 only)."""

    def collate(self, batch: dict[str, np.ndarray], encoder) -> dict:
        """Numpy batch -> ``{text column: token tensors, **collate_extra(batch)}``.

        Text columns already tokenized by Ray Data (``train.batch.pretokenize``)
        are cut to the batch's longest row instead of being tokenized here.
        """
        from train.batch import tokens_of

        out = {col: tokens_of(batch, col, encoder) for col in self.tokenized_columns(self.options)}
        out.update(self.collate_extra(batch))
        return out

    def collate_extra(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """Non-text columns as tensors (row-wise, first dim = rows)."""
        return {}

    def embed(self, encoder, batch: dict) -> dict[str, torch.Tensor]:
        """Default: one embedding per tokenized column (``encode_columns``)."""
        return encode_columns(encoder, batch, self.tokenized_columns(self.options))

    def loss_from_embeddings(self, embeddings: dict[str, torch.Tensor], batch: dict) -> tuple[torch.Tensor, dict]:
        raise NotImplementedError

    def loss(self, encoder, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        return self.loss_from_embeddings(self.embed(encoder, batch), batch)

    def optimizer_groups(self, lr: float) -> list[dict]:
        """Parameter groups with their own settings (e.g. RSE's relation table at lr 1e-2); every
        parameter not listed here gets the run's lr and weight decay."""
        return []

    # ---------------------------------------------------------- inference (score.model.TrainedModel)
    def pair_score(self, h_a: torch.Tensor, h_b: torch.Tensor) -> torch.Tensor:
        """The method's natural score of pairs (h_a[k], h_b[k]) of inference embeddings, (N,): cosine unless a
        method scores pairs its own way (GaussCSE's KL similarity, RSE's relational score)."""
        return F.cosine_similarity(h_a.float(), h_b.float(), dim=-1)

    def pair_representation(self) -> str:
        """The representation r(p) of a sentence pair this model was trained with (SRSD scores with it):
        ``offset`` = e(second) − e(first) unless the method trains a pair head (DSBATS's ``concat_mlp``)."""
        return "offset"

    def sentence_embedding(self, pooled: torch.Tensor) -> torch.Tensor:
        """The method's sentence embedding of pooled vectors (what ``SentenceTransformer(path).encode`` gives and
        cosines are taken of): the pooled vector itself unless the method maps it (GaussCSE: μ)."""
        return pooled

    # ---------------------------------------------------------- saving
    def embedding_modules(self) -> list[nn.Module]:
        """Standard sentence-transformers modules that compute :meth:`sentence_embedding` from the pooled vector,
        appended to the saved folder's modules (none unless the method maps the pooled vector)."""
        return []

    def describe(self) -> dict:
        return {
            "method": self.name,
            "options": dataclasses.asdict(self.options),
            "hidden_size": self.hidden_size,
            "temperature": self.temperature,
            "data_info": self.data_info,
        }

    def save_heads(self, model_dir: str | Path, embedding_modules: int = 0) -> None:
        """``embedding_modules``: how many of the folder's last modules are this method's ``embedding_modules()``
        (``train.saved_models.save_model`` wrote them; ``load`` drops them, as the heads take the pooled vector)."""
        model_dir = Path(model_dir)
        model_dir.mkdir(parents=True, exist_ok=True)
        info = self.describe()
        if embedding_modules:
            info["embedding_modules"] = embedding_modules
        if any(True for _ in self.parameters()):
            torch.save({k: v.detach().cpu() for k, v in self.state_dict().items()}, model_dir / HEADS_FILE)
            info["heads_file"] = HEADS_FILE
        (model_dir / METHOD_FILE).write_text(json.dumps(info, indent=2, sort_keys=True))


def double(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """[x; x]: each sentence twice in ONE forward, so the two copies get independent dropout masks
    (keyed masks, ``train.dropout_keys``: the second copy's rows get keys of their own)."""
    from train.dropout_keys import ROW_KEYS, second_copy

    return {k: torch.cat([v, second_copy(v) if k == ROW_KEYS else v], dim=0) for k, v in inputs.items()}


def encode_columns(encoder, batch: dict, columns: list[str] | tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Encode each token dict of ``batch``, padded to its own longest row.

    (Padding all columns to one length would pad short hypotheses to the premises' length:
    on SNLI that costs ~40% more compute than it saves in launch overhead. An unpadded
    encoder still runs its per-token layers on all columns' tokens at once:
    ``Encoder.forward_columns``.)
    """
    return dict(zip(columns, encoder.forward_columns([batch[c] for c in columns])))
