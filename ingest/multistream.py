"""Wikipedia dump files as units of parallel work.

A ``pages-articles-multistream.xml.bz2`` is a concatenation of bz2 streams
(stream 0: the ``<siteinfo>`` header; then up to 100 ``<page>`` per stream;
the last: ``</mediawiki>``). Its companion ``-index.txt.bz2`` has one line
``offset:page_id:title`` per page, every page of a stream sharing the
stream's byte offset. Each stream decompresses alone, so a shard is a list of
byte ranges any worker can read with a seek.

Dumps without an index (plain ``.xml`` or ``.xml.bz2``) are one shard each.
"""

from __future__ import annotations

import bz2
import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from infra.storage import filesystem, open_file

INDEX_SUFFIX = "-index.txt.bz2"


class DumpFormatError(ValueError):
    """A dump or index file is not in the expected format."""


@dataclass(frozen=True)
class StreamRange:
    start: int
    end: int
    pages: int  # pages the index lists in this stream
    page_ids: tuple[int, ...] = ()  # filled by stream_ranges(); the planner keeps counts only


@dataclass
class WikipediaShard:
    """One unit of work: a whole file, or a run of bz2 streams of a multistream dump."""

    shard_id: int
    path: str
    wiki: str
    streams: list[StreamRange] = field(default_factory=list)  # empty: read the whole file

    @property
    def compressed_bytes(self) -> int:
        return sum(s.end - s.start for s in self.streams)

    def to_json(self) -> str:
        return json.dumps(
            {"shard_id": self.shard_id, "path": self.path, "wiki": self.wiki,
             "streams": [[s.start, s.end, s.pages] for s in self.streams]}
        )

    @classmethod
    def from_json(cls, text: str) -> "WikipediaShard":
        data = json.loads(text)
        streams = [StreamRange(a, b, pages) for a, b, pages in data["streams"]]
        return cls(data["shard_id"], data["path"], data["wiki"], streams)


_DBNAME = re.compile(rb"<dbname>([^<]+)</dbname>")
_WIKI_IN_NAME = re.compile(r"^([a-z0-9_]+wiki(?:books|news|quote|source|versity|voyage)?)-")


def wiki_of(path: str, header: bytes | None = None) -> str | None:
    """The wiki id (``enwiki``, ``dewiki``…) of a dump: the ``<dbname>`` of its
    header, else the file-name prefix of Wikimedia's naming scheme."""
    if header:
        match = _DBNAME.search(header)
        if match:
            return match.group(1).decode("utf-8").strip()
    match = _WIKI_IN_NAME.match(Path(path).name)
    return match.group(1) if match else None


def _read_header(path: str, first_stream_offset: int | None) -> bytes:
    """The ``<siteinfo>`` header: stream 0 of a multistream dump, or the first
    64 KiB of a plain dump."""
    try:
        with open_file(path, "rb") as f:
            if first_stream_offset is not None:
                return bz2.BZ2Decompressor().decompress(f.read(first_stream_offset))
            head = f.read(4)
            f.seek(0)
            if head.startswith(b"BZh"):
                return bz2.BZ2Decompressor().decompress(f.read(1 << 16))[: 1 << 16]
            return f.read(1 << 16)
    except (OSError, EOFError, ValueError):
        return b""


_DTD_MARKERS = (b"<!DOCTYPE", b"<!ENTITY")


