"""A trained model in one call: ``load(model_dir)`` -> :class:`TrainedModel`.

Input: a model folder written by ``python -m train`` (a SentenceTransformer
folder + ``structcse_method.json`` + ``structcse_heads.pt``) or any plain
SentenceTransformer folder (no heads: cosine only). The encoder is
``SentenceTransformer(model_dir)``, whose ``encode`` gives the inference
pooled vector that the method's heads take; the heads are rebuilt by
``train.methods.load_method_heads`` in eval mode.

What each method adds beyond ``encode`` / cosine:

* GaussCSE (Yoda et al. 2023): ``gaussian(texts)`` -> (μ, σ²);
  ``asymmetric_similarity(a, b)`` = sim(a‖b) = 1/(1+KL(N_a‖N_b)) (the
  entailment score of a pair is sim(hypothesis‖premise)); ``similarity`` is the
  symmetric 1/(1+(KL_ab+KL_ba)/2) of the reference code.
* RSE (Wang & Li 2022): ``relation_scores(a, b)`` -> {relation: cos(h_a + r_k, h_b)};
  ``relational_similarity(a, b)`` = max over both directions of Σ_k w_k cos(h_a + r_k, h_b)
  with the trained ``sts_weights`` (paper: entailment 1.0, duplicate_question 0.5);
  ``similarity`` is that score.
* every other model (SimCSE, EASE, a plain SentenceTransformer): ``similarity`` = cosine.

Pairs: ``a`` and ``b`` are two equally long lists of texts (pair i is
(a[i], b[i])) and the result is a numpy array (``relation_scores``: a list of
dicts); two strings give one pair and a scalar (one dict). Every distinct
text is encoded once per call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from train.methods.base import HEADS_FILE, METHOD_FILE

ST_MARKER = "modules.json"


class ModelLoadError(FileNotFoundError):
    """A model folder cannot be loaded: missing folder or file, unreadable method description."""


class MethodMismatchError(TypeError):
    """The model's method has no such capability (e.g. asymmetric similarity of a non-GaussCSE model)."""


def _pairs(a, b) -> tuple[list[str], list[str], bool]:
    """(texts_a, texts_b, single): two strings are one pair; else two equal-length sequences."""
    if isinstance(a, str) and isinstance(b, str):
        return [a], [b], True
    if isinstance(a, str) or isinstance(b, str):
        raise TypeError("give two strings (one pair) or two lists of texts, not a string and a list")
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"a and b must have the same length, got {len(a)} and {len(b)}")
    return a, b, False


