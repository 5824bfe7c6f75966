"""AspectCSE's retrieval evaluation (§6.1, after Ostendorff et al. 2022): the ``aspect_docs`` reader and the
retrieval metrics, once — the ``aspect_p10`` dev metric (``score.dev_metrics``) and ``python -m eval --task
aspect_retrieval`` (``eval.aspect_retrieval``, which describes the protocol) both score with these.

:class:`AspectDocs`, :func:`read_aspect_docs` (an ``aspect_docs`` set), :func:`normalise`,
:func:`label_matrix`, :func:`retrieval_metrics` (P@k / R@k / MRR@k of one aspect), :func:`retrieval_ceiling` (the best any
ranking can reach), :func:`embed_aspects`
(each distinct qid encoded once; ``model``: anything with ``encode(texts, batch_size=...)``),
:func:`retrieval_by_aspect` (per aspect, and each metric's mean over the aspects that have seeds),
:func:`has_seeds`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

KS = (5, 10, 25, 50)
ASPECT_COLUMNS = ["qid", "title", "text", "aspect", "labels"]
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


def read_aspect_docs(data: str | Path, limit: int | None = None) -> dict[str, AspectDocs]:
    """``{aspect: AspectDocs}`` in order of first appearance; a repeated (aspect, qid) keeps its first row."""
    from setformat.io import read_table

    table = read_table(data, ASPECT_COLUMNS, kind="aspect_docs").to_pydict()
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


def _seeds(labels: list[frozenset[str]]):
    """Per chunk of documents, the seeds among them (documents with >= 1 relevant document):
    ``(seed indices, their relevance rows over all documents, their numbers of relevant documents)``."""
    n = len(labels)
    inc = label_matrix(labels)
    for start in range(0, n, SEED_CHUNK):
        idx = np.arange(start, min(start + SEED_CHUNK, n))
        relevant = (inc[idx] @ inc.T).toarray() > 0  # shares >= 1 label
        relevant[np.arange(len(idx)), idx] = False
        n_relevant = relevant.sum(axis=1)
        seeds = n_relevant > 0
        if seeds.any():
            yield idx[seeds], relevant[seeds], n_relevant[seeds]


def _averaged(n: int, sums: dict[str, float], n_seeds: int) -> dict:
    out = {"n_docs": n, "n_seeds": n_seeds}
    out.update({key: (value / n_seeds if n_seeds else 0.0) for key, value in sums.items()})
    return out


def retrieval_metrics(embeddings: np.ndarray, labels: list[frozenset[str]], ks=KS) -> dict:
    """P@k / R@k / MRR@k averaged over the seeds (docs with ≥ 1 relevant doc), plus n_docs and n_seeds."""
    n = len(labels)
    emb = normalise(embeddings)
    k_max = min(max(ks), max(n - 1, 0))
    sums = {f"{m}@{k}": 0.0 for k in ks for m in ("P", "R", "MRR")}
    n_seeds = 0
    for idx, relevant, n_relevant in _seeds(labels):
        scores = emb[idx] @ emb.T
        scores[np.arange(len(idx)), idx] = -np.inf  # never retrieve the seed itself
        top = np.argsort(-scores, axis=1, kind="stable")[:, :k_max]
        hits = np.take_along_axis(relevant, top, axis=1)
        for k in ks:
            h = hits[:, :k]
            found = h.sum(axis=1)
            first = np.where(h.any(axis=1), 1.0 / (h.argmax(axis=1) + 1), 0.0)
            sums[f"P@{k}"] += float((found / h.shape[1]).sum())  # over what was retrieved: min(k, pool)
            sums[f"R@{k}"] += float((found / n_relevant).sum())
            sums[f"MRR@{k}"] += float(first.sum())
        n_seeds += len(idx)
    return _averaged(n, sums, n_seeds)


def retrieval_ceiling(labels: list[frozenset[str]], ks=KS) -> dict:
    """The best P@k / R@k / MRR@k any ranking can reach on these labels (every relevant document first),
    over the same seeds and with the same divisions as :func:`retrieval_metrics`."""
    pool = max(len(labels) - 1, 0)
    sums = {f"{m}@{k}": 0.0 for k in ks for m in ("P", "R", "MRR")}
    n_seeds = 0
    for _, _, n_relevant in _seeds(labels):
        for k in ks:
            found = np.minimum(n_relevant, k)
            sums[f"P@{k}"] += float((found / min(k, pool)).sum())
            sums[f"R@{k}"] += float((found / n_relevant).sum())
            sums[f"MRR@{k}"] += float(len(n_relevant))
        n_seeds += len(n_relevant)
    return _averaged(len(labels), sums, n_seeds)


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


def retrieval_by_aspect(embeddings: dict[str, np.ndarray], aspects: dict[str, AspectDocs],
                        ks=KS) -> tuple[dict[str, dict], dict[str, float]]:
    """(``{aspect: retrieval_metrics}``, each ``P@k`` / ``R@k`` / ``MRR@k``'s unweighted mean over the
    aspects that have seeds); the means are ``{}`` when no aspect has a seed."""
    per_aspect = {a: retrieval_metrics(embeddings[a], docs.labels, ks) for a, docs in aspects.items()}
    scored = [m for m in per_aspect.values() if m["n_seeds"]]
    if not scored:
        return per_aspect, {}
    keys = [f"{m}@{k}" for k in ks for m in ("P", "R", "MRR")]
    return per_aspect, {key: float(np.mean([m[key] for m in scored])) for key in keys}


def has_seeds(aspects: dict[str, AspectDocs]) -> bool:
    """Whether some document shares a label with another on its aspect (else nothing is retrievable);
    needs no model."""
    for docs in aspects.values():
        counts: dict[str, int] = defaultdict(int)
        for labs in docs.labels:
            for lab in labs:
                counts[lab] += 1
                if counts[lab] > 1:
                    return True
    return False
