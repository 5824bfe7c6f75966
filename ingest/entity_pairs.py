"""Pass 2 of ingest: EASE entity pairs as distributed joins and aggregations.

Inputs are pass 1's files: ``_work/mentions`` (one row per sentence and link
target), ``_work/redirects``, the ``wikidata`` set and the ``sentences`` set.
Every step is a ``map_buckets`` (hash buckets of a key, one call per bucket) over the sides of a
join (a reduce-side join through ``ingest/shuffle.py``'s files, buckets sized by the rows they
hold; from step 4 on, each side with only its own columns), so no table of dump size ever sits
on one node, nor in Ray's object store:

1. titles: redirects joined to Wikidata sitelinks on (wiki, target) gives
   (wiki, title) -> QID for every title and every redirect, in every
   configured wiki (multilingual EASE: 18 wikis map to one QID space);
2. mentions joined to titles on (wiki, title) gives each link its QID; link
   counts per entity are each block's counts, summed per QID in step 3;
3. the entity vocabulary: entities linked more than the threshold with a P31
   type, in QID order (its rows are the rows of the trainable entity table;
   it is bounded by the model, not by the dump, and is written by the driver
   from a sorted stream);
4. per entity (grouped by QID): the vocabulary row, the per-entity cap
   (a seeded sample, global over the dump), and the choice of a P31 type and
   ``negative_candidates`` random member slots of that type;
5. candidate slots joined to the numbered members of each type;
6. per page (grouped by page): the page's linked entities, its pairs and
   their candidates; a pair's negative is its first candidate that is neither
   the positive nor linked anywhere on the page;
7. pairs joined back to their sentence text, grouped by a hash bucket of the
   page, each bucket written as one ``entity_pairs/part-NNNNN.parquet``.

Every group is sorted before it is used and every random choice is seeded by
the row's own key, so the output is byte-identical for the same input no
matter how Ray partitions the shuffles. Every link mention is counted: as a
pair, or under the reason it gave none.
"""

from __future__ import annotations

import logging
import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from setformat import schemas
from setformat.io import align, find_rows, hash_buckets, mix64, read_dataset, row_hashes, table_writer, write_table
from ingest.shuffle import Shuffle, count_rows, map_buckets, map_keys, value_runs
from ingest.wikitext import normalize_title

log = logging.getLogger(__name__)
_STR, _INT, _U64, _BOOL, _STRS = pa.string(), pa.int64(), pa.uint64(), pa.bool_(), pa.list_(pa.string())


def _schema(**columns) -> pa.Schema:
    return pa.schema([pa.field(name, kind) for name, kind in columns.items()])


def _out(rows: list[dict], schema: pa.Schema) -> list[dict]:
    return pa.Table.from_pylist(rows, schema=schema)


# ---------------------------------------------------------------- 1. titles -> QID

TITLE_SIDES = _schema(wiki=_STR, key=_STR, title=_STR, qid=_STR, direct=_BOOL)
TITLE_QIDS = _schema(wiki=_STR, title=_STR, qid=_STR, direct=_BOOL)


def _redirect_side(batch: pa.Table) -> pa.Table:
    return align(batch.select(["wiki", "title", "target"]).rename_columns(["wiki", "title", "key"]), TITLE_SIDES)


def sitelink_side(batch: pa.Table, wikis: list[str]) -> pa.Table:
    rows = []
    for qid, sitelinks in zip(batch["qid"].to_pylist(), batch["sitelinks"].to_pylist()):
        for link in sitelinks or ():
            if link["wiki"] in wikis:
                title = normalize_title(link["title"])
                rows.append({"wiki": link["wiki"], "key": title, "title": title, "qid": qid, "direct": True})
    return _out(rows, TITLE_SIDES)


def _resolve_titles(rows: list[dict]) -> list[dict]:
    rows = sorted(rows, key=lambda r: (not r["direct"], r["title"], r["qid"] or ""))
    qid = rows[0]["qid"] if rows[0]["direct"] else None
    if qid is None:  # a redirect to a page without a Wikidata item (or a double redirect)
        return []
    return [{"wiki": r["wiki"], "title": r["title"], "qid": qid, "direct": bool(r["direct"])} for r in rows]


# ---------------------------------------------------------------- 2. mentions -> QID

