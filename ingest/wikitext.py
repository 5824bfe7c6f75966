"""Wikitext to plain text with hyperlink spans, and a rule-based sentence splitter.

`wikitext_to_text` is a regex-and-scanner extractor (no template expansion), the
fast default recommended in docs/ray.md section 5. It works in passes over the
page, each one removing a kind of markup that cannot carry article text:

1. HTML comments; an unclosed ``<!--`` hides the rest of the page, as in MediaWiki.
2. ``<nowiki>`` content is escaped so that later passes leave it alone.
3. Extension blocks dropped with their content (``<ref>``, ``<gallery>``,
   ``<math>``, ``<syntaxhighlight>``, ...). An unclosed one is dropped to the end
   of its paragraph (the next blank line) or of the page.
4. Templates ``{{…}}`` and tables ``{| … |}``, nested in any order, found by one
   stack scanner. An unclosed one is dropped to the end of its paragraph.
5. ``[[File:…]]``, ``[[Image:…]]``, ``[[Category:…]]`` and interlanguage links,
   whose captions may hold nested links. An unclosed one is dropped to the end
   of its paragraph.
6. Headings, list markers, horizontal rules, behaviour switches (``__TOC__``).
7. One tokenizer renders the inline markup left: wikilinks become `Link` spans,
   external links keep their label, bare URLs, bold/italic quotes and simple
   HTML tags go, entities are unescaped. Stray ``[[``/``]]``/``{{``/``}}`` go too.
8. Whitespace is compacted (paragraphs are separated by one ``"\\n"``) while link
   offsets are remapped, so ``text[link.start:link.end] == link.anchor`` holds.

Every scanner moves forward only and regexes avoid nested quantifiers, so broken
markup costs linear time. Links to other wikis (``[[wikt:…]]``, ``[[:fr:…]]``)
keep their text but give no `Link`; links to other namespaces of the same wiki
(``[[:Category:X]]``, ``[[Wikipedia:…]]``) do give one.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    start: int
    end: int
    target: str
    anchor: str


# ---------------------------------------------------------------- titles

_TITLE_SPACES = re.compile(r"[\s_]+")
_CANONICAL_NAMESPACES = {
    name.lower(): name
    for name in (
        "Category", "File", "Image", "Media", "Wikipedia", "Help", "Template",
        "Portal", "User", "Talk", "Draft", "Module", "Special", "MediaWiki", "Book",
    )
}


def normalize_title(title: str) -> str:
    """Normalize a page title as MediaWiki does for `[[links]]` (first-letter case)."""
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
    if "<nowiki" not in text and "<NOWIKI" not in text:
        return text
    return _NOWIKI.sub(lambda m: (m.group(1) or "").translate(_NOWIKI_ESCAPES), text)


# ---------------------------------------------------------------- 3 extension blocks

DROPPED_BLOCK_TAGS = (
    "ref", "references", "gallery", "math", "chem", "ce", "syntaxhighlight", "source",
    "pre", "score", "timeline", "graph", "imagemap", "mapframe", "maplink", "hiero",
    "templatedata", "templatestyles", "inputbox", "categorytree", "includeonly", "table",
)
_BLOCK_TAG = re.compile(
    r"<(/?)[ \t]*(" + "|".join(sorted(DROPPED_BLOCK_TAGS, key=len, reverse=True))
    + r")\b([^<>]*)>",
    re.I,
)


def _remove_extension_blocks(text: str) -> str:
    """Drop paired and self-closing extension tags with their content."""
    if "<" not in text:
        return text
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        tag = _BLOCK_TAG.search(text, pos)
        if tag is None:
            return _cut_spans(text, spans)
        is_close, name = tag.group(1), tag.group(2).lower()
        if is_close or tag.group(3).rstrip().endswith("/"):
            spans.append((tag.start(), tag.end()))  # self-closing or stray close tag
            pos = tag.end()
            continue
        end = _block_end(text, tag.end(), name)
        spans.append((tag.start(), end))
        pos = end


def _block_end(text: str, pos: int, name: str) -> int:
    """End of the block opened just before `pos`: after its close tag, or, when it
    is unclosed, its paragraph end (never past a reopening of the same tag)."""
    search_from = pos
    while True:
        tag = _BLOCK_TAG.search(text, search_from)
        if tag is None:
            return _paragraph_end(text, pos)
        if tag.group(2).lower() == name:
            if tag.group(1):
                return tag.end()
            if not tag.group(3).rstrip().endswith("/"):
                return _paragraph_end(text, pos, tag.start())
        search_from = tag.end()


# ---------------------------------------------------------------- 4 templates and tables

# Tables open and close at line starts; matching "\n" is much faster than "^" with re.M.
_BRACE_TOKEN = re.compile(r"\{\{|\}\}|\n[ \t:]*\{\||\n[ \t]*\|\}")
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
    unclosed: returns (cleaned text before it, its start), or (cleaned text, None)."""
    spans: list[tuple[int, int]] = []
    stack: list[str] = []
    outer_start = pos = 0
    while True:
        token = _BRACE_TOKEN.search(text, pos)
        if token is None:
            break
        kind = token.group().lstrip("\n \t:")
        pos = token.end()
        if kind in (_TEMPLATE, _TABLE):
            if not stack:
                outer_start = token.start()
            stack.append(kind)
            continue
        if not stack:
            spans.append((token.start(), token.end()))  # stray closer
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
            spans.append((outer_start, pos))
    if stack:
        return _cut_spans(text[:outer_start], spans), outer_start
    return _cut_spans(text, spans), None


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

