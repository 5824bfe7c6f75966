"""Aspect retrieval (AspectCSE §6.1; Ostendorff et al. 2022, ``eval_cli.py``): P@k, R@k, MRR@k per aspect.

Input: an ``aspect_docs`` set folder (``ingest.schemas.ASPECT_DOCS``: one row
per (document, aspect) with the document's label ids on that aspect) and
any encoder. Protocol, per aspect:

* embed that aspect's documents (each distinct ``qid`` once; a document in
  several aspects is embedded once for all) and L2-normalise;
* a document is *relevant* to a seed when it shares at least one label with
  it on that aspect; every document with at least one relevant document is
  a seed;
* for each seed, rank the aspect's other documents by cosine (the seed
  itself excluded; ties broken by set order) and take the top k:
  P@k = hits / k, R@k = hits / |relevant|, MRR@k = 1 / rank of the first
  hit within k (0 if none); averaged over the seeds;
* k ∈ {5, 10, 25, 50}. When k exceeds the pool (n_docs − 1 candidates) the
  whole pool is taken, as Ostendorff's code does, and P@k still divides by k
  (so P@k is at most pool / k).

Result: ``per_aspect[aspect]`` = ``{n_docs, n_seeds, P@k, R@k, MRR@k ...}``
(fractions) and, at the top level, each metric's unweighted mean over the
aspects that have seeds (``P@10`` etc.: one number for model selection / Tune).
``limit``: the first N documents of each aspect (set order).
``plots``: a folder; one t-SNE PNG per aspect (:func:`eval.plots.label_tsne`).
:func:`compare_models_tsne` draws a generic and an aspect model side by side.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eval.plots import label_tsne

KS = (5, 10, 25, 50)
COLUMNS = ["qid", "title", "text", "aspect", "labels"]
SEED_CHUNK = 512  # seeds scored at once: (chunk × docs) floats


@dataclass
class AspectDocs:
    """One aspect's documents: distinct qids in set order, their texts and label sets."""

    aspect: str
    qids: list[str]
    texts: list[str]
    labels: list[frozenset[str]]

    def __len__(self) -> int:
        return len(self.qids)


def check_aspect_data(data: str | Path, split: str = "test", **_) -> None:
    """Cheap check before a model loads: the folder exists and holds an ``aspect_docs`` set."""
    from ingest.sets import check_set_folder

    check_set_folder(data, "aspect_docs", required=COLUMNS)


def read_aspect_docs(data: str | Path, limit: int | None = None) -> dict[str, AspectDocs]:
    """``{aspect: AspectDocs}`` in order of first appearance; a repeated (aspect, qid) keeps its first row."""
    from ingest.sets import read_table

    table = read_table(data, COLUMNS, kind="aspect_docs").to_pydict()
    out: dict[str, AspectDocs] = {}
    seen: set[tuple[str, str]] = set()
    for qid, text, aspect, labels in zip(table["qid"], table["text"], table["aspect"], table["labels"]):
        docs = out.setdefault(aspect, AspectDocs(aspect, [], [], []))
        if (aspect, qid) in seen or (limit is not None and len(docs) >= limit):
            continue
        seen.add((aspect, qid))
        docs.qids.append(qid)
        docs.texts.append(text)
        docs.labels.append(frozenset(labels or ()))
    if not out:
        raise ValueError(f"aspect_docs set at {data} has no rows")
    return out


def normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def label_matrix(labels: list[frozenset[str]]):
    """(docs × distinct labels) sparse 0/1 incidence matrix."""
    from scipy import sparse

    index: dict[str, int] = {}
    rows, cols = [], []
    for i, labs in enumerate(labels):
        for lab in sorted(labs):
            rows.append(i)
            cols.append(index.setdefault(lab, len(index)))
    return sparse.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(len(labels), max(len(index), 1)))


