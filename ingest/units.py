"""Pass 1 of ingest: one task per unit of input, each writing its own files.
The task is a plain Ray task (``ray.remote``, the default) or a Ray Data read
task (``--pass1 data``, ``ingest/pass1.py``); ``ingest/pipeline.py`` runs them.

A unit is a Wikipedia shard (a run of bz2 streams of a multistream dump, about
``shard_bytes`` compressed, or a whole non-indexed file) or a Wikidata range
(line-aligned bytes of a JSON dump). Every output file has a deterministic
name (``shard-NNNNN.parquet``) and is written to a temp name and renamed, so a
retried task overwrites what a killed one left. When a unit is done its result
row is written last, as ``_work/done/<kind>-NNNNN.json``; a rerun of the same
job finds it and skips the unit (the marker holds a fingerprint of the unit, of
the config that shapes its output and of the input file as it was read: size and
modification stamp, ``sets.file_stamp``, and the sha256 of the compressed bytes
the unit reads, ``read_digest``; so a changed config or a re-downloaded dump
redoes the work). A unit whose input ended early (a truncated
file) writes no marker: it is never done, and a rerun reads it again.

A Wikipedia shard writes:
- ``sentences/shard-N.parquet``: the article sentences (the SimCSE set);
- ``_work/mentions/shard-N.parquet``: one row per (sentence, distinct link target);
- ``_work/redirects/shard-N.parquet``: ``(wiki, title, target, page_id)`` of redirect pages;
- ``_work/pages/shard-N.parquet``: every parsed page's id, fate and rows written
  (``ingest/duplicates.py`` removes a page read twice across shards);
- ``_work/intros/shard-N.parquet``: the lead section (the wikitext before the
  first heading, rendered by the same extractor) of every article, as
  ``schemas.INTROS`` rows with ``qid`` null (pass 2, ``ingest/intros.py``,
  joins it to the sitelinks and writes the ``intros`` set).

Every page of the shard ends in exactly one count: ``written`` or a reason
(``redirect``, ``non_article_namespace``, ``no_sentences``, ``parse_error``,
``corrupt_stream``, ``missing_from_stream``, ``corrupt_block``), and, for the intros, in
exactly one intro count (``written``, ``no_intro``, ``parse_error`` or the
page's reason for not being an article). A corrupt or truncated bz2
stream is copied to ``_quarantine/`` with its byte offset and its pages are
counted; the rest of the shard is unaffected. In a single-stream file, a run of
damaged bzip2 blocks is quarantined the same way and reading goes on after it
(``ingest.bz2_blocks``); the pages it cut are ``corrupt_block``, and the pages
wholly inside it cannot be counted, so such a source is never ``accounted``.

A Wikidata range writes ``wikidata/part-N.parquet`` (the ``wikidata`` set)
and counts every entity line as written or skipped with a reason.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import resource
from collections import Counter

import pyarrow as pa

from infra.storage import filesystem, open_file
from ingest import duplicates, multistream, wikidata, wikidata_ranges
from setformat import schemas
from setformat.io import read_json as _read_json
from setformat.io import file_stamp, table_writer, write_bytes, write_json, write_table
from ingest.wikipedia import LostPages, Page, PageError, decode_xml_bytes, iter_pages_from_file, parse_pages
from ingest.wikitext import extractor_loops, normalize_title, split_sentences, wikitext_to_text

MENTIONS = pa.schema(
    [
        pa.field("wiki", pa.string()),
        pa.field("title", pa.string()),  # the link target as written, normalised (redirects not yet applied)
        pa.field("page_id", pa.int64()),
        pa.field("sentence_index", pa.int32()),
    ]
)
REDIRECTS = pa.schema([pa.field("wiki", pa.string()), pa.field("title", pa.string()), pa.field("target", pa.string()),
                       pa.field("page_id", pa.int64())])  # the redirect page's own id (ingest.duplicates)

# config fields that shape pass-1 output; a change invalidates finished units
UNIT_CONFIG_FIELDS = ("min_sentence_chars", "max_sentence_chars", "languages", "wikis", "properties",
                      "wikidata_prefilter")


# the files a Wikipedia shard writes: a shard finished by code that wrote fewer
# (before ``intros``) has another fingerprint, so a resumed job redoes it
WIKIPEDIA_OUTPUTS = ("sentences", "mentions", "redirects", "intros", "pages")


def fingerprint(spec: str, cfg: dict, kind: str | None = None, source: tuple | None = None) -> str:
    shaping = {k: cfg.get(k) for k in UNIT_CONFIG_FIELDS}
    parts = [schemas.SCHEMA_VERSION, spec, shaping] + ([list(WIKIPEDIA_OUTPUTS)] if kind == "wikipedia" else [])
    if source is not None:  # the input file's (size, modification stamp): sets.file_stamp
        parts.append(list(source))
    payload = json.dumps(parts, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def language_of(wiki: str) -> str:
    """``enwiki`` -> ``en``, ``zh_yuewiki`` -> ``zh_yue``; the sentence splitter's language."""
    return wiki[: -len("wiki")] if wiki.endswith("wiki") else wiki


