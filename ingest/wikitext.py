"""Wikitext to plain text with hyperlink spans, and a rule-based sentence splitter.

`wikitext_to_text` is a regex-and-scanner extractor (no template expansion), the
fast default recommended in ../shared/docs/ray.md section 5. It works in passes over the
page, each one removing a kind of markup that cannot carry article text:

1. HTML comments; an unclosed ``<!--`` hides the rest of the page, as in MediaWiki.
2. ``<nowiki>`` content is escaped so that later passes leave it alone.
3. Extension blocks dropped with their content (``<ref>``, ``<gallery>``,
   ``<math>``, ``<syntaxhighlight>``, ...). An unclosed one is dropped to the end
   of its paragraph (the next blank line) or of the page.
4. Templates ``{{…}}`` and tables ``{| … |}``, nested in any order, found by one
   stack scanner. An unclosed one is dropped to the end of its paragraph. A link
   whose whole anchor is a template (``[[X|{{nowrap|…}}]]``) goes with it: its
   text is unknown without expansion.
5. ``[[File:…]]``, ``[[Image:…]]``, ``[[Category:…]]`` and interlanguage links,
   whose captions may hold nested links. An unclosed one is dropped to the end
   of its paragraph.
6. Headings, list markers, horizontal rules, behaviour switches (``__TOC__``).
7. One tokenizer renders the inline markup left: wikilinks become anchors
   wrapped in two marker characters, external links keep their label (a
   wikilink in a label is plain text, as in MediaWiki), bare URLs, bold/italic
   quotes and simple HTML tags go, entities are unescaped. Stray
   ``[[``/``]]``/``{{``/``}}`` go too. The link trail (``[[dog]]s``) takes the
   letters of the wiki's language (`LINK_TRAILS`; ``language="bg"`` for Cyrillic).
8. Whitespace is compacted (paragraphs are separated by one ``"\\n"``) by plain
   substitutions, then the markers become `Link` offsets, so
   ``text[link.start:link.end] == link.anchor`` holds.

Every scanner moves forward only and regexes avoid nested quantifiers, so broken
markup costs linear time. Scanning cost is set by how a regex starts: CPython's
engine skips to a literal prefix in a fast C loop (about 1 ns per character of a
54 kB enwiki page), but tests a leading character class or alternation at every
position (7-9 ns); so the hot scans start with a literal where the markup allows
(comments, blocks, templates, hidden links, line markup), other whitespace is
found by one-character `in` tests, and the one-class scans left (inline tokens,
sentence cuts) are one pass each. Links to other wikis
(``[[wikt:…]]``, ``[[:fr:…]]``) keep their text but give no `Link`; links to
other namespaces of the same wiki (``[[:Category:X]]``, ``[[Wikipedia:…]]``) do
give one. ``tests/wikitext_oracle.py`` measures the links against
mwparserfromhell (``bench/ingest.py`` prints the figures).

`split_sentences` is described in its section below.

The three loops that pay Python's per-step cost once per link and once per
candidate sentence cut have C versions in ``_structcse_wikitext.c``, built by
``pip install`` where a C compiler is present and used when they are: the inline
tokenizer (simple links, quote runs and doubled stray brackets in C; at other
tokens the regex decides, as in the Python version), the whitespace pass
(`_compact_whitespace`) and the sentence splitter (`_split_sentences`). The
Python versions are their specification (``tests/test_wikitext_c.py`` checks
that both give the same output) and the fallback.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass
from functools import cache, cached_property, partial
from itertools import accumulate
from operator import itemgetter
from typing import NamedTuple

try:  # the C loops, built by `pip install` where a C compiler is present
    import _structcse_wikitext as _wikitext_c
except ImportError:
    _wikitext_c = None


def extractor_loops() -> str:
    """"c" when the C loops are in use here, else "python" (same output, slower)."""
    return "python" if _wikitext_c is None else "c"


class Link(NamedTuple):
    """A wikilink in plain text: ``text[start:end] == anchor``; `target` is normalized."""

    start: int
    end: int
    target: str
    anchor: str


_new_link = partial(tuple.__new__, Link)  # Link((start, end, target, anchor)) without a Python frame
_link_start = itemgetter(0)
_link_end = itemgetter(1)


# ---------------------------------------------------------------- titles

_TITLE_SPACES = re.compile(r"[\s_]+")
_CANONICAL_NAMESPACES = {
    name.lower(): name
    for name in (
        "Category", "File", "Image", "Media", "Wikipedia", "Help", "Template",
        "Portal", "User", "Talk", "Draft", "Module", "Special", "MediaWiki", "Book",
    )
}


# Any character that makes a title need more than strip + first-letter case.
_TITLE_NEEDS_WORK = re.compile(r"[_#:&\t\n\x0b-\r\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]|  ")


def normalize_title(title: str) -> str:
    """Normalize a page title as MediaWiki does for `[[links]]` (first-letter case)."""
    if _TITLE_NEEDS_WORK.search(title) is None:
        title = title.strip(" ")
        return title[:1].upper() + title[1:]
    if "&" in title:
        title = html.unescape(title)
    title = title.split("#", 1)[0]
    title = _TITLE_SPACES.sub(" ", title).strip().lstrip(":").strip()
    prefix, colon, rest = title.partition(":")
    namespace = _CANONICAL_NAMESPACES.get(prefix.strip().lower()) if colon else None
    if namespace is not None:
        rest = rest.strip()
        return f"{namespace}:{rest[:1].upper()}{rest[1:]}"
    return title[:1].upper() + title[1:]


# ---------------------------------------------------------------- pass helpers

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


def _paragraph_end(text: str, pos: int, limit: int | None = None) -> int:
    """Index of the blank line ending the paragraph that holds `pos`, at most `limit`."""
    limit = len(text) if limit is None else limit
    match = _PARAGRAPH_BREAK.search(text, pos, limit)
    return match.start() if match else limit


def _cut_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` without the given sorted, non-overlapping [start, end) spans."""
    if not spans:
        return text
    pieces, pos = [], 0
    for start, end in spans:
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


