"""The aspect label table both routes (``sparql.py``, ``offline.py``) return, built one way."""

from __future__ import annotations

import pyarrow as pa

from setformat import schemas
from ingest.aspects.validate import id_sort_key


def aspect_table(wiki: str, titles: dict[str, str], values: dict[tuple[str, str], dict[str, str]]) -> pa.Table:
    """``schemas.ASPECT_LABELS`` rows from ``titles`` ({qid: article title in ``wiki``}) and
    ``values`` ({(qid, property): {value id: label}}): one row per (entity, property) with at
    least one value, rows sorted by (qid, property) and each row's values by id (ids
    numerically: Q2 before Q10)."""
    keys = sorted((k for k, v in values.items() if v), key=lambda k: (id_sort_key(k[0]), id_sort_key(k[1])))
    rows = {name: [] for name in schemas.ASPECT_LABELS.names}
    for qid, prop in keys:
        ids = sorted(values[qid, prop], key=id_sort_key)
        rows["qid"].append(qid)
        rows["wiki"].append(wiki)
        rows["title"].append(titles[qid])
        rows["property"].append(prop)
        rows["label_qids"].append(ids)
        rows["labels"].append([values[qid, prop][i] for i in ids])
    return pa.table(rows, schema=schemas.ASPECT_LABELS)
