"""Stage 1 of the pair ingest: read one unit (a file, a SentEval split, a chunk
of a hub dataset) in a Ray task, in its format (SentEval, SimCSE csv, jsonl /
json / csv / tsv tables, hub parquet chunks), and write its valid pair units
(``sentence1, relation, sentence2``; a SimCSE row is two units, its entailment
and its contradiction, tied by ``side``) to ``_work/pair_units``. Every other
row is counted under a reason (``missing_field``, ``malformed_row``,
``unknown_label``, ``excluded_label``, ``empty_text``, ``too_short``,
``too_long``, ``not_utf8``: a row holding bytes that are not UTF-8) with its
first row numbers.
"""

from __future__ import annotations

import csv
import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq

from infra.storage import arrow_filesystem
from ingest.pairs.sources import FIRST_ROWS, open_text
from setformat.io import file_digest, write_table

UNITS = pa.schema([
    pa.field("source", pa.int32()), pa.field("unit", pa.int32()), pa.field("row", pa.int64()),
    pa.field("side", pa.string()),  # null: a free pair; "e"/"c": the two halves of one SimCSE row
    pa.field("sentence1", pa.string()), pa.field("relation", pa.string()), pa.field("sentence2", pa.string()),
])


REPLACED = "\ufffd"  # what errors="replace" reads bytes that are not UTF-8 as


class _UnitStats:
    def __init__(self):
        self.records = 0
        self.pairs = 0
        self.dropped: Counter = Counter()
        self.first: dict[str, list[int]] = {}
        self.replaced_rows: list[int] = []  # rows kept with U+FFFD for bytes that are not UTF-8 (not_utf8: replace)

    def drop(self, reason: str, row: int, count: int = 1) -> None:
        self.pairs += count
        self.dropped[reason] += count
        rows = self.first.setdefault(reason, [])
        if len(rows) < FIRST_ROWS:
            rows.append(row)


def _relation(label, label_map: dict) -> tuple[str | None, str | None]:
    """(relation, drop reason)."""
    if label is None:
        return None, "unknown_label"
    key = str(label).strip()
    if key in label_map:
        relation = label_map[key]
    else:
        lowered = {str(k).lower(): v for k, v in label_map.items()}
        if key.lower() not in lowered:
            return None, "unknown_label"
        relation = lowered[key.lower()]
    return (relation, None) if relation is not None else (None, "excluded_label")


def _text_reason(texts, spec: dict) -> str | None:
    for t in texts:
        if not t:
            return "empty_text"
    for t in texts:
        if len(t) < spec["min_chars"]:
            return "too_short"
    for t in texts:
        if len(t) > spec["max_chars"]:
            return "too_long"
    return None


def _get(record, path: str):
    """``record["a"]["b"][0]`` for ``"a.b.0"``; raises KeyError when absent."""
    value = record
    for part in path.split("."):
        if isinstance(value, dict):
            if part not in value:
                raise KeyError(path)
            value = value[part]
        elif isinstance(value, (list, tuple)) and part.lstrip("-").isdigit():
            try:
                value = value[int(part)]
            except IndexError:
                raise KeyError(path) from None
        else:
            raise KeyError(path)
    return value


def _text(value) -> str | None:
    if value is None:
        return None
    return (value if isinstance(value, str) else str(value)).strip()


def _records(unit: dict):
    """(row number, record dict or None when malformed) per input record."""
    spec = unit["spec"]
    kind, files = spec["kind"], unit["files"]
    if kind == "senteval":
        with open_text(files[0]) as f1, open_text(files[1]) as f2, open_text(files[2]) as f3:
            for line, (a, b, label) in enumerate(zip(f1, f2, f3), start=1):
                yield line, {"s1": a, "s2": b, "label": label}
        return
    fmt = spec.get("format", "csv")
    if kind == "simcse_csv" or fmt in ("csv", "tsv"):
        with open_text(files[0], newline="") as f:
            reader = csv.DictReader(f, delimiter="\t" if fmt == "tsv" else ",",
                                    quoting=csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL)
            start = 2
            for record in reader:
                yield start, record
                start = reader.line_num + 1
        return
    if fmt == "parquet":
        offset = spec.get("row_offset", 0)
        arrow_fs, path = arrow_filesystem(files[0])
        table = pq.read_table(path, filesystem=arrow_fs)
        for i, record in enumerate(table.to_pylist()):
            yield offset + i, record
        return
    if fmt == "json":
        with open_text(files[0]) as f:
            data = json.load(f)
        for i, record in enumerate(data, start=1):  # the record's number in the list
            yield i, record if isinstance(record, dict) else None
        return
    with open_text(files[0]) as f:
        for line, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError:
                record = None
            yield line, record if isinstance(record, dict) else None


