"""Stages 2–4 of the pair ingest: grouping by premise, the per-relation caps,
and the hard negatives (RSE, ``docs/methods.md`` section 2).

2. per premise (``sentence1``; ``ingest.shuffle.map_buckets`` over premise hash
   buckets): duplicates are dropped; each premise with both an entailment and
   a contradiction hypothesis gives one ``nli_triplets`` row per (entailment,
   contradiction) pair (a SimCSE row gives its own triplet), at most
   ``max_triplets_per_premise`` (a seeded sample); each unit becomes a
   ``relation_triples`` candidate with its in-relation hard negative when the
   premise has one;
3. per-relation caps (``max_per_relation``): a seeded sample, the same for the
   same input however Ray partitions it;
4. the remaining hard negatives, drawn from seeded (pool, bucket) groups of each
   relation's sentences.

Hard negatives:

- entailment: a contradiction hypothesis of the same premise (a SimCSE row's
  own ``hard_neg``), else a random contradiction hypothesis of another
  premise, else (no contradictions at all) a random entailment hypothesis of
  another premise;
- contradiction: an entailment hypothesis of the same premise, else a random
  contradiction hypothesis of another premise;
- any other relation: a random ``sentence2`` of another pair of the same
  relation (never one of the same ``sentence1``, never the pair's own
  ``sentence2``);
- null when there is none. Random choices are seeded by the row's content
  (``_hash``), never by where a row lands.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from setformat.labels import NLI_RELATIONS
from ingest.pairs.sources import FIRST_ROWS
from setformat.io import stable_hash
from ingest.shuffle import Shuffle, key_groups, map_buckets

_STR, _INT, _I32 = pa.string(), pa.int64(), pa.int32()

# stage 2's rows out: triplets, relation candidates and per-bucket fate counts in one schema
STAGE = pa.schema([
    pa.field("kind", _STR),  # triplet | relation | fate
    pa.field("source", _I32), pa.field("source2", _I32), pa.field("unit", _I32), pa.field("row", _INT),
    pa.field("side", _STR), pa.field("sentence1", _STR), pa.field("relation", _STR), pa.field("sentence2", _STR),
    pa.field("hard_negative", _STR), pa.field("hn_kind", _STR), pa.field("pool", _STR), pa.field("status", _STR),
    pa.field("rank", _INT),
    pa.field("set", _STR), pa.field("reason", _STR), pa.field("count", _INT), pa.field("first", _STR),
])



def _hash(*parts) -> int:
    """63-bit hash of the parts: seeds every sample and choice from the rows' content."""
    return stable_hash("\x1f".join(str(p) for p in parts)) >> 1



def _order(row: dict) -> tuple:
    return row["source"], row["unit"], row["row"], row["side"] or ""


class _Fates:
    """Per (set, source, reason): a count and the first (unit, row) ids."""

    def __init__(self):
        self.counts: Counter = Counter()
        self.first: dict[tuple, list] = {}

    def add(self, set_name: str, row: dict, reason: str) -> None:
        key = (set_name, row["source"], reason)
        self.counts[key] += 1
        if reason not in ("written", "used"):  # the smallest row ids, whatever order the rows come in
            first = self.first.setdefault(key, [])
            item = (row["unit"], row["row"])
            if len(first) < FIRST_ROWS or item < first[-1]:
                bisect.insort(first, item)
                del first[FIRST_ROWS:]

    def rows(self) -> list[dict]:
        return [{"kind": "fate", "set": s, "source": src, "reason": reason, "count": n,
                 "first": json.dumps([list(item) for item in self.first.get((s, src, reason), [])])}
                for (s, src, reason), n in sorted(self.counts.items())]


# ---------------------------------------------------------------- stage 2: per premise


def _premise_rows(rows: list[dict], seed: int, max_triplets: int | None, selected: list[str] | None,
                  fates: _Fates) -> list[dict]:
    """One premise's rows: its nli_triplets and its relation_triples candidates, each row's fate counted."""
    rows.sort(key=_order)
    duplicate, explicit, partner = _duplicates_and_partners(rows)
    return (_triplets(rows, seed, max_triplets, duplicate, explicit, fates)
            + _relation_rows(rows, seed, selected, duplicate, partner, fates))


