"""From ``bats_definitions`` to training and test rows: the split, DSBATS4CL and SRSD items.

**Split** (``split_rows``), seeded, by BATS line: a line (a word with its
answers) goes to ``test`` when a hash of (seed, category, word) falls under
``test_share``. ``holdout: lines`` (default) keeps the lines apart: a test
pair's relationship (dog : bark) is never trained on, but its words may be,
in other lines (the answer *animal* of L01 recurs across lines). It is not the
slides' test set DSBATS-dic (dictionary definitions of L01/L02/L04, 603 items):
SRSD here holds the training source's own WordNet glosses of all categories, a
different test whose figures do not compare with the slides'. ``holdout: words``
is stricter: a train-side row that shares a word (either side) with any test
row is ``held_out``, in neither DSBATS4CL nor SRSD, so no test word's
definition is ever trained on (measured: SRSD does not rise under it,
``bench/results/dsbats-2core.txt``).

**DSBATS4CL** (``dsbats4cl_rows``): for every train pair p of a cluster,
``positives_per_pair`` seeded draws p⁺ among the cluster's train pairs of
OTHER lines (dog : bark with cat : meow, never with dog : growl); p⁻ (p⁺
reversed, or p reversed: ``dsbats.reversed_pair``) is implicit in the row. The slides' 2,244,530 rows over 38,676
DSBATS-sn pairs are ≈ 58 positives per pair, the default. Rows are ordered
by a seeded hash, so a shuffle buffer sees every cluster.

**SRSD** (``srsd_rows``), from the test pairs: for each test pair q (the
query), the answer is a seeded test pair of the same cluster from another
line; kind ``other_cluster`` adds ``distractors`` seeded test pairs of other
clusters (chance = 1 / (1 + distractors); the slides' chance level is ≈ 50%),
kind ``reversed`` adds the answer reversed (same two definitions, opposite
relationship). Candidates are in a seeded order.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pyarrow as pa

from setformat import schemas
from setformat.io import stable_hash


def _draw(seed: int, *parts) -> float:
    return stable_hash(":".join(map(str, (seed, *parts)))) / 2.0**64


def split_rows(rows: list[dict], seed: int, test_share: float, holdout: str) -> dict[str, int]:
    """Set every row's ``split`` in place; returns the counts."""
    for r in rows:
        r["split"] = "test" if _draw(seed, "split", r["category"], r["first_word"]) < test_share else "train"
    if holdout == "words":
        test_words = {w for r in rows if r["split"] == "test" for w in (r["first_word"], r["second_word"])}
        for r in rows:
            if r["split"] == "train" and (r["first_word"] in test_words or r["second_word"] in test_words):
                r["split"] = "held_out"
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        counts[r["split"]] += 1
    return dict(sorted(counts.items()))


def _by_cluster(rows: list[dict], split: str) -> dict[str, list[dict]]:
    clusters: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if r["split"] == split:
            clusters[r["cluster"]].append(r)
    return {c: sorted(v, key=lambda r: r["pair_id"]) for c, v in sorted(clusters.items())}


def dsbats4cl_rows(rows: list[dict], seed: int, positives_per_pair: int) -> tuple[pa.Table, dict]:
    out, no_positive = [], 0
    for cluster, members in _by_cluster(rows, "train").items():
        members.sort(key=lambda r: (r["category"], r["line"], r["pair_id"]))  # each line one block
        block: dict[tuple, list[int]] = {}
        for i, r in enumerate(members):
            block.setdefault((r["category"], r["line"]), [i, i])[1] = i + 1
        for p in members:
            start, end = block[(p["category"], p["line"])]
            n_others = len(members) - (end - start)
            if not n_others:
                no_positive += 1
                continue
            rng = random.Random(stable_hash(f"{seed}:positive:{p['pair_id']}"))
            for i in sorted(rng.sample(range(n_others), min(positives_per_pair, n_others))):
                q = members[i if i < start else i + end - start]  # the i-th pair of another line
                out.append({"anchor_first": p["first_definition"], "anchor_second": p["second_definition"],
                            "positive_first": q["first_definition"], "positive_second": q["second_definition"],
                            "cluster": cluster, "anchor_id": p["pair_id"], "positive_id": q["pair_id"]})
    out.sort(key=lambda r: (stable_hash(f"{seed}:order:{r['anchor_id']}:{r['positive_id']}"), r["anchor_id"],
                            r["positive_id"]))
    return pa.Table.from_pylist(out, schema=schemas.DSBATS4CL), {"anchors_without_positive": no_positive}


def _definitions(r: dict) -> tuple[str, str]:
    return r["first_definition"], r["second_definition"]


def srsd_rows(rows: list[dict], seed: int, distractors: int) -> tuple[pa.Table, dict]:
    """The SRSD items of the test pairs. A test pair whose two definitions are a training pair's (toad : croak
    told with frog : croak's senses, one synset) is trained on as it stands: it is neither a query nor a
    candidate, and ``test_pairs_equal_to_training`` counts it."""
    trained = {_definitions(r) for r in rows if r["split"] == "train"}
    clusters = _by_cluster([r for r in rows if r["split"] != "test" or _definitions(r) not in trained], "test")
    seen_in_training = sum(1 for r in rows if r["split"] == "test" and _definitions(r) in trained)
    out, no_partner = [], 0
    for cluster, members in clusters.items():
        elsewhere = [q for c, m in clusters.items() if c != cluster for q in m]
        for q in members:
            partners = [r for r in members if (r["category"], r["line"]) != (q["category"], q["line"])]
            if not partners or (distractors and not elsewhere):
                no_partner += 1
                continue
            rng = random.Random(stable_hash(f"{seed}:srsd:{q['pair_id']}"))
            answer = rng.choice(partners)
            pair = (answer["first_definition"], answer["second_definition"])
            kinds = {"other_cluster": [pair] + [(d["first_definition"], d["second_definition"])
                                                for d in rng.sample(elsewhere, min(distractors, len(elsewhere)))],
                     "reversed": [pair, pair[::-1]]}
            for kind, candidates in kinds.items():
                order = list(range(len(candidates)))
                rng.shuffle(order)
                out.append({"item_id": f"{q['pair_id']}/{kind}", "cluster": cluster, "kind": kind,
                            "query_first": q["first_definition"], "query_second": q["second_definition"],
                            "candidates_first": [candidates[i][0] for i in order],
                            "candidates_second": [candidates[i][1] for i in order],
                            "answer": order.index(0)})
    return pa.Table.from_pylist(out, schema=schemas.SRSD), {"queries_without_partner": no_partner,
                                                             "test_pairs_equal_to_training": seen_in_training}
