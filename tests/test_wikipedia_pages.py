"""Tests of ingest.wikipedia: decoding, page XML parsing, bad pages, dump files."""

from __future__ import annotations

import bz2
import codecs
import re

import pytest

import ingest.wikipedia as wikipedia
from ingest.wikipedia import Page, PageError, decode_xml_bytes, iter_pages_from_file, parse_pages
from tests.conftest import shared_data

ENWIKI = ("wikipedia_xml_sample", "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
TABLES = ("wikipedia_xml_sample", "enwiki-table-markup.xml.bz2")
BGWIKI = ("wikipedia_xml_sample", "bgwiki-latest-pages-articles-shortened.xml.bz2")


def page_xml(page_id: int, title: str, text: str = "Some text.", extra: str = "") -> str:
    return (
        f"  <page>\n    <title>{title}</title>\n    <ns>0</ns>\n    <id>{page_id}</id>\n{extra}"
        f"    <revision>\n      <id>{page_id * 10}</id>\n      <model>wikitext</model>\n"
        f'      <text bytes="{len(text)}" xml:space="preserve">{text}</text>\n'
        "    </revision>\n  </page>\n"
    )


def as_tuples(pages) -> list[tuple]:
    return [(p.page_id, p.title, p.ns, p.redirect, len(p.wikitext)) for p in pages]


# ---------------------------------------------------------------- decoding


@pytest.mark.parametrize(
    "encode",
    [
        lambda s: s.encode("utf-8"),
        lambda s: codecs.BOM_UTF8 + s.encode("utf-8"),
        lambda s: codecs.BOM_UTF16_LE + s.encode("utf-16-le"),
        lambda s: codecs.BOM_UTF16_BE + s.encode("utf-16-be"),
        lambda s: s.encode("utf-16-le"),
    ],
    ids=["utf8", "utf8-bom", "utf16le-bom", "utf16be-bom", "utf16le-no-bom"],
)
def test_decode_xml_bytes(encode):
    text = '<?xml version="1.0"?><mediawiki><page><title>Ünïcödé — кирилица</title></page></mediawiki>'
    assert decode_xml_bytes(encode(text)) == text


# ---------------------------------------------------------------- fragments and documents


def test_fragment_without_root():
    fragment = page_xml(1, "Alpha") + page_xml(2, "Beta &amp; Co", "[[Gamma]] &lt;ref&gt;")
    pages = list(parse_pages(fragment))
    assert pages == [
        Page(1, "Alpha", 0, None, "Some text."),
        Page(2, "Beta & Co", 0, None, "[[Gamma]] <ref>"),
    ]


@pytest.mark.parametrize("version", ["0.10", "0.11"])
def test_whole_document_with_namespace_and_siteinfo(version):
    document = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-{version}/" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xsi:schemaLocation="http://www.mediawiki.org/xml/export-{version}/ x.xsd" version="{version}" xml:lang="en">\n'
        "  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <namespaces>\n"
        '      <namespace key="0" case="first-letter" />\n    </namespaces>\n  </siteinfo>\n'
        + page_xml(10, "AccessibleComputing", "#REDIRECT [[Computer accessibility]]",
                   '    <redirect title="Computer_accessibility" />\n')
        + page_xml(12, "Anarchism", "'''Anarchism''' is ...")
        + "</mediawiki>\n"
    )
    pages = list(parse_pages(document))
    assert as_tuples(pages) == [
        (10, "AccessibleComputing", 0, "Computer accessibility", 36),
        (12, "Anarchism", 0, None, 22),
    ]


def test_header_only_and_footer_only_streams_give_no_pages():
    header = '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/"><siteinfo><sitename>W</sitename></siteinfo>\n'
    assert list(parse_pages(header)) == []
    assert list(parse_pages("\n</mediawiki>\n")) == []
    assert list(parse_pages("")) == []


def test_redirect_from_wikitext_when_no_redirect_element():
    [page] = parse_pages(page_xml(5, "Old", "#REDIRECT [[new_title#Section]]"))
    assert page.redirect == "New title"


def test_last_revision_is_used_and_missing_text_is_empty():
    two_revisions = page_xml(7, "Multi", "old").replace(
        "  </page>", "    <revision><id>2</id><text>new</text></revision>\n  </page>"
    )
    no_text = "<page><title>Empty</title><ns>0</ns><id>8</id><revision><id>1</id></revision></page>"
    assert [p.wikitext for p in parse_pages(two_revisions + no_text)] == ["new", ""]


# ---------------------------------------------------------------- bad XML


@pytest.mark.parametrize(
    "broken",
    [
        page_xml(2, "Bad & title"),  # unescaped ampersand
        page_xml(2, "Bad", "a <b> c"),  # unclosed element inside text
        page_xml(2, "Bad").replace("</revision>", "</revisoin>"),  # mismatched tag
    ],
    ids=["ampersand", "unclosed-element", "mismatched-tag"],
)
@pytest.mark.parametrize("position", [0, 1, 2])
def test_malformed_page_yields_page_error_and_neighbours_parse(broken, position):
    good = [page_xml(1, "One"), page_xml(3, "Three")]
    fragment = "".join(good[:position] + [broken] + good[position:])
    results = list(parse_pages(fragment))
    assert len(results) == 3
    error = results[position]
    assert isinstance(error, PageError)
    assert error.page_id == 2 and error.title.startswith("Bad") and error.reason
    assert [p.title for p in results if isinstance(p, Page)] == ["One", "Three"]


