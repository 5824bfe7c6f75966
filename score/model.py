"""The inference API of a trained model: :class:`TrainedModel`, an encoder and its method's heads.

``train.saved_models.load(model_dir)`` builds one from a folder written by
``python -m train`` (a SentenceTransformer folder + ``structcse_method.json`` +
``structcse_heads.pt``) or any plain SentenceTransformer folder (no heads:
cosine only); ``TrainedModel(encoder)`` wraps any SentenceTransformer. The
encoder's ``encode`` gives the pooled vector that the heads take
(:meth:`TrainedModel.pooled`); :meth:`TrainedModel.encode` gives the method's
sentence embedding (GaussCSE: μ), which is what ``SentenceTransformer(path).encode``
gives for the saved folder.

Nothing here is keyed by a method's name: what a method adds is what its
``Method`` object (``train/methods/``) has, asked for by capability —
``pair_score`` (the natural pair score, cosine by default), ``gaussian`` and
``asymmetric_similarity`` (GaussCSE), ``relation_scores`` (RSE), ``pair``
(a trained pair representation, DSBATS's ``concat_mlp``). Today:

* GaussCSE (Yoda et al. 2023): ``gaussian(texts)`` -> (μ, σ²);
  ``asymmetric_similarity(a, b)`` = sim(a‖b) = 1/(1+KL(N_a‖N_b)) (the
  entailment score of a pair is sim(hypothesis‖premise)); ``similarity`` is the
  symmetric 1/(1+(KL_ab+KL_ba)/2) of the reference code.
* RSE (Wang & Li 2022): ``relation_scores(a, b)`` -> {relation: cos(h_a + r_k, h_b)};
  ``relational_similarity(a, b)`` = max over both directions of Σ_k w_k cos(h_a + r_k, h_b)
  with the trained ``sts_weights`` (paper: entailment 1.0, duplicate_question 0.5);
  ``similarity`` is that score.
* every other model (SimCSE, EASE, AspectCSE, DSBATS, a plain SentenceTransformer): ``similarity`` = cosine.

Pairs: ``a`` and ``b`` are two equally long lists of texts (pair i is
(a[i], b[i])) and the result is a numpy array (``relation_scores``: a list of
dicts); two strings give one pair and a scalar (one dict). Every distinct
text is encoded once per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

ST_MARKER = "modules.json"
METHOD_FILE = "structcse_method.json"  # beside a trained model: which method, its options (``Method.describe``)
HEADS_FILE = "structcse_heads.pt"  # the method's extra parameters, when it has any
OFFSET = "offset"  # the pair representation every model has: e(second) − e(first)


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


def _distinct_texts(a, b) -> tuple[list[str], list[int], list[int], bool]:
    """(each distinct text once, the rows of a's texts in it, the rows of b's, single): every text is encoded once."""
    ta, tb, single = _pairs(a, b)
    unique = list(dict.fromkeys(ta + tb))
    index = {t: i for i, t in enumerate(unique)}
    return unique, [index[t] for t in ta], [index[t] for t in tb], single


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
        """The method's registered name, or None for a folder without ``structcse_method.json``."""
        return self.method.name if self.method is not None else None

    @property
    def relation_names(self) -> list[str]:
        """RSE: the trained relations, in the column order of the relation table (else [])."""
        return list(getattr(self.method, "relation_names", []) or [])

    @property
    def similarity_name(self) -> str:
        """What :meth:`similarity` computes: ``cosine`` or the method's ``pair_score_name``."""
        return self.method.pair_score_name if self.method is not None else "cosine"

    def has(self, capability: str) -> bool:
        """Whether the model's method offers ``capability`` (``gaussian``, ``relation_scores``, ``pair``, ...)."""
        return self.method is not None and callable(getattr(self.method, capability, None))

    def relation_table(self) -> np.ndarray:
        """RSE: (R, d) the relation vectors r_k, rows in ``relation_names`` order."""
        self._require("relation_scores", "relation_table")
        return self.method.relations.table.detach().float().cpu().numpy()

    def __repr__(self) -> str:
        return f"TrainedModel({self.path!r}, method={self.method_name!r})"

    def _require(self, capability: str, what: str) -> None:
        if not self.has(capability):
            raise MethodMismatchError(
                f"{what} needs a model whose method has {capability} (the method's file in train/methods/ "
                f"says what it has); "
                f"{self.path or 'this model'} is "
                + (f"a {self.method_name} model" if self.method_name else f"a plain encoder (no {METHOD_FILE})")
            )

    # ------------------------------------------------------------ encoding
    def enable_cache(self) -> TrainedModel:
        """Remember every encoded text (evaluations that share sentences encode them once)."""
        self.cache = {} if self.cache is None else self.cache
        return self

    def pooled(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """(N, d) float32 pooled vectors, what the method's heads take (the encoder's output), not normalised;
        the same as :meth:`encode` for every method but GaussCSE."""
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
            return np.zeros((0, embedding_dimension(self.encoder)), dtype=np.float32)
        out = self.encoder.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)

    def _pooled(self, texts: list[str], batch_size: int = 64) -> torch.Tensor:
        param = next(self.method.parameters(), None) if self.method is not None else None
        h = torch.from_numpy(self.pooled(texts, batch_size))
        return h if param is None else h.to(device=param.device, dtype=param.dtype)

    def _pair_vectors(self, a, b, batch_size: int):
        unique, rows_a, rows_b, single = _distinct_texts(a, b)
        h = self._pooled(unique, batch_size)
        return h[rows_a], h[rows_b], single

    @staticmethod
    def _out(values: torch.Tensor, single: bool):
        arr = values.detach().float().cpu().numpy()
        return float(arr[0]) if single else arr

    # ------------------------------------------------------------ every model
    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """(N, d) float32 sentence embeddings, not normalised: what ``SentenceTransformer(path).encode`` gives for
        the saved folder (GaussCSE: μ; every other method: the :meth:`pooled` vector itself)."""
        if self.method is None:
            return self.pooled(texts, batch_size)
        texts = [texts] if isinstance(texts, str) else list(texts)
        with torch.no_grad():
            return self.method.sentence_embedding(self._pooled(texts, batch_size)).float().cpu().numpy()

    def cosine(self, a, b, batch_size: int = 64):
        """cos(e_a, e_b) of the sentence embeddings (:meth:`encode`), in float64 (the one cosine of every STS
        figure)."""
        unique, rows_a, rows_b, single = _distinct_texts(a, b)
        h = self.encode(unique, batch_size).astype(np.float64)
        h /= np.maximum(np.linalg.norm(h, axis=1, keepdims=True), 1e-12)
        values = np.sum(h[rows_a] * h[rows_b], axis=1)
        return float(values[0]) if single else values

    def similarity(self, a, b, batch_size: int = 64):
        """The method's natural pair score (``Method.pair_score``: GaussCSE's symmetric KL similarity, RSE's
        weighted relational score); cosine for every other model."""
        if self.method is None or self.similarity_name == "cosine":
            return self.cosine(a, b, batch_size)
        ha, hb, single = self._pair_vectors(a, b, batch_size)
        with torch.no_grad():
            return self._out(self.method.pair_score(ha, hb), single)

    # ------------------------------------------------------------ pair representations (SRSD)
    def pair_representation(self, override: str | None = None) -> str:
        """The representation r(p) of a sentence pair to score with: ``override``, else the method's own
        trained one (``Method.pair_representation``), else ``offset``; one the model lacks is a ValueError."""
        own = self.method.pair_representation() if self.method is not None else OFFSET
        chosen = override or own
        if chosen not in (OFFSET, own):
            what = f"a {self.method_name} model" if self.method_name else "a model without method heads"
            raise ValueError(f"pair representation {chosen} needs a model trained with it; this is {what} "
                             f"(pair representation: {own})")
        return chosen

    def pair_vectors(self, first_emb, second_emb, representation: str | None = None) -> torch.Tensor:
        """r(p) for pairs (first_emb[k], second_emb[k]) ((N, h) tensors or arrays) -> (N, h) tensor, no gradient:
        ``offset`` e(second) − e(first) for any model, else the method's trained pair head on its device."""
        chosen = self.pair_representation(representation)
        first, second = (x if torch.is_tensor(x) else torch.as_tensor(np.asarray(x)) for x in (first_emb, second_emb))
        if chosen == OFFSET:
            return _at_least_float32(second) - _at_least_float32(first)
        param = next(self.method.parameters())
        with torch.no_grad():
            out = self.method.pair(first.to(param.device, param.dtype), second.to(param.device, param.dtype))
        return _at_least_float32(out).cpu()

    # ------------------------------------------------------------ GaussCSE
    def gaussian(self, texts: Sequence[str], batch_size: int = 64) -> tuple[np.ndarray, np.ndarray]:
        """GaussCSE: (μ, σ²), each (N, d) float32 numpy."""
        self._require("gaussian", "gaussian()")
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
        self._require("asymmetric_similarity", "asymmetric_similarity()")
        with torch.no_grad():
            ga, gb, single = self._gaussians(a, b, batch_size)
            return self._out(self.method.asymmetric_similarity(ga, gb), single)

    def symmetric_similarity(self, a, b, batch_size: int = 64):
        """GaussCSE: 1/(1+(KL(a‖b)+KL(b‖a))/2) (the reference code's STS score: its ``pair_score``)."""
        self._require("gaussian", "symmetric_similarity()")
        return self.similarity(a, b, batch_size)

    # ------------------------------------------------------------ RSE
    def relation_scores(self, a, b, direction: str = "forward", batch_size: int = 64):
        """RSE: {relation: cos(h_a + r_k, h_b)} per pair (a list of dicts; one dict for two strings).
        ``direction``: forward (a→b), backward (b→a) or max."""
        self._require("relation_scores", "relation_scores()")
        ha, hb, single = self._pair_vectors(a, b, batch_size)
        with torch.no_grad():
            scores = self.method.relation_scores(ha, hb, direction).float().cpu().numpy()
        names = self.relation_names
        rows = [{name: float(v) for name, v in zip(names, row)} for row in scores]
        return rows[0] if single else rows

    def relational_similarity(self, a, b, weights: dict | None = None, batch_size: int = 64):
        """RSE: max over directions of Σ_k w̃_k cos(h_a + r_k, h_b); ``weights`` {relation: w}
        (default: the trained ``sts_weights``; relations without a weight count 0)."""
        self._require("relation_scores", "relational_similarity()")
        ha, hb, single = self._pair_vectors(a, b, batch_size)
        with torch.no_grad():
            return self._out(self.method.similarity(ha, hb, weights), single)


def _at_least_float32(x: torch.Tensor) -> torch.Tensor:
    return x if x.dtype == torch.float64 else x.float()


def embedding_dimension(encoder) -> int | None:
    getter = getattr(encoder, "get_embedding_dimension", None) or encoder.get_sentence_embedding_dimension
    return getter()