# ---------------------------------------------------------------- the task


def compressed_spans(kind: str, spec: str) -> tuple[str, list[tuple[int, int]]]:
    """(file, byte spans) a unit reads of its input: a multistream shard's streams, a Wikidata range's
    bytes (for an indexed ``.bz2``, its blocks'), or the whole file."""
    unit = json.loads(spec)
    path = unit["path"]
    if kind == "wikipedia":
        return path, [(start, end) for start, end, _ in unit["streams"]] or [(0, file_stamp(path)[0])]
    rng = wikidata.WikidataRange.from_json(spec)
    if rng.compression == "bz2":
        if rng.index_path is None:
            return path, [(0, file_stamp(path)[0])]
        _, offsets = wikidata_ranges.read_bz2_index(rng.index_path)
        blocks = sorted(offsets.items(), key=lambda kv: kv[1])  # (compressed bit, uncompressed byte)
        first = max((bit for bit, byte in blocks if byte <= rng.start), default=0)
        after = min((bit for bit, byte in blocks if byte >= rng.end), default=None)
        return path, [(first // 8, (after + 7) // 8 if after is not None else file_stamp(path)[0])]
    return path, [(rng.start, min(rng.end, file_stamp(path)[0]))]


def read_digest(kind: str, spec: str) -> str:
    """sha256 of the compressed bytes the unit reads: a finished unit is redone when they change, even
    where the file's size and modification stamp did not (a copy that kept the stamp)."""
    path, spans = compressed_spans(kind, spec)
    digest = hashlib.sha256()
    with open_file(path, "rb") as f:
        for start, end in spans:
            f.seek(start)
            left = end - start
            while left > 0 and (chunk := f.read(min(left, 8 << 20))):
                digest.update(chunk)
                left -= len(chunk)
    return digest.hexdigest()


def process_unit(row: dict, out: str, cfg: dict) -> dict:
    """One pass-1 task (a plain Ray task, or the body of a Ray Data read task): run one
    unit unless its done-marker says it ran. Returns ``{kind, unit_id, result (JSON),
    peak_rss_mb, resumed}``."""
    kind, unit_id, spec = row["kind"], row["unit_id"], row["spec"]
    marker = f"{out}/_work/done/{kind}-{unit_id:05d}.json"
    source = json.loads(spec).get("path")
    stamp = fingerprint(spec, cfg, kind, file_stamp(source) if source else None)
    read_sha256 = read_digest(kind, spec)
    if cfg.get("resume", True):
        done = _read_json(marker)
        if done is not None and done.get("fingerprint") == stamp and done.get("read_sha256") == read_sha256:
            return {"kind": kind, "unit_id": unit_id, "result": json.dumps(done["result"]),
                    "peak_rss_mb": 0.0, "resumed": True}
    if kind == "wikipedia":
        result = process_wikipedia_shard(multistream.WikipediaShard.from_json(spec), out, cfg)
    else:
        result = process_wikidata_range(wikidata.WikidataRange.from_json(spec), out, cfg)
    if not result.get("truncated"):  # a unit cut short is never done: a rerun reads it again
        write_json({"fingerprint": stamp, "read_sha256": read_sha256, "result": result}, marker)
    # peak memory belongs to this run's worker, not to the unit's output
    return {"kind": kind, "unit_id": unit_id, "result": json.dumps(result),
            "peak_rss_mb": _peak_rss_mb(), "resumed": False}


# ---------------------------------------------------------------- Wikipedia

# a section heading: a line that starts and ends with "=" (``== History ==``)
_HEADING = re.compile(r"^=[^\n]*=[ \t]*$", re.M)


def lead_wikitext(wikitext: str) -> str:
    """The lead section: the wikitext before the first heading (all of it when there is none)."""
    heading = _HEADING.search(wikitext)
    return wikitext[: heading.start()] if heading else wikitext


class _ShardPages:
    """One shard's rows and the fate of every page."""

    def __init__(self, wiki: str, cfg: dict):
        self.wiki = wiki
        self.language = language_of(wiki)
        self.cfg = cfg
        self.sentences: list[dict] = []
        self.mentions: list[dict] = []
        self.redirects: list[dict] = []
        self.intros: list[dict] = []
        self.status: Counter = Counter()
        self.intro_status: Counter = Counter()  # every page once: written, no_intro, or why not
        self.errors: list[str] = []
        self.seen: set[int] = set()
        self.pages: list[dict] = []  # every parsed page in order, with the rows it wrote (ingest.duplicates)

    def add(self, item: Page | PageError) -> None:
        if isinstance(item, PageError):
            self.status["parse_error"] += 1
            self.intro_status["parse_error"] += 1
            self.errors.append(f"page {item.page_id} {item.title!r}: {item.reason}")
            return
        rows_before = (len(self.sentences), len(self.mentions), len(self.intros), len(self.redirects))
        if item.page_id in self.seen:
            status = intro = duplicates.DUPLICATE  # written once, at its first occurrence
        elif item.ns != 0:
            status = intro = "non_article_namespace"
        elif item.redirect:
            status = intro = "redirect"
            self.redirects.append(
                {"wiki": self.wiki, "title": normalize_title(item.title), "target": normalize_title(item.redirect),
                 "page_id": item.page_id}
            )
        else:
            intro = self._add_intro(item)
            status = self._add_article(item)
        self.seen.add(item.page_id)
        self.status[status] += 1
        self.intro_status[intro] += 1
        rows = (len(self.sentences), len(self.mentions), len(self.intros), len(self.redirects))
        self.pages.append({"wiki": self.wiki, "page_id": item.page_id, "status": status, "intro_status": intro,
                           **{f"{name}_rows": after - before for name, after, before in
                              zip(duplicates.PAGE_ROW_SETS, rows, rows_before)}})

    def _add_intro(self, page: Page) -> str:
        try:
            text, _ = wikitext_to_text(lead_wikitext(page.wikitext), language=self.language)
        except Exception:  # counted; the page's own parse error (if any) is reported by _add_article
            return "parse_error"
        text = text.strip()
        if not text:
            return "no_intro"
        self.intros.append({"wiki": self.wiki, "page_id": page.page_id, "title": normalize_title(page.title),
                            "qid": None, "text": text})
        return "written"

    def _add_article(self, page: Page) -> str:
        try:
            text, links = wikitext_to_text(page.wikitext, language=self.language)
            sentences = split_sentences(
                text, links, min_chars=self.cfg["min_sentence_chars"], max_chars=self.cfg["max_sentence_chars"],
                language=self.language,
            )
        except Exception as e:  # one bad page must not lose its shard
            self.errors.append(f"page {page.page_id} {page.title!r}: {type(e).__name__}: {e}")
            return "parse_error"
        if not sentences:
            return "no_sentences"
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
        return "written"


def _quarantine(f, start: int, end: int, path: str) -> str:
    f.seek(start)
    write_bytes(f.read(end - start), path)
    return path


def _read_indexed_streams(shard: multistream.WikipediaShard, pages: _ShardPages, out: str,
                          quarantined: list[dict]) -> int:
    """The shard's bz2 streams, as the multistream index lists them: a stream that does not decode is
    quarantined and its pages counted; returns the pages the index lists."""
    with open_file(shard.path, "rb") as f:
        for stream in shard.streams:
            try:
                data = multistream.read_stream(f, stream)
            except (EOFError, OSError) as e:
                pages.status["corrupt_stream"] += stream.pages
                copy = _quarantine(f, stream.start, stream.end,
                                   f"{out}/_quarantine/{shard.wiki}-stream-{stream.start:012d}.bz2")
                quarantined.append({"path": shard.path, "offset": stream.start, "end": stream.end,
                                    "pages": stream.pages, "error": f"{type(e).__name__}: {e}", "copy": copy})
                continue
            parsed = 0
            for item in parse_pages(decode_xml_bytes(data)):
                pages.add(item)
                parsed += 1
            if parsed < stream.pages:  # (more than the index lists shows as accounted: false)
                pages.status["missing_from_stream"] += stream.pages - parsed
    return sum(s.pages for s in shard.streams)


def _read_whole_file(shard: multistream.WikipediaShard, pages: _ShardPages, out: str,
                     quarantined: list[dict]) -> tuple[int, bool, bool]:
    """A dump without an index, read through: damaged bzip2 blocks are quarantined and read on after; returns
    (pages seen: parsed or cut by damaged blocks, truncated, damaged)."""
    truncated = damaged = False
    try:
        for item in iter_pages_from_file(shard.path):
            if not isinstance(item, LostPages):
                pages.add(item)
                continue
            gap = item.gap  # damaged bzip2 blocks: read on after them, count what they cut
            damaged, truncated = True, truncated or gap.at_end
            pages.status["corrupt_block"] += item.pages
            with open_file(shard.path, "rb") as f:
                copy = _quarantine(f, gap.start, gap.end, f"{out}/_quarantine/{shard.wiki}-blocks-{gap.start:012d}.bz2")
            quarantined.append({"path": shard.path, "offset": gap.start, "end": gap.end, "pages": item.pages,
                                "error": gap.error, "copy": copy, "truncated": gap.at_end})
            pages.errors.append(
                f"{shard.path}: bytes {gap.start}-{gap.end} cannot be decoded ({gap.error}); "
                + ("the file ends there (truncated); " if gap.at_end else "read on after them; ")
                + f"{item.pages} page(s) seen cut by them, the pages wholly inside them unknown")
    except (EOFError, OSError) as e:
        truncated = damaged = True
        pages.errors.append(
            f"{shard.path}: truncated or corrupt after {sum(pages.status.values())} pages; "
            f"the pages after that point could not be read ({type(e).__name__}: {e})"
        )
    return sum(pages.status.values()), truncated, damaged


def process_wikipedia_shard(shard: multistream.WikipediaShard, out: str, cfg: dict) -> dict:
    pages = _ShardPages(shard.wiki, cfg)
    quarantined: list[dict] = []
    if shard.streams:
        truncated = damaged = False
        pages_in_input = _read_indexed_streams(shard, pages, out, quarantined)
    else:
        pages_in_input, truncated, damaged = _read_whole_file(shard, pages, out, quarantined)
    name = f"shard-{shard.shard_id:05d}.parquet"
    write_table(pa.Table.from_pylist(pages.sentences, schema=schemas.SENTENCES), f"{out}/sentences/{name}")
    write_table(pa.Table.from_pylist(pages.mentions, schema=MENTIONS), f"{out}/_work/mentions/{name}")
    write_table(pa.Table.from_pylist(pages.redirects, schema=REDIRECTS), f"{out}/_work/redirects/{name}")
    write_table(pa.Table.from_pylist(pages.intros, schema=schemas.INTROS), f"{out}/_work/intros/{name}")
    write_table(pa.Table.from_pylist(pages.pages, schema=duplicates.PAGES), f"{out}/_work/pages/{name}")
    for reason in ("corrupt_stream", "missing_from_stream", "corrupt_block"):  # pages no parser saw
        if pages.status[reason]:
            pages.intro_status[reason] = pages.status[reason]
    return {
        "source": shard.path,
        "wiki": shard.wiki,
        "file": name,
        "compressed_bytes": shard.compressed_bytes,
        "pages_in_input": pages_in_input,
        "truncated": truncated,
        "damaged": damaged,  # blocks lost: pages wholly inside them cannot be counted
        "status": json.dumps(dict(pages.status), sort_keys=True),
        "errors": json.dumps(pages.errors[:50]),
        "quarantined": json.dumps(quarantined),
        "sentences": len(pages.sentences),
        "mentions": len(pages.mentions),
        "intros": len(pages.intros),
        "intro_status": json.dumps(dict(pages.intro_status), sort_keys=True),
        "extractor_loops": extractor_loops(),
    }


# ---------------------------------------------------------------- Wikidata


WIKIDATA_ROWS = 32_768


def process_wikidata_range(rng: "wikidata.WikidataRange", out: str, cfg: dict) -> dict:
    selection = wikidata.EntitySelection(
        languages=tuple(cfg["languages"]), wikis=tuple(cfg["wikis"]), properties=tuple(cfg["properties"])
    )
    stats = wikidata.WikidataStats()
    rows = wikidata.iter_range(rng, selection, stats, prefilter=cfg.get("wikidata_prefilter", False))
    name = f"part-{rng.range_id:05d}.parquet"
    # a row group per WIKIDATA_ROWS items: a task holds one group's rows, whatever the range (a .json.gz
    # member is one range however large it is)
    with table_writer(f"{out}/wikidata/{name}", schemas.WIKIDATA) as writer:
        batch = list(itertools.islice(rows, WIKIDATA_ROWS))
        writer.write_table(pa.Table.from_pylist(batch, schema=schemas.WIKIDATA))  # written even when empty
        while batch := list(itertools.islice(rows, WIKIDATA_ROWS)):
            writer.write_table(pa.Table.from_pylist(batch, schema=schemas.WIKIDATA))
    return {"source": rng.path, "file": name, "stats": json.dumps(stats.as_dict(), sort_keys=True)}


# the folders each kind of unit writes one file to, and that file's name prefix
UNIT_FILES = {"wikipedia": (("sentences", "_work/mentions", "_work/redirects", "_work/intros", "_work/pages"), "shard"),
              "wikidata": (("wikidata",), "part")}


def remove_stale_unit_files(out: str, units: list[dict], kinds: tuple[str, ...]) -> int:
    """Remove the pass-1 files (and done-markers) in ``out`` of units of ``kinds`` that this run's plan lacks:
    what an earlier run into the same ``--out`` with other inputs or shard sizes left, which would otherwise
    be read as part of this run's sets (rows twice). Returns how many files were removed."""
    fs, root = filesystem(out)
    root = root.rstrip("/")
    planned = {(u["kind"], int(u["unit_id"])) for u in units}
    stale = []
    for kind in kinds:
        folders, prefix = UNIT_FILES[kind]
        for folder in folders:
            for path in fs.ls(f"{root}/{folder}", detail=False) if fs.isdir(f"{root}/{folder}") else []:
                found = re.fullmatch(rf"{prefix}-(\d+)\.parquet", path.rsplit("/", 1)[-1])
                if found and (kind, int(found.group(1))) not in planned:
                    stale.append(path)
        markers = f"{root}/_work/done"
        for path in fs.ls(markers, detail=False) if fs.isdir(markers) else []:
            found = re.fullmatch(rf"{kind}-(\d+)\.json", path.rsplit("/", 1)[-1])
            if found and (kind, int(found.group(1))) not in planned:
                stale.append(path)
    from infra.storage import is_uri
    from setformat.integrity import remove_in_out

    for path in stale:  # structcse's own files only (infra.owned.remove_owned), in the job's claimed --out
        remove_in_out(out, fs.unstrip_protocol(path) if is_uri(out) else path, "a pass-1 file of an earlier run",
                      "python -m ingest")
    return len(stale)