def test_truncated_last_page_yields_page_error():
    cut_page = page_xml(2, "Cut")
    fragment = page_xml(1, "One") + cut_page[: cut_page.index("<text")]
    results = list(parse_pages(fragment))
    assert isinstance(results[0], Page) and results[0].title == "One"
    assert isinstance(results[1], PageError) and results[1].title == "Cut" and results[1].page_id == 2


def test_bad_id_yields_page_error():
    fragment = page_xml(1, "One").replace("<id>1</id>", "<id>one</id>", 1)
    [error] = parse_pages(fragment)
    assert isinstance(error, PageError) and error.title == "One" and error.page_id is None


def test_garbage_fragment_does_not_raise():
    results = list(parse_pages("<<<not xml at all &&&"))
    assert len(results) == 1 and isinstance(results[0], PageError)


# ---------------------------------------------------------------- real dump files


def test_enwiki_sample_all_pages():
    pages = list(iter_pages_from_file(shared_data(*ENWIKI)))
    assert len(pages) == 206
    assert all(isinstance(page, Page) for page in pages)
    assert sum(page.ns == 0 for page in pages) == 205
    assert [page.title for page in pages if page.ns == 4] == ["Wikipedia:Adding Wikipedia articles to Nupedia"]
    assert sum(page.redirect is not None for page in pages) == 100
    assert len({page.page_id for page in pages}) == 206
    first = pages[0]
    assert (first.page_id, first.title, first.redirect) == (10, "AccessibleComputing", "Computer accessibility")
    articles = [page for page in pages if page.redirect is None]
    assert sum(len(page.wikitext.encode()) for page in articles) > 5_000_000


def test_enwiki_sample_string_parse_matches_file_stream():
    data = bz2.decompress(shared_data(*ENWIKI).read_bytes())
    from_string = list(parse_pages(decode_xml_bytes(data)))
    assert from_string == list(iter_pages_from_file(shared_data(*ENWIKI)))


def test_small_batches_and_reads_give_the_same_pages(monkeypatch):
    expected = as_tuples(iter_pages_from_file(shared_data(*TABLES)))
    monkeypatch.setattr(wikipedia, "BATCH_CHARS", 10_000)
    monkeypatch.setattr(wikipedia, "_READ_BYTES", 4_099)
    assert as_tuples(iter_pages_from_file(shared_data(*TABLES))) == expected
    assert len(expected) == 5


def test_bgwiki_utf16_sample(monkeypatch):
    raw = bz2.decompress(shared_data(*BGWIKI).read_bytes())
    assert raw[:2] == codecs.BOM_UTF16_LE
    from_string = list(parse_pages(decode_xml_bytes(raw)))
    assert len(from_string) == 3 and all(isinstance(page, Page) for page in from_string)
    assert from_string[0].title == "Григориански календар"
    assert [page.ns for page in from_string] == [0, 4, 4]
    assert list(iter_pages_from_file(shared_data(*BGWIKI))) == from_string
    monkeypatch.setattr(wikipedia, "_READ_BYTES", 1_001)  # odd: splits UTF-16 code units
    monkeypatch.setattr(wikipedia, "BATCH_CHARS", 20_000)
    assert list(iter_pages_from_file(shared_data(*BGWIKI))) == from_string


def test_plain_xml_file_in_utf16_be(tmp_path):
    raw = bz2.decompress(shared_data(*BGWIKI).read_bytes())
    path = tmp_path / "bg.xml"
    path.write_bytes(codecs.BOM_UTF16_BE + raw[2:].decode("utf-16-le").encode("utf-16-be"))
    assert [page.title for page in iter_pages_from_file(path)][0] == "Григориански календар"


def test_multistream_dump_streams_and_fragments(tmp_path):
    """Rebuild a multistream file (header, 100 pages per stream, footer) as in ../shared/docs/ray.md."""
    text = bz2.decompress(shared_data(*ENWIKI).read_bytes()).decode("utf-8")
    first_page = text.index("  <page>")
    footer = text.rindex("</mediawiki>")
    page_texts = re.findall(r"  <page>.*?</page>\n", text[first_page:footer], re.S)
    assert len(page_texts) == 206
    streams = [text[:first_page]]
    streams += ["".join(page_texts[i : i + 100]) for i in range(0, len(page_texts), 100)]
    streams.append(text[footer:])
    compressed = [bz2.compress(stream.encode("utf-8"), compresslevel=1) for stream in streams]
    path = tmp_path / "multistream.xml.bz2"
    path.write_bytes(b"".join(compressed))

    assert len(list(iter_pages_from_file(path))) == 206
    per_stream = [list(parse_pages(decode_xml_bytes(bz2.BZ2Decompressor().decompress(c)))) for c in compressed]
    assert [len(pages) for pages in per_stream] == [0, 100, 100, 6, 0]
