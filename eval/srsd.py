"""SRSD: sentence relationship similarity distinguishing (DSBATS slides, "Intrinsic Evaluation"; methods.md §6).

Input: an ``srsd`` set folder (``ingest.schemas.SRSD``: ``item_id``,
``cluster``, ``kind``, ``query_first``, ``query_second``,
``candidates_first``, ``candidates_second``, ``answer``): a query pair of
definition sentences and candidate pairs, exactly one of which (``answer``,
an index) holds the query's relationship. The folder is the test side, so the
only split is ``test``. ``kind``: ``other_cluster`` (distractors from other
clusters: the slides' task) or ``reversed`` (the distractor is the answer pair
reversed: does the model see the relationship's direction?).

Protocol: every distinct sentence of the items is encoded once; a pair p is
represented by r(p) (``train.methods.dsbats.pair_vectors``: the model's
``pair_representation`` when it is a DSBATS model with heads, else the offset
e(second) − e(first); ``representation`` overrides it); each candidate c is
scored by cos(r(query), r(c)); an item is correct when the answer candidate
scores strictly highest (a tie is wrong).

Result: ``accuracy`` (fraction) on the ``other_cluster`` items (the headline,
None when there are none), ``accuracy_reversed`` on the ``reversed`` items,
``per_kind[kind]`` = ``{accuracy, n_items, per_cluster: {cluster: {accuracy,
n_items}}}``, ``n_items``, ``representation``, ``method``, ``seconds``.
``limit``: the first N items of each kind (set order).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

COLUMNS = ["item_id", "cluster", "kind", "query_first", "query_second", "candidates_first", "candidates_second",
           "answer"]
HEADLINE_KIND, REVERSED_KIND = "other_cluster", "reversed"


@dataclass
class SrsdItem:
    item_id: str
    cluster: str
    kind: str
    query: tuple[str, str]
    candidates: list[tuple[str, str]]
    answer: int


def check_srsd_data(data: str | Path, split: str = "test", representation: str | None = None, **_) -> None:
    """Cheap check before a model loads: the folder exists and holds an ``srsd`` set."""
    from ingest.sets import check_set_folder
    from train.methods.dsbats import PAIR_REPRESENTATIONS

    if split != "test":
        raise ValueError(f"an srsd set folder is the test side; split {split!r} does not exist (use test)")
    if representation is not None and representation not in PAIR_REPRESENTATIONS:
        raise ValueError(f"unknown pair representation {representation!r}; choose from "
                         f"{', '.join(PAIR_REPRESENTATIONS)}")
    check_set_folder(data, "srsd", required=COLUMNS)


def read_srsd(data: str | Path, limit: int | None = None) -> list[SrsdItem]:
    """The items in set order (the first ``limit`` of each kind); a malformed item is a ValueError naming it."""
    from ingest.sets import read_table

    table = read_table(data, COLUMNS, kind="srsd").to_pydict()
    items, per_kind = [], defaultdict(int)
    for row in zip(*(table[c] for c in COLUMNS)):
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


def score_items(model, items: list[SrsdItem], *, batch_size: int = 64, representation: str | None = None):
    """(per item: the candidates' cosines to the query as a float64 array, the representation used)."""
    from eval.models import as_trained
    from train.methods.dsbats import pair_vectors, representation_of

    model = as_trained(model)
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


def accuracies(items: list[SrsdItem], correct: list[bool]) -> dict:
    """``{kind: {accuracy, n_items, per_cluster: {cluster: {accuracy, n_items}}}}``."""
    counts: dict = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for item, ok in zip(items, correct):
        counts[item.kind][item.cluster][0] += int(ok)
        counts[item.kind][item.cluster][1] += 1
    out = {}
    for kind, clusters in counts.items():
        hits, total = sum(c[0] for c in clusters.values()), sum(c[1] for c in clusters.values())
        out[kind] = {"accuracy": hits / total, "n_items": total,
                     "per_cluster": {c: {"accuracy": h / n, "n_items": n} for c, (h, n) in sorted(clusters.items())}}
    return out


def evaluate_srsd(model, data: str | Path, split: str = "test", *, batch_size: int = 64, limit: int | None = None,
                  representation: str | None = None, **_) -> dict:
    """SRSD accuracy of ``model`` (a ``TrainedModel`` or a SentenceTransformer) on an srsd set folder."""
    started = time.perf_counter()
    check_srsd_data(data, split, representation)
    items = read_srsd(data, limit)
    scores, chosen = score_items(model, items, batch_size=batch_size, representation=representation)
    correct = [is_correct(s, item.answer) for s, item in zip(scores, items)]
    per_kind = accuracies(items, correct)
    return {
        "task": "srsd", "split": split, "data": str(data), "representation": chosen,
        "method": getattr(model, "method_name", None),
        "accuracy": per_kind.get(HEADLINE_KIND, {}).get("accuracy"),
        "accuracy_reversed": per_kind.get(REVERSED_KIND, {}).get("accuracy"),
        "n_items": len(items), "per_kind": per_kind,
        "seconds": round(time.perf_counter() - started, 2),
    }
