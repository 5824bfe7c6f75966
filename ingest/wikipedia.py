"""MediaWiki XML export parsing: bytes → text, `<page>` elements → `Page` records.

`parse_pages` takes either a whole ``<mediawiki>`` document (export-0.10/0.11,
any xmlns, with ``<siteinfo>``) or a root-less run of ``<page>`` elements, such
as one bz2 stream of a multistream dump. It strips the ``<?xml?>`` declaration
and the ``<mediawiki>`` tags, wraps the rest in ``<pages>…</pages>`` and parses
it with `xml.etree.ElementTree.XMLPullParser`, yielding pages as they close.

A strict XML parser cannot skip one bad page, so when the fragment fails to
parse, the pages not yet yielded are cut out of it with a regex on ``<page>``
boundaries and parsed one by one; a page that still fails gives a `PageError`
(with its id and title found by regex when possible) instead of an exception.

`iter_pages_from_file` streams a plain ``.xml`` or a single- or multi-stream
``.xml.bz2`` file, UTF-8 or UTF-16 with a BOM: it decodes chunks incrementally,
cuts the text after the last complete ``</page>`` into batches of about
`BATCH_CHARS` characters and hands each batch to `parse_pages`. ``</page>``
cannot occur inside XML text content (``<`` is always escaped there), so the
cut never splits a well-formed page. A damaged ``.bz2`` is read on block by
block after the fault (`ingest.bz2_blocks`); each run of lost blocks yields a
`LostPages` with its byte range and the pages it cut.
"""

from __future__ import annotations

import bz2
import codecs
import html
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ingest import bz2_blocks
from ingest.wikitext import normalize_title


@dataclass(frozen=True)
class Page:
    page_id: int
    title: str
    ns: int
    redirect: str | None
    wikitext: str


@dataclass(frozen=True)
class PageError:
    page_id: int | None
    title: str | None
    reason: str


# ---------------------------------------------------------------- bytes → text

_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def detect_encoding(head: bytes) -> tuple[str, int]:
    """(codec name, BOM length) from the first bytes of an XML document."""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return ("utf-8" if encoding == "utf-8-sig" else encoding), len(bom)
    if head.startswith(b"<\x00"):
        return "utf-16-le", 0
    if head.startswith(b"\x00<"):
        return "utf-16-be", 0
    return "utf-8", 0


def decode_xml_bytes(data: bytes) -> str:
    """Decode UTF-8 (with or without BOM) or UTF-16 LE/BE (BOM or leading "<")."""
    encoding, bom_length = detect_encoding(data[:4])
    return data[bom_length:].decode(encoding, errors="replace")


# ---------------------------------------------------------------- fragment → pages

_DOCUMENT_HEAD = re.compile(r"\A\ufeff?\s*(?:<\?xml[^>]*\?>\s*)?(?:<mediawiki\b[^>]*>)?")
_DOCUMENT_TAIL = re.compile(r"</mediawiki\s*>\s*\Z")
_PAGE_START = re.compile(r"<page\b[^>]*>")
_PAGE_END = "</page>"
_FEED_CHARS = 1 << 20


def parse_pages(xml_fragment: str) -> Iterator[Page | PageError]:
    """Yield a `Page` (or a `PageError`) for every `<page>` element in the text."""
    start = _DOCUMENT_HEAD.match(xml_fragment).end()
    tail = _DOCUMENT_TAIL.search(xml_fragment, start)
    end = tail.start() if tail else len(xml_fragment)
    yielded = 0
    try:
        for page in _pull_parse(xml_fragment, start, end):
            yielded += 1
            yield page
    except ET.ParseError as error:
        yield from _parse_pages_one_by_one(xml_fragment[start:end], skip=yielded, error=error)


def _pull_parse(text: str, start: int, end: int) -> Iterator[Page | PageError]:
    parser = ET.XMLPullParser(events=("end",))
    parser.feed("<pages>")
    for chunk_start in range(start, end, _FEED_CHARS):
        parser.feed(text[chunk_start : min(chunk_start + _FEED_CHARS, end)])
        yield from _pages_from_events(parser)
    parser.feed("</pages>")
    parser.close()
    yield from _pages_from_events(parser)


