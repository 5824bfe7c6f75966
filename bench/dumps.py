"""The dumps the ingest benches build from the real samples in ``../shared/data/wikipedia_xml_sample/``: a
multistream Wikipedia dump (+ its index) of the enwiki sample's pages repeated with new page ids and suffixed
titles (100 pages per bz2 stream, stream 0 the siteinfo header, the last ``</mediawiki>``), several sizes at
once, each a prefix of the largest; and a Wikidata ``.json.gz`` (gzip members of 2,000 lines, as Wikimedia
writes it) with an item per link target (an enwiki sitelink, an English label, one of 40 P31 types)."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import multiprocessing
import os
import re
import shutil
from pathlib import Path

from bench.harness import REPO

SAMPLES = REPO.parent / "shared" / "data" / "wikipedia_xml_sample"
ENWIKI = SAMPLES / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
BGWIKI = SAMPLES / "bgwiki-latest-pages-articles-shortened.xml.bz2"
TABLES = SAMPLES / "enwiki-table-markup.xml.bz2"
DUMP_NAME = "enwiki-20260101-pages-articles-multistream.xml.bz2"
INDEX_NAME = "enwiki-20260101-pages-articles-multistream-index.txt.bz2"
PAGES_PER_STREAM = 100
ID_STRIDE = 10_000_000  # copy k of page id i gets id k * ID_STRIDE + i


def load_pages(path: Path):
    from ingest.wikipedia import Page, iter_pages_from_file

    return [page for page in iter_pages_from_file(path) if isinstance(page, Page)]


def link_targets(articles) -> list[str]:
    from ingest.wikitext import wikitext_to_text

    return sorted({link.target for page in articles for link in wikitext_to_text(page.wikitext)[1]})


# ---------------------------------------------------------------- the multistream Wikipedia dump

_PAGE = re.compile(r"<page>.*?</page>", re.DOTALL)
_TITLE = re.compile(r"<title>(.*?)</title>")
_PAGE_ID = re.compile(r"(</ns>\s*<id>)(\d+)(</id>)")
_REDIRECT_TITLE = re.compile(r'(<redirect title=")([^"]*)(")')


def sample_parts(path: Path = ENWIKI) -> tuple[str, list[str], str]:
    """(header, page XMLs, footer) of a sample dump."""
    with bz2.open(path, "rt", encoding="utf-8") as f:
        xml = f.read()
    pages = _PAGE.findall(xml)
    header = xml[: xml.index("<page>")]
    return header, pages, "</mediawiki>\n"


def page_copy(page: str, copy: int) -> tuple[str, int, str]:
    """(page XML, page id, escaped title) of copy `copy` of a sample page."""
    if copy:
        page = _TITLE.sub(lambda m: f"<title>{m.group(1)} ({copy})</title>", page, count=1)
        page = _PAGE_ID.sub(lambda m: f"{m.group(1)}{copy * ID_STRIDE + int(m.group(2))}{m.group(3)}", page, count=1)
        page = _REDIRECT_TITLE.sub(lambda m: f"{m.group(1)}{m.group(2)} ({copy}){m.group(3)}", page, count=1)
    return page, int(_PAGE_ID.search(page).group(2)), _TITLE.search(page).group(1)


_SAMPLE_PAGES: list[str] = []
_COPY = [page_copy]


def _init_worker(pages: list[str], copy_of=page_copy) -> None:
    global _SAMPLE_PAGES
    _SAMPLE_PAGES = pages
    _COPY[0] = copy_of


def _compress_stream(args: tuple[int, int]) -> tuple[bytes, list[tuple[int, str]]]:
    """One bz2 stream of `count` pages from position `first` of the repeated sample."""
    count, first = args
    xml, rows = [], []
    for position in range(first, first + count):
        copy, index = divmod(position, len(_SAMPLE_PAGES))
        page, page_id, title = _COPY[0](_SAMPLE_PAGES[index], copy)
        xml.append("  " + page + "\n")
        rows.append((page_id, title))
    return bz2.compress("".join(xml).encode("utf-8"), 9), rows


def copy_bytes(pages: list[str]) -> int:
    """XML bytes of one copy of the sample's pages (later copies' titles are a few bytes longer)."""
    return sum(len(("  " + page + "\n").encode()) for page in pages)


def write_dumps(folders: dict, totals: dict, parts: tuple[str, list[str], str], copy_of=page_copy) -> dict:
    """One multistream dump (+ index) per key of ``folders``, of ``totals[key]`` pages of the repeated sample
    (``copy_of(page, copy)`` makes each copy), each a prefix of the largest, so the streams are compressed
    once: ``{key: {"path", "pages", "streams", "compressed_bytes"}}``."""
    header, pages, footer = parts
    per, largest = PAGES_PER_STREAM, max(totals.values())
    chunks = [(min(per, largest - first), first) for first in range(0, largest, per)]
    tails = {k: (t % per, t - t % per) for k, t in totals.items() if t % per and t != largest}
    files, index_lines, streams = {}, {k: [] for k in folders}, dict.fromkeys(folders, 0)
    for k, folder in folders.items():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        files[k] = open(folder / DUMP_NAME, "wb")
        files[k].write(bz2.compress(header.encode("utf-8"), 9))

    def write(k, compressed, rows):
        offset = files[k].tell()
        files[k].write(compressed)
        index_lines[k].extend(f"{offset}:{page_id}:{title}\n" for page_id, title in rows)
        streams[k] += 1

    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1, _init_worker, (pages, copy_of)) as pool:
        for (count, first), (compressed, rows) in zip(chunks, pool.imap(_compress_stream, chunks, chunksize=4)):
            for k in folders:
                if first + count <= totals[k]:
                    write(k, compressed, rows)
    _init_worker(pages, copy_of)
    for k, tail in tails.items():
        write(k, *_compress_stream(tail))
    written = {}
    for k, folder in folders.items():
        files[k].write(bz2.compress(footer.encode("utf-8"), 9))
        written[k] = {"path": str(folder / DUMP_NAME), "pages": len(index_lines[k]), "streams": streams[k] + 2,
                      "compressed_bytes": files[k].tell()}
        files[k].close()
        with bz2.open(folder / INDEX_NAME, "wt", encoding="utf-8") as index:
            index.writelines(index_lines[k])
    return written


# ---------------------------------------------------------------- the Wikidata dump


def wikidata_lines(targets: list[str], worlds: int = 1, types: int = 40) -> list[str]:
    """An item per target per world: world 0's QIDs from Q1000000, world g's titles suffixed `` (wg)`` and QIDs
    offset by g million; a P31 drawn from ``types`` types by a hash of the target."""
    lines = []
    for world in range(worlds):
        for i, target in enumerate(targets):
            kind = int(hashlib.sha1(target.encode()).hexdigest(), 16) % types
            title = f"{target} (w{world})" if world else target
            lines.append(json.dumps({
                "type": "item", "id": f"Q{1_000_000 * (world + 1) + i}",
                "labels": {"en": {"language": "en", "value": title}},
                "claims": {"P31": [{"mainsnak": {"snaktype": "value", "property": "P31", "datavalue": {
                    "value": {"entity-type": "item", "id": f"Q{900_000 + kind}"}, "type": "wikibase-entityid"}},
                    "rank": "normal"}]},
                "sitelinks": {"enwiki": {"site": "enwiki", "title": title, "badges": []}}}, separators=(",", ":")))
    return lines


def write_wikidata(path: Path, lines: list[str]) -> None:
    """``lines`` as a JSON array in gzip members of 2,000 lines (written whole, then renamed into place)."""
    members = [b"[\n"] + [(",\n".join(lines[i:i + 2000]) + (",\n" if i + 2000 < len(lines) else "\n")).encode()
                           for i in range(0, len(lines), 2000)] + [b"]\n"]
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(b"".join(gzip.compress(m, 6, mtime=0) for m in members))
    tmp.replace(path)