def reject_dtd(path: str, header: bytes) -> bytes:
    """``header`` unless it declares a DTD or entities: a MediaWiki export has none, and a parser
    that expanded them could be made to read local files or blow up (XXE, billion laughs)."""
    for marker in _DTD_MARKERS:
        at = header.find(marker)
        if at < 0 and header[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 with a BOM
            at = header.find(marker.decode().encode("utf-16-le" if header[:2] == b"\xff\xfe" else "utf-16-be"))
        if at >= 0:
            raise DumpFormatError(
                f"{path}: declares {marker.decode()} at byte {at} of its header; MediaWiki dumps have no DTD or "
                "entity declarations, so this file is refused rather than expanded")
    return header


def find_index(dump_path: str) -> str | None:
    """The ``…-multistream-index.txt.bz2`` beside a ``…-multistream.xml.bz2``, if present."""
    if not dump_path.endswith("-multistream.xml.bz2"):
        return None
    candidate = dump_path[: -len(".xml.bz2")] + INDEX_SUFFIX
    fs, local = filesystem(candidate)
    return candidate if fs.exists(local) else None


def _index_fields(index_path: str):
    """``(offset, page_id, raw title bytes)`` of every index line, in file order;
    a malformed line is a DumpFormatError naming the file and line."""
    with open_file(index_path, "rb", compression="infer") as f:
        for line_number, raw in enumerate(f, start=1):
            line = raw.rstrip(b"\n")
            if not line:
                continue
            parts = line.split(b":", 2)
            if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
                shown = line.decode("utf-8", errors="replace")[:80]
                raise DumpFormatError(f"{index_path}:{line_number}: expected 'offset:page_id:title', got {shown!r}")
            yield int(parts[0]), int(parts[1]), parts[2]


def read_index(index_path: str) -> list[tuple[int, int, str]]:
    """Parse an index file into ``(offset, page_id, title)`` rows, in file order."""
    return [(offset, page_id, html.unescape(title.decode("utf-8")))
            for offset, page_id, title in _index_fields(index_path)]


def _ranges(pages_by_offset: dict[int, int | list[int]], file_size: int) -> list[StreamRange]:
    """Each distinct offset up to the next one, the last up to the end of the
    file (the footer stream is never decoded, because a decompressor stops at
    the end of the first stream). Values: a page count, or the page ids."""
    offsets = sorted(pages_by_offset)
    ends = offsets[1:] + [file_size]
    for a, b in zip(offsets, ends):
        if b <= a:
            raise DumpFormatError(f"index offsets not increasing at byte {a}")
    ranges = []
    for a, b in zip(offsets, ends):
        pages = pages_by_offset[a]
        ranges.append(StreamRange(a, b, len(pages), tuple(pages)) if isinstance(pages, list)
                      else StreamRange(a, b, pages))
    return ranges


def stream_ranges(index_rows: list[tuple[int, int, str]], file_size: int) -> list[StreamRange]:
    """Byte ranges of the page streams, with the page ids of each."""
    pages_by_offset: dict[int, list[int]] = {}
    for offset, page_id, _ in index_rows:
        pages_by_offset.setdefault(offset, []).append(page_id)
    return _ranges(pages_by_offset, file_size)


def count_index_streams(index_path: str, file_size: int) -> list[StreamRange]:
    """``stream_ranges`` without holding the index: one pass that keeps a page
    count per stream (enwiki's index has ~23 M lines; the planner needs ~230 k
    streams, not 23 M ids and titles)."""
    counts: dict[int, int] = {}
    for offset, _, _ in _index_fields(index_path):
        counts[offset] = counts.get(offset, 0) + 1
    return _ranges(counts, file_size)


def plan_shards(dump_paths: list[str], shard_bytes: int = 32 << 20, first_shard_id: int = 0,
                default_wiki: str = "enwiki") -> list[WikipediaShard]:
    """Split dumps into shards of about ``shard_bytes`` compressed bytes: runs
    of consecutive bz2 streams for an indexed multistream dump (every stream
    in exactly one shard), one shard per file otherwise. Shard ids run over
    all files in order, so the plan (and every output name) is a function of
    the inputs alone."""
    shards: list[WikipediaShard] = []
    shard_id = first_shard_id
    for path in dump_paths:
        index = find_index(path)
        if index is None:
            wiki = wiki_of(path, reject_dtd(path, _read_header(path, None))) or default_wiki
            shards.append(WikipediaShard(shard_id, path, wiki))
            shard_id += 1
            continue
        fs, local = filesystem(path)
        ranges = count_index_streams(index, fs.size(local))
        wiki = wiki_of(path, reject_dtd(path, _read_header(path, ranges[0].start if ranges else None))) or default_wiki
        group: list[StreamRange] = []
        group_bytes = 0
        for stream in ranges:
            group.append(stream)
            group_bytes += stream.end - stream.start
            if group_bytes >= shard_bytes:
                shards.append(WikipediaShard(shard_id, path, wiki, group))
                shard_id, group, group_bytes = shard_id + 1, [], 0
        if group:
            shards.append(WikipediaShard(shard_id, path, wiki, group))
            shard_id += 1
    return shards


def read_stream(f, stream: StreamRange) -> bytes:
    """Decompress one bz2 stream from an open file. Raises EOFError when the
    stream is truncated or OSError when it is corrupt."""
    f.seek(stream.start)
    decompressor = bz2.BZ2Decompressor()
    data = decompressor.decompress(f.read(stream.end - stream.start))
    if not decompressor.eof:
        raise EOFError(f"bz2 stream at byte {stream.start} ends before its end-of-stream marker")
    return data


def dump_files_in(path: str) -> list[str]:
    """A dump file as given, or the dump files of a folder (index files excluded)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(
            str(f) for f in p.iterdir()
            if f.is_file() and not f.name.endswith(INDEX_SUFFIX)
            and (f.name.endswith((".xml", ".bz2", ".xml.gz")))
        )
        if not files:
            raise DumpFormatError(f"{path}: no .xml or .bz2 dump files in this folder")
        return files
    fs, local = filesystem(path)
    if not fs.exists(local):
        raise FileNotFoundError(f"Wikipedia dump not found: {path}")
    return [path]