def _pages_from_events(parser: ET.XMLPullParser) -> Iterator[Page | PageError]:
    for _, element in parser.read_events():
        element.tag = _local_name(element.tag)
        if element.tag == "page":
            yield _page_from_element(element)
            element.clear()


def _local_name(tag: str) -> str:
    return tag.rpartition("}")[2] if tag[:1] == "{" else tag


def _page_from_element(page: ET.Element) -> Page | PageError:
    title = page.findtext("title")
    raw_id = page.findtext("id")
    try:
        page_id = int(raw_id)
        ns = int(page.findtext("ns", "0"))
    except (TypeError, ValueError):
        return PageError(_int_or_none(raw_id), title, f"bad <id> {raw_id!r} or <ns>")
    if title is None:
        return PageError(page_id, None, "no <title>")
    revisions = page.findall("revision")
    wikitext = (revisions[-1].findtext("text") or "") if revisions else ""
    redirect = page.find("redirect")
    target = redirect.get("title") if redirect is not None else _redirect_in_wikitext(wikitext)
    return Page(page_id, title, ns, normalize_title(target) if target else None, wikitext)


_REDIRECT_WIKITEXT = re.compile(r"\s*#\s*REDIRECT\s*:?\s*\[\[([^\[\]|]+)", re.I)


def _redirect_in_wikitext(wikitext: str) -> str | None:
    """Old dumps have no <redirect> element; their text starts with #REDIRECT [[X]]."""
    match = _REDIRECT_WIKITEXT.match(wikitext)
    return match.group(1) if match else None


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- fallback for bad XML

_ID_IN_PAGE = re.compile(r"<id>\s*(\d+)\s*</id>")
_TITLE_IN_PAGE = re.compile(r"<title>(.*?)</title>", re.S)


def _parse_pages_one_by_one(text: str, skip: int, error: ET.ParseError) -> Iterator[Page | PageError]:
    """Parse each `<page>` alone, skipping the `skip` first ones (already yielded)."""
    segments = _page_segments(text)
    if not segments and skip == 0:
        yield PageError(None, None, f"no <page> in unparsable fragment: {error}")
    for segment in segments[skip:]:
        try:
            pages = list(_pull_parse(segment, 0, len(segment)))
        except ET.ParseError as page_error:
            yield _page_error_from_text(segment, str(page_error))
            continue
        if len(pages) == 1:
            yield pages[0]
        else:
            yield _page_error_from_text(segment, f"expected 1 <page>, parsed {len(pages)}")


def _page_segments(text: str) -> list[str]:
    """Text of each `<page>`: from its start tag to the last `</page>` before the next one."""
    starts = [match.start() for match in _PAGE_START.finditer(text)]
    segments = []
    for index, start in enumerate(starts):
        stop = starts[index + 1] if index + 1 < len(starts) else len(text)
        close = text.rfind(_PAGE_END, start, stop)
        segments.append(text[start : close + len(_PAGE_END)] if close >= 0 else text[start:stop])
    return segments


def _page_error_from_text(segment: str, reason: str) -> PageError:
    page_id = _ID_IN_PAGE.search(segment)
    title = _TITLE_IN_PAGE.search(segment)
    return PageError(
        int(page_id.group(1)) if page_id else None,
        html.unescape(title.group(1)) if title else None,
        reason,
    )


# ---------------------------------------------------------------- files

BATCH_CHARS = 8 << 20
_READ_BYTES = 1 << 20


@dataclass(frozen=True)
class LostPages:
    """A run of damaged bzip2 blocks (`gap`) and the pages seen cut by it: a ``<page>`` opened before it
    and never closed, or a ``</page>`` after it whose start is lost (at most one per gap: both may be
    the same page). Pages wholly inside the damage are not seen by anyone and cannot be counted."""

    pages: int
    gap: bz2_blocks.Gap