MENTION_SIDES = _schema(wiki=_STR, title=_STR, qid=_STR, direct=_BOOL, page_id=_INT, sentence_index=_INT)
RESOLVED = _schema(wiki=_STR, page_id=_INT, sentence_index=_INT, qid=_STR)


def _resolve_mentions(bucket: pa.Table) -> pa.Table:
    """Mentions left-joined to the (wiki, title) -> QID rows of their bucket; a
    title's own sitelink beats a redirect's (then the smallest QID)."""
    titles = bucket.filter(pc.is_null(bucket["page_id"])).select(["wiki", "title", "qid", "direct"]).sort_by(
        [("wiki", "ascending"), ("title", "ascending"), ("direct", "descending"), ("qid", "ascending")])
    best = titles.group_by(["wiki", "title"], use_threads=False).aggregate([("qid", "first")])
    best = best.select(["wiki", "title", "qid_first"]).rename_columns(["wiki", "title", "qid"])
    mentions = bucket.filter(pc.is_valid(bucket["page_id"])).select(["wiki", "title", "page_id", "sentence_index"])
    resolved = mentions.join(best, keys=["wiki", "title"], join_type="left outer")
    return align(resolved, RESOLVED)


# ---------------------------------------------------------------- 3. the vocabulary

VOCAB_SIDES = _schema(qid=_STR, link_count=_INT, title=_STR, types=_STRS)


def _wikidata_side(batch: pa.Table, wikis: list[str], type_property: str) -> pa.Table:
    rows = []
    for qid, sitelinks, claims in zip(batch["qid"].to_pylist(), batch["sitelinks"].to_pylist(),
                                      batch["claims"].to_pylist()):
        titles = {link["wiki"]: link["title"] for link in sitelinks or ()}
        title = next((titles[w] for w in wikis if w in titles), None)
        types = [c["value"] for c in claims or () if c["property"] == type_property]
        rows.append({"qid": qid, "title": normalize_title(title) if title else None, "types": types})
    return _out(rows, VOCAB_SIDES)


def _eligible(rows: list[dict], threshold: int) -> list[dict]:
    count = sum(r["link_count"] or 0 for r in rows)
    item = next((r for r in rows if r["link_count"] is None), None)
    if item is None or count <= threshold or not item["types"] or not item["title"]:
        return []
    return [{"qid": item["qid"], "link_count": count, "title": item["title"],
                  "types": sorted(set(item["types"]))}]


# ---------------------------------------------------------------- 4. per entity: vocabulary, cap, negative type

MENTIONS = _schema(qid=_STR, wiki=_STR, page_id=_INT, sentence_index=_INT)
VOCABULARY_ROWS = _schema(qid=_STR, entity_index=_INT, title=_STR, types=_STRS)
PAIRS = _schema(wiki=_STR, page_id=_INT, sentence_index=_INT, positive_qid=_STR,
                positive_entity=_INT, positive_title=_STR, negative_type=_STR, draw=_U64, type_size=_INT,
                dropped=_STR, entity=_INT)  # entity: the mention's row in the vocabulary, kept or not (step 6)


_TYPE_DRAW, _SLOT_DRAW = np.uint64(0x5851F42D4C957F2D), np.uint64(0x14057B7EF767814F)