def _duplicates_and_partners(rows: list[dict]) -> tuple[set[int], dict[tuple, dict[str, int]], dict[int, int]]:
    """(the rows dropped as duplicates from both sets; each explicit source row's sides ``{"e": i, "c": j}``;
    each explicit side's partner row)."""
    duplicate: set[int] = set()
    explicit: dict[tuple, dict[str, int]] = {}
    free_seen, explicit_seen = set(), set()
    for i, r in enumerate(rows):
        if r["side"]:
            explicit.setdefault((r["source"], r["unit"], r["row"]), {})[r["side"]] = i
        elif (r["relation"], r["sentence2"]) in free_seen:
            duplicate.add(i)
        else:
            free_seen.add((r["relation"], r["sentence2"]))
    partner: dict[int, int] = {}
    for sides in explicit.values():
        if "e" in sides and "c" in sides:
            partner[sides["e"]], partner[sides["c"]] = sides["c"], sides["e"]
    for i, r in enumerate(rows):
        if r["side"]:
            key = (r["relation"], r["sentence2"], rows[partner[i]]["sentence2"] if i in partner else None)
            if key in explicit_seen:
                duplicate.add(i)
            else:
                explicit_seen.add(key)
    return duplicate, explicit, partner


def _triplets(rows: list[dict], seed: int, max_triplets: int | None, duplicate: set[int],
              explicit: dict[tuple, dict[str, int]], fates: _Fates) -> list[dict]:
    """nli_triplets: free entailment x free contradiction, plus each SimCSE row's own triplet; the cap keeps
    the lowest hashes."""
    premise = rows[0]["sentence1"]
    alive = [i for i in range(len(rows)) if i not in duplicate]
    free_e = [i for i in alive if not rows[i]["side"] and rows[i]["relation"] == "entailment"]
    free_c = [i for i in alive if not rows[i]["side"] and rows[i]["relation"] == "contradiction"]
    candidates = [(e, c) for e in free_e for c in free_c if rows[e]["sentence2"] != rows[c]["sentence2"]]
    candidates += sorted((sides["e"], sides["c"]) for sides in explicit.values() if "e" in sides and "c" in sides)
    in_candidate = {i for pair in candidates for i in pair}
    unique, seen = [], set()
    for e, c in candidates:
        texts = (rows[e]["sentence2"], rows[c]["sentence2"])
        if texts not in seen and texts[0] != texts[1]:
            seen.add(texts)
            unique.append((e, c))
    in_unique = {i for pair in unique for i in pair}
    ranked = sorted(((_hash(seed, "triplet", premise, rows[e]["sentence2"], rows[c]["sentence2"]), e, c)
                     for e, c in unique))
    out, used = [], set()
    for rank, e, c in ranked[:max_triplets] if max_triplets else ranked:
        used.update((e, c))
        out.append({"kind": "triplet", "source": rows[e]["source"], "source2": rows[c]["source"],
                    "sentence1": premise, "sentence2": rows[e]["sentence2"],
                    "hard_negative": rows[c]["sentence2"], "rank": rank})
    for i, r in enumerate(rows):
        if i in duplicate:
            reason = "duplicate"
        elif r["relation"] not in NLI_RELATIONS:
            reason = "other_relation"
        elif i in used:
            reason = "used"
        elif i not in in_candidate:
            reason = "missing_premise_partner"
        elif i not in in_unique:
            reason = "duplicate"
        else:
            reason = "over_cap"
        fates.add("nli_triplets", r, reason)
    return out


def _relation_rows(rows: list[dict], seed: int, selected: list[str] | None, duplicate: set[int],
                   partner: dict[int, int], fates: _Fates) -> list[dict]:
    """relation_triples candidates, with a same-premise hard negative where the premise has one (else the
    pool a later step draws one from)."""
    premise = rows[0]["sentence1"]
    by_relation: dict[str, list[str]] = {}
    for i in range(len(rows)):
        if i not in duplicate:
            by_relation.setdefault(rows[i]["relation"], []).append(rows[i]["sentence2"])
    by_relation = {rel: sorted(set(texts)) for rel, texts in by_relation.items()}
    out = []
    for i, r in enumerate(rows):
        if i in duplicate:
            fates.add("relation_triples", r, "duplicate")
            continue
        relation = r["relation"]
        own_partner = rows[partner[i]]["sentence2"] if i in partner else None
        rank = _hash(seed, "relation", "x" if r["side"] else "f", relation, premise, r["sentence2"],
                     own_partner or "")
        status = None if selected is None or relation in selected else "relation_not_selected"
        hard_negative = hn_kind = pool = None
        if status is None:
            if own_partner is not None and own_partner != r["sentence2"]:
                hard_negative, hn_kind = own_partner, "same_premise"
            elif relation in NLI_RELATIONS:
                other = "contradiction" if relation == "entailment" else "entailment"
                options = [t for t in by_relation.get(other, []) if t != r["sentence2"]]
                if options:
                    hard_negative, hn_kind = options[_hash(seed, "same_premise", rank) % len(options)], "same_premise"
            if hard_negative is None:
                pool = "contradiction" if relation == "entailment" else relation
        out.append({"kind": "relation", "source": r["source"], "unit": r["unit"], "row": r["row"],
                    "side": r["side"], "sentence1": premise, "relation": relation, "sentence2": r["sentence2"],
                    "hard_negative": hard_negative, "hn_kind": hn_kind, "pool": pool, "status": status,
                    "rank": rank})
    return out