def iter_pages_from_file(path: str | Path) -> Iterator[Page | PageError | LostPages]:
    """Stream the pages of a `.xml` or (multistream) `.xml.bz2` dump file. When a ``.bz2`` file's
    decoder fails (a truncated download, a corrupt block), the pages decoded before the fault are
    parsed and reading goes on block by block (`ingest.bz2_blocks`): a `LostPages` marks each run of
    blocks that could not be decoded."""
    path = Path(path)
    opener = bz2.open if path.suffix == ".bz2" else open
    with opener(path, "rb") as raw:
        yield from _pages_from_text_chunks(_decoded_chunks(_byte_chunks(raw, path)))


def _byte_chunks(raw, path: Path) -> Iterator[bytes | bz2_blocks.Gap]:
    # read1: what one read of the decompressor gives; read() would gather _READ_BYTES first and lose
    # them all when the file ends early or a block is corrupt
    read = getattr(raw, "read1", raw.read)
    consumed = 0
    try:
        while data := read(_READ_BYTES):
            consumed += len(data)
            yield data
    except (EOFError, OSError):
        if path.suffix != ".bz2":
            raise
        yield from bz2_blocks.recover(str(path), skip=consumed)


def _decoded_chunks(chunks: Iterable[bytes | bz2_blocks.Gap]) -> Iterator[str | bz2_blocks.Gap]:
    decoder, first = None, True
    for chunk in chunks:
        if isinstance(chunk, bz2_blocks.Gap):
            if decoder is not None:
                yield decoder.decode(b"", final=True)
                decoder = None
            first = False
            yield chunk
            continue
        if decoder is None:
            encoding, bom_length = detect_encoding(chunk[:4])
            decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
            chunk = chunk[bom_length:] if first else chunk
            first = False
        yield decoder.decode(chunk)
    if decoder is not None:
        yield decoder.decode(b"", final=True)


def _pages_from_text_chunks(chunks: Iterable[str | bz2_blocks.Gap]) -> Iterator[Page | PageError | LostPages]:
    """Pages parsed in batches of about ``BATCH_CHARS``. At a gap the whole pages before it are parsed,
    the text after it is skipped up to the next ``<page>``, and a `LostPages` counts the pages cut."""
    pending: list[str] = []
    pending_chars = 0
    gap: bz2_blocks.Gap | None = None  # skipping the text after this gap, up to the next <page>
    cut_before = 0  # pages the gap cut that began before it
    for chunk in chunks:
        if isinstance(chunk, bz2_blocks.Gap):
            text = "".join(pending)
            if gap is not None:
                yield LostPages(max(cut_before, int(_PAGE_END in text)), gap)
                cut_before = 0
            else:
                cut = text.rfind(_PAGE_END)
                if cut >= 0:
                    yield from parse_pages(text[: cut + len(_PAGE_END)])
                cut_before = int(_PAGE_START.search(text, cut + len(_PAGE_END) if cut >= 0 else 0) is not None)
            gap, pending, pending_chars = chunk, [], 0
            continue
        pending.append(chunk)
        pending_chars += len(chunk)
        if gap is not None:
            text = "".join(pending)
            start = _PAGE_START.search(text)
            if start is None:
                pending = [text]
                continue
            yield LostPages(max(cut_before, int(_PAGE_END in text[: start.start()])), gap)
            gap, cut_before = None, 0
            pending, pending_chars = [text[start.start():]], len(text) - start.start()
        if pending_chars < BATCH_CHARS:
            continue
        text = "".join(pending)
        cut = text.rfind(_PAGE_END)
        if cut < 0:
            pending = [text]
            continue
        cut += len(_PAGE_END)
        yield from parse_pages(text[:cut])
        pending, pending_chars = [text[cut:]], len(text) - cut
    if gap is not None:
        yield LostPages(max(cut_before, int(_PAGE_END in "".join(pending))), gap)
    else:
        yield from parse_pages("".join(pending))