# ---------------------------------------------------------------- 1-2 comments, nowiki

_REDIRECT = re.compile(r"\s*#\s*(?:REDIRECT|ПРЕНАСОЧВАНЕ|WEITERLEITUNG|REDIRECTION)", re.I)
_NOWIKI = re.compile(r"<nowiki\s*/>|<nowiki\s*>(.*?)</nowiki\s*>", re.I | re.S)
_NOWIKI_OPEN = re.compile("<nowiki", re.I)  # its literal "<" prefix: faster than two `in` tests
_NOWIKI_ESCAPES = str.maketrans(
    {"[": "&#91;", "]": "&#93;", "{": "&#123;", "}": "&#125;", "|": "&#124;",
     "<": "&lt;", ">": "&gt;", "'": "&#39;", "=": "&#61;", "_": "&#95;"}
)


def _remove_comments(text: str) -> str:
    start = text.find("<!--")
    if start < 0:
        return text
    pieces, pos = [], 0
    while start >= 0:
        end = text.find("-->", start + 4)
        pieces.append(text[pos:start])
        if end < 0:
            return "".join(pieces)  # an unclosed comment hides the rest of the page
        pos = end + 3
        start = text.find("<!--", pos)
    pieces.append(text[pos:])
    return "".join(pieces)


def _escape_nowiki(text: str) -> str:
    if _NOWIKI_OPEN.search(text) is None:
        return text
    return _NOWIKI.sub(lambda m: (m.group(1) or "").translate(_NOWIKI_ESCAPES), text)


# ---------------------------------------------------------------- 3 extension blocks

DROPPED_BLOCK_TAGS = (
    "ref", "references", "gallery", "math", "chem", "ce", "syntaxhighlight", "source",
    "pre", "score", "timeline", "graph", "imagemap", "mapframe", "maplink", "hiero",
    "templatedata", "templatestyles", "inputbox", "categorytree", "includeonly", "table",
)
_BLOCK_NAMES = "|".join(sorted(DROPPED_BLOCK_TAGS, key=len, reverse=True))
_BLOCK_OR_TAG = re.compile(
    # a whole block: an open tag (not self-closing), content holding no tag of its
    # name, and its close tag; most refs are one such match
    r"<[ \t]*(?P<block>" + _BLOCK_NAMES + r")\b(?:[^<>]*[^<>/\s])?\s*>"
    r"[^<]*(?:<(?!/?[ \t]*(?P=block)\b[^<>]*>)[^<]*)*"
    r"</[ \t]*(?P=block)\b[^<>]*>"
    # else one tag: (close slash, name, attributes)
    r"|<(/?)[ \t]*(" + _BLOCK_NAMES + r")\b([^<>]*)>",
    re.I,
)


@cache
def _tag_named(name: str) -> re.Pattern:
    return re.compile(r"<(/?)[ \t]*" + name + r"\b([^<>]*)>", re.I)


def _remove_extension_blocks(text: str) -> str:
    """Drop paired and self-closing extension tags with their content.

    A block ends after the next close tag of its name; an unclosed one at its
    paragraph end, never past a reopening of the same name. A closed block with
    no other tag of its name inside is one regex match (a page has ~70 blocks,
    most of them refs); only after an unclosed block does the scan restart, from
    that block's end."""
    if "<" not in text:
        return text
    spans: list[tuple[int, int]] = []
    pos, size = 0, len(text)
    while pos < size:
        pos = _block_spans(text, pos, spans)
    return _cut_spans(text, spans)


def _block_spans(text: str, pos: int, spans: list[tuple[int, int]]) -> int:
    """Append the blocks from `pos` on to `spans`; returns where to go on after an
    unclosed block that ended at its paragraph end, or the text's length when done."""
    search, add = _BLOCK_OR_TAG.search, spans.append
    while True:
        tag = search(text, pos)
        if tag is None:
            return len(text)
        pos = tag.end()
        if tag.start("block") >= 0:
            add((tag.start(), pos))
            continue
        is_close, name, attributes = tag.group(2, 3, 4)
        if is_close or attributes.rstrip().endswith("/"):
            add((tag.start(), pos))  # self-closing or stray close tag
            continue
        # an open block holding a tag of its name, or unclosed: only the tags of
        # its name matter until it ends (the others inside it go with it)
        same_name = _tag_named(name.lower()).search
        opened_start, opened_end = tag.start(), pos
        while True:
            inner = same_name(text, pos)
            if inner is None:
                end = _paragraph_end(text, opened_end)
                add((opened_start, end))
                return end
            pos = inner.end()
            if inner.group(1):
                add((opened_start, pos))
                break
            if inner.group(2).rstrip().endswith("/"):
                continue  # a self-closing tag of the same name inside the block
            # reopened before closing: the open one ends at its paragraph end or here
            end = _paragraph_end(text, opened_end, inner.start())
            add((opened_start, end))
            if end < inner.start():
                return end  # the tags between are outside any block: read them again
            opened_start, opened_end = inner.start(), pos


# ---------------------------------------------------------------- 4 templates and tables

# Tables open and close at line starts; matching "\n" is much faster than "^" with re.M.
_TABLE_TOKEN = re.compile(r"\n[ \t:]*\{\||\n[ \t]*\|\}")
_TEMPLATE, _TABLE = "{{", "{|"


_MAX_UNCLOSED_RESCANS = 20


def _remove_templates_and_tables(text: str) -> str:
    """Drop templates and tables; an unclosed one goes to the end of its paragraph.

    Each unclosed construct costs a rescan of the rest of the page, so after
    `_MAX_UNCLOSED_RESCANS` of them the rest of the page is dropped.
    """
    if "{" not in text and "}}" not in text:
        return text
    pieces = []
    text = "\n" + text  # lets a table open on the first line
    for _ in range(_MAX_UNCLOSED_RESCANS):
        cleaned, unclosed_start = _scan_templates_and_tables(text)
        pieces.append(cleaned)
        if unclosed_start is None:
            break
        text = text[_paragraph_end(text, unclosed_start) :]
    return "".join(pieces)