def premise_bucket(bucket: pa.Table, seed: int, max_triplets: int | None, selected: list[str] | None) -> pa.Table:
    """Stage 2 for every premise of a hash bucket of premises (``ingest.shuffle.map_buckets``)."""
    fates, out = _Fates(), []
    for _, rows in key_groups(bucket, ["sentence1"]):
        out.extend(_premise_rows(rows, seed, max_triplets, selected, fates))
    out.extend(fates.rows())
    return pa.Table.from_pylist(out, schema=STAGE)


def _take_kind(batch: pa.Table, kind: str) -> pa.Table:
    return batch.filter(pc.equal(batch["kind"], kind))


# ---------------------------------------------------------------- stage 3: per-relation caps


def _relation_counts(batch: pa.Table) -> pa.Table:
    selected = pc.is_null(batch["status"])
    counts: Counter = Counter()
    for relation, sel in zip(batch["relation"].to_pylist(), selected.to_pylist()):
        counts[(relation, bool(sel))] += 1
    rows = [{"relation": r, "selected": s, "count": n} for (r, s), n in sorted(counts.items())]
    return pa.Table.from_pylist(rows, schema=pa.schema([("relation", _STR), ("selected", pa.bool_()),
                                                        ("count", _INT)]))


def _cap_threshold(group: pa.Table, caps: dict) -> pa.Table:
    relation = group["relation"][0].as_py()
    ranks = group["rank"].to_numpy()
    cap = caps[relation]
    threshold = int(np.partition(ranks, cap - 1)[cap - 1]) if len(ranks) > cap else int(ranks.max())
    return pa.table({"relation": [relation], "threshold": pa.array([threshold], _INT)})


def _selected_of(batch: pa.Table, relations: list[str]) -> pa.Table:
    keep = pc.and_(pc.is_null(batch["status"]), pc.is_in(batch["relation"], pa.array(relations, _STR)))
    return batch.filter(keep).select(["relation", "rank"])


def _apply_caps(batch: pa.Table, thresholds: dict) -> pa.Table:
    status = batch["status"].to_pylist()
    for i, (relation, rank) in enumerate(zip(batch["relation"].to_pylist(), batch["rank"].to_pylist())):
        if status[i] is None and relation in thresholds and rank > thresholds[relation]:
            status[i] = "over_cap"
    return batch.set_column(batch.schema.get_field_index("status"), "status", pa.array(status, _STR))


def _relation_fates(batch: pa.Table) -> pa.Table:
    fates = _Fates()
    for row in batch.select(["source", "unit", "row", "status"]).to_pylist():
        if row["status"] is not None:
            fates.add("relation_triples", row, row["status"])
    return pa.Table.from_pylist(fates.rows(), schema=STAGE)


# ---------------------------------------------------------------- stage 4: random hard negatives

POOL = pa.schema([
    pa.field("pool", _STR), pa.field("pbucket", _INT), pa.field("member", pa.bool_()),
    pa.field("source", _I32), pa.field("unit", _I32), pa.field("row", _INT), pa.field("side", _STR),
    pa.field("sentence1", _STR), pa.field("relation", _STR), pa.field("sentence2", _STR),
    pa.field("hard_negative", _STR), pa.field("hn_kind", _STR), pa.field("rank", _INT),
])


def _members(batch: pa.Table, buckets: dict) -> pa.Table:
    rows = [{"pool": r["relation"], "pbucket": r["rank"] % buckets[r["relation"]], "member": True,
             "sentence1": r["sentence1"], "sentence2": r["sentence2"], "rank": r["rank"]}
            for r in batch.select(["relation", "sentence1", "sentence2", "rank"]).to_pylist()]
    return pa.Table.from_pylist(rows, schema=POOL)


def _needers(batch: pa.Table, buckets: dict, seed: int) -> pa.Table:
    keep = pc.and_(pc.is_null(batch["status"]), pc.is_valid(batch["pool"]))
    rows = []
    for r in batch.filter(keep).to_pylist():
        pool = r["pool"]
        if pool not in buckets:  # no contradiction anywhere: an entailment takes another entailment
            pool = r["relation"]
        kind = "random_contradiction" if pool == "contradiction" and r["relation"] == "entailment" \
            else "random_same_relation"
        rows.append({**{k: r[k] for k in POOL.names if k in r}, "pool": pool, "member": False,
                     "pbucket": _hash(seed, "pool", r["rank"]) % buckets[pool], "hn_kind": kind})
    return pa.Table.from_pylist(rows, schema=POOL)