def _pairs_for_entities(mentions: pa.Table, entities: pa.Table, cap: int, seed: int, type_sizes: dict) -> pa.Table:
    """The pairs of every entity in a hash bucket of QIDs (its ``mentions`` and its ``entities``' vocabulary
    rows), as Arrow/numpy column
    operations. Per mention row: a pair, or dropped as a repeat of the entity in
    its sentence, an entity outside the vocabulary, over the per-entity cap, or
    with no other entity of its types. Each pair gets a P31 type for its
    negative, and that type's size (step 5 draws the member slots).

    Every draw is a hash of the pair's own key and ``seed``: the cap keeps the
    mentions with the smallest draws, the same sample on any cluster. (Strings stay
    Arrow arrays: a Python object per mention would be most of the call's memory.)"""
    key = ["wiki", "page_id", "sentence_index", "qid"]
    draws = row_hashes(mentions, key, seed)
    mentions = mentions.select(key).append_column("draw", pa.array(draws, pa.uint64()))
    del draws  # (the unsorted column: only the sorted copy is kept)
    # equal keys have equal draws, so a repeat sorts right after its first row
    mentions = mentions.sort_by([("qid", "ascending"), ("draw", "ascending"), ("wiki", "ascending"),
                                 ("page_id", "ascending"), ("sentence_index", "ascending")])
    repeat = ~np.logical_or.reduce([_starts(mentions[column]) for column in key])
    repeats = mentions.filter(pa.array(repeat)).select(key)
    pairs = mentions.filter(pa.array(~repeat)) if repeat.any() else mentions
    del mentions
    group_starts = np.flatnonzero(_starts(pairs["qid"]))
    rank = np.arange(len(pairs)) - np.repeat(group_starts, np.diff(np.r_[group_starts, len(pairs)]))
    table = _typed_pairs(pairs, entities, rank, cap, type_sizes)
    repeats = repeats.rename_columns(["wiki", "page_id", "sentence_index", "positive_qid"])
    repeats = repeats.append_column("dropped", pa.array(["same_entity_twice_in_a_sentence"] * len(repeats), _STR))
    return pa.concat_tables([align(table, PAIRS), align(repeats, PAIRS)])


def _typed_pairs(pairs: pa.Table, entities: pa.Table, rank: np.ndarray, cap: int, type_sizes: dict) -> pa.Table:
    """Each pair (one per entity mention, sorted by QID and draw; ``rank``: its place among its entity's) with
    its entity's vocabulary row, a P31 type of that entity chosen by the pair's draw and the size of that type
    (the pair's member slots are drawn from both in step 5: :func:`candidate_slots`), or the reason it is
    dropped (outside the vocabulary, over the cap, no other entity of its types)."""
    # the entity of each pair, and its types that have another member
    entity_types = [[t for t in types if type_sizes.get(t, 0) >= 2] for types in entities["types"].to_pylist()]
    type_count = np.array([len(t) for t in entity_types] + [0], np.int64)
    type_offset = np.r_[0, np.cumsum(type_count[:-1])]
    flat_types = pa.array([t for ts in entity_types for t in ts] + [""], _STR)
    flat_sizes = np.array([type_sizes[t] for ts in entity_types for t in ts] + [1], np.uint64)
    row = pc.index_in(pairs["qid"], value_set=entities["qid"])
    has_entity = row.is_valid().to_numpy(zero_copy_only=False)
    row = row.fill_null(len(entities)).to_numpy().astype(np.int64)  # the extra last slot: no entity, no types
    n_types = type_count[row]
    kept = has_entity & (rank < cap) & (n_types > 0)
    reason = np.where(~has_entity, 1, np.where(rank >= cap, 2, np.where(n_types == 0, 3, 0)))
    dropped = _DROPPED.take(pa.array(reason))

    draws = pairs["draw"].to_numpy()
    choice = type_offset[row] + (mix64(draws ^ _TYPE_DRAW) % np.maximum(n_types, 1).astype(np.uint64)).astype(np.int64)
    sizes = flat_sizes[choice].astype(np.int64)
    del draws
    entity_index = entities["entity_index"].to_numpy(zero_copy_only=False)
    titles = pa.concat_arrays([entities["title"].combine_chunks(), pa.nulls(1, _STR)])
    return pa.table({
        "wiki": pairs["wiki"], "page_id": pairs["page_id"],
        "sentence_index": pairs["sentence_index"], "positive_qid": pairs["qid"],
        "positive_entity": pa.array(np.r_[entity_index, 0].astype(np.int64)[row], _INT, mask=~kept),
        # (a null index takes a null: one copy of the strings, not a take and then an if_else)
        "positive_title": titles.take(pa.array(row, mask=~kept)),
        "negative_type": flat_types.take(pa.array(choice, mask=~kept)),
        "draw": pairs["draw"],
        "type_size": pa.array(sizes, _INT, mask=~kept),
        "dropped": dropped,
        "entity": pa.array(np.r_[entity_index, 0].astype(np.int64)[row], _INT, mask=~has_entity),
    })


_DROPPED = pa.array([None, "entity_below_link_threshold_or_untyped", "entity_pair_cap", "no_other_entity_of_its_type"],
                    _STR)