def _scan_templates_and_tables(text: str) -> tuple[str, int | None]:
    """Remove closed outermost templates/tables, stopping at the first one left
    unclosed: returns (cleaned text before it, its start), or (cleaned text, None).

    The tokens are "{{", "}}" and the table tokens, leftmost first. Each kind is
    found on its own (``str.find`` and a regex with a literal prefix skip ahead in
    fast C loops; one regex alternating all three tests every position, ~7x slower)
    and its next occurrence is looked up again only once the scan has passed it.
    """
    spans: list[tuple[int, int]] = []
    stack: list[str] = []
    outer_start = pos = 0
    size = len(text)
    find, table_search = text.find, _TABLE_TOKEN.search
    opening = closing = table_start = -1
    table = None
    while True:
        if opening < pos:
            opening = find("{{", pos) % (size + 1)  # -1 (none left) becomes size
        if closing < pos:
            closing = find("}}", pos) % (size + 1)
        if table_start < pos:
            table = table_search(text, pos)
            table_start = table.start() if table else size
        start = min(opening, closing, table_start)
        if start == size:
            break
        if start == opening:
            kind, pos = _TEMPLATE, start + 2
        elif start == closing:
            kind, pos = "}}", start + 2
        else:
            kind, pos = table.group().lstrip("\n \t:"), table.end()
        if kind in (_TEMPLATE, _TABLE):
            if not stack:
                outer_start = start
            stack.append(kind)
            continue
        if not stack:
            spans.append((start, pos))  # stray closer
            continue
        if kind == "}}":
            while stack and stack.pop() != _TEMPLATE:
                pass  # a table left open inside a template ends with it
        elif stack[-1] == _TABLE:
            stack.pop()
        elif text.startswith("}", pos):
            stack.pop()  # "|}}" closing a template whose last parameter is empty
            pos += 1
        if not stack:
            spans.append(_template_or_its_link(text, outer_start, pos, spans[-1][1] if spans else 0))
    if stack:
        return _cut_spans(text[:outer_start], spans), outer_start
    return _cut_spans(text, spans), None


_LINK_OPENING = re.compile(r"\[\[[^\[\]{}|\n]*\|[ \t]*\Z")


def _template_or_its_link(text: str, start: int, end: int, floor: int) -> tuple[int, int]:
    """The span to drop for the template at [start, end): the whole link when the
    template is a link's entire anchor, as in ``[[29th parallel north|{{nowrap|29° N}}]]``
    (its text is unknown without expansion; keeping the link would show its title
    through the pipe trick), else the template alone."""
    before = start - 1
    while before > floor and text[before] in " \t":
        before -= 1
    if before <= floor or text[before] != "|":
        return start, end
    after = end
    while after < len(text) and text[after] in " \t":
        after += 1
    if not text.startswith("]]", after):
        return start, end
    opening = _LINK_OPENING.search(text, max(floor, start - 512), start)
    return (opening.start(), after + 2) if opening else (start, end)


# ---------------------------------------------------------------- 5 file, category, language links

MEDIA_AND_CATEGORY_NAMESPACES = (
    "file", "image", "category",
    "файл", "картинка", "изображение", "категория",  # bg / ru
    "datei", "bild", "kategorie", "fichier", "catégorie",  # de / fr
)
INTERWIKI_PREFIXES = frozenset(
    "w wikipedia wikt wiktionary s wikisource q wikiquote b wikibooks n wikinews "
    "v wikiversity voy wikivoyage c commons m meta mw mediawikiwiki species wikispecies "
    "d wikidata wmf foundation phab doi arxiv google imdbname imdbtitle".split()
)
_LANGUAGE_CODE = r"[a-z]{2,3}(?:-[a-z]+)*|simple"
_HIDDEN_LINK_START = re.compile(
    r"\[\[[ \t]*(?:(?i:" + "|".join(MEDIA_AND_CATEGORY_NAMESPACES)
    + r")[ \t]*:|(?P<lang>" + _LANGUAGE_CODE + r"):)"
)
_LANGUAGE_PREFIX = re.compile(_LANGUAGE_CODE)
_DOUBLE_BRACKET = re.compile(r"\[\[|\]\]")


def _remove_hidden_links(text: str) -> str:
    """Drop media, category and interlanguage links, captions and nested links included."""
    if "[[" not in text:
        return text
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        link = _HIDDEN_LINK_START.search(text, pos)
        if link is None:
            return _cut_spans(text, spans)
        if link.group("lang") in INTERWIKI_PREFIXES:
            pos = link.end()  # e.g. [[doi:…]] is a visible interwiki link
            continue
        end = _closing_brackets_end(text, link.end())
        spans.append((link.start(), end))
        pos = end


def _closing_brackets_end(text: str, pos: int) -> int:
    """End of the `]]` matching an opened `[[`, or of the paragraph when unclosed."""
    depth = 1
    while depth:
        bracket = _DOUBLE_BRACKET.search(text, pos)
        limit = bracket.start() if bracket else len(text)
        paragraph_end = _paragraph_end(text, pos, limit)
        if paragraph_end < limit or bracket is None:
            return paragraph_end
        depth += 1 if bracket.group() == "[[" else -1
        pos = bracket.end()
    return pos


# ---------------------------------------------------------------- 6 line markup

# A heading, list marker or horizontal rule at a line start. After a "\n" it is found
# by a regex with a literal prefix (the engine skips ahead to each "\n"); the first
# line is matched in place.
_LINE_START_MARKUP = r"[ \t]*(?:=[^\n]*=[ \t]*(?=\n|\Z)|[*#:;]+[ \t]*|-{4,})"
_LINE_MARKUP = re.compile(r"\n" + _LINE_START_MARKUP)
_FIRST_LINE_MARKUP = re.compile(_LINE_START_MARKUP)
_BEHAVIOUR_SWITCH = re.compile(r"__[A-Z]+__")  # its literal "__" prefix: as fast as an `in` test


