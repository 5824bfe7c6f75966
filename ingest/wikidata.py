"""Wikidata JSON dump: one entity per line inside ``[`` … ``]``.

Only what the training sets need is kept per item: the English Wikipedia
title (``sitelinks.enwiki``), the English label, and the values of a few
item-valued properties (P31 instance of, P17 country, P452 industry, …).
Non-``value`` snaks and deprecated statements are skipped. A line that is not
JSON is a counted skip with its line number, never a crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import fsspec
import pyarrow as pa

KEPT_PROPERTIES = ("P31", "P17", "P452", "P27", "P279")

ENTITY_ROWS = pa.schema(
    [
        pa.field("qid", pa.string()),
        pa.field("title", pa.string()),
        pa.field("label", pa.string()),
        *[pa.field(p, pa.list_(pa.string())) for p in KEPT_PROPERTIES],
    ]
)


@dataclass
class WikidataStats:
    lines: int = 0
    items: int = 0
    items_with_enwiki: int = 0
    skipped_non_item: int = 0
    skipped_bad_json: int = 0
    bad_json_lines: list[int] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "lines": self.lines,
            "items": self.items,
            "items_with_enwiki": self.items_with_enwiki,
            "skipped_non_item": self.skipped_non_item,
            "skipped_bad_json": self.skipped_bad_json,
            "bad_json_lines_first": self.bad_json_lines[:20],
        }


def item_values(claims: dict, prop: str) -> list[str]:
    values = []
    for statement in claims.get(prop, ()):
        if statement.get("rank") == "deprecated":
            continue
        snak = statement.get("mainsnak", {})
        if snak.get("snaktype") != "value":
            continue
        value = snak.get("datavalue", {}).get("value")
        if isinstance(value, dict) and "id" in value:
            values.append(value["id"])
        elif isinstance(value, dict) and "numeric-id" in value:
            values.append(f"Q{value['numeric-id']}")
    return values


def entity_row(entity: dict) -> dict | None:
    """The kept fields of an item with an English Wikipedia article, else None."""
    sitelink = entity.get("sitelinks", {}).get("enwiki")
    if not sitelink:
        return None
    claims = entity.get("claims", {})
    label = entity.get("labels", {}).get("en", {}).get("value")
    row = {"qid": entity["id"], "title": sitelink["title"], "label": label}
    for prop in KEPT_PROPERTIES:
        row[prop] = item_values(claims, prop)
    return row


def read_entities(path: str, stats: WikidataStats) -> list[dict]:
    """All items of a dump file (``.json``, ``.json.bz2``, ``.json.gz``) that
    have an enwiki sitelink. Counts what it reads and skips into ``stats``."""
    rows = []
    with fsspec.open(path, "rb", compression="infer") as f:
        for line_number, raw in enumerate(f, start=1):
            line = raw.strip()
            if line.endswith(b","):
                line = line[:-1]
            if line in (b"", b"[", b"]"):
                continue
            stats.lines += 1
            try:
                entity = json.loads(line)
                kind = entity["type"]
            except (ValueError, KeyError, TypeError):
                stats.skipped_bad_json += 1
                stats.bad_json_lines.append(line_number)
                continue
            if kind != "item":
                stats.skipped_non_item += 1
                continue
            stats.items += 1
            row = entity_row(entity)
            if row is not None:
                stats.items_with_enwiki += 1
                rows.append(row)
    return rows