def _units_of(record, row: int, spec: dict, stats: _UnitStats, out: list[dict], source: int, unit: int) -> None:
    kind = spec["kind"]

    def emit(side, s1, relation, s2):
        stats.pairs += 1
        out.append({"source": source, "unit": unit, "row": row, "side": side, "sentence1": s1,
                    "relation": relation, "sentence2": s2})

    if kind == "senteval":
        relation, reason = (spec["relation"], None) if spec.get("relation") else _relation(
            record["label"].strip(), spec["label_map"])
        s1, s2 = _text(record["s1"]), _text(record["s2"])
        reason = reason or _text_reason([s1, s2], spec)
        return stats.drop(reason, row) if reason else emit(None, s1, relation, s2)
    columns = spec["columns"]
    if kind == "simcse_csv" or "sent0" in columns:  # SimCSE's csv, or a hub dataset of such rows (all-nli)
        has_neg = "hard_neg" in columns
        if record is None or record.get(columns["sent0"]) is None or record.get(columns["sent1"]) is None \
                or (has_neg and record.get(columns["hard_neg"]) is None):
            return stats.drop("missing_field", row, 2 if has_neg else 1)
        premise = _text(record[columns["sent0"]])
        halves = [("e", "entailment", _text(record[columns["sent1"]]))]
        if has_neg:
            halves.append(("c", "contradiction", _text(record[columns["hard_neg"]])))
        for side, relation, hypothesis in halves:
            reason = _text_reason([premise, hypothesis], spec)
            if reason:
                stats.drop(reason, row)
            else:
                emit(side, premise, relation, hypothesis)
        return
    if "captions" in columns:
        try:
            captions = _get(record, columns["captions"]) if record is not None else None
        except KeyError:
            captions = None
        if not isinstance(captions, (list, tuple)):
            return stats.drop("missing_field" if record is not None else "malformed_row", row)
        texts = [_text(c) for c in captions]
        for i in range(len(texts)):
            for j in range(i + 1, len(texts)):
                reason = _text_reason([texts[i], texts[j]], spec)
                if reason:
                    stats.drop(reason, row)
                else:
                    emit(None, texts[i], spec["relation"], texts[j])
        return
    if record is None:
        return stats.drop("malformed_row", row)
    try:
        s1, s2 = _text(_get(record, columns["sentence1"])), _text(_get(record, columns["sentence2"]))
        label = _get(record, columns["label"]) if "label" in columns else None
    except KeyError:
        return stats.drop("missing_field", row)
    if spec.get("relation"):
        relation, reason = spec["relation"], None
    else:
        relation, reason = _relation(label, spec["label_map"])
    reason = reason or _text_reason([s1, s2], spec)
    return stats.drop(reason, row) if reason else emit(None, s1, relation, s2)


def read_unit(row: dict, work: str) -> dict:
    """Ray Data ``map``: read one unit, write its valid pair units, count the rest."""
    unit = json.loads(row["unit"])
    stats, out = _UnitStats(), []
    for number, record in _records(unit):
        stats.records += 1
        if record is not None and any(isinstance(v, str) and REPLACED in v for v in record.values()):
            spec = unit["spec"]  # bytes that are not UTF-8: the row's text cannot be trusted
            if spec.get("not_utf8", "drop") == "drop":
                stats.drop("not_utf8", number, 2 if spec["kind"] == "simcse_csv" and "hard_neg" in spec["columns"] else 1)
                continue
            stats.replaced_rows.append(number)
        _units_of(record, number, unit["spec"], stats, out, unit["source"], unit["unit"])
    name = f"{unit['source']:03d}-{unit['unit']:05d}.parquet"
    write_table(pa.Table.from_pylist(out, schema=UNITS), f"{work}/pair_units/{name}")
    digests = [] if unit["spec"].get("format") == "parquet" else [file_digest(p) for p in unit["files"]]
    result = {"source": unit["source"], "unit": unit["unit"], "file": name, "records": stats.records,
              "pairs": stats.pairs, "valid": len(out), "dropped": dict(stats.dropped), "first": stats.first,
              "not_utf8_replaced": len(stats.replaced_rows), "not_utf8_replaced_first": stats.replaced_rows[:FIRST_ROWS],
              "digests": digests}
    return {"source": unit["source"], "unit": unit["unit"], "result": json.dumps(result)}