def _remove_line_markup(text: str) -> str:
    first = _FIRST_LINE_MARKUP.match(text)
    if first is not None:
        text = text[first.end() :]
    return _BEHAVIOUR_SWITCH.sub("", _LINE_MARKUP.sub("\n", text))


# ---------------------------------------------------------------- 7 inline rendering

INLINE_TAGS = frozenset(
    "span small big sup sub b i u s strike del ins code tt kbd var samp abbr cite q em "
    "strong font center div p blockquote poem br hr li ul ol dl dt dd caption "
    "onlyinclude noinclude section bdi mark wbr ruby rb rt rp time data dfn translate "
    "tr td th tbody thead nowiki".split()
)
# MediaWiki's $linkTrail per language (languages/messages/MessagesXx.php): the
# letters after "]]" that join the anchor, as in "[[dog]]s". Others use English.
LINK_TRAILS = {
    "en": "a-z",
    "de": "a-zäöüß",
    "fr": "a-zàâçéèêîôûäëïöüùÇÉÂÊÎÔÛÄËÏÖÜÀÈÙ",
    "es": "a-záéíñóúü",
    "bg": "a-zабвгдежзийклмнопрстуфхцчшщъыьэюя",
    "ru": "a-zабвгдежзийклмнопрстуфхцчшщъыьэюяё",
}
# Every token starts with one of the characters of the leading class, so one
# scan finds them all (one class test per character); lookbehinds then tell the
# alternatives apart. (Bare URLs are removed before, by
# `_remove_bare_urls`.) An external link's label may hold wikilinks; MediaWiki
# shows them as plain text there.
_INLINE_PATTERN = (
    r"[\[\]&<'{}](?:"
    # [[Title]] or [[Title|anchor]] with no markup, namespace or odd spacing: most links
    r"(?<=\[)(?P<simple>\[(?P<simple_title>[^|:&<'#_\s\[\]{}]+(?: [^|:&<'#_\s\[\]{}]+)*)"
    r"(?:\|(?P<simple_anchor>[^|&<'\s\[\]{}]+(?: [^|&<'\s\[\]{}]+)*))?\]\](?P<simple_trail>[TRAIL]+)?)"
    r"|(?<=\[)(?P<link>\[(?P<inner>[^\[\]\n]*)\]\](?P<trail>[TRAIL]+)?)"
    r"|(?<=\[)(?P<external>(?:https?:|ftp:|mailto:|//)[^\s\[\]<>\"]*"
    r"(?:[ \t]+(?P<label>[^\[\]\n]*(?:\[\[[^\[\]\n]*\]\][^\[\]\n]*)*))?\])"
    r"|(?<=')(?P<quotes>'+)"
    r"|(?<=&)(?P<entity>(?:[a-zA-Z][a-zA-Z0-9]*|#[0-9]+|#[xX][0-9a-fA-F]+);)"
    r"|(?<=<)(?P<tag>/?[ \t]*(?P<tagname>[a-zA-Z][a-zA-Z0-9]*)\b[^<>]*>)"
    r"|(?P<stray>(?<=\[)\[(?!\[)|(?<=\])\]|(?<=\{)\{|(?<=\})\}))"
)
_INLINE_BY_TRAIL: dict[str, re.Pattern] = {}


def base_language(language: str) -> str:
    """"en", "bg-x-old", "zh_yue", "EN" -> "en", "bg", "zh", "en": the key of the per-language tables."""
    return language.replace("_", "-").split("-", 1)[0].lower()


def _link_trail(language: str) -> str:
    """The language's link-trail character class, English's for a language without one."""
    return LINK_TRAILS.get(base_language(language), LINK_TRAILS["en"])


def _inline_regex(language: str) -> re.Pattern:
    trail = _link_trail(language)
    regex = _INLINE_BY_TRAIL.get(trail)
    if regex is None:
        regex = _INLINE_BY_TRAIL[trail] = re.compile(_INLINE_PATTERN.replace("TRAIL", trail))
    return regex


_ANCHOR_MARKUP = re.compile(
    r"'{2,}|(?P<entity>&(?:[a-zA-Z][a-zA-Z0-9]*|#[0-9]+|#[xX][0-9a-fA-F]+);)"
    r"|</?[ \t]*(?P<tagname>[a-zA-Z][a-zA-Z0-9]*)\b[^<>]*>"
)
_PIPE_TRICK_SUFFIX = re.compile(r"\s*(?:\([^()]*\)|,.*)$")
_LINK_IN_LABEL = re.compile(r"\[\[([^\[\]\n]*)\]\]")
# MediaWiki refuses "[[http://…]]" as an internal link (the inside is an external link).
_URL_PROTOCOL = re.compile(r"(?i:https?:|ftp:|mailto:|//)")


# Link boundaries are marked in the rendered text with two noncharacters, so the
# whitespace pass can run as plain C-level substitutions and still find them.
_LINK_START, _LINK_END = "\ufdd0", "\ufdd1"
_LINK_MARKERS = re.compile("[\ufdd0\ufdd1]")
# Bold/italic quotes, but not right after "]]", where they stop a link trail:
# those stay for the inline pass. The literal first "'" lets the engine skip ahead.
_QUOTES = re.compile(r"'(?<!'')(?<!\]\]')'+")


_URL_TAIL = re.compile(r"[^\s\[\]<>\"{}|]+")


def _remove_bare_urls(text: str) -> str:
    """Drop "http://…", "https://…", "ftp://…" not opening an external link "[http://…]"."""
    pieces, pos = [], 0
    found = text.find("://")
    while found >= 0:
        for scheme in ("https", "http", "ftp"):
            start = found - len(scheme)
            if start >= pos and text.startswith(scheme, start):
                break
        else:
            start = -1
        tail = _URL_TAIL.match(text, found + 3)
        if start >= pos and tail and (start == 0 or text[start - 1] != "["):
            pieces.append(text[pos:start])
            pos = tail.end()
        found = text.find("://", max(found + 3, pos))
    if not pieces:
        return text
    pieces.append(text[pos:])
    return "".join(pieces)