def retrieval_metrics(embeddings: np.ndarray, labels: list[frozenset[str]], ks=KS) -> dict:
    """P@k / R@k / MRR@k averaged over the seeds (docs with ≥ 1 relevant doc), plus n_docs and n_seeds."""
    n = len(labels)
    emb = normalise(embeddings)
    inc = label_matrix(labels)
    k_max = min(max(ks), max(n - 1, 0))
    sums = {f"{m}@{k}": 0.0 for k in ks for m in ("P", "R", "MRR")}
    n_seeds = 0
    for start in range(0, n, SEED_CHUNK):
        idx = np.arange(start, min(start + SEED_CHUNK, n))
        relevant = (inc[idx] @ inc.T).toarray() > 0  # shares ≥ 1 label
        relevant[np.arange(len(idx)), idx] = False
        n_relevant = relevant.sum(axis=1)
        seeds = n_relevant > 0
        if not seeds.any():
            continue
        idx, relevant, n_relevant = idx[seeds], relevant[seeds], n_relevant[seeds]
        scores = emb[idx] @ emb.T
        scores[np.arange(len(idx)), idx] = -np.inf  # never retrieve the seed itself
        top = np.argsort(-scores, axis=1, kind="stable")[:, :k_max]
        hits = np.take_along_axis(relevant, top, axis=1)
        for k in ks:
            h = hits[:, :k]
            found = h.sum(axis=1)
            first = np.where(h.any(axis=1), 1.0 / (h.argmax(axis=1) + 1), 0.0)
            sums[f"P@{k}"] += float((found / k).sum())
            sums[f"R@{k}"] += float((found / n_relevant).sum())
            sums[f"MRR@{k}"] += float(first.sum())
        n_seeds += len(idx)
    out = {"n_docs": n, "n_seeds": n_seeds}
    out.update({key: (value / n_seeds if n_seeds else 0.0) for key, value in sums.items()})
    return out


def embed_aspects(model, aspects: dict[str, AspectDocs], batch_size: int = 64) -> dict[str, np.ndarray]:
    """{aspect: (n_docs, d) embeddings}; each distinct qid is encoded once across aspects."""
    texts: dict[str, str] = {}
    for docs in aspects.values():
        for qid, text in zip(docs.qids, docs.texts):
            texts.setdefault(qid, text)
    order = list(texts)
    row = {q: i for i, q in enumerate(order)}
    emb = np.asarray(model.encode([texts[q] for q in order], batch_size=batch_size), dtype=np.float32)
    return {a: emb[[row[q] for q in docs.qids]] for a, docs in aspects.items()}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "aspect"


def evaluate_aspect_retrieval(model, data: str | Path, split: str = "test", *, batch_size: int = 64,
                              limit: int | None = None, plots: str | Path | None = None, ks=KS, **_) -> dict:
    """P@k / R@k / MRR@k per aspect of ``data`` (an aspect_docs set folder) and their means over aspects."""
    started = time.perf_counter()
    aspects = read_aspect_docs(data, limit)
    embeddings = embed_aspects(model, aspects, batch_size)
    per_aspect = {a: retrieval_metrics(embeddings[a], docs.labels, ks) for a, docs in aspects.items()}
    scored = [m for m in per_aspect.values() if m["n_seeds"]]
    if not scored:
        raise ValueError(f"{data}: no document shares a label with another on its aspect; nothing to retrieve")
    result = {"task": "aspect_retrieval", "split": split, "data": str(data), "ks": list(ks)}
    for key in (f"{m}@{k}" for k in ks for m in ("P", "R", "MRR")):
        result[key] = float(np.mean([m[key] for m in scored]))
    result.update({"per_aspect": per_aspect, "n_aspects": len(per_aspect),
                   "n_docs": len({q for d in aspects.values() for q in d.qids}),
                   "n_seeds": sum(m["n_seeds"] for m in per_aspect.values()), "plots": []})
    if plots:
        name = model_name(model)
        for a, docs in aspects.items():
            path = Path(plots) / f"aspect_tsne_{_slug(a)}.png"
            if label_tsne([embeddings[a]], docs.labels, path, titles=[f"{name}: aspect {a}"]) is not None:
                result["plots"].append(str(path))
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


def model_name(model) -> str:
    """A short name for titles: the model's folder when it knows it (TrainedModel), else "model"."""
    from eval.plots import model_label

    return model_label(model) if getattr(model, "path", None) else "model"


def compare_models_tsne(models: dict, data: str | Path, aspect: str, path: str | Path, *, batch_size: int = 64,
                        limit: int | None = None, top_labels: int = 10, label_names: dict | None = None) -> Path:
    """One PNG, one t-SNE panel per model (e.g. ``{"generic SimCSE": m1, "AspectCSE country": m2}``) of the
    ``aspect`` documents of ``data``, coloured alike by label (the paper's Figures 3–4)."""
    aspects = read_aspect_docs(data, limit)
    if aspect not in aspects:
        raise ValueError(f"{data}: no documents for aspect {aspect!r}; aspects: {sorted(aspects)}")
    docs = aspects[aspect]
    panels = [embed_aspects(m, {aspect: docs}, batch_size)[aspect] for m in models.values()]
    titles = [f"{name}: aspect {aspect}" for name in models]
    out = label_tsne(panels, docs.labels, path, titles=titles, top_labels=top_labels, label_names=label_names)
    if out is None:
        raise ValueError(f"aspect {aspect!r} has {len(docs)} documents: too few for a t-SNE plot")
    return out