_LINE_MARKUP = re.compile(r"^[ \t]*=[^\n]*=[ \t]*$|^[ \t]*[*#:;]+[ \t]*|^-{4,}", re.M)
_BEHAVIOUR_SWITCH = re.compile(r"__[A-Z]+__")


def _remove_line_markup(text: str) -> str:
    text = _LINE_MARKUP.sub("", text)
    return _BEHAVIOUR_SWITCH.sub("", text) if "__" in text else text


# ---------------------------------------------------------------- 7 inline rendering

INLINE_TAGS = frozenset(
    "span small big sup sub b i u s strike del ins code tt kbd var samp abbr cite q em "
    "strong font center div p blockquote poem br hr li ul ol dl dt dd caption "
    "onlyinclude noinclude section bdi mark wbr ruby rb rt rp time data dfn translate "
    "tr td th tbody thead nowiki".split()
)
# The leading lookahead only speeds up the scan (about 4x): it rejects most
# positions before the alternatives are tried.
_INLINE = re.compile(
    r"(?=[\[\]&<'{}]|https?:|ftp:)(?:"
    r"(?P<link>\[\[(?P<inner>[^\[\]\n]*)\]\](?P<trail>[a-z]+)?)"
    r"|(?P<external>\[(?:https?:|ftp:|mailto:|//)[^\s\[\]<>\"]*(?:[ \t]+(?P<label>[^\[\]\n]*))?\])"
    r"|(?P<url>(?:https?|ftp)://[^\s\[\]<>\"{}|]+)"
    r"|(?P<quotes>'{2,})"
    r"|(?P<entity>&(?:[a-zA-Z][a-zA-Z0-9]*|#[0-9]+|#[xX][0-9a-fA-F]+);)"
    r"|(?P<tag></?[ \t]*(?P<tagname>[a-zA-Z][a-zA-Z0-9]*)\b[^<>]*>)"
    r"|(?P<stray>\[\[|\]\]|\{\{|\}\}))"
)
_ANCHOR_MARKUP = re.compile(
    r"'{2,}|(?P<entity>&(?:[a-zA-Z][a-zA-Z0-9]*|#[0-9]+|#[xX][0-9a-fA-F]+);)"
    r"|</?[ \t]*(?P<tagname>[a-zA-Z][a-zA-Z0-9]*)\b[^<>]*>"
)
_PIPE_TRICK_SUFFIX = re.compile(r"\s*(?:\([^()]*\)|,.*)$")