def _render_inline(text: str, language: str = "en") -> tuple[str, list[str]]:
    """Render inline markup; returns the text, each link's anchor wrapped in
    `_LINK_START` … `_LINK_END`, and the links' targets in order."""
    if "://" in text:
        text = _remove_bare_urls(text)
    if "''" in text:
        text = _QUOTES.sub("", text)  # bold and italic, in one C-level pass
    targets: list[str] = []
    add_target = targets.append

    def render(token: re.Match) -> str:
        kind = token.lastgroup
        if kind == "simple":
            title, anchor, trail = token.group(2, 3, 4)  # simple_title, simple_anchor, simple_trail
            add_target(title[0].upper() + title[1:])
            return f"{_LINK_START}{anchor or title}{trail or ''}{_LINK_END}"
        if kind == "link":
            anchor, target = _parse_wikilink(token.group("inner"), token.group("trail") or "")
            stripped = anchor.strip()
            if not (target and stripped):
                return anchor
            add_target(target)
            if stripped == anchor:
                return _LINK_START + anchor + _LINK_END
            lead = anchor.index(stripped[0])
            return anchor[:lead] + _LINK_START + stripped + _LINK_END + anchor[lead + len(stripped) :]
        if kind == "external":
            return _render_label(token.group("label") or "")
        if kind == "entity":
            return html.unescape(token.group())
        if kind == "tag":
            return _render_tag(token)
        return ""  # quotes and stray brackets

    regex = _inline_regex(language)
    if _wikitext_c is not None:
        return _wikitext_c.render_inline(text, regex, render, targets, _trail_characters(language)), targets
    return regex.sub(render, text), targets


@cache
def _trail_characters(language: str) -> str:
    """The characters of the language's link-trail class ("a-zäö" -> "ab…zäö")."""
    trail = _link_trail(language)
    characters, i = [], 0
    while i < len(trail):
        if i + 2 < len(trail) and trail[i + 1] == "-":
            characters.extend(map(chr, range(ord(trail[i]), ord(trail[i + 2]) + 1)))
            i += 3
        else:
            characters.append(trail[i])
            i += 1
    return "".join(characters)


def _render_label(label: str) -> str:
    """An external link's label; wikilinks in it are shown as their anchors."""
    if "[[" in label:
        label = _LINK_IN_LABEL.sub(lambda m: _parse_wikilink(m.group(1), "")[0], label)
    return _clean_anchor(label)


def _render_tag(tag: re.Match) -> str:
    name = tag.group("tagname").lower()
    if name not in INLINE_TAGS:
        return tag.group()  # an unknown name is text, e.g. "<Ctrl>" in prose
    return " " if name in ("br", "hr", "p", "li", "div") else ""


_SIMPLE_LINK = re.compile(r"[^|:&<'#_\s]+(?: [^|:&<'#_\s]+)*")


def _parse_wikilink(inner: str, trail: str) -> tuple[str, str]:
    """(visible anchor, normalized target or '' when it is no article link)."""
    if _SIMPLE_LINK.fullmatch(inner):  # [[plain title]]: most links
        return inner + trail, inner[0].upper() + inner[1:]
    target_text, pipe, anchor = inner.partition("|")
    bare = target_text.strip().lstrip(":").strip()
    if _URL_PROTOCOL.match(bare):
        return _clean_anchor(bare.partition(" ")[2] if not pipe else ""), ""
    prefix, colon, _ = bare.partition(":")
    prefix = prefix.strip()
    is_interwiki = bool(colon) and (
        prefix.lower() in INTERWIKI_PREFIXES or _LANGUAGE_PREFIX.fullmatch(prefix) is not None
    )
    if pipe and not anchor.strip():
        anchor = _pipe_trick(bare)
    elif not pipe:
        anchor = bare
    anchor = _clean_anchor(anchor + trail)
    target = "" if is_interwiki else normalize_title(bare)
    return anchor, target


def _pipe_trick(title: str) -> str:
    """`[[Foo (bar)|]]` shows "Foo": drop the namespace, a final (…) and a ", …" part."""
    _, colon, rest = title.partition(":")
    if colon and rest:
        title = rest
    return _PIPE_TRICK_SUFFIX.sub("", title.split("#", 1)[0]).strip()


def _clean_anchor(anchor: str) -> str:
    if "'" not in anchor and "&" not in anchor and "<" not in anchor:
        return anchor
    return _ANCHOR_MARKUP.sub(_render_anchor_markup, anchor)


def _render_anchor_markup(token: re.Match) -> str:
    if token.group("entity"):
        return html.unescape(token.group())
    name = token.group("tagname")
    if name and name.lower() not in INLINE_TAGS:
        return token.group()
    return ""


# ---------------------------------------------------------------- 8 whitespace

# C-level passes: other whitespace becomes " ", runs of spaces one " ", runs holding
# a newline one "\n". The other whitespace (str.isspace's characters but " " and
# "\n") is listed most frequent first (on enwiki: no-break and thin spaces from
# &nbsp; and &thinsp;, tabs): one `in` test per character (a C loop) and a `replace`
# for the few present take a third of the time of one character-class regex scan.
_OTHER_SPACE_CHARS = "\xa0\t\u2009\u200a\u202f\u2002\u2003\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\u1680" + "".join(
    map(chr, (0x2000, 0x2001, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2028, 0x2029, 0x205F, 0x3000))
)


def _spaces_for_other_whitespace(text: str) -> str:
    for char in _OTHER_SPACE_CHARS:
        if char in text:
            text = text.replace(char, " ")
    return text


_SPACE_RUN = re.compile("  +")
_NEWLINE_RUN = re.compile(r"\n[ \n]+")