def _starts(column: pa.ChunkedArray) -> np.ndarray:
    """True where a row's value differs from the row before it (and at row 0): a sorted column's group starts."""
    starts = np.ones(len(column), bool)
    if len(column) > 1:
        same = pc.equal(column.slice(1), column.slice(0, len(column) - 1))
        starts[1:] = ~pc.fill_null(same, False).to_numpy(zero_copy_only=False)
    return starts


# ---------------------------------------------------------------- 5. candidate slots -> entities
# From here on an entity is its vocabulary row (entity_index), a pair is (wiki, page_id, sentence_index,
# positive_entity): integer columns through the two largest shuffles (8 candidates per pair), the QIDs and
# titles of the chosen negatives looked up in the vocabulary at the end.

SLOT_REQUESTS = _schema(type=_STR, slot=_INT, wiki=_STR, page_id=_INT, sentence_index=_INT, positive_entity=_INT,
                        rank=_INT)
TYPE_MEMBERS = _schema(type=_STR, slot=_INT, entity_index=_INT)
PAIR_KEY = ["wiki", "page_id", "sentence_index", "positive_entity"]
CANDIDATES = _schema(wiki=_STR, page_id=_INT, sentence_index=_INT, positive_entity=_INT, rank=_INT, entity_index=_INT)