def pool_bucket(bucket: pa.Table, seed: int, walk: int = 64) -> pa.Table:
    """Stage 4 for every (pool, pbucket) of a hash bucket: each needer takes the first
    member of its group, from a seeded start, of another premise and another text."""
    out = []
    for _, rows in key_groups(bucket, ["pool", "pbucket"]):
        members = sorted((r for r in rows if r["member"]), key=lambda r: r["rank"])
        for r in sorted((r for r in rows if not r["member"]), key=lambda r: r["rank"]):
            choice = None
            if members:
                start = _hash(seed, "pick", r["rank"]) % len(members)
                for k in range(min(walk, len(members))):
                    m = members[(start + k) % len(members)]
                    if m["sentence2"] != r["sentence2"] and m["sentence1"] != r["sentence1"]:
                        choice = m["sentence2"]
                        break
            out.append({**r, "hard_negative": choice, "hn_kind": r["hn_kind"] if choice else "none"})
    return pa.Table.from_pylist(out, schema=POOL)


# ---------------------------------------------------------------- stages 2–4 on Ray Data (driver)


def add_fates(fates: dict[tuple, list], rows: list[dict]) -> None:
    """Sum fate rows (``kind == "fate"``) into ``fates``: (set, source, reason) -> [count, first (unit, row)s]."""
    for f in rows:
        entry = fates.setdefault((f["set"], f["source"], f["reason"]), [0, []])
        entry[0] += f["count"]
        entry[1].extend(json.loads(f["first"]))


def per_premise(pair_units, shuffle: Shuffle, seed: int, max_triplets: int | None, selected: list[str] | None,
                fates: dict):
    """Stage 2 over the pair units (a Ray Dataset of ``readers.UNITS`` rows): returns
    (triplets, relation candidates) as Ray Datasets of ``STAGE`` rows; the fates go into ``fates``."""
    stage = map_buckets(pair_units, ["sentence1"], premise_bucket, shuffle, seed=seed,
                        max_triplets=max_triplets, selected=selected)
    add_fates(fates, stage.map_batches(_take_kind, batch_format="pyarrow", fn_kwargs={"kind": "fate"}).take_all())
    triplets = stage.map_batches(_take_kind, batch_format="pyarrow", fn_kwargs={"kind": "triplet"})
    relations = stage.map_batches(_take_kind, batch_format="pyarrow", fn_kwargs={"kind": "relation"})
    return triplets, relations


def cap_relations(relations, caps: dict[str, int], relation_counts: Counter, fates: dict):
    """Stage 3: count the candidates per (relation, selected) into ``relation_counts``,
    mark the selected rows over their relation's cap ``over_cap`` (the rows with the
    largest seeded ranks), and add the relation fates to ``fates``. Returns (the
    candidates, materialized; per capped relation: cap, available, over_cap)."""
    for r in relations.map_batches(_relation_counts, batch_format="pyarrow").take_all():
        relation_counts[(r["relation"], r["selected"])] += r["count"]
    capped = {rel: cap for rel, cap in caps.items() if relation_counts.get((rel, True), 0) > cap}
    if capped:
        thresholds = {
            t["relation"]: t["threshold"]
            for t in relations.map_batches(_selected_of, batch_format="pyarrow",
                                           fn_kwargs={"relations": sorted(capped)})
            .groupby("relation").map_groups(_cap_threshold, batch_format="pyarrow",
                                            fn_kwargs={"caps": capped}).take_all()
        }
        relations = relations.map_batches(_apply_caps, batch_format="pyarrow", fn_kwargs={"thresholds": thresholds})
    relations = relations.materialize()
    caps_applied = {}
    for rel, cap in sorted(caps.items()):
        available = relation_counts.get((rel, True), 0)
        caps_applied[rel] = {"cap": cap, "available": available, "over_cap": max(0, available - cap)}
    add_fates(fates, relations.map_batches(_relation_fates, batch_format="pyarrow").take_all())
    return relations, caps_applied


def random_negatives(relations, relation_counts: Counter, pool_bucket_rows: int, seed: int, shuffle: Shuffle):
    """Stage 4: the selected candidates still without a hard negative draw one from
    their pool (seeded buckets of about ``pool_bucket_rows`` sentences of a
    relation). Returns a Ray Dataset of ``POOL`` rows, or None when none needs one."""
    members_per_relation = Counter()
    for (rel, _), n in relation_counts.items():
        members_per_relation[rel] += n
    buckets = {rel: max(1, n // pool_bucket_rows) for rel, n in members_per_relation.items()}
    needers = relations.map_batches(_needers, batch_format="pyarrow",
                                    fn_kwargs={"buckets": buckets, "seed": seed}).materialize()
    if not needers.count():
        return None
    members = relations.map_batches(_members, batch_format="pyarrow", fn_kwargs={"buckets": buckets})
    return map_buckets(members.union(needers), ["pool", "pbucket"], pool_bucket, shuffle, seed=seed)
