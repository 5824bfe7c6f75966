"""Pass 1 of ingest: one Ray task per unit of input, each writing its own files.

A unit is a Wikipedia shard (a run of bz2 streams of a multistream dump, about
``shard_bytes`` compressed, or a whole non-indexed file) or a Wikidata range
(line-aligned bytes of a JSON dump). Every output file has a deterministic
name (``shard-NNNNN.parquet``) and is written to a temp name and renamed, so a
retried task overwrites what a killed one left. When a unit is done its result
row is written last, as ``_work/done/<kind>-NNNNN.json``; a rerun of the same
job finds it and skips the unit (the marker holds a fingerprint of the unit and
of the config that shapes its output, so a changed config redoes the work).

A Wikipedia shard writes:
- ``sentences/shard-N.parquet``: the article sentences (the SimCSE set);
- ``_work/mentions/shard-N.parquet``: one row per (sentence, distinct link target);
- ``_work/redirects/shard-N.parquet``: ``(wiki, title, target)`` of redirect pages.

Every page of the shard ends in exactly one count: ``written`` or a reason
(``redirect``, ``non_article_namespace``, ``no_sentences``, ``parse_error``,
``corrupt_stream``, ``missing_from_stream``). A corrupt or truncated bz2
stream is copied to ``_quarantine/`` with its byte offset and its pages are
counted; the rest of the shard is unaffected.

A Wikidata range writes ``wikidata/part-N.parquet`` (the ``wikidata`` set)
and counts every entity line as written or skipped with a reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
from collections import Counter
from contextlib import contextmanager

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ingest import multistream, schemas, wikidata
from ingest.wikipedia import Page, PageError, decode_xml_bytes, iter_pages_from_file, parse_pages
from ingest.wikitext import extractor_loops, normalize_title, split_sentences, wikitext_to_text

MENTIONS = pa.schema(
    [
        pa.field("wiki", pa.string()),
        pa.field("title", pa.string()),  # the link target as written, normalised (redirects not yet applied)
        pa.field("page_id", pa.int64()),
        pa.field("sentence_index", pa.int32()),
    ]
)
REDIRECTS = pa.schema([pa.field("wiki", pa.string()), pa.field("title", pa.string()), pa.field("target", pa.string())])

# config fields that shape pass-1 output; a change invalidates finished units
UNIT_CONFIG_FIELDS = ("min_sentence_chars", "max_sentence_chars", "languages", "wikis", "properties",
                      "wikidata_prefilter")


def _tmp_name(local: str) -> str:
    """Hidden, so readers of the folder (pyarrow, Ray Data) never see a half-written file."""
    folder, name = os.path.split(local)
    return os.path.join(folder, f".{name}.tmp-{os.getpid()}")


def write_table(table: pa.Table, path: str) -> None:
    """Write atomically under a fixed name: a retried task overwrites the same file."""
    fs, local = fsspec.core.url_to_fs(path)
    fs.makedirs(os.path.dirname(local), exist_ok=True)
    tmp = _tmp_name(local)
    with fs.open(tmp, "wb") as f:
        pq.write_table(table, f)
    fs.mv(tmp, local)


@contextmanager
def table_writer(path: str, schema: pa.Schema):
    """A ``ParquetWriter`` for batches, renamed into place only when closed cleanly."""
    fs, local = fsspec.core.url_to_fs(path)
    fs.makedirs(os.path.dirname(local), exist_ok=True)
    tmp = _tmp_name(local)
    with fs.open(tmp, "wb") as f, pq.ParquetWriter(f, schema) as writer:
        yield writer
    fs.mv(tmp, local)


def write_json(obj: dict, path: str) -> None:
    fs, local = fsspec.core.url_to_fs(path)
    fs.makedirs(os.path.dirname(local), exist_ok=True)
    tmp = _tmp_name(local)
    with fs.open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
    fs.mv(tmp, local)


def _read_json(path: str) -> dict | None:
    fs, local = fsspec.core.url_to_fs(path)
    if not fs.exists(local):
        return None
    with fs.open(local, "r") as f:
        return json.load(f)


def file_digest(path: str) -> dict:
    """Size and sha256 of an input file, for the manifests."""
    fs, local = fsspec.core.url_to_fs(path)
    digest = hashlib.sha256()
    with fs.open(local, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return {"path": path, "bytes": fs.size(local), "sha256": digest.hexdigest()}


def stable_hash(text: str) -> int:
    """A 64-bit hash that is the same in every process (Python's ``hash`` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


_U64 = np.uint64
_NULL_HASH = _U64(0x9E3779B97F4A7C15)


def mix64(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over a uint64 array: every input bit reaches every output bit."""
    with np.errstate(over="ignore"):
        h = (h ^ (h >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> _U64(27))) * _U64(0x94D049BB133111EB)
    return h ^ (h >> _U64(31))


def _column_hashes(column: pa.Array) -> np.ndarray:
    if pa.types.is_integer(column.type):
        values = column.fill_null(0).to_numpy().astype(np.int64).view(np.uint64)
    elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        # each distinct string hashed once: key columns repeat (wikis, titles, types, QIDs)
        encoded = pc.dictionary_encode(column)
        distinct = np.array([stable_hash(text) for text in encoded.dictionary.to_pylist()] or [0], np.uint64)
        values = distinct[encoded.indices.fill_null(0).to_numpy()]
    else:
        raise TypeError(f"row_hashes takes string and integer key columns, not {column.type}")
    values = mix64(values)
    return np.where(column.is_valid().to_numpy(zero_copy_only=False), values, _NULL_HASH) if column.null_count else values


def row_hashes(table: pa.Table, columns: list[str], seed: int = 0) -> np.ndarray:
    """A 64-bit hash of each row's values in ``columns`` (strings and integers),
    the same in every process and for any chunking of the table: Ray Data's
    shuffle buckets and the seeded per-row draws of pass 2, vectorised (a
    Python hash per row cost ~2 µs, on millions of rows per shuffle)."""
    h = np.full(len(table), seed, np.uint64)
    with np.errstate(over="ignore"):
        for name in columns:
            column = table[name]
            column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            h = mix64(h * _U64(0x100000001B3) + _column_hashes(column))
    return h


def code_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("structcse")
    except PackageNotFoundError:
        return "unknown"


def fingerprint(spec: str, cfg: dict) -> str:
    shaping = {k: cfg.get(k) for k in UNIT_CONFIG_FIELDS}
    payload = json.dumps([schemas.SCHEMA_VERSION, spec, shaping], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def language_of(wiki: str) -> str:
    """``enwiki`` -> ``en``, ``zh_yuewiki`` -> ``zh_yue``; the sentence splitter's language."""
    return wiki[: -len("wiki")] if wiki.endswith("wiki") else wiki


# ---------------------------------------------------------------- the task


def process_unit(row: dict, out: str, cfg: dict) -> dict:
    """One pass-1 Ray task: run one unit unless its done-marker says it ran.
    Returns ``{kind, unit_id, result (JSON), peak_rss_mb, resumed}``."""
    kind, unit_id, spec = row["kind"], row["unit_id"], row["spec"]
    marker = f"{out}/_work/done/{kind}-{unit_id:05d}.json"
    stamp = fingerprint(spec, cfg)
    if cfg.get("resume", True):
        done = _read_json(marker)
        if done is not None and done.get("fingerprint") == stamp:
            return {"kind": kind, "unit_id": unit_id, "result": json.dumps(done["result"]),
                    "peak_rss_mb": 0.0, "resumed": True}
    if kind == "wikipedia":
        result = process_wikipedia_shard(multistream.WikipediaShard.from_json(spec), out, cfg)
    else:
        result = process_wikidata_range(wikidata.WikidataRange.from_json(spec), out, cfg)
    write_json({"fingerprint": stamp, "result": result}, marker)
    # peak memory belongs to this run's worker, not to the unit's output
    return {"kind": kind, "unit_id": unit_id, "result": json.dumps(result),
            "peak_rss_mb": _peak_rss_mb(), "resumed": False}


# ---------------------------------------------------------------- Wikipedia


class _ShardPages:
    """One shard's rows and the fate of every page."""

    def __init__(self, wiki: str, cfg: dict):
        self.wiki = wiki
        self.language = language_of(wiki)
        self.cfg = cfg
        self.sentences: list[dict] = []
        self.mentions: list[dict] = []
        self.redirects: list[dict] = []
        self.status: Counter = Counter()
        self.errors: list[str] = []

    def add(self, item: Page | PageError) -> None:
        if isinstance(item, PageError):
            self.status["parse_error"] += 1
            self.errors.append(f"page {item.page_id} {item.title!r}: {item.reason}")
            return
        if item.ns != 0:
            self.status["non_article_namespace"] += 1
        elif item.redirect:
            self.status["redirect"] += 1
            self.redirects.append(
                {"wiki": self.wiki, "title": normalize_title(item.title), "target": normalize_title(item.redirect)}
            )
        else:
            self._add_article(item)

    def _add_article(self, page: Page) -> None:
        try:
            text, links = wikitext_to_text(page.wikitext, language=self.language)
            sentences = split_sentences(
                text, links, min_chars=self.cfg["min_sentence_chars"], max_chars=self.cfg["max_sentence_chars"],
                language=self.language,
            )
        except Exception as e:  # one bad page must not lose its shard
            self.status["parse_error"] += 1
            self.errors.append(f"page {page.page_id} {page.title!r}: {type(e).__name__}: {e}")
            return
        if not sentences:
            self.status["no_sentences"] += 1
            return
        self.status["written"] += 1
        title = normalize_title(page.title)
        for index, (sentence, links) in enumerate(sentences):
            self.sentences.append(
                {"sentence": sentence, "page_id": page.page_id, "title": title, "sentence_index": index,
                 "wiki": self.wiki}
            )
            for target in sorted({link.target for link in links}):
                self.mentions.append(
                    {"wiki": self.wiki, "title": target, "page_id": page.page_id, "sentence_index": index}
                )


def _quarantine_stream(f, stream: multistream.StreamRange, shard: multistream.WikipediaShard, out: str) -> str:
    f.seek(stream.start)
    raw = f.read(stream.end - stream.start)
    path = f"{out}/_quarantine/{shard.wiki}-stream-{stream.start:012d}.bz2"
    fs, local = fsspec.core.url_to_fs(path)
    fs.makedirs(os.path.dirname(local), exist_ok=True)
    with fs.open(local, "wb") as q:
        q.write(raw)
    return path


def process_wikipedia_shard(shard: multistream.WikipediaShard, out: str, cfg: dict) -> dict:
    pages = _ShardPages(shard.wiki, cfg)
    quarantined: list[dict] = []
    truncated = False
    if shard.streams:
        with fsspec.open(shard.path, "rb") as f:
            for stream in shard.streams:
                try:
                    data = multistream.read_stream(f, stream)
                except (EOFError, OSError) as e:
                    pages.status["corrupt_stream"] += stream.pages
                    quarantined.append({"path": shard.path, "offset": stream.start, "end": stream.end,
                                        "pages": stream.pages, "error": f"{type(e).__name__}: {e}",
                                        "copy": _quarantine_stream(f, stream, shard, out)})
                    continue
                parsed = 0
                for item in parse_pages(decode_xml_bytes(data)):
                    pages.add(item)
                    parsed += 1
                if parsed < stream.pages:  # (more than the index lists shows as accounted: false)
                    pages.status["missing_from_stream"] += stream.pages - parsed
        pages_in_input = sum(s.pages for s in shard.streams)
    else:
        try:
            for item in iter_pages_from_file(shard.path):
                pages.add(item)
        except (EOFError, OSError) as e:
            truncated = True
            pages.errors.append(
                f"{shard.path}: truncated or corrupt after {sum(pages.status.values())} pages; "
                f"the pages after that point could not be read ({type(e).__name__}: {e})"
            )
        pages_in_input = sum(pages.status.values())
    name = f"shard-{shard.shard_id:05d}.parquet"
    write_table(pa.Table.from_pylist(pages.sentences, schema=schemas.SENTENCES), f"{out}/sentences/{name}")
    write_table(pa.Table.from_pylist(pages.mentions, schema=MENTIONS), f"{out}/_work/mentions/{name}")
    write_table(pa.Table.from_pylist(pages.redirects, schema=REDIRECTS), f"{out}/_work/redirects/{name}")
    return {
        "source": shard.path,
        "wiki": shard.wiki,
        "file": name,
        "compressed_bytes": shard.compressed_bytes,
        "pages_in_input": pages_in_input,
        "truncated": truncated,
        "status": json.dumps(dict(pages.status), sort_keys=True),
        "errors": json.dumps(pages.errors[:50]),
        "quarantined": json.dumps(quarantined),
        "sentences": len(pages.sentences),
        "mentions": len(pages.mentions),
        "extractor_loops": extractor_loops(),
    }


# ---------------------------------------------------------------- Wikidata


def process_wikidata_range(rng: "wikidata.WikidataRange", out: str, cfg: dict) -> dict:
    selection = wikidata.EntitySelection(
        languages=tuple(cfg["languages"]), wikis=tuple(cfg["wikis"]), properties=tuple(cfg["properties"])
    )
    stats = wikidata.WikidataStats()
    rows = wikidata.read_range(rng, selection, stats, prefilter=cfg.get("wikidata_prefilter", False))
    name = f"part-{rng.range_id:05d}.parquet"
    write_table(pa.Table.from_pylist(rows, schema=schemas.WIKIDATA), f"{out}/wikidata/{name}")
    return {"source": rng.path, "file": name, "stats": json.dumps(stats.as_dict(), sort_keys=True)}