def _compact_whitespace(text: str, targets: list[str]) -> tuple[str, list[Link]]:
    """Collapse whitespace (a run with a newline becomes one "\\n") and turn the
    link markers into `Link` spans. Markers sit next to an anchor's first and last
    non-space characters, so no whitespace run contains one."""
    text = _spaces_for_other_whitespace(text)
    text = _NEWLINE_RUN.sub("\n", _SPACE_RUN.sub(" ", text)).replace(" \n", "\n").strip()
    if not targets:
        return text, []
    # before, anchor, between, anchor, ..., after: the markers alternate, so the
    # cumulative lengths are the link boundaries (all C-level loops)
    parts = text.replace(_LINK_END, _LINK_START).split(_LINK_START)  # str.split: 8x a regex split
    bounds = list(accumulate(map(len, parts)))
    links = list(map(_new_link, zip(bounds[0::2], bounds[1::2], targets, parts[1::2])))
    return "".join(parts), links


# ---------------------------------------------------------------- public API


def wikitext_to_text(wikitext: str, language: str = "en") -> tuple[str, list[Link]]:
    """Plain text of a page (paragraphs separated by "\\n") and its wikilink spans.

    `language` (the wiki's: "en", "bg", "de", ...) picks the letters a link trail
    may take (`LINK_TRAILS`): ``[[Българи]]те`` is one anchor with "bg" only.
    """
    if _REDIRECT.match(wikitext):
        return "", []
    if _LINK_START in wikitext or _LINK_END in wikitext:
        wikitext = _LINK_MARKERS.sub("", wikitext)
    text = _remove_comments(wikitext)
    text = _escape_nowiki(text)
    text = _remove_extension_blocks(text)
    text = _remove_templates_and_tables(text)
    text = _remove_hidden_links(text)
    text = _remove_line_markup(text)
    rendered, targets = _render_inline(text, language)
    if _wikitext_c is not None:
        return _wikitext_c.compact_whitespace(rendered, targets, Link)
    return _compact_whitespace(rendered, targets)


# ---------------------------------------------------------------- sentences
#
# A candidate cut is a run of ".", "!", "?" or "…", optionally followed by closing
# quotes or brackets, then a space; it is a sentence end when the next character
# is uppercase, a digit or an opening quote/bracket, it is not inside a link, and
# a single "." is not the period of an abbreviation. Abbreviations come in three
# kinds per language (`SentenceRules`):
#
# * never final: "Dr.", "e.g.", "St.": they always lead into more words;
# * before a number: "No. 5", "p. 12", "Jan. 5": not final when a digit or a
#   Roman numeral follows, ordinary words otherwise ("The answer was no. Then …");
# * maybe final: "Inc.", "Jr.", "U.S.", "пр.н.е.": final only when the
#   next word is a common sentence starter of the language ("… in the U.S. The
#   war" splits, "the U.S. Army" does not).
#
# Shape rules hold in every language: a single uppercase letter is an initial
# ("J. R. R. Tolkien") and dotted letter groups ("U.S.", "т.е.") are abbreviations,
# both maybe final; numbers with a decimal point never see a cut (no space
# after the point). Closing quotes or brackets after the period belong to the
# sentence that ends: `He said "Stop." Then …`, `(see above.) Next …`; the word
# before the period is still checked (`„сл.Хр.“ (след Христа)` goes on). Ellipses
# ("...", "…") end a sentence before an uppercase start. An unknown language uses
# the shape rules only, with no sentence starters. German ordinals ("am 3.
# Oktober") are numbers that are maybe final.


