"""mwparserfromhell as the reference for `ingest.wikitext`'s links (tests and bench).

`oracle_links(wikitext)` lists the article links of a page as MediaWiki would
show them in the running text, found by walking mwparserfromhell's parse tree.
`link_agreement(pages)` scores `wikitext_to_text` against it.

What counts ("article text outside templates")
----------------------------------------------
The fast extractor deliberately drops some parts of a page; a link there is
neither expected from it nor counted against it. The oracle therefore skips,
by its own parse (not by the extractor's rules):

* templates ``{{…}}`` and template arguments ``{{{…}}}`` (nothing is expanded),
* comments,
* extension tags whose content is not running text: ``<ref>``, ``<references>``,
  ``<gallery>``, ``<math>``, ``<syntaxhighlight>``, ``<pre>``, ``<timeline>``,
  ``<imagemap>``, ``<includeonly>`` … (`SKIPPED_TAGS`),
* tables, both ``{| … |}`` wiki tables and HTML ``<table>`` (the extractor
  drops them: cells are not sentences), so links in tables are scored on
  neither side,
* headings (``== … ==`` lines; the extractor drops headings, not sentences),
* ``[[File:…]]``, ``[[Image:…]]``, ``[[Category:…]]`` (and their localized
  names) with their captions, and interlanguage links ``[[de:…]]``,
* interwiki links (``[[wikt:…]]``, ``[[:fr:…]]``, ``[[s:…]]``): they point out of
  the wiki, so neither side reports them,
* external links ``[http://… label]`` (a wikilink inside a label is not a link).

Everything else is walked: paragraphs, lists, bold/italic, inline HTML tags
(``<span>``, ``<small>``, ``<blockquote>``, ``<poem>``, ``<div>`` …).

A link is the pair (normalized target, visible anchor):

* target: ``normalize_title`` of the title (the same function on both sides);
  a section-only link ``[[#Sec]]`` has no target and is not counted,
* anchor: the text after ``|`` with its markup stripped (entities decoded,
  bold/italic and tags removed) or the title; the pipe trick ``[[Foo (bar)|]]``
  shows "Foo"; a link trail (``[[dog]]s`` → "dogs", with the wiki's trail
  letters, `LINK_TRAILS`) is appended; whitespace runs become one space.

Precision = matched / extractor links, recall = matched / oracle links, where
matched is the size of the multiset intersection per page, micro-averaged over
pages.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import mwparserfromhell
from mwparserfromhell.nodes import Tag, Text, Wikilink

from ingest.wikitext import LINK_TRAILS, normalize_title, wikitext_to_text  # the trail letters are MediaWiki data, not logic under test

SKIPPED_TAGS = frozenset(
    "ref references gallery math chem ce syntaxhighlight source pre score timeline graph "
    "imagemap mapframe maplink hiero templatedata templatestyles inputbox categorytree "
    "includeonly table nowiki".split()
)
# [[File:…]] and [[Category:…]] in English and the localized names of bg/ru/de/fr wikis.
HIDDEN_NAMESPACES = frozenset(
    "file image category media "
    "файл картинка изображение категория "
    "datei bild kategorie fichier catégorie".split()
)
# Interwiki prefixes of the Wikimedia interwiki map (the common ones) …
INTERWIKI = frozenset(
    "w wikipedia wikt wiktionary s wikisource q wikiquote b wikibooks n wikinews v "
    "wikiversity voy wikivoyage c commons m meta metawikimedia mw mediawikiwiki species "
    "wikispecies d wikidata wmf foundation phab phabricator doi arxiv google imdbname "
    "imdbtitle hdl rfc outreach incubator mediazilla bugzilla gerrit toollabs wikitech".split()
)
# … and the language editions (interlanguage links when unprefixed by ":").
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(?:-[a-z]+)*|simple")
_SPACES = re.compile(r"\s+")


def _trail_pattern(language: str) -> re.Pattern:
    base = language.replace("_", "-").split("-", 1)[0].lower()
    return re.compile("[" + LINK_TRAILS.get(base, LINK_TRAILS["en"]) + "]+")


def _classify(title: str) -> str:
    """'article', 'hidden' (media/category/interlanguage: dropped with caption) or 'interwiki'."""
    stripped = title.strip()
    leading_colon = stripped.startswith(":")
    bare = stripped.lstrip(":").strip()
    prefix, colon, _ = bare.partition(":")
    if not colon:
        return "article"
    prefix = prefix.strip()
    lowered = prefix.lower()
    if lowered in INTERWIKI:
        return "interwiki"
    if LANGUAGE_CODE.fullmatch(prefix):
        return "interwiki" if leading_colon else "hidden"
    if lowered in HIDDEN_NAMESPACES and not leading_colon:
        return "hidden"
    return "article"


def _pipe_trick(title: str) -> str:
    bare = title.strip().lstrip(":").split("#", 1)[0]
    _, colon, rest = bare.partition(":")
    if colon and rest:
        bare = rest
    bare = re.sub(r"\s*\([^()]*\)\s*$", "", bare)
    return bare.split(",", 1)[0].strip()


_QUOTES = re.compile(r"'{2,}")


def _plain(wikicode) -> str:
    text = _QUOTES.sub("", wikicode.strip_code(normalize=True, collapse=True))
    return _SPACES.sub(" ", text).strip()


def oracle_links(wikitext: str, language: str = "en") -> list[tuple[str, str]]:
    """(normalized target, anchor) of every article link in a page's running text."""
    links: list[tuple[str, str]] = []
    _walk(mwparserfromhell.parse(wikitext, skip_style_tags=True), links, _trail_pattern(language))
    return links


