"""The same page read twice — two copies of a dump, overlapping chunks of one — is written once.

Within a shard, a page id seen again is counted ``duplicate_page`` and writes nothing
(``units._ShardPages``). Across shards, which run apart, each shard also writes
``_work/pages/shard-N.parquet``: one row per parsed page with its fate and how many rows it
wrote to each file. `drop_duplicate_pages` reads those lists (a few small columns per page),
keeps each ``(wiki, page_id)``'s first occurrence (in shard order) and removes the later
occurrences' rows from their shards' files by page id, counting each as ``duplicate_page`` instead of its first fate. Removing by
key is idempotent and the page lists are never rewritten, so a resumed job (its shards' files
already filtered) reaches the same files and the same counts.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pyarrow as pa
import pyarrow.compute as pc

from setformat.io import read_table, write_table

# the shard files whose rows belong to one page, in the order units._ShardPages counts them
PAGE_ROW_SETS = ("sentences", "mentions", "intros", "redirects")
PAGES = pa.schema(
    [pa.field("wiki", pa.string()), pa.field("page_id", pa.int64()), pa.field("status", pa.string()),
     pa.field("intro_status", pa.string())]
    + [pa.field(f"{name}_rows", pa.int32()) for name in PAGE_ROW_SETS]
)
DUPLICATE = "duplicate_page"


def _shard_files(out: str, name: str) -> dict[str, str]:
    return {"sentences": f"{out}/sentences/{name}", "mentions": f"{out}/_work/mentions/{name}",
            "intros": f"{out}/_work/intros/{name}", "redirects": f"{out}/_work/redirects/{name}"}


def drop_duplicate_pages(out: str, results: list[dict]) -> dict:
    """Remove the later occurrences of every page from pass 1's Wikipedia shard files and move their
    counts in ``results`` (updated in place) to ``duplicate_page``. Returns ``{pages, rows}``: the
    duplicate occurrences removed and the rows each file lost."""
    first_shard: dict[tuple[str, int], str] = {}
    later: dict[str, list[dict]] = defaultdict(list)  # shard file name -> its pages read earlier elsewhere
    for result in sorted(results, key=lambda r: r["file"]):
        table = read_table(f"{out}/_work/pages/{result['file']}")
        for page in table.to_pylist():
            if page["status"] == DUPLICATE:  # already counted within its shard
                continue
            key = (page["wiki"], page["page_id"])
            if first_shard.setdefault(key, result["file"]) != result["file"]:
                later[result["file"]].append(page)
    removed_rows: Counter = Counter()
    for result in results:
        pages = later.get(result["file"])
        if not pages:
            continue
        status, intro_status = Counter(json.loads(result["status"])), Counter(json.loads(result["intro_status"]))
        for page in pages:
            status[page["status"]] -= 1
            status[DUPLICATE] += 1
            intro_status[page["intro_status"]] -= 1
            intro_status[DUPLICATE] += 1
            for name in PAGE_ROW_SETS:
                removed_rows[name] += page[f"{name}_rows"]
        result["status"] = json.dumps({k: v for k, v in sorted(status.items()) if v}, sort_keys=True)
        result["intro_status"] = json.dumps({k: v for k, v in sorted(intro_status.items()) if v}, sort_keys=True)
        result["sentences"] -= sum(p["sentences_rows"] for p in pages)
        result["mentions"] -= sum(p["mentions_rows"] for p in pages)
        result["intros"] -= sum(p["intros_rows"] for p in pages)
        _filter_shard(out, result["file"], pages)
    return {"pages": sum(len(p) for p in later.values()), "rows": dict(sorted(removed_rows.items()))}


def _filter_shard(out: str, name: str, pages: list[dict]) -> None:
    ids = pa.array(sorted({p["page_id"] for p in pages}), pa.int64())
    wikis = pa.array(sorted({p["wiki"] for p in pages}), pa.string())
    for path in _shard_files(out, name).values():
        table = read_table(path)
        drop = pc.and_(pc.is_in(table["page_id"], value_set=ids), pc.is_in(table["wiki"], value_set=wikis))
        if pc.any(drop).as_py():
            write_table(table.filter(pc.invert(drop)), path)