def _render_inline(text: str) -> tuple[str, list[tuple[int, int, str]]]:
    """Render inline markup; returns the text and (start, end, target) link spans."""
    pieces: list[str] = []
    links: list[tuple[int, int, str]] = []
    length = pos = 0
    for token in _INLINE.finditer(text):
        if token.start() > pos:
            pieces.append(text[pos : token.start()])
            length += token.start() - pos
        pos = token.end()
        kind = token.lastgroup
        if kind == "link":
            anchor, target = _parse_wikilink(token.group("inner"), token.group("trail") or "")
            stripped = anchor.strip()
            if target and stripped:
                start = length + anchor.index(stripped[0])
                links.append((start, start + len(stripped), target))
            rendered = anchor
        elif kind == "external":
            rendered = _clean_anchor(token.group("label") or "")
        elif kind == "entity":
            rendered = html.unescape(token.group())
        elif kind == "tag":
            rendered = _render_tag(token)
        else:  # bare url, quotes, stray brackets
            rendered = ""
        pieces.append(rendered)
        length += len(rendered)
    pieces.append(text[pos:])
    return "".join(pieces), links


def _render_tag(tag: re.Match) -> str:
    name = tag.group("tagname").lower()
    if name not in INLINE_TAGS:
        return tag.group()  # an unknown name is text, e.g. "<Ctrl>" in prose
    return " " if name in ("br", "hr", "p", "li", "div") else ""


def _parse_wikilink(inner: str, trail: str) -> tuple[str, str]:
    """(visible anchor, normalized target or '' when it is no article link)."""
    target_text, pipe, anchor = inner.partition("|")
    bare = target_text.strip().lstrip(":").strip()
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

_LOOSE_WHITESPACE = re.compile(r"[^\S ]\s*| \s+")  # any run but a lone " "


def _compact_whitespace(text: str, spans: list[tuple[int, int, str]]) -> tuple[str, list[Link]]:
    """Collapse whitespace (a run with a newline becomes one "\\n"), remapping spans."""
    leading = len(text) - len(text.lstrip())
    text = text.strip()  # spans never start or end in whitespace: anchors are stripped
    spans = [(start - leading, end - leading, target) for start, end, target in spans]
    pieces: list[str] = []
    run_ends: list[int] = []
    removed_before: list[int] = []
    removed = pos = 0
    for run in _LOOSE_WHITESPACE.finditer(text):
        replacement = "\n" if "\n" in run.group() else " "
        pieces.append(text[pos : run.start()])
        pieces.append(replacement)
        pos = run.end()
        removed += run.end() - run.start() - len(replacement)
        run_ends.append(run.end())
        removed_before.append(removed)
    pieces.append(text[pos:])
    compact = "".join(pieces)

    def remap(offset: int) -> int:
        runs = bisect_right(run_ends, offset)
        return offset - (removed_before[runs - 1] if runs else 0)

    links = []
    for start, end, target in spans:
        start, end = remap(start), remap(end)
        links.append(Link(start, end, target, compact[start:end]))
    return compact, links


# ---------------------------------------------------------------- public API


def wikitext_to_text(wikitext: str) -> tuple[str, list[Link]]:
    """Plain text of a page (paragraphs separated by "\\n") and its wikilink spans."""
    if _REDIRECT.match(wikitext):
        return "", []
    text = _remove_comments(wikitext)
    text = _escape_nowiki(text)
    text = _remove_extension_blocks(text)
    text = _remove_templates_and_tables(text)
    text = _remove_hidden_links(text)
    text = _remove_line_markup(text)
    rendered, spans = _render_inline(text)
    return _compact_whitespace(rendered, spans)


# ---------------------------------------------------------------- sentences