@dataclass(frozen=True)
class SentenceRules:
    never_final: frozenset[str] = frozenset()
    before_number: frozenset[str] = frozenset()
    maybe_final: frozenset[str] = frozenset()
    starters: frozenset[str] = frozenset()
    lowercase_letters_are_abbreviations: bool = True  # "c. 1900", "b. 1950"; not bg ("1916 г.")
    ordinal_numbers: bool = False  # de "am 3. Oktober": a small number + "." may be an ordinal

    @cached_property
    def special_words(self) -> frozenset[str]:
        """The listed words of all kinds: a word that is in none of them, starts in
        lowercase, has no "." and is no number is never an abbreviation."""
        return self.never_final | self.before_number | self.maybe_final

    @cached_property
    def capitalised_tails(self) -> frozenset[str]:
        """What follows the first letter of a capitalised never-final word ("Ibid" of
        "ibid"): a lowercased letter is at most 3 characters."""
        return frozenset(word[cut:] for word in self.never_final for cut in (1, 2, 3) if cut <= len(word))


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_LATIN = "ca cf ibid op viz approx vs v c fl"
SENTENCE_RULES: dict[str, SentenceRules] = {
    "en": SentenceRules(
        never_final=_words(
            _LATIN + " Mr Mrs Ms Messrs Mmes Mme Mlle Dr Drs Prof St Ste Sts Mt Ft Sen Rep Gov Gen "
            "Col Lt Sgt Capt Cmdr Cdr Adm Maj Brig Cpl Pvt Rev Revd Hon Pres Supt Insp Atty Msgr Fr "
            "e.g i.e a.k.a esp incl est dept univ assn assoc ed eds trans abbr orig repr var lit"
        ),
        before_number=_words(
            "No Nos no nos Nr nr Vol Vols vol vols Fig Figs fig figs Ch ch Chap chap Art art "
            "Pp pp p Sec sec Sect sect Para para Pt pt Ex ex Op op Jan Feb Mar Apr Jun Jul "
            "Aug Sep Sept Oct Nov Dec Rte Hwy"
        ),
        maybe_final=_words(
            "Inc Ltd Co Corp Bros Plc Jr Sr Esq al cit seq Ave Blvd Rd Sq Ln Pl Ct "
            "a.m p.m A.D B.C B.C.E C.E U.S U.K U.N U.S.A U.S.S.R D.C Ph.D M.D B.A M.A"
        ),
        starters=_words(
            "A An I The This That These Those There Their They Then Thus Today He She It Its His Her "
            "We Our You Your In On At By For From To After Before During Since Until Although "
            "Though While When Where Whereas However But And Or Nor So Yet Also As If Because "
            "Despite Following Many Most Some Several Other Others Each Every Both Such One Two "
            "Three Another Later Meanwhile Nevertheless Moreover Furthermore Finally First Second "
            "Instead Indeed Under Over Between Among Within Without According Unlike Like Upon"
        ),
    ),
    "de": SentenceRules(
        never_final=_words(
            _LATIN + " Dr Prof Hr Hrn Fr Frl St Dipl Ing Mag z.B z.b d.h u.a o.ä u.ä s.o s.u "
            "vgl Vgl bzw evtl ggf inkl insb sog geb gest verh gegr Bd Bde Hg Hrsg hrsg ca "
            "zzgl abzgl allg bspw eigtl Abk v n"
        ),
        before_number=_words("Nr Nrn Abs Art Kap Bd Jan Feb Mär Apr Aug Sep Sept Okt Nov Dez Tel"),
        maybe_final=_words("u.a Jh Jhd Jhdt Mio Mrd Tsd Chr Str GmbH AG e.V a.D"),
        starters=_words(
            "Der Die Das Den Dem Des Ein Eine Einer Er Sie Es Wir Ihr Im In Am An Auf Aus Bei "
            "Mit Nach Seit Von Vor Zum Zur Als Auch Aber Doch Dies Diese Dieser Dieses Damit "
            "Danach Dabei Dort Heute Jedoch Nachdem Obwohl Während Wenn Weil So Zudem Außerdem "
            "Später Seine Sein Ihre Ihr"
        ),
        ordinal_numbers=True,
    ),
    "fr": SentenceRules(
        never_final=_words(
            _LATIN + " M MM Mme Mmes Mlle Mlles Dr Pr Me Mgr St Ste av apr env cf c.-à-d "
            "c-à-d ex éd dir coll trad préf"
        ),
        before_number=_words("p pp t vol no n° chap art fig janv févr avr juil sept oct nov déc"),
        maybe_final=_words("J.-C Cie"),
        starters=_words(
            "Le La Les Un Une Des Il Elle Ils Elles On Ce Cet Cette Ces En Dans Au Aux Par Pour "
            "Sur Depuis Après Avant Pendant Mais Et Ou Donc Or Ainsi Alors Cependant Puis Selon "
            "Son Sa Ses Leur Leurs Lors Enfin Aujourd'hui"
        ),
    ),
    "es": SentenceRules(
        never_final=_words(
            _LATIN + " Sr Sra Srta Sres Dr Dra Lic Ing Prof Arq Ud Uds Vd Vds Excmo Excma Ilmo "
            "Sto Sta Gral p.ej ej aprox ca pág págs cap vol núm tel"
        ),
        before_number=_words("p pp pág págs núm n.º art cap vol ene feb mar abr jun jul ago sep oct nov dic"),
        maybe_final=_words("a.C d.C a.m p.m EE.UU S.A Cía"),
        starters=_words(
            "El La Los Las Un Una Unos Unas En Este Esta Estos Estas Ese Esa Se Su Sus Por Para "
            "Con Desde Durante Después Antes Tras Pero Sin Aunque Cuando Como Así También Sin "
            "Según Además Entre Hoy Ya Él Ella Ellos Ellas Allí"
        ),
    ),
    "bg": SentenceRules(
        never_final=_words(
            "т.е Т.е т.нар Т.нар напр Напр вж Вж ср срв Срв проф акад доц ген полк ст.н.с "
            "св с р гр о ул бул пл пк кв обл общ англ лат гр нем фр рус ит исп ез"
        ),
        before_number=_words("ок стр бр т № ч кн изд ал чл ян фев авг септ окт ноем дек"),
        maybe_final=_words("т.н и.т.н др пр.н.е н.е сл.н.е хил млн млрд лв ЕООД ООД АД"),
        starters=_words(
            "Той Тя То Те Това Тази Този Тези Там Тук Така Тогава През При След Преди По На Във "
            "От До За Според Но Като Когато Въпреки Освен Също Днес Сега Обаче Има Няма Не Се "
            "Най Неговият Негова Неговата Нейният Техните Първият Първата Още Докато Макар Затова "
            "Поради Чрез Между Около Там Един Една Едно Някои Много Всички"
        ),
        lowercase_letters_are_abbreviations=False,
    ),
}
GENERIC_RULES = SentenceRules()

# kept for callers of the earlier module: the English abbreviations of all kinds
ABBREVIATIONS = (
    SENTENCE_RULES["en"].never_final | SENTENCE_RULES["en"].before_number | SENTENCE_RULES["en"].maybe_final
)

# "\n", or end punctuation, closing quotes or brackets and a space (one scan:
# one class test per character).
_SENTENCE_CUT = re.compile(
    r"[\n.!?…](?:(?<=\n)|(?P<punctuation>[.!?…]*(?:[\"'”’“)\]]|[ \u00a0\u202f]?»)*)[ \t]+)"
)
_END_PUNCTUATION = ".!?…"
_DOTTED = re.compile(r"(?:[^\W\d_]+\.-?)+[^\W\d_]+")  # "U.S", "e.g", "т.нар", "J.-C"
_ROMAN = re.compile(r"[IVXLC]+\b")
_NEXT_WORD = re.compile(r"[\"'“‘«„(\[]*([^\s.,;:!?\"'”’»)\]]*)")
_OPENING_CHARS = frozenset("\"'“‘«„([")
_WORD_PREFIX_CHARS = "(\"'“‘«„["


