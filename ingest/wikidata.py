"""Wikidata JSON dump, read in parallel, line-aligned byte ranges.

A dump (``latest-all.json``, ``.json.gz``, ``.json.bz2``) is one JSON array
with one entity per line: line 1 is ``[``, each entity line ends in ``,``
(except the last) and the last line is ``]``.

The ranges and their compressions are ``ingest/wikidata_ranges.py``; this module
plans them (``plan_ranges``) and turns the lines a range owns into rows.

Rows
----
Per item: the labels of the selected languages, the sitelinks of the selected
wikis (an item with none of them is skipped, counted ``no_sitelink``) and the
values of the selected properties (deprecated statements and
``somevalue``/``novalue`` snaks skipped; an item value is its QID, other
values their main literal). A line that is not JSON, or an object without
``type``/``id``, is counted ``bad_json`` and quarantined with its offset;
reading never raises on content, only on a broken container (a truncated or
corrupt compressed file, a gz range that does not end on a line boundary).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from ingest.bz2_blocks import LostLines
from ingest.wikidata_ranges import (  # noqa: F401 - the ranges are part of this module's API
    COMPRESSIONS,
    DumpError,
    WikidataRange,
    bz2_index,
    compression_of,
    iter_range_lines,
    plan_gz,
    plan_ranges,
)

DEFAULT_LANGUAGES = ("en",)
DEFAULT_WIKIS = ("enwiki",)
DEFAULT_PROPERTIES = ("P31", "P17", "P452", "P27", "P279")
# The 18 languages of multilingual EASE (Nishikawa et al. 2022, section 5,
# footnote 4: "ar, ca, cs, de, en, eo, es, fa, fr, it, ja, ko, nl, pl, pt,
# ru, sv, tr"), as Wikipedia sitelink keys.
MULTILINGUAL_EASE_LANGUAGES = (
    "ar", "ca", "cs", "de", "en", "eo", "es", "fa", "fr",
    "it", "ja", "ko", "nl", "pl", "pt", "ru", "sv", "tr",
)
MULTILINGUAL_EASE_WIKIS = tuple(f"{lang}wiki" for lang in MULTILINGUAL_EASE_LANGUAGES)

SNIPPET_CHARS = 200
QUARANTINE_KEEP = 10_000  # entries a WikidataStats keeps; the count covers all
QUARANTINE_REPORT = 100  # entries as_dict() reports

# --------------------------------------------------------------------------
# selection and rows


@dataclass(frozen=True)
class EntitySelection:
    """What to keep of each item."""

    languages: tuple[str, ...] = DEFAULT_LANGUAGES  # labels kept
    wikis: tuple[str, ...] = DEFAULT_WIKIS  # sitelinks kept; an item with none is skipped
    properties: tuple[str, ...] = DEFAULT_PROPERTIES  # claims kept

    def __post_init__(self) -> None:
        for name in ("languages", "wikis", "properties"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise TypeError(f"EntitySelection.{name} must be a sequence of strings, not {value!r}")
            object.__setattr__(self, name, tuple(value))
        if not self.wikis:
            raise ValueError("EntitySelection.wikis is empty: every item would be skipped")


def _as_dict(value) -> dict:
    # Wikibase serialises an empty map as [] (PHP arrays), e.g. "labels":[].
    return value if isinstance(value, dict) else {}


_ENTITY_PREFIX = {"item": "Q", "property": "P", "lexeme": "L", "form": "F", "sense": "S"}


def snak_value(datavalue: dict) -> str | None:
    """The main literal of a ``datavalue``: an entity's id, a string, a
    monolingual text, a quantity's amount, a time; anything else as sorted
    JSON."""
    value = datavalue.get("value")
    kind = datavalue.get("type")
    if value is None:
        return None
    if kind == "wikibase-entityid" and isinstance(value, dict):
        if "id" in value:
            return str(value["id"])
        if "numeric-id" in value:
            prefix = _ENTITY_PREFIX.get(value.get("entity-type", "item"), "Q")
            return f"{prefix}{value['numeric-id']}"
    elif kind == "string" and isinstance(value, str):
        return value
    elif kind == "monolingualtext" and isinstance(value, dict) and "text" in value:
        return str(value["text"])
    elif kind == "quantity" and isinstance(value, dict) and "amount" in value:
        return str(value["amount"])
    elif kind == "time" and isinstance(value, dict) and "time" in value:
        return str(value["time"])
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _kept(entries, keys, key_name: str, field: str) -> list[dict]:
    """``{key_name: key, field: text}`` of each of ``keys`` (wikis, languages) that ``entries`` (an entity's
    sitelinks or labels) holds with a string ``field``, in the order of ``keys``."""
    entries = _as_dict(entries)
    kept = []
    for key in keys:
        entry = entries.get(key)
        if isinstance(entry, dict) and isinstance(entry.get(field), str):
            kept.append({key_name: key, field: entry[field]})
    return kept


def entity_row(entity: dict, selection: EntitySelection) -> dict | None:
    """The ``schemas.WIKIDATA`` row of an item, or None for a non-item or an
    item without a sitelink to one of ``selection.wikis``.

    Labels and sitelinks come in the order of the selection; claims in the
    order of ``selection.properties``, then statement order.
    """
    if entity.get("type") != "item":
        return None
    sitelinks = _kept(entity.get("sitelinks"), selection.wikis, "wiki", "title")
    if not sitelinks:
        return None
    labels = _kept(entity.get("labels"), selection.languages, "language", "value")
    claims_in = _as_dict(entity.get("claims"))
    claims = []
    for prop in selection.properties:
        statements = claims_in.get(prop)
        if not isinstance(statements, list):
            continue
        for statement in statements:
            if not isinstance(statement, dict) or statement.get("rank") == "deprecated":
                continue
            snak = statement.get("mainsnak")
            if not isinstance(snak, dict) or snak.get("snaktype") != "value":
                continue
            datavalue = snak.get("datavalue")
            if not isinstance(datavalue, dict):
                continue
            value = snak_value(datavalue)
            if value is not None:
                claims.append({"property": prop, "value": value})
    return {"qid": str(entity["id"]), "labels": labels, "sitelinks": sitelinks, "claims": claims}


# --------------------------------------------------------------------------
# stats


@dataclass
class WikidataStats:
    """Counts of one or more ranges. ``lines == written + sum(skipped.values())``.

    ``skipped`` reasons: ``bad_json`` (not JSON, or no ``type``/``id``),
    ``non_item`` (properties, lexemes, ...), ``no_sitelink`` (an item without a
    sitelink to a selected wiki). ``quarantined`` holds one entry
    ``{"path", "offset", "reason", "snippet"}`` per bad line (the first
    ``QUARANTINE_KEEP``; ``quarantined_count`` counts all). ``offset`` is the
    line's uncompressed byte offset for ``none``/``bz2``; for ``gz`` it is
    ``member_offset`` (the compressed offset of the range's first member,
    also in the entry) plus the line's offset in the data decompressed from
    there, i.e. decompress the members from ``member_offset`` and skip
    ``offset - member_offset`` bytes. For a single-member ``.gz`` both are
    plain uncompressed offsets.
    """

    lines: int = 0
    written: int = 0
    skipped: Counter = field(default_factory=Counter)
    quarantined: list[dict] = field(default_factory=list)
    quarantined_count: int = 0
    truncated: dict | None = None  # {"path", "after_offset", "error"}: the range could not be read to its end
    damaged: list[dict] = field(default_factory=list)  # runs of lost bzip2 blocks: {"path", "start", "end", ...}
    last_end: int = 0  # uncompressed offset after the last line read

    def quarantine(self, entry: dict) -> None:
        self.quarantined_count += 1
        if len(self.quarantined) < QUARANTINE_KEEP:
            self.quarantined.append(entry)

    def merge(self, other: WikidataStats) -> WikidataStats:
        self.lines += other.lines
        self.written += other.written
        self.skipped.update(other.skipped)
        self.quarantined_count += other.quarantined_count
        self.truncated = self.truncated or other.truncated
        self.damaged.extend(other.damaged)
        room = QUARANTINE_KEEP - len(self.quarantined)
        if room > 0:
            self.quarantined.extend(other.quarantined[:room])
        return self

    def as_dict(self) -> dict:
        return {
            "lines": self.lines,
            "written": self.written,
            "skipped": {k: self.skipped[k] for k in sorted(self.skipped)},
            "quarantined_count": self.quarantined_count,
            "quarantined": [dict(e) for e in self.quarantined[:QUARANTINE_REPORT]],
            "truncated": self.truncated,
            "damaged": self.damaged,
        }


def _count_lost_lines(lost: LostLines, rng: WikidataRange, stats: WikidataStats) -> None:
    stats.lines += lost.lines
    stats.skipped["corrupt_block"] += lost.lines
    stats.damaged.append({"path": rng.path, "start": lost.gap.start, "end": lost.gap.end, "lines_cut": lost.lines,
                          "error": lost.gap.error[:300]})
    if lost.gap.at_end:
        stats.truncated = {"path": rng.path, "after_offset": stats.last_end, "compressed_offset": lost.gap.start,
                           "error": lost.gap.error[:300]}


_ITEM_START = re.compile(rb'\{\s*"type"\s*:\s*"item"')


def iter_range(rng: WikidataRange, selection: EntitySelection, stats: WikidataStats,
               prefilter: bool = False) -> Iterator[dict]:
    """The rows of a range, streamed; counts go into ``stats``.

    ``prefilter``: most Wikidata items have no sitelink to the configured
    wikis (scholarly articles, taxa, …). An item line in which no configured
    wiki id occurs as a quoted string cannot have such a sitelink, so with the
    prefilter it is counted ``no_sitelink`` without being parsed (a byte search
    instead of ``json.loads``). The price: such a line is checked only for its
    item prefix and closing brace, so broken JSON inside it is not caught.
    Off by default."""
    wiki_markers = [f'"{w}"'.encode() for w in selection.wikis]
    for offset, raw in _lines_of(rng, stats):
        stats.last_end = offset + len(raw)
        row = _row_of_line(offset, raw, rng, selection, stats, wiki_markers if prefilter else None)
        if row is not None:
            stats.written += 1
            yield row


def _lines_of(rng: WikidataRange, stats: WikidataStats) -> Iterator[tuple[int, bytes]]:
    """``(offset, raw line)`` of the range; lines lost in damaged bzip2 blocks counted, reading on after them;
    a file that ends early or a corrupt block recorded in ``stats.truncated``, where reading stops."""
    lines = iter_range_lines(rng)
    while True:
        try:
            item = next(lines)
        except StopIteration:
            return
        except DumpError:  # a range that does not fit the file: the plan is wrong, not the bytes
            raise
        except (EOFError, OSError, RuntimeError, ValueError) as e:  # the file ends early or a block is corrupt
            stats.truncated = {"path": rng.path, "after_offset": stats.last_end, "error": f"{type(e).__name__}: {e}"[:300]}
            return
        if isinstance(item, LostLines):  # damaged bzip2 blocks: reading went on after them
            _count_lost_lines(item, rng, stats)
            continue
        yield item


def _row_of_line(offset: int, raw: bytes, rng: WikidataRange, selection: EntitySelection, stats: WikidataStats,
                 wiki_markers: list[bytes] | None) -> dict | None:
    """The row of one dump line, or None with the reason counted (a line of broken JSON quarantined).
    ``wiki_markers``: the prefilter's byte search (``iter_range``), or None."""
    line = raw.strip()
    if line.endswith(b","):
        line = line[:-1].rstrip()
    if line in (b"", b"[", b"]"):
        return None
    stats.lines += 1
    if (wiki_markers is not None and line.endswith(b"}") and _ITEM_START.match(line)
            and not any(marker in line for marker in wiki_markers)):
        stats.skipped["no_sitelink"] += 1
        return None
    try:
        entity = json.loads(line)
        if not isinstance(entity, dict) or "type" not in entity or "id" not in entity:
            raise ValueError("not an entity object (no 'type' or 'id')")
        kind = entity["type"]
        row = entity_row(entity, selection) if kind == "item" else None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
        stats.skipped["bad_json"] += 1
        entry = {
            "path": rng.path,
            "offset": offset,
            "reason": f"bad_json: {e}"[:300],
            "snippet": raw[: SNIPPET_CHARS * 4].decode("utf-8", "replace")[:SNIPPET_CHARS],
        }
        if rng.compression == "gz":
            entry["member_offset"] = rng.start
        stats.quarantine(entry)
        return None
    if kind != "item":
        stats.skipped["non_item"] += 1
    elif row is None:
        stats.skipped["no_sitelink"] += 1
    return row


def read_range(rng: WikidataRange, selection: EntitySelection, stats: WikidataStats,
               prefilter: bool = False) -> list[dict]:
    """Rows of ``schemas.WIKIDATA`` for the lines a range owns, in file order."""
    return list(iter_range(rng, selection, stats, prefilter))
