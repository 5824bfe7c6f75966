"""The Wikipedia multistream dump writer: MediaWiki export-0.11 XML in bz2 streams, and its index.

One bz2 stream holds the ``<siteinfo>`` header, one each ``pages_per_stream``
``<page>`` elements and one the closing ``</mediawiki>``; the index has one
``offset:page_id:title`` line per page (what :mod:`ingest.multistream` reads).
"""

from __future__ import annotations

import bz2
import hashlib
import random
from pathlib import Path
from typing import NamedTuple
from xml.sax.saxutils import escape

from structcse.demo.world import TIMESTAMP

PAGES_PER_STREAM = 100
DEWIKI_PAGES_PER_STREAM = 20


EDITORS = (("Halvard Quill", 48213), ("Ostrabot", 7731), ("Mereth Lane", 120944), ("Corvid", 99012),
           ("Tessaly", 3321))
EDIT_COMMENTS = ("Copyedit", "Added infobox", "Fixed typo in lead", "Update employee count -> 2025 figure",
                 "Added references & categories", "Expanded [[WP:LEAD|lead]]", "Reverted vandalism")


class Page(NamedTuple):
    title: str
    ns: int
    text: str
    redirect: str | None


NAMESPACES = ((-2, "Media"), (-1, "Special"), (0, ""), (1, "Talk"), (2, "User"), (3, "User talk"),
              (4, "Demowiki"), (5, "Demowiki talk"), (6, "File"), (7, "File talk"), (8, "MediaWiki"),
              (9, "MediaWiki talk"), (10, "Template"), (11, "Template talk"), (12, "Help"), (13, "Help talk"),
              (14, "Category"), (15, "Category talk"), (100, "Portal"), (101, "Portal talk"), (118, "Draft"),
              (119, "Draft talk"), (710, "TimedText"), (711, "TimedText talk"), (828, "Module"),
              (829, "Module talk"))
NAMESPACES_DE = ((-2, "Medium"), (-1, "Spezial"), (0, ""), (1, "Diskussion"), (2, "Benutzer"),
                 (3, "Benutzer Diskussion"), (4, "Demowiki"), (5, "Demowiki Diskussion"), (6, "Datei"),
                 (7, "Datei Diskussion"), (8, "MediaWiki"), (9, "MediaWiki Diskussion"), (10, "Vorlage"),
                 (11, "Vorlage Diskussion"), (12, "Hilfe"), (13, "Hilfe Diskussion"), (14, "Kategorie"),
                 (15, "Kategorie Diskussion"), (100, "Portal"), (101, "Portal Diskussion"), (710, "TimedText"),
                 (711, "TimedText talk"), (828, "Modul"), (829, "Modul Diskussion"))


class Site(NamedTuple):
    """What a dump's ``<siteinfo>`` says about its wiki, and where its page ids start."""

    dbname: str
    lang: str
    base: str
    namespaces: tuple
    pages_per_stream: int
    first_page_id: int
    first_revision: int


ENWIKI = Site("enwiki", "en", "https://demo.wikipedia.example/wiki/Main_Page", NAMESPACES, PAGES_PER_STREAM,
               9, 1_130_000_000)
DEWIKI = Site("dewiki", "de", "https://de.demo.wikipedia.example/wiki/Demowiki:Hauptseite", NAMESPACES_DE,
               DEWIKI_PAGES_PER_STREAM, 20, 250_000_000)


def _xml(text: str) -> str:
    return escape(text, {'"': "&quot;"})


def _siteinfo(site: Site = ENWIKI) -> str:
    ns = "http://www.mediawiki.org/xml/export-0.11/"
    lines = [(f'<mediawiki xmlns="{ns}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
              f'xsi:schemaLocation="{ns} http://www.mediawiki.org/xml/export-0.11.xsd" version="0.11" '
              f'xml:lang="{site.lang}">'),
             "  <siteinfo>", "    <sitename>Demowiki</sitename>", f"    <dbname>{site.dbname}</dbname>",
             f"    <base>{site.base}</base>",
             "    <generator>MediaWiki 1.46.0-wmf.8</generator>", "    <case>first-letter</case>", "    <namespaces>"]
    for key, name in site.namespaces:
        lines.append(f'      <namespace key="{key}" case="first-letter"' + (f">{name}</namespace>" if name else " />"))
    return "\n".join(lines + ["    </namespaces>", "  </siteinfo>", ""])


def _sha1_base36(text: str) -> str:
    number = int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16)
    digits = ""
    while number:
        number, digit = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
    return digits.rjust(31, "0")


def _page_xml(rng: random.Random, page: Page, page_id: int, revision: int) -> str:
    sha1 = _sha1_base36(page.text)
    lines = ["  <page>", f"    <title>{_xml(page.title)}</title>", f"    <ns>{page.ns}</ns>", f"    <id>{page_id}</id>"]
    if page.redirect:
        lines.append(f'    <redirect title="{_xml(page.redirect)}" />')
    lines += ["    <revision>", f"      <id>{revision}</id>"]
    if rng.random() < 0.9:
        lines.append(f"      <parentid>{revision - rng.randint(1, 50000)}</parentid>")
    lines += [f"      <timestamp>{TIMESTAMP}</timestamp>", "      <contributor>"]
    if rng.random() < 0.1:
        lines.append(f"        <ip>192.0.2.{rng.randint(1, 254)}</ip>")
    else:
        username, user_id = rng.choice(EDITORS)
        lines += [f"        <username>{_xml(username)}</username>", f"        <id>{user_id}</id>"]
    lines.append("      </contributor>")
    if rng.random() < 0.2:
        lines.append("      <minor />")
    if rng.random() < 0.8:
        lines.append(f"      <comment>{_xml(rng.choice(EDIT_COMMENTS))}</comment>")
    lines += [f"      <origin>{revision}</origin>", "      <model>wikitext</model>",
              "      <format>text/x-wiki</format>",
              f'      <text bytes="{len(page.text.encode("utf-8"))}" sha1="{sha1}" xml:space="preserve">'
              f"{_xml(page.text)}</text>", f"      <sha1>{sha1}</sha1>", "    </revision>", "  </page>", ""]
    return "\n".join(lines)


def write_multistream(rng: random.Random, pages: list[Page], dump_path: Path, index_path: Path,
                       site: Site = ENWIKI) -> None:
    """Write the dump (header stream, one stream per ``site.pages_per_stream`` pages, footer stream) and its index."""
    streams = [bz2.compress(_siteinfo(site).encode("utf-8"))]
    offset = len(streams[0])
    index_lines = []
    page_id, revision = site.first_page_id, site.first_revision
    for start in range(0, len(pages), site.pages_per_stream):
        chunk = []
        for page in pages[start:start + site.pages_per_stream]:
            page_id += rng.randint(1, 6)
            revision += rng.randint(1, 900)
            chunk.append(_page_xml(rng, page, page_id, revision))
            index_lines.append(f"{offset}:{page_id}:{_xml(page.title)}\n")
        streams.append(bz2.compress("".join(chunk).encode("utf-8")))
        offset += len(streams[-1])
    streams.append(bz2.compress(b"</mediawiki>\n"))
    dump_path.write_bytes(b"".join(streams))
    index_path.write_bytes(bz2.compress("".join(index_lines).encode("utf-8")))
