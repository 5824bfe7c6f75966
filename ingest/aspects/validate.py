"""Checks of the values that enter a SPARQL query or a path, and the wiki -> site mapping.

Every Wikidata id, language code and wiki name the aspect routes take from a
config goes through one of these checks before it is formatted into a query:
a value that does not match is a one-line ``ValueError`` naming the config key
and the value, raised before any request.
"""

from __future__ import annotations

import re

QID = re.compile(r"Q[1-9][0-9]*")
PID = re.compile(r"P[1-9][0-9]*")
LANGUAGE = re.compile(r"[a-z]{2,3}(-[a-z0-9]+)*")
WIKI = re.compile(r"[a-z][a-z0-9_]*wiki")

# Wikis whose site is not <language>.wikipedia.org (the sitelink keys Wikidata uses).
SPECIAL_SITES = {
    "commonswiki": "https://commons.wikimedia.org/",
    "metawiki": "https://meta.wikimedia.org/",
    "specieswiki": "https://species.wikimedia.org/",
    "wikidatawiki": "https://www.wikidata.org/",
    "mediawikiwiki": "https://www.mediawiki.org/",
    "sourceswiki": "https://wikisource.org/",
    "be_x_oldwiki": "https://be-tarask.wikipedia.org/",
}


def _check(pattern: re.Pattern, value, key: str, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ValueError(f"{key}: {value!r} is not {what}")
    return value


def check_qid(value, key: str = "aspects.class") -> str:
    """``value`` if it is a Wikidata item id (``Q42``), else a ValueError naming ``key``."""
    return _check(QID, value, key, "a Wikidata item id (Q followed by digits)")


def check_pid(value, key: str = "aspects.properties") -> str:
    """``value`` if it is a Wikidata property id (``P17``), else a ValueError naming ``key``."""
    return _check(PID, value, key, "a Wikidata property id (P followed by digits)")


def check_language(value, key: str = "aspects.language") -> str:
    """``value`` if it is a language code (``en``, ``zh-hans``), else a ValueError naming ``key``."""
    return _check(LANGUAGE, value, key, "a language code (2-3 lowercase letters, optional -subtags)")


def check_wiki(value, key: str = "aspects.wiki") -> str:
    """``value`` if it is a wiki's sitelink key (``enwiki``), else a ValueError naming ``key``."""
    return _check(WIKI, value, key, "a wiki name (lowercase, ending in 'wiki', e.g. enwiki)")


def check_properties(values, key: str = "aspects.properties") -> tuple[str, ...]:
    """A non-empty sequence of property ids (duplicates dropped, order kept)."""
    if isinstance(values, str):
        values = [values]
    values = tuple(dict.fromkeys(check_pid(v, key) for v in values))
    if not values:
        raise ValueError(f"{key}: no property given")
    return values


def wiki_site(wiki: str) -> str:
    """The site IRI a sitelink of ``wiki`` points into, as in the Wikidata RDF
    (``schema:isPartOf``): ``enwiki`` -> ``https://en.wikipedia.org/``,
    ``zh_yuewiki`` -> ``https://zh-yue.wikipedia.org/``."""
    check_wiki(wiki)
    if wiki in SPECIAL_SITES:
        return SPECIAL_SITES[wiki]
    return f"https://{wiki[:-len('wiki')].replace('_', '-')}.wikipedia.org/"


def wiki_language(wiki: str) -> str:
    """The language tag of a Wikipedia's titles (``schema:name``): ``zh_yuewiki`` -> ``zh-yue``."""
    check_wiki(wiki)
    return wiki[:-len("wiki")].replace("_", "-")


def id_sort_key(value: str) -> tuple:
    """Sort key of an id: Wikidata ids numerically (Q2 before Q10), other values after, as text."""
    if len(value) > 1 and value[0] in "QPL" and value[1:].isdigit():
        return (0, value[0], int(value[1:]), "")
    return (1, "", 0, value)
