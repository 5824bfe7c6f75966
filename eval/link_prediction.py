"""RSE relation (link) prediction (Wang & Li, App. B, Table 7): retrieve the tail sentence given head + relation.

Input: an RSE model and a SentEval NLI folder (or SICK) whose labels map to
relations through ingest's NLI label map (entailment, neutral,
contradiction). For each pair (sentence1, relation k, sentence2) whose
relation the model was trained on, every unique sentence of the split (both
sides, every pair read) except sentence1 is a candidate, scored by
cos(h_1 + r_k, h_j) (the reference code: cos(norm(h1 + r), norm(h_j)), the
same ranking); the rank of sentence2 (1-based; ties count against it, see
``score.metrics.rank_of_true``) gives MR, MRR and Hits@1/3/10, per
relation and overall (fractions). Pairs of relations the model does not know
are skipped and counted per label.

``plots``: a folder; the relation-embedding cosine heatmap is written there.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import numpy as np

from score.nli_data import nli_split_files, read_nli
from score.metrics import rank_of_true, ranking_metrics
from eval.plots import rse_relation_plot

QUERY_CHUNK = 512  # queries scored at once: (chunk × candidates) floats


def check_link_data(data: str, split: str, **_) -> None:
    nli_split_files(data, split)


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def tail_ranks(head: np.ndarray, relation: np.ndarray, candidates: np.ndarray, true_index: np.ndarray,
               head_index: np.ndarray, ties: str = "pessimistic") -> np.ndarray:
    """Rank of candidate ``true_index[i]`` for query cos(head_i + relation_i, ·), the head itself excluded."""
    cand = _normalise(candidates)
    query = _normalise(np.asarray(head, dtype=np.float32) + np.asarray(relation, dtype=np.float32))
    ranks = []
    for start in range(0, len(query), QUERY_CHUNK):
        end = start + QUERY_CHUNK
        scores = query[start:end] @ cand.T
        ranks.append(rank_of_true(scores, true_index[start:end], ties=ties, exclude=head_index[start:end]))
    return np.concatenate(ranks) if ranks else np.zeros(0)


def evaluate_link_prediction(model, data: str | Path, split: str, *, batch_size: int = 64, limit: int | None = None,
                             plots: str | Path | None = None, **_) -> dict:
    """MR / MRR / Hits@k of tail retrieval on ``split`` (the first ``limit`` pairs)."""
    started = time.perf_counter()
    table = model.relation_table()  # raises for a model that is not RSE
    names = model.relation_names
    pairs = read_nli(data, split, limit)
    known = [label in names for label in pairs.labels]
    skipped = Counter(label for label, k in zip(pairs.labels, known) if not k)
    if not any(known):
        raise ValueError(f"{pairs.path}: none of the labels {sorted(set(pairs.labels))} is a relation the model "
                         f"was trained on ({names})")
    sentences = list(dict.fromkeys(pairs.premises + pairs.hypotheses))
    index = {s: i for i, s in enumerate(sentences)}
    embeddings = model.encode(sentences, batch_size=batch_size)
    queries = pairs.subset(known)
    head_index = np.array([index[s] for s in queries.premises])
    true_index = np.array([index[s] for s in queries.hypotheses])
    rel = np.array([names.index(label) for label in queries.labels])
    ranks = tail_ranks(embeddings[head_index], table[rel], embeddings, true_index, head_index)
    per_relation = {}
    for k, name in enumerate(names):
        mask = rel == k
        if mask.any():
            per_relation[name] = {**ranking_metrics(ranks[mask]), "n_pairs": int(mask.sum())}
    result = {
        "task": "link_prediction", "split": split, "data": str(Path(data).expanduser()),
        "method": model.method_name, **ranking_metrics(ranks),
        "per_relation": per_relation, "n_pairs": len(queries), "n_candidates": len(sentences),
        "skipped_labels": dict(sorted(skipped.items())), "relations": names, "plots": [],
    }
    if plots:
        result["plots"].append(str(rse_relation_plot(model, plots)))
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result
