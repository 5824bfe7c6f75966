"""Pass 2 of ingest for the ``intros`` set: each article's lead section with its QID.

Pass 1 (``ingest/units.py``) writes ``_work/intros/shard-N.parquet``: the lead
section (the wikitext before the first heading, through the same extractor as
the sentences) of every article, ``qid`` null. Here they are joined to the
``wikidata`` set's sitelinks on (wiki, title), the page's own title (a sitelink
names an article, never a redirect), as a reduce-side join on a hash bucket of
the key (``ingest.shuffle.map_buckets``, the same sitelink side as
``ingest/entity_pairs.py``); an item linking the title gives its QID, none
leaves it null (two items linking one title: the smallest QID). Rows then go
to one of ``files`` hash buckets of (wiki, page_id); each bucket is sorted and
written as ``intros/part-NNNNN.parquet``, so the set is byte-identical for the
same input however Ray partitions the shuffles. Without Wikidata the rows go
straight to their buckets, ``qid`` null.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

from setformat import schemas
from ingest.entity_pairs import sitelink_side
from setformat.io import align, find_rows, hash_buckets, read_dataset, set_files, write_manifest, write_table
from ingest.shuffle import Shuffle, count_bytes, map_buckets, value_runs

log = logging.getLogger(__name__)
_STR, _INT = pa.string(), pa.int64()
INTRO_SIDE = pa.schema([pa.field("wiki", _STR), pa.field("title", _STR), pa.field("page_id", _INT),
                        pa.field("text", _STR)])
SITELINK_SIDE = pa.schema([pa.field("wiki", _STR), pa.field("title", _STR), pa.field("qid", _STR)])
INTRO_ROWS = 16_384  # rows per scatter call: a lead section is ~1.5 KB, 100x a link mention
BUCKETED = pa.schema(list(schemas.INTROS) + [pa.field("bucket", _INT)])
WRITTEN = pa.schema([pa.field("bucket", _INT), pa.field("rows", _INT), pa.field("linked", _INT),
                     pa.field("file", _STR)])


def _sitelinks(batch: pa.Table, wikis: list[str]) -> pa.Table:
    return align(sitelink_side(batch, wikis), SITELINK_SIDE)


def _bucketed(table: pa.Table, files: int) -> pa.Table:
    table = align(table, schemas.INTROS)
    return align(table.append_column("bucket", hash_buckets(table, ["wiki", "page_id"], files)), BUCKETED)


def _join(intros: pa.Table, links: pa.Table, files: int) -> pa.Table:
    """The intros of a (wiki, title) bucket with the QID of the bucket's sitelink to their title (the smallest
    of several), null for none: looked up (``setformat.io.find_rows``), so that the texts are not copied."""
    keys = ["wiki", "title"]
    best = links.group_by(keys, use_threads=False).aggregate([("qid", "min")]).rename_columns(keys + ["qid"])
    found = find_rows(intros, best, keys)
    if found is None:  # a 64-bit hash shared by two keys of the bucket: the join itself, as rare as it is
        return _bucketed(intros.join(best, keys=keys, join_type="left outer"), files)
    return _bucketed(intros.append_column("qid", best["qid"].take(found)), files)


def _write(bucket: pa.Table, out: str) -> pa.Table:
    """Each bucket's rows sorted by (wiki, page_id) and written as ``intros/part-<bucket>.parquet``,
    copied once, in their file's order."""
    sort_keys = ["bucket", "wiki", "page_id"]
    order = pc.sort_indices(bucket.select(sort_keys), sort_keys=[(k, "ascending") for k in sort_keys]).to_numpy()
    bucket_of_row = bucket["bucket"].take(order).to_numpy()
    written = []
    for start, end in value_runs(bucket_of_row):
        rows = bucket.take(order[start:end])
        b = int(bucket_of_row[start])
        name = f"part-{b:05d}.parquet"
        write_table(align(rows, schemas.INTROS), f"{out}/intros/{name}")
        written.append({"bucket": b, "rows": len(rows), "linked": len(rows) - rows["qid"].null_count, "file": name})
        del rows
    return pa.Table.from_pylist(written, schema=WRITTEN)


def build_intros(out: str, wikidata_set: str | None, cfg: dict, results: list[dict], common: dict,
                 shuffle: Shuffle, file_bytes: int = 64 << 20) -> dict:
    """Write the ``intros`` set under ``out`` from pass 1's ``_work/intros`` (and the
    sitelinks of ``wikidata_set`` in ``cfg["wikis"]``, when given) and its manifest;
    ``results`` are pass 1's Wikipedia shard results (their ``intro_status``
    counts every page), ``common`` the fields every ingest manifest carries."""
    work_files = set_files(f"{out}/_work/intros")
    intros = read_dataset(work_files)
    # files of about file_bytes of rows as Arrow holds them (a writing call holds one file), measured where the
    # blocks are read: text compresses on disk anywhere from 2x to 10x
    files = max(1, math.ceil(count_bytes(intros) / file_bytes)) if work_files else 1
    if wikidata_set:
        sides = [intros, read_dataset(wikidata_set, columns=["qid", "sitelinks"]).map_batches(
            _sitelinks, batch_format="pyarrow", fn_kwargs={"wikis": list(cfg["wikis"])})]
        rows = map_buckets(sides, ["wiki", "title"], _join, shuffle, _batch_rows=INTRO_ROWS,
                           _side_schemas=[INTRO_SIDE, SITELINK_SIDE], files=files)
    else:
        rows = intros.map_batches(_bucketed, batch_format="pyarrow", fn_kwargs={"files": files})
    written = map_buckets(rows, "bucket", _write, shuffle, _by_value=files, _batch_rows=INTRO_ROWS,
                          out=out).take_all() if work_files else []
    if not written:  # no article at all: still a readable (empty) set
        write_table(schemas.INTROS.empty_table(), f"{out}/intros/part-00000.parquet")
        written = [{"bucket": 0, "rows": 0, "linked": 0, "file": "part-00000.parquet"}]
    n_rows, linked = sum(w["rows"] for w in written), sum(w["linked"] for w in written)

    status: Counter = Counter()
    for r in results:
        status.update(json.loads(r.get("intro_status", "{}")))
    in_input = sum(r["pages_in_input"] for r in results)
    truncated = any(r["truncated"] or r.get("damaged") for r in results)  # pages lost that no one counted
    pages = {"in_input": in_input, "written": status.get("written", 0),
             "dropped": {k: v for k, v in sorted(status.items()) if k != "written"},
             "accounted": not truncated and sum(status.values()) == in_input and status.get("written", 0) == n_rows}
    qids = {"linked": linked, "no_item": n_rows - linked,
            "joined_to": wikidata_set or None}
    write_manifest(f"{out}/intros", "intros", n_rows, **{k: v for k, v in common.items() if k not in ("pages",)},
                   pages=pages, qids=qids, files=sorted(w["file"] for w in written))
    log.info(f"[ingest] intros: {n_rows} lead sections ({linked} with a QID), pages dropped {pages['dropped']}")
    return {"path": f"{out}/intros", "rows": n_rows, "linked": linked, "pages": pages}