class TrainedModel:
    """A SentenceTransformer encoder and, when the folder has them, the method heads it was trained with."""

    def __init__(self, encoder, method=None, path: str | Path | None = None):
        self.encoder = encoder
        self.method = method
        self.path = str(path) if path is not None else None
        self.cache: dict[str, np.ndarray] | None = None  # text -> pooled vector, when enable_cache() was called

    # ------------------------------------------------------------ facts
    @property
    def method_name(self) -> str | None:
        """``gausscse``, ``rse``, ``simcse_sup``, ... or None for a folder without ``structcse_method.json``."""
        return self.method.name if self.method is not None else None

    @property
    def relation_names(self) -> list[str]:
        """RSE: the trained relations, in the column order of the relation table (else [])."""
        return list(getattr(self.method, "relation_names", []) or [])

    def relation_table(self) -> np.ndarray:
        """RSE: (R, d) the relation vectors r_k, rows in ``relation_names`` order."""
        self._require("rse", "relation_table")
        return self.method.relations.table.detach().float().cpu().numpy()

    def __repr__(self) -> str:
        return f"TrainedModel({self.path!r}, method={self.method_name!r})"

    def _require(self, method: str, what: str) -> None:
        if self.method_name != method:
            raise MethodMismatchError(
                f"{what} needs a {method} model; {self.path or 'this model'} is "
                + (f"a {self.method_name} model" if self.method_name else f"a plain encoder (no {METHOD_FILE})")
            )

    # ------------------------------------------------------------ encoding
    def enable_cache(self) -> TrainedModel:
        """Remember every encoded text (evaluations that share sentences encode them once)."""
        self.cache = {} if self.cache is None else self.cache
        return self

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """(N, d) float32 inference embeddings (what the heads take), not normalised."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        if self.cache is None:
            return self._encode(texts, batch_size)
        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if todo:
            self.cache.update(zip(todo, self._encode(todo, batch_size)))
        if not texts:
            return self._encode([], batch_size)
        return np.stack([self.cache[t] for t in texts])

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        if not texts:
            return np.zeros((0, _embedding_dimension(self.encoder)), dtype=np.float32)
        out = self.encoder.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)

    def _pooled(self, texts: list[str], batch_size: int = 64) -> torch.Tensor:
        param = next(self.method.parameters(), None) if self.method is not None else None
        h = torch.from_numpy(self.encode(texts, batch_size))
        return h if param is None else h.to(device=param.device, dtype=param.dtype)

    def _pair_vectors(self, a, b, batch_size: int):
        ta, tb, single = _pairs(a, b)
        unique = list(dict.fromkeys(ta + tb))
        index = {t: i for i, t in enumerate(unique)}
        h = self._pooled(unique, batch_size)
        return h[[index[t] for t in ta]], h[[index[t] for t in tb]], single

    @staticmethod
    def _out(values: torch.Tensor, single: bool):
        arr = values.detach().float().cpu().numpy()
        return float(arr[0]) if single else arr

    # ------------------------------------------------------------ every model
    def cosine(self, a, b, batch_size: int = 64):
        """cos(h_a, h_b) of the inference embeddings."""
        ha, hb, single = self._pair_vectors(a, b, batch_size)
        return self._out(torch.nn.functional.cosine_similarity(ha.float(), hb.float(), dim=-1), single)

    def similarity(self, a, b, batch_size: int = 64):
        """The method's natural pair score: GaussCSE symmetric KL similarity, RSE weighted relational
        score, cosine for every other model."""
        if self.method_name == "gausscse":
            return self.symmetric_similarity(a, b, batch_size)
        if self.method_name == "rse":
            return self.relational_similarity(a, b, batch_size=batch_size)
        return self.cosine(a, b, batch_size)

    # ------------------------------------------------------------ GaussCSE
    def gaussian(self, texts: Sequence[str], batch_size: int = 64) -> tuple[np.ndarray, np.ndarray]:
        """GaussCSE: (μ, σ²), each (N, d) float32 numpy."""
        self._require("gausscse", "gaussian()")
        texts = [texts] if isinstance(texts, str) else list(texts)
        with torch.no_grad():
            g = self.method.gaussian(self._pooled(texts, batch_size))
        return g.mu.float().cpu().numpy(), g.var.float().cpu().numpy()

    def log_det(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """GaussCSE: Σ_d log σ²_d per text (larger = broader = more general sentence)."""
        _, var = self.gaussian(texts, batch_size)
        return np.log(var.astype(np.float64)).sum(-1)

    def _gaussians(self, a, b, batch_size: int):
        ha, hb, single = self._pair_vectors(a, b, batch_size)
        return self.method.gaussian(ha), self.method.gaussian(hb), single

    def asymmetric_similarity(self, a, b, batch_size: int = 64):
        """GaussCSE: sim(a_i‖b_i) = 1/(1+KL(N_a‖N_b)) in the model's similarity form; entailment
        score of (premise, hypothesis) = ``asymmetric_similarity(hypothesis, premise)``."""
        self._require("gausscse", "asymmetric_similarity()")
        with torch.no_grad():
            ga, gb, single = self._gaussians(a, b, batch_size)
            return self._out(self.method.asymmetric_similarity(ga, gb), single)

    def symmetric_similarity(self, a, b, batch_size: int = 64):
        """GaussCSE: 1/(1+(KL(a‖b)+KL(b‖a))/2) (the reference code's STS score)."""
        from train.methods.pair_losses import symmetric_similarity

        self._require("gausscse", "symmetric_similarity()")
        with torch.no_grad():
            ga, gb, single = self._gaussians(a, b, batch_size)
            return self._out(symmetric_similarity(ga, gb, self.method.options.similarity), single)

    # ------------------------------------------------------------ RSE
    def relation_scores(self, a, b, direction: str = "forward", batch_size: int = 64):
        """RSE: {relation: cos(h_a + r_k, h_b)} per pair (a list of dicts; one dict for two strings).
        ``direction``: forward (a→b), backward (b→a) or max."""
        self._require("rse", "relation_scores()")
        ha, hb, single = self._pair_vectors(a, b, batch_size)
        with torch.no_grad():
            scores = self.method.relation_scores(ha, hb, direction).float().cpu().numpy()
        names = self.relation_names
        rows = [{name: float(v) for name, v in zip(names, row)} for row in scores]
        return rows[0] if single else rows

    def relational_similarity(self, a, b, weights: dict | None = None, batch_size: int = 64):
        """RSE: max over directions of Σ_k w̃_k cos(h_a + r_k, h_b); ``weights`` {relation: w}
        (default: the trained ``sts_weights``; relations without a weight count 0)."""
        self._require("rse", "relational_similarity()")
        ha, hb, single = self._pair_vectors(a, b, batch_size)
        with torch.no_grad():
            return self._out(self.method.similarity(ha, hb, weights), single)


# ---------------------------------------------------------------- loading


def _embedding_dimension(encoder) -> int | None:
    getter = getattr(encoder, "get_embedding_dimension", None) or encoder.get_sentence_embedding_dimension
    return getter()


def _read_method_file(folder: Path) -> dict:
    path = folder / METHOD_FILE
    try:
        info = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ModelLoadError(f"{path}: not valid JSON ({e})") from None
    for key in ("method", "options", "hidden_size", "temperature"):
        if key not in info:
            raise ModelLoadError(f"{path}: field {key!r} is missing")
    if info.get("heads_file") and not (folder / info["heads_file"]).is_file():
        raise ModelLoadError(f"{folder}: {info['heads_file']} is missing ({METHOD_FILE} says the "
                             f"{info['method']} heads are saved there)")
    return info


def load(model_dir: str | Path, device: str | None = None) -> TrainedModel:
    """Load a structcse model folder (or a plain SentenceTransformer folder) in eval mode.

    Raises :class:`ModelLoadError` naming the folder and the file when the
    folder, ``modules.json``, the heads file or a method field is missing, and
    when the heads do not fit the encoder's embedding size.
    """
    from sentence_transformers import SentenceTransformer

    from train.methods import get_method, load_method_heads

    folder = Path(model_dir).expanduser()
    if not folder.is_dir():
        raise ModelLoadError(f"model folder does not exist: {folder}")
    if not (folder / ST_MARKER).is_file():
        raise ModelLoadError(f"{folder} is not a SentenceTransformer folder: {ST_MARKER} is missing")
    method = None
    if (folder / METHOD_FILE).is_file():
        info = _read_method_file(folder)
        try:
            get_method(info["method"])
        except KeyError as e:
            raise ModelLoadError(f"{folder / METHOD_FILE}: {e.args[0]}") from None
        try:
            method = load_method_heads(folder, info=info)
        except (RuntimeError, TypeError) as e:
            raise ModelLoadError(f"{folder}: cannot rebuild the {info['method']} heads from "
                                 f"{HEADS_FILE} and {METHOD_FILE}: {e}") from None
    elif (folder / HEADS_FILE).is_file():
        raise ModelLoadError(f"{folder}: {HEADS_FILE} is there but {METHOD_FILE} is missing")
    encoder = SentenceTransformer(str(folder), device=device, local_files_only=True)
    if method is not None:
        dim = _embedding_dimension(encoder)
        if dim is not None and method.hidden_size != dim:
            raise ModelLoadError(f"{folder}: the {method.name} heads expect {method.hidden_size}-d embeddings, "
                                 f"the encoder gives {dim}-d")
        method = method.to(encoder.device).eval()
    return TrainedModel(encoder, method, folder)