def split_sentences(
    text: str,
    links: list[Link],
    min_chars: int = 20,
    max_chars: int = 1000,
    stats: Counter | None = None,
    language: str = "en",
) -> list[tuple[str, list[Link]]]:
    """Split text into sentences on "\\n" and on .!?… before an uppercase start.

    Abbreviations, initials, decimals, quotes and brackets are handled with the
    rules of `language` (en, de, fr, es, bg; other codes get shape rules only).
    Returns the sentences whose length is within [min_chars, max_chars], each with
    the links lying fully inside it, offsets re-based to the sentence. When `stats`
    is given, its "kept", "too_short" and "too_long" counts are incremented.
    """
    rules = SENTENCE_RULES.get(base_language(language), GENERIC_RULES)
    ordered = sorted(links)  # tuples: by start first; already sorted when from wikitext_to_text
    if _wikitext_c is not None:
        sentences, too_short, too_long = _wikitext_c.split_sentences(
            text, ordered, min_chars, max_chars, _is_abbreviation, rules, rules.special_words,
            rules.capitalised_tails, Link,
        )
    else:
        sentences, too_short, too_long = _split_sentences(text, ordered, min_chars, max_chars, rules)
    if stats is not None:
        for reason, count in (("kept", len(sentences)), ("too_short", too_short), ("too_long", too_long)):
            if count:
                stats[reason] += count
    return sentences


def _split_sentences(text: str, ordered: list[Link], min_chars: int, max_chars: int, rules: SentenceRules):
    """`split_sentences` on sorted links, in Python (the C version's specification):
    the kept sentences and the counts of those too short and too long."""
    link_starts = list(map(_link_start, ordered))
    link_ends = list(map(_link_end, ordered))
    sentences = []
    add = sentences.append
    too_short = too_long = 0
    first = 0  # the first link starting at or after the sentence: both only move forward
    for start, end in _sentence_bounds(text, link_starts, link_ends, rules):
        length = end - start
        if length < min_chars:
            too_short += 1
            continue
        if length > max_chars:
            too_long += 1
            continue
        first = bisect_left(link_starts, start, first)
        stop = bisect_left(link_starts, end, first)
        if first == stop:
            add((text[start:end], []))
            continue
        add((text[start:end], [_new_link((s - start, e - start, target, anchor))
                               for s, e, target, anchor in ordered[first:stop] if e <= end]))
    return sentences, too_short, too_long


def _sentence_bounds(text: str, link_starts: list[int], link_ends: list[int], rules: SentenceRules):
    """Stripped, non-empty (start, end) sentence spans, in order.

    One loop over the candidate cuts with every check written out (no call per
    cut): a page has hundreds of cuts, and most end a sentence after a lowercase
    word, which needs no abbreviation rule (`_is_abbreviation` is called for the rest)."""
    bounds: list[tuple[int, int]] = []
    add = bounds.append
    begin = 0
    text_length = len(text)
    special = rules.special_words
    for cut in _SENTENCE_CUT.finditer(text):
        end = cut.end("punctuation")
        if end < 0:  # "\n"
            end = cut.start()
            next_begin = end + 1
        else:
            next_begin = cut.end()
            if next_begin < text_length:
                following = text[next_begin]
                if not (following.isupper() or following.isdigit() or following in _OPENING_CHARS):
                    continue
                # not inside a link; links do not overlap, so only the last one starting before can hold it
                if link_starts:
                    index = bisect_left(link_starts, end) - 1
                    if index >= 0 and link_ends[index] > end:
                        continue
                punct_start = cut.start()
                # a single period, maybe closed by quotes or brackets: `"Stop." Then` ends,
                # `„сл.Хр.“ (след` does not
                if text[punct_start] == "." and (
                    end - punct_start == 1 or text[punct_start + 1] not in _END_PUNCTUATION
                ):
                    # the word before; the "\n" search stops at the space, not back at the paragraph's start
                    space = text.rfind(" ", 0, punct_start)
                    word_start = max(space, text.rfind("\n", space + 1, punct_start)) + 1
                    word = text[word_start:punct_start].lstrip(_WORD_PREFIX_CHARS)
                    if (word in special or len(word) < 2 or "." in word or word[0].isupper() or word.isdigit()) \
                            and _is_abbreviation(word, text, next_begin, rules):
                        continue
        if begin < end and not (text[begin].isspace() or text[end - 1].isspace()):
            add((begin, end))  # the usual case: compacted text
        else:
            _add_stripped(bounds, text, begin, end)
        begin = next_begin
    _add_stripped(bounds, text, begin, text_length)
    return bounds


def _add_stripped(bounds: list, text: str, start: int, end: int) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        bounds.append((start, end))


def _is_abbreviation(word: str, text: str, next_begin: int, rules: SentenceRules) -> bool:
    """Whether the "." after `word` is an abbreviation's, so no sentence ends there."""
    if not word:
        return False
    if word in rules.never_final or (word[0].isupper() and word[0].lower() + word[1:] in rules.never_final):
        return True
    if word in rules.before_number:
        return _following_is_number(text, next_begin)
    if word in rules.maybe_final:
        return not _starts_sentence(text, next_begin, rules)
    if word.isdigit():  # de "am 3. Oktober"
        return rules.ordinal_numbers and len(word) <= 3 and not _starts_sentence(text, next_begin, rules)
    if len(word) == 1:
        if word.isupper():  # an initial: "J. R. R. Tolkien"; "World War I. The war …" splits
            return not _starts_sentence(text, next_begin, rules, single_letters=False)
        return word.isalpha() and rules.lowercase_letters_are_abbreviations
    if "." in word and _DOTTED.fullmatch(word):  # "U.S.", "a.m.", "т.нар."
        return not _starts_sentence(text, next_begin, rules)
    return False


def _following_is_number(text: str, pos: int) -> bool:
    return text[pos].isdigit() or _ROMAN.match(text, pos) is not None


def _starts_sentence(text: str, pos: int, rules: SentenceRules, single_letters: bool = True) -> bool:
    """Whether the word at `pos` is one that commonly opens a sentence ("The", "Той");
    after an initial, "A" and "I" are more likely initials too ("J. A. Smith")."""
    word = _NEXT_WORD.match(text, pos).group(1)
    return (single_letters or len(word) > 1) and word in rules.starters
