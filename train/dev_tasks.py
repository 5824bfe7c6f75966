"""The pure pieces of two evaluation tasks that a dev metric (``train.dev_metrics``) scores with too.

Stage dependencies point one way (ingest ← train ← eval ← tune): ``train`` never imports ``eval``, so
what checkpoint selection and ``python -m eval`` share lives here, once, and ``eval.aspect_retrieval``
and ``eval.srsd`` import it (and re-export its names). The protocols are described there.

* aspect retrieval (AspectCSE §6.1): :class:`AspectDocs`, :func:`read_aspect_docs` (an ``aspect_docs``
  set), :func:`normalise`, :func:`label_matrix`, :func:`retrieval_metrics` (P@k / R@k / MRR@k of one
  aspect), :func:`embed_aspects` (each distinct qid encoded once), :func:`retrieval_by_aspect` (per
  aspect, and each metric's mean over the aspects that have seeds);
* SRSD (methods.md §6): :class:`SrsdItem`, :func:`read_srsd` (an ``srsd`` set), :func:`score_srsd_items`
  (candidates' cosines to the query under the model's pair representation; takes a loaded
  ``train.model.TrainedModel``), :func:`is_correct` (the answer scores strictly highest).

``model`` in :func:`embed_aspects` is anything with ``encode(texts, batch_size=...)``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# ---------------------------------------------------------------- aspect retrieval

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
    from ingest.sets import read_table

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


# ---------------------------------------------------------------- SRSD

SRSD_COLUMNS = ["item_id", "cluster", "kind", "query_first", "query_second", "candidates_first",
                "candidates_second", "answer"]
HEADLINE_KIND, REVERSED_KIND = "other_cluster", "reversed"


@dataclass
class SrsdItem:
    item_id: str
    cluster: str
    kind: str
    query: tuple[str, str]
    candidates: list[tuple[str, str]]
    answer: int


def read_srsd(data: str | Path, limit: int | None = None) -> list[SrsdItem]:
    """The items in set order (the first ``limit`` of each kind); a malformed item is a ValueError naming it."""
    from ingest.sets import read_table

    table = read_table(data, SRSD_COLUMNS, kind="srsd").to_pydict()
    items, per_kind = [], defaultdict(int)
    for row in zip(*(table[c] for c in SRSD_COLUMNS)):
        item_id, cluster, kind, q1, q2, firsts, seconds, answer = row
        if limit is not None and per_kind[kind] >= limit:
            continue
        firsts, seconds = list(firsts or ()), list(seconds or ())
        if len(firsts) != len(seconds) or len(firsts) < 2:
            raise ValueError(f"{data}: item {item_id!r} has {len(firsts)} candidates_first and {len(seconds)} "
                             "candidates_second; need two equally long lists of at least 2")
        if answer is None or not 0 <= answer < len(firsts):
            raise ValueError(f"{data}: item {item_id!r} answer {answer} is not an index into its "
                             f"{len(firsts)} candidates")
        per_kind[kind] += 1
        items.append(SrsdItem(item_id, cluster, kind, (q1, q2), list(zip(firsts, seconds)), int(answer)))
    if not items:
        raise ValueError(f"srsd set at {data} has no items")
    return items


def score_srsd_items(model, items: list[SrsdItem], *, batch_size: int = 64, representation: str | None = None):
    """(per item: the candidates' cosines to the query as a float64 array, the representation used).

    ``model``: a ``train.model.TrainedModel`` (its ``method`` picks the pair representation,
    ``train.methods.dsbats.representation_of``; ``representation`` overrides it)."""
    from train.methods.dsbats import pair_vectors, representation_of

    method = model.method
    chosen = representation_of(method, representation)
    pairs = [p for item in items for p in [item.query, *item.candidates]]
    sentences = list(dict.fromkeys(s for pair in pairs for s in pair))
    index = {s: i for i, s in enumerate(sentences)}
    emb = model.encode(sentences, batch_size=batch_size)
    firsts = emb[[index[a] for a, _ in pairs]]
    seconds = emb[[index[b] for _, b in pairs]]
    vectors = pair_vectors(firsts, seconds, method, chosen).double().numpy()
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    scores, start = [], 0
    for item in items:
        query, candidates = vectors[start], vectors[start + 1: start + 1 + len(item.candidates)]
        scores.append(candidates @ query)
        start += 1 + len(item.candidates)
    return scores, chosen


def is_correct(scores: np.ndarray, answer: int) -> bool:
    """The answer scores strictly higher than every other candidate."""
    others = np.delete(scores, answer)
    return bool(scores[answer] > others.max())