def _walk(wikicode, links: list, trail: re.Pattern) -> None:
    nodes = wikicode.nodes
    for index, node in enumerate(nodes):
        if isinstance(node, Wikilink):
            kind = _classify(str(node.title))
            if kind != "article":
                continue
            target = normalize_title(str(node.title).strip())
            if not target:
                continue
            if node.text is None:
                anchor = _plain(node.title).lstrip(":").strip()
            elif not str(node.text).strip():
                anchor = _pipe_trick(str(node.title))
            else:
                anchor = _plain(node.text)
            nxt = nodes[index + 1] if index + 1 < len(nodes) else None
            if isinstance(nxt, Text):
                match = trail.match(str(nxt.value))
                if match:
                    anchor += match.group()
            anchor = _SPACES.sub(" ", anchor).strip()
            if anchor:
                links.append((target, anchor))
        elif isinstance(node, Tag):
            if str(node.tag).strip().lower() in SKIPPED_TAGS or node.wiki_markup == "{|":
                continue
            if node.contents is not None:
                _walk(node.contents, links, trail)
        # Template, Argument, Comment, Heading, ExternalLink: skipped with what they hold;
        # Text, HTMLEntity: no links


# ---------------------------------------------------------------- scoring


@dataclass
class Agreement:
    pages: int = 0
    extractor: int = 0
    oracle: int = 0
    matched: int = 0
    missed: Counter = field(default_factory=Counter)  # oracle links the extractor lacks
    extra: Counter = field(default_factory=Counter)  # extractor links the oracle lacks

    @property
    def precision(self) -> float:
        return self.matched / self.extractor if self.extractor else 1.0

    @property
    def recall(self) -> float:
        return self.matched / self.oracle if self.oracle else 1.0

    def add(self, other: Agreement) -> Agreement:
        return Agreement(
            self.pages + other.pages, self.extractor + other.extractor, self.oracle + other.oracle,
            self.matched + other.matched, self.missed + other.missed, self.extra + other.extra,
        )


def extractor_links(wikitext: str, language: str = "en") -> list[tuple[str, str]]:
    _, links = wikitext_to_text(wikitext, language=language)
    return [(link.target, _SPACES.sub(" ", link.anchor).strip()) for link in links]


def link_agreement(wikitexts, language: str = "en") -> Agreement:
    """Micro-averaged agreement of `wikitext_to_text` with `oracle_links` over pages."""
    result = Agreement()
    for wikitext in wikitexts:
        ours = Counter(extractor_links(wikitext, language))
        theirs = Counter(oracle_links(wikitext, language))
        common = ours & theirs
        result.pages += 1
        result.extractor += sum(ours.values())
        result.oracle += sum(theirs.values())
        result.matched += sum(common.values())
        result.missed.update(theirs - common)
        result.extra.update(ours - common)
    return result