ABBREVIATIONS = frozenset(
    "Mr Mrs Ms Messrs Dr Prof St Ste Jr Sr Sen Rep Gov Gen Col Lt Sgt Capt Cmdr Adm Maj "
    "Rev Hon Fr Mt Ft No Nos Vol Vols Fig Figs Ch Pp Op Inc Ltd Co Corp Bros Ave Blvd "
    "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec "
    "vs v c ca cf e.g i.e al approx fl pp p ed eds vol no op viz esp incl est dept".split()
)
_SENTENCE_CUT = re.compile(r"\n|[.!?]+[\"'”’»)\]]*[ \t]+")
_DOTTED_INITIALS = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
_OPENING_CHARS = frozenset("\"'“‘«([")
_WORD_PREFIX_CHARS = "(\"'“‘«["


def split_sentences(
    text: str,
    links: list[Link],
    min_chars: int = 20,
    max_chars: int = 1000,
    stats: Counter | None = None,
) -> list[tuple[str, list[Link]]]:
    """Split text into sentences on "\\n" and on .!? before an uppercase start.

    Returns the sentences whose length is within [min_chars, max_chars], each with
    the links lying fully inside it, offsets re-based to the sentence. When `stats`
    is given, its "kept", "too_short" and "too_long" counts are incremented.
    """
    ordered = sorted(links, key=lambda link: link.start)
    link_starts = [link.start for link in ordered]
    sentences = []
    for start, end in _sentence_bounds(text, ordered, link_starts):
        length = end - start
        if length < min_chars or length > max_chars:
            if stats is not None:
                stats["too_short" if length < min_chars else "too_long"] += 1
            continue
        if stats is not None:
            stats["kept"] += 1
        sentences.append((text[start:end], _links_within(ordered, link_starts, start, end)))
    return sentences


def _sentence_bounds(text: str, links: list[Link], link_starts: list[int]):
    """Yield stripped, non-empty (start, end) sentence spans."""
    begin = 0
    for cut in _SENTENCE_CUT.finditer(text):
        if cut.group() == "\n":
            end, next_begin = cut.start(), cut.end()
        else:
            end, next_begin = cut.start() + len(cut.group().rstrip(" \t")), cut.end()
            if not _is_sentence_end(text, cut.start(), end, next_begin, links, link_starts):
                continue
        yield from _stripped(text, begin, end)
        begin = next_begin
    yield from _stripped(text, begin, len(text))


def _stripped(text: str, start: int, end: int):
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        yield start, end


def _is_sentence_end(text, punct_start, end, next_begin, links, link_starts) -> bool:
    if next_begin >= len(text):
        return True
    following = text[next_begin]
    if not (following.isupper() or following.isdigit() or following in _OPENING_CHARS):
        return False
    if _inside_link(end, links, link_starts):
        return False
    is_single_period = text[punct_start] == "." and not text.startswith("..", punct_start)
    return not (is_single_period and _is_abbreviation(_word_before(text, punct_start)))


def _word_before(text: str, pos: int) -> str:
    word_start = max(text.rfind(" ", 0, pos), text.rfind("\n", 0, pos)) + 1
    return text[word_start:pos].lstrip(_WORD_PREFIX_CHARS)


def _is_abbreviation(word: str) -> bool:
    if len(word) == 1:
        return word.isalpha()  # initials: "J. R. R. Tolkien"
    return word in ABBREVIATIONS or _DOTTED_INITIALS.fullmatch(word) is not None


def _inside_link(offset: int, links: list[Link], link_starts: list[int]) -> bool:
    index = bisect_left(link_starts, offset) - 1
    # links do not overlap, so only the last link starting before offset can hold it
    return index >= 0 and links[index].end > offset


def _links_within(links: list[Link], link_starts: list[int], start: int, end: int) -> list[Link]:
    inside = []
    for index in range(bisect_left(link_starts, start), len(links)):
        link = links[index]
        if link.start >= end:
            break
        if link.end <= end:
            inside.append(Link(link.start - start, link.end - start, link.target, link.anchor))
    return inside
