"""SRSD: sentence relationship similarity distinguishing (DSBATS slides, "Intrinsic Evaluation"; methods.md §6).

Input: an ``srsd`` set folder (``setformat.schemas.SRSD``: ``item_id``,
``cluster``, ``kind``, ``query_first``, ``query_second``,
``candidates_first``, ``candidates_second``, ``answer``): a query pair of
definition sentences and candidate pairs, exactly one of which (``answer``,
an index) holds the query's relationship. The folder is the test side, so the
only split is ``test``. ``kind``: ``other_cluster`` (distractors from other
clusters: the slides' task) or ``reversed`` (the distractor is the answer pair
reversed: does the model see the relationship's direction?).

Protocol: every distinct sentence of the items is encoded once; a pair p is
represented by r(p) (``TrainedModel.pair_vectors``: the model's own
``pair_representation`` when its method trained a pair head, else the offset
e(second) − e(first); ``representation`` overrides it); each candidate c is
scored by cos(r(query), r(c)); an item is correct when the answer candidate
scores strictly highest (a tie is wrong).

Result: ``accuracy`` (fraction) on the ``other_cluster`` items (the headline,
None when there are none), ``accuracy_reversed`` on the ``reversed`` items,
``per_kind[kind]`` = ``{accuracy, n_items, per_cluster: {cluster: {accuracy,
n_items}}}``, ``n_items``, ``skipped_items`` and ``bad_items`` (malformed items skipped), ``representation``, ``method``, ``seconds``.
``limit``: the first N items of each kind (set order).

The reader and the scoring (``read_srsd``, ``SrsdItem``, ``is_correct``, ``score_srsd_items``) live in
``score.srsd``: DSBATS's dev metric ``srsd`` (``score.dev_metrics``: this task's ``accuracy``) scores with
them too.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from score.srsd import HEADLINE_KIND, REVERSED_KIND, SRSD_COLUMNS, SrsdItem, is_correct, read_srsd, score_srsd_items


def check_srsd_data(data: str | Path, split: str = "test", representation: str | None = None, **_) -> None:
    """Cheap check before a model loads: the folder exists and holds an ``srsd`` set."""
    from setformat.io import check_set_folder
    from train.methods.dsbats import PAIR_REPRESENTATIONS

    if split != "test":
        raise ValueError(f"an srsd set folder is the test side; split {split!r} does not exist (use test)")
    if representation is not None and representation not in PAIR_REPRESENTATIONS:
        raise ValueError(f"unknown pair representation {representation!r}; choose from "
                         f"{', '.join(PAIR_REPRESENTATIONS)}")
    check_set_folder(data, "srsd", required=SRSD_COLUMNS)


def score_items(model, items: list[SrsdItem], *, batch_size: int = 64, representation: str | None = None):
    """(per item: the candidates' cosines to the query as a float64 array, the representation used);
    ``model``: a ``TrainedModel`` or a SentenceTransformer (``score.srsd.score_srsd_items``)."""
    from eval.models import as_trained

    return score_srsd_items(as_trained(model), items, batch_size=batch_size, representation=representation)


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
        "n_items": len(items), "skipped_items": items.skipped, "bad_items": items.bad_items, "per_kind": per_kind,
        "seconds": round(time.perf_counter() - started, 2),
    }
