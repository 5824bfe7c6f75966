"""DSBATS's SRSD (sentence relationship similarity distinguishing, methods.md §6): the ``srsd`` set reader and
the scoring, once — the ``srsd`` dev metric (``score.dev_metrics``) and ``python -m eval --task srsd``
(``eval.srsd``, which describes the protocol) both score with these.

:class:`SrsdItem`, :func:`read_srsd` (an ``srsd`` set), :func:`score_srsd_items` (candidates' cosines to the
query under the model's pair representation, ``TrainedModel.pair_vectors``), :func:`is_correct` (the answer
scores strictly highest).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SRSD_COLUMNS = ["item_id", "cluster", "kind", "query_first", "query_second", "candidates_first",
                "candidates_second", "answer"]
HEADLINE_KIND, REVERSED_KIND = "other_cluster", "reversed"
MAX_REPORTED_ITEMS = 10
log = logging.getLogger(__name__)


@dataclass
class SrsdItem:
    item_id: str
    cluster: str
    kind: str
    query: tuple[str, str]
    candidates: list[tuple[str, str]]
    answer: int


class SrsdItems(list):
    """The items read, and the malformed ones skipped: ``skipped`` counts them, ``bad_items`` names the first."""

    skipped: int = 0
    bad_items: list[str]


def read_srsd(data: str | Path, limit: int | None = None) -> SrsdItems:
    """The items in set order (the first ``limit`` of each kind). One rule for a bad row, as every reader in
    ``score``: a malformed item is skipped, counted and named (``item 'x': reason``) in a warning."""
    from setformat.io import read_table

    table = read_table(data, SRSD_COLUMNS, kind="srsd").to_pydict()
    items, per_kind = SrsdItems(), defaultdict(int)
    items.bad_items = []

    def skip(item_id, reason: str) -> None:
        items.skipped += 1
        if len(items.bad_items) < MAX_REPORTED_ITEMS:
            items.bad_items.append(f"item {item_id!r}: {reason}")
    for row in zip(*(table[c] for c in SRSD_COLUMNS)):
        item_id, cluster, kind, q1, q2, firsts, seconds, answer = row
        if limit is not None and per_kind[kind] >= limit:
            continue
        firsts, seconds = list(firsts or ()), list(seconds or ())
        if len(firsts) != len(seconds) or len(firsts) < 2:
            skip(item_id, f"{len(firsts)} candidates_first and {len(seconds)} candidates_second; need two "
                          "equally long lists of at least 2")
            continue
        if answer is None or not 0 <= answer < len(firsts):
            skip(item_id, f"answer {answer} is not an index into its {len(firsts)} candidates")
            continue
        per_kind[kind] += 1
        items.append(SrsdItem(item_id, cluster, kind, (q1, q2), list(zip(firsts, seconds)), int(answer)))
    if items.skipped:
        log.warning("%s: skipped %d malformed srsd items (first: %s)", data, items.skipped, items.bad_items[0])
    if not items:
        raise ValueError(f"srsd set at {data} has no readable items"
                         + (f" ({items.skipped} malformed; first: {items.bad_items[0]})" if items.skipped else ""))
    return items


def score_srsd_items(model, items: list[SrsdItem], *, batch_size: int = 64, representation: str | None = None):
    """(per item: the candidates' cosines to the query as a float64 array, the representation used).

    ``model``: a ``score.model.TrainedModel`` (its method picks the pair representation,
    ``TrainedModel.pair_representation``; ``representation`` overrides it)."""
    chosen = model.pair_representation(representation)
    # every distinct pair once, scored row by row: the same pair twice gets the same score bit for bit (a tie)
    pairs = list(dict.fromkeys(p for item in items for p in [item.query, *item.candidates]))
    row = {pair: i for i, pair in enumerate(pairs)}
    sentences = list(dict.fromkeys(s for pair in pairs for s in pair))
    index = {s: i for i, s in enumerate(sentences)}
    emb = model.encode(sentences, batch_size=batch_size)
    firsts = emb[[index[a] for a, _ in pairs]]
    seconds = emb[[index[b] for _, b in pairs]]
    vectors = model.pair_vectors(firsts, seconds, chosen).double().numpy()
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    scores = []
    for item in items:
        query, candidates = vectors[row[item.query]], vectors[[row[c] for c in item.candidates]]
        scores.append((candidates * query).sum(axis=1))
    return scores, chosen


def is_correct(scores: np.ndarray, answer: int) -> bool:
    """The answer scores strictly higher than every other candidate."""
    others = np.delete(scores, answer)
    return bool(scores[answer] > others.max())