def candidate_slots(draws: np.ndarray, type_sizes: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """The member slot of candidate ``rank`` of each pair: a hash of the pair's draw and the rank, modulo the
    size of the pair's negative type (the same slot in either round, on any cluster)."""
    with np.errstate(over="ignore"):
        return (mix64(draws + _SLOT_DRAW * (rank.astype(np.uint64) + np.uint64(1)))
                % type_sizes.astype(np.uint64)).astype(np.int64)


def _slot_side(batch: pa.Table, ranks: tuple[int, int]) -> pa.Table:
    """A request (negative type, slot) per candidate rank in ``range(*ranks)`` of each pair with a type.
    (The slots are drawn here, a bounded batch at a time, not carried through the shuffles as lists.)"""
    batch = batch.filter(pc.is_valid(batch["type_size"]))
    rows = np.repeat(np.arange(len(batch)), ranks[1] - ranks[0])
    rank = np.tile(np.arange(ranks[0], ranks[1], dtype=np.int64), len(batch))
    slot = candidate_slots(batch["draw"].to_numpy(zero_copy_only=False)[rows],
                           batch["type_size"].to_numpy(zero_copy_only=False)[rows], rank)
    table = batch.select(["negative_type", "wiki", "page_id", "sentence_index", "positive_entity"]).take(rows)
    table = table.rename_columns(["type", "wiki", "page_id", "sentence_index", "positive_entity"])
    return align(table.append_column("slot", pa.array(slot, _INT)).append_column("rank", pa.array(rank, _INT)),
                 SLOT_REQUESTS)


def _fill_slots(requests: pa.Table, members: pa.Table) -> pa.Table:
    """Requests (type, slot) joined to the type's numbered members, as an Arrow join; a
    candidate that is the pair's own positive is no candidate."""
    joined = requests.join(members, keys=["type", "slot"], join_type="inner")
    joined = joined.filter(pc.not_equal(joined["entity_index"], joined["positive_entity"]))
    return align(joined, CANDIDATES)


# ---------------------------------------------------------------- 6. per page: the negative of each pair

LINKED = _schema(wiki=_STR, page_id=_INT, entity_index=_INT)
PAIRS_TO_PICK = _schema(wiki=_STR, page_id=_INT, sentence_index=_INT, positive_entity=_INT, positive_qid=_STR,
                        positive_title=_STR, negative_type=_STR, draw=_U64, type_size=_INT)
PICKED = _schema(wiki=_STR, page_id=_INT, sentence_index=_INT, positive_qid=_STR, positive_entity=_INT,
                 positive_title=_STR, negative_type=_STR, draw=_U64, type_size=_INT, negative_qid=_STR,
                 negative_entity=_INT,
                 negative_title=_STR, bucket=_INT, dropped=_STR)


def _linked_side(batch: pa.Table, pages: np.ndarray | None = None) -> pa.Table:
    """The entities linked on each page (a pair or not), once per page and entity in this batch; with
    ``pages`` (a :func:`_page_filter`), only on the pages it may hold."""
    linked = batch.filter(pc.is_valid(batch["entity"])).select(["wiki", "page_id", "entity"])
    if pages is not None:
        linked = linked.filter(pa.array(_in_page_filter(linked, pages)))
    linked = linked.group_by(["wiki", "page_id", "entity"], use_threads=False).aggregate([])
    return align(linked.rename_columns(["wiki", "page_id", "entity_index"]), LINKED)


def _page_bits(table: pa.Table, bits: int) -> np.ndarray:
    """Each row's page as a bit of a :func:`_page_filter` of ``2 ** bits`` bits: the top bits of its hash."""
    return (row_hashes(table, ["wiki", "page_id"]) >> np.uint64(64 - bits)).astype(np.int64)


def _block_page_bits(batch: pa.Table, bits: int) -> pa.Table:
    return pa.table({"bit": np.unique(_page_bits(batch, bits))})


def _page_filter(pairs, rows: int) -> np.ndarray:
    """A bitmap of the pages of ``pairs`` (``rows`` of them), set at the top bits of each page's hash: a page it
    misses has no pair, one it holds may (at most ~1/16 of the others, up to ~500,000 pages; a fixed 1 MiB
    beyond). The second round's linked side keeps only its pages' rows, not every page's again."""
    bits = min(23, max(16, math.ceil(math.log2(16 * max(rows, 1)))))
    bitmap = np.zeros(1 << (bits - 3), np.uint8)
    for batch in pairs.map_batches(_block_page_bits, batch_format="pyarrow", batch_size=None,
                                   fn_kwargs={"bits": bits}).iter_batches(batch_format="numpy", batch_size=None):
        found = batch["bit"]
        np.bitwise_or.at(bitmap, found >> 3, (1 << (found & 7)).astype(np.uint8))
    return bitmap


def _in_page_filter(table: pa.Table, pages: np.ndarray) -> np.ndarray:
    found = _page_bits(table, (len(pages) * 8).bit_length() - 1)
    return (pages[found >> 3] >> (found & 7).astype(np.uint8)) & 1 == 1


def _vocabulary_lookup(path: str) -> tuple[pa.Array, pa.Array]:
    """The vocabulary's QIDs and titles, position ``entity_index - 1`` (entities are numbered 1..N)."""
    from setformat.io import read_table

    vocabulary = read_table(path, columns=["entity_index", "qid", "title"])
    if not np.array_equal(vocabulary["entity_index"].to_numpy(), np.arange(1, len(vocabulary) + 1)):
        raise RuntimeError(f"{path}: entity_index is not 1..{len(vocabulary)} in order")
    return vocabulary["qid"].combine_chunks(), vocabulary["title"].combine_chunks()


def _pick_negatives(linked: pa.Table, pairs: pa.Table, candidates: pa.Table, buckets: int,
                    vocabulary: str) -> pa.Table:
    """Whole pages: their linked entities, their pairs and the pairs'
    candidates. A pair's negative is its lowest-ranked candidate that is
    neither the positive nor linked anywhere on the page (Arrow anti-join,
    then the minimum rank per pair)."""
    linked = linked.group_by(["wiki", "page_id", "entity_index"], use_threads=False).aggregate([])
    allowed = candidates.join(linked, keys=["wiki", "page_id", "entity_index"], join_type="left anti")
    del linked, candidates
    first = allowed.group_by(PAIR_KEY).aggregate([("rank", "min")]).rename_columns(PAIR_KEY + ["rank"])
    chosen = allowed.join(first, keys=PAIR_KEY + ["rank"], join_type="inner").select(
        PAIR_KEY + ["entity_index"]).rename_columns(PAIR_KEY + ["negative_entity"])
    del allowed, first
    picked = pairs.join(chosen, keys=PAIR_KEY, join_type="left outer")
    qids, titles = _vocabulary_lookup(vocabulary)
    row = pc.subtract(picked["negative_entity"], 1)
    picked = picked.append_column("negative_qid", qids.take(row)).append_column("negative_title", titles.take(row))
    picked = picked.append_column("bucket", hash_buckets(picked, ["wiki", "page_id"], buckets))
    dropped = pc.if_else(pc.is_null(picked["negative_entity"]), pa.scalar("no_hard_negative"), pa.scalar(None, _STR))
    return align(picked.append_column("dropped", dropped), PICKED)


# ---------------------------------------------------------------- 7. sentences back in, one file per bucket

PAIRS_TO_WRITE = _schema(bucket=_INT, wiki=_STR, page_id=_INT, sentence_index=_INT, positive_qid=_STR,
                         positive_entity=_INT, positive_title=_STR, negative_qid=_STR, negative_entity=_INT,
                         negative_title=_STR)
SENTENCES = _schema(bucket=_INT, wiki=_STR, page_id=_INT, sentence_index=_INT, sentence=_STR)
WRITTEN = _schema(bucket=_INT, rows=_INT, file=_STR)


def _sentence_side(batch: pa.Table, buckets: int) -> pa.Table:
    return align(batch.append_column("bucket", hash_buckets(batch, ["wiki", "page_id"], buckets)), SENTENCES)


def _sentence_of_each_pair(pairs: pa.Table, sentences: pa.Table) -> np.ndarray:
    """The row in ``sentences`` of each pair's sentence, on (wiki, page_id, sentence_index), copying nothing
    (``setformat.io.find_rows``)."""
    found = find_rows(pairs, sentences, ["wiki", "page_id", "sentence_index"])
    if found is None:
        raise RuntimeError(f"two sentence keys share a 64-bit hash in a bucket of {len(sentences)} sentences")
    if found.null_count:
        raise RuntimeError(f"{found.null_count} entity pairs have no sentence in the sentences set")
    return found.to_numpy()


def _write_buckets(first: pa.Table, second: pa.Table, sentences: pa.Table, out: str) -> pa.Table:
    """Pairs (those with a negative from either round) joined to their sentence text; each bucket sorted and
    written as ``entity_pairs/part-<bucket>.parquet``. The rows are copied once, in their file's order."""
    pairs = pa.concat_tables([first, second])
    del first, second
    source = _sentence_of_each_pair(pairs, sentences)
    sort_keys = ["bucket", "wiki", "page_id", "sentence_index", "positive_qid"]
    order = pc.sort_indices(pairs.select(sort_keys), sort_keys=[(k, "ascending") for k in sort_keys]).to_numpy()
    source = source[order]
    bucket_of_row = pairs["bucket"].take(order).to_numpy()
    written = []
    for start, end in value_runs(bucket_of_row):
        rows = pairs.take(order[start:end]).append_column("sentence", sentences["sentence"].take(source[start:end]))
        bucket = int(bucket_of_row[start])
        name = f"part-{bucket:05d}.parquet"
        write_table(align(rows, schemas.ENTITY_PAIRS), f"{out}/entity_pairs/{name}")
        written.append({"bucket": bucket, "rows": len(rows), "file": name})
        del rows
    return _out(written, WRITTEN)


# ---------------------------------------------------------------- helpers and the driver


def _keep(batch: pa.Table, column: str, null: bool) -> pa.Table:
    mask = pc.is_null(batch[column]) if null else pc.is_valid(batch[column])
    return batch.filter(mask)


def _block_value_counts(block: pa.Table, column: str) -> pa.Table:
    counts = pc.value_counts(block[column])
    return pa.table({"value": counts.field("values").cast(_STR), "count": counts.field("counts")})


def _value_counts(ds, column: str) -> Counter:
    """The count of each value of ``column``, counted where the blocks are made."""
    counts: Counter = Counter()
    for row in ds.map_batches(_block_value_counts, batch_format="pyarrow", batch_size=None,
                              fn_kwargs={"column": column}).take_all():
        counts[row["value"]] += row["count"]
    return counts


def write_vocabulary(eligible, out: str, work: str) -> tuple[int, dict[str, int]]:
    """Number the eligible entities in QID order into ``entities/entities.parquet``
    and the members of each type into ``_work/type_members.parquet``; returns the
    entity count and the size of each type. Streams: the driver holds one batch
    and the per-type counters."""
    type_sizes: Counter = Counter()
    index = 0
    with table_writer(f"{out}/entities/entities.parquet", schemas.ENTITIES) as entities, \
            table_writer(f"{work}/type_members.parquet", TYPE_MEMBERS) as members:
        for batch in eligible.sort("qid").iter_batches(batch_format="pyarrow", batch_size=65536):
            entity_rows, member_rows = [], []
            for row in batch.to_pylist():
                index += 1
                entity_rows.append({"entity_index": index, "qid": row["qid"], "title": row["title"],
                                    "link_count": row["link_count"], "types": row["types"]})
                for t in row["types"]:
                    member_rows.append({"type": t, "slot": type_sizes[t], "entity_index": index})
                    type_sizes[t] += 1
            entities.write_table(pa.Table.from_pylist(entity_rows, schema=schemas.ENTITIES))
            members.write_table(pa.Table.from_pylist(member_rows, schema=TYPE_MEMBERS))
    return index, dict(type_sizes)


def _link_counts(batch: pa.Table) -> pa.Table:
    """One block's link count per QID: partial counts that the vocabulary step adds up per QID."""
    counts = pc.value_counts(batch["qid"])
    return align(pa.table({"qid": counts.field("values"), "link_count": counts.field("counts")}), VOCAB_SIDES)


def resolve_mentions(wikidata, redirects, mentions, wikis: list[str], shuffle: Shuffle):
    """Steps 1–2: ``mentions`` (wiki, title, page_id, sentence_index) with the
    QID of their target through ``redirects`` (wiki, title, target) and the
    sitelinks of ``wikidata`` (a ``wikidata`` set); QID null when none."""
    title_sides = [redirects.map_batches(_redirect_side, batch_format="pyarrow"),
                   wikidata.map_batches(sitelink_side, batch_format="pyarrow", fn_kwargs={"wikis": wikis})]
    title_qids = map_keys(title_sides, ["wiki", "key"], _resolve_titles, TITLE_QIDS, shuffle)
    mention_sides = [title_qids.map_batches(align, batch_format="pyarrow", fn_kwargs={"schema": MENTION_SIDES}),
                     mentions.map_batches(align, batch_format="pyarrow", fn_kwargs={"schema": MENTION_SIDES})]
    return map_buckets(mention_sides, ["wiki", "title"], _resolve_mentions, shuffle)


def build_entity_pairs(out: str, wikidata_set: str, cfg: dict, shuffle: Shuffle) -> dict:
    """Run steps 1–8 over pass 1's files under ``out`` and the ``wikidata``
    set at ``wikidata_set``; returns the counts for the manifest. Every shuffle
    goes through ``shuffle``'s folder (``ingest/shuffle.py``)."""
    work = f"{out}/_work"
    wikis = list(cfg["wikis"])
    wikidata = read_dataset(wikidata_set)
    dropped: Counter = Counter()

    # 1–2. every mention gets its QID (or null); link counts per entity
    resolved = resolve_mentions(wikidata, read_dataset(f"{work}/redirects"), read_dataset(f"{work}/mentions"),
                                wikis, shuffle)
    mentions_total = count_rows(resolved)
    linked = resolved.map_batches(_keep, batch_format="pyarrow", fn_kwargs={"column": "qid", "null": False})
    dropped["link_target_without_wikidata_item"] = mentions_total - count_rows(linked)
    # 3. the vocabulary
    n_entities, type_sizes = _vocabulary(linked, wikidata, wikis, cfg, out, shuffle)
    log.info(f"[ingest] pass 2: {mentions_total} link mentions, {n_entities} entities in the vocabulary, "
             f"{len(type_sizes)} types")
    # 4. per entity: vocabulary row, cap, negative type and slots
    pairs = _pairs(linked, out, cfg, type_sizes, shuffle)
    dropped.update(_dropped(pairs))
    # 5–6. each pair's negative
    buckets = max(1, math.ceil(max(1, count_rows(_kept(pairs))) * 400 / cfg["pairs_file_bytes"]))
    final = _negatives(pairs, out, cfg, buckets, shuffle, dropped)
    # 7. sentence text back in; one file per bucket
    written = _write(final, out, buckets, shuffle)
    n_pairs = sum(r["rows"] for r in written)
    return {
        "entities": n_entities,
        "types": len(type_sizes),
        "link_mentions": mentions_total,
        "entity_pairs": n_pairs,
        "files": sorted(r["file"] for r in written),
        "dropped_links": dict(sorted((k, v) for k, v in dropped.items() if v)),
        "accounted": mentions_total == n_pairs + sum(dropped.values()),
    }


def _kept(ds):
    return ds.map_batches(_keep, batch_format="pyarrow", fn_kwargs={"column": "dropped", "null": True})


def _dropped(ds) -> Counter:
    return _value_counts(ds.map_batches(_keep, batch_format="pyarrow", fn_kwargs={"column": "dropped", "null": False}),
                         "dropped")


def _vocabulary(linked, wikidata, wikis: list[str], cfg: dict, out: str, shuffle: Shuffle) -> tuple[int, dict]:
    """Step 3: each block's link counts and the items, summed per QID; the vocabulary written. Returns (its
    entities, the size of each type)."""
    link_counts = linked.map_batches(_link_counts, batch_format="pyarrow", batch_size=None)
    items = wikidata.map_batches(_wikidata_side, batch_format="pyarrow",
                                 fn_kwargs={"wikis": wikis, "type_property": cfg["type_property"]})
    eligible = map_keys([link_counts, items], "qid", _eligible, VOCAB_SIDES, shuffle,
                        threshold=cfg["entity_link_threshold"])
    return write_vocabulary(eligible, out, f"{out}/_work")


def _pairs(linked, out: str, cfg: dict, type_sizes: dict, shuffle: Shuffle):
    """Step 4: the mentions joined to the vocabulary per QID; a pair (or a drop) per mention."""
    vocabulary = read_dataset(f"{out}/entities")
    return map_buckets([linked, vocabulary], ["qid"], _pairs_for_entities, shuffle,
                       _side_schemas=[MENTIONS, VOCABULARY_ROWS], cap=cfg["max_pairs_per_entity"],
                       seed=cfg["seed"], type_sizes=type_sizes)


def _negatives(pairs, out: str, cfg: dict, buckets: int, shuffle: Shuffle, dropped: Counter) -> list:
    """Steps 5–6: candidate slots -> members of the type; per page, the first candidate not linked on the page.
    Two rounds: every pair's first candidate, then the other candidates of the pairs whose first was linked on
    the page (or was the positive). The lowest allowed rank wins either way; the second round is small.
    Returns the pairs with a negative (two Datasets); those without one are counted in ``dropped``."""
    members = read_dataset(f"{out}/_work/type_members.parquet")

    def pick(pair_rows, ranks: tuple[int, int], pages: np.ndarray | None = None):
        # a bounded batch: no block grows `negative_candidates`-fold whole
        slot_sides = [pair_rows.map_batches(_slot_side, batch_format="pyarrow", batch_size=65536,
                                            fn_kwargs={"ranks": ranks}), members]
        candidates = map_buckets(slot_sides, ["type", "slot"], _fill_slots, shuffle,
                                 _side_schemas=[SLOT_REQUESTS, TYPE_MEMBERS])
        linked = pairs.map_batches(_linked_side, batch_format="pyarrow", fn_kwargs={"pages": pages})
        return map_buckets([linked, pair_rows, candidates], ["wiki", "page_id"], _pick_negatives, shuffle,
                           _side_schemas=[LINKED, PAIRS_TO_PICK, CANDIDATES], buckets=buckets,
                           vocabulary=f"{out}/entities/entities.parquet")

    first = pick(_kept(pairs), (0, 1))
    again = first.map_batches(_keep, batch_format="pyarrow", fn_kwargs={"column": "dropped", "null": False})
    again_rows = count_rows(again) if cfg["negative_candidates"] > 1 else 0
    second = pick(again, (1, cfg["negative_candidates"]), _page_filter(again, again_rows)) if again_rows else again
    dropped.update(_dropped(second))
    return [_kept(first), _kept(second)]


def _write(final: list, out: str, buckets: int, shuffle: Shuffle) -> list[dict]:
    """Step 7: each pair's sentence text back in; one file per bucket (one call per file: its rows and its pages'
    sentences, bounded by pairs_file_bytes, not by the dump)."""
    sentences = read_dataset(f"{out}/sentences", columns=["wiki", "page_id", "sentence_index", "sentence"])
    sentence_side = sentences.map_batches(_sentence_side, batch_format="pyarrow", fn_kwargs={"buckets": buckets})
    return map_buckets([*final, sentence_side], "bucket", _write_buckets, shuffle, _by_value=buckets,
                       _side_schemas=[PAIRS_TO_WRITE, PAIRS_TO_WRITE, SENTENCES], out=out).take_all()
