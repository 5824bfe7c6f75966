"""AspectCSE's aspect labels from the ``wikidata`` set a dump ingest wrote (no endpoint needed).

The same table as ``ingest.aspects.sparql.fetch_aspect_labels``: the items of
a class (a ``P31`` claim, or with ``subclasses`` a ``P31`` into the class's
``P279*`` closure over the set's own ``P279`` claims) that have a sitelink to
the chosen wiki and a value of the property, the values' labels in the chosen
language taken from the label items' rows in the same set (the id when the
item is not in the set or has no label in that language).

The set holds only what its ingest was configured to keep (``--properties``,
``--languages``, ``--wikis``; the manifest's ``config``): asking for something
else is an error telling how to re-ingest, not a silently empty table. The set
keeps every non-deprecated statement (the dump's ranks are not stored), where
the SPARQL route's ``wdt:`` keeps only the preferred ones of a property that
has any; the two agree on items without preferred statements.
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc

from setformat import schemas
from ingest.aspects.table import aspect_table
from ingest.aspects.validate import (
    check_language,
    check_properties,
    check_qid,
    check_wiki,
)
from setformat.io import read_manifest, read_table


def _flat(table: pa.Table, column: str) -> tuple[pa.Array, pa.StructArray]:
    """(row index of each element, the elements) of a list<struct> column."""
    array = table[column].combine_chunks()
    return pc.list_parent_indices(array), pc.list_flatten(array)


def _check_config(path, properties, wiki: str, language: str, subclasses: bool) -> None:
    try:
        config = read_manifest(path).get("config") or {}
    except schemas.SchemaError:
        return  # a set without manifest: nothing to check against
    kept = {"properties": config.get("properties"), "wikis": config.get("wikis"), "languages": config.get("languages")}
    wanted = {"properties": [*properties, "P31"] + (["P279"] if subclasses else []), "wikis": [wiki],
              "languages": [language]}
    for name, values in wanted.items():
        if kept[name] is None:
            continue
        missing = [v for v in dict.fromkeys(values) if v not in kept[name]]
        if missing:
            flag = "--" + name
            raise ValueError(f"the wikidata set at {path} was ingested without {name} {missing} (it kept "
                             f"{flag} {' '.join(kept[name])}); re-ingest with {flag} "
                             f"{' '.join(dict.fromkeys([*kept[name], *missing]))}")


def aspect_labels_from_wikidata_set(path, *, cls: str = "Q4830453", properties=("P17", "P452"),
                                    wiki: str = "enwiki", language: str = "en", subclasses: bool = False) -> pa.Table:
    """The ``schemas.ASPECT_LABELS`` table of the items of ``cls`` with an article in ``wiki``, one row per
    (item, property) with at least one value, from the ``wikidata`` set at ``path`` (see the module doc)."""
    cls = check_qid(cls, "aspects.class")
    properties = check_properties(properties, "aspects.properties")
    wiki, language = check_wiki(wiki, "aspects.wiki"), check_language(language, "aspects.language")
    _check_config(path, properties, wiki, language, subclasses)
    table = read_table(path, ["qid", "labels", "sitelinks", "claims"], kind="wikidata")
    qids = table["qid"].combine_chunks()

    rows, links = _flat(table, "sitelinks")
    on_wiki = pc.equal(links.field("wiki"), wiki)
    titles_by_row = dict(zip(pc.filter(rows, on_wiki).to_pylist(), pc.filter(links.field("title"), on_wiki).to_pylist()))

    rows, claims = _flat(table, "claims")
    props, vals = claims.field("property"), claims.field("value")

    classes = _subclasses(cls, qids, rows, props, vals) if subclasses else {cls}
    is_member = pc.and_(pc.equal(props, "P31"), pc.is_in(vals, pa.array(sorted(classes), pa.string())))
    members = {r for r in pc.filter(rows, is_member).to_pylist() if r in titles_by_row}

    wanted = pc.is_in(props, pa.array(list(properties), pa.string()))
    titles: dict[str, str] = {}
    values: dict[tuple[str, str], dict[str, str]] = {}
    wanted_rows = pc.filter(rows, wanted)
    for row, qid, prop, value in zip(wanted_rows.to_pylist(), pc.take(qids, wanted_rows).to_pylist(),
                                     pc.filter(props, wanted).to_pylist(), pc.filter(vals, wanted).to_pylist()):
        if row in members and value is not None:
            titles[qid] = titles_by_row[row]
            values.setdefault((qid, prop), {})[value] = value

    if not members:
        raise ValueError(f"no item is an instance of wd:{cls}{' (or of a subclass)' if subclasses else ''} with an "
                         f"article in {wiki} in the wikidata set at {path}; is aspects.class {cls} right?")
    for pid in properties:
        if not any(prop == pid for _, prop in values):
            raise ValueError(f"no item of class wd:{cls} with an article in {wiki} has property {pid} in the "
                             f"wikidata set at {path}; is {pid} right?")

    _label_values(table, qids, values, language)
    return aspect_table(wiki, titles, values)


def _subclasses(cls: str, qids, rows, props, vals) -> set[str]:
    """``cls`` and its P279* closure over the set's own P279 claims."""
    is_sub = pc.equal(props, "P279")
    children = defaultdict(set)
    for child, parent in zip(pc.take(qids, pc.filter(rows, is_sub)).to_pylist(), pc.filter(vals, is_sub).to_pylist()):
        children[parent].add(child)
    classes, todo = {cls}, [cls]
    while todo:
        for child in children.pop(todo.pop(), ()):
            if child not in classes:
                classes.add(child)
                todo.append(child)
    return classes


def _label_values(table: pa.Table, qids, values: dict[tuple[str, str], dict[str, str]], language: str) -> None:
    """Each value QID in ``values`` replaced by its label in ``language`` where the set has one (in place)."""
    needed = pa.array(sorted({v for labels in values.values() for v in labels}), pa.string())
    if not len(needed):
        return
    label_rows = pc.is_in(qids, needed)
    rows, labels = _flat(table.filter(label_rows), "labels")
    in_language = pc.equal(labels.field("language"), language)
    owners = pc.take(pc.filter(qids, label_rows), pc.filter(rows, in_language))
    text_of = dict(zip(owners.to_pylist(), pc.filter(labels.field("value"), in_language).to_pylist()))
    for labels_of in values.values():
        for value in labels_of:
            labels_of[value] = text_of.get(value, value)
