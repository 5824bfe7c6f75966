"""Pair-corpus ingest: sentence-pair corpora -> ``nli_triplets`` and ``relation_triples``.

Sources (``PairSource``), chosen by config:

- ``senteval``: SentEval's ``s1.<split>``, ``s2.<split>``, ``labels.<split>``
  (line i of the three files is one pair), e.g. ``../shared/data/nli/snli_senteval``
  or the demo world's ``nli/`` folder;
- ``simcse_csv``: SimCSE's ``nli_for_simcse.csv`` (header ``sent0,sent1,hard_neg``:
  premise, entailment, contradiction; a file without ``hard_neg`` gives
  entailment pairs only);
- ``table``: a local jsonl / json (a list of objects) / csv / tsv file (``.gz``
  and ``.bz2`` too), with a column mapping ``{"sentence1": ..., "sentence2": ...,
  "label": ...}`` (or ``"captions"``: a list column whose members are pairwise
  related) and a label map, or one fixed ``relation`` for every pair;
- ``hf``: ``datasets.load_dataset(path, name, split=split)``: a hub dataset
  (snli, multi_nli / glue mnli, glue qqp, quora, paws, glue qnli, flickr30k
  captions: their columns and label names are known, see ``PRESETS``) or a
  local folder / builder (``json``, ``csv``) with an explicit ``preset`` or
  ``columns`` + ``label_map``.

A label map takes a raw label (compared as text, then case-insensitively) to a
relation, or to ``None``: the row is dropped as ``excluded_label`` (SNLI's
``-``, PAWS's non-paraphrases); a label not in the map is dropped as
``unknown_label``. Relation names follow RSE: entailment, neutral,
contradiction, duplicate_question, non_duplicate_question, paraphrase,
same_caption, qa_entailment, qa_not_entailment.

The job (``run_pair_ingest``), all on Ray Data:

1. the driver checks every source (files exist, mapped columns are in the
   header or first record, SentEval files have equal line counts, a hub
   dataset loads) and raises ``PairSourceError`` naming file and column before
   any Ray work; hub datasets are cut into row chunks written under ``_work``;
2. one task per unit (a file, a SentEval split, a chunk of a hub dataset)
   reads its rows and writes the valid pair units (``sentence1, relation,
   sentence2``; a SimCSE row is two units, its entailment and its
   contradiction, tied to each other) to ``_work/pair_units``; every other
   row is counted under a reason (``missing_field``, ``malformed_row``,
   ``unknown_label``, ``excluded_label``, ``empty_text``, ``too_short``,
   ``too_long``) with its first row numbers;
3. ``groupby`` premise (``sentence1``): duplicates are dropped; each
   premise with both an entailment and a contradiction hypothesis gives one
   ``nli_triplets`` row per (entailment, contradiction) pair (a SimCSE row
   gives its own triplet), at most ``max_triplets_per_premise`` (a seeded
   sample); each unit becomes a ``relation_triples`` candidate with its
   in-relation hard negative when the premise has one (below);
4. per-relation caps (``max_per_relation``): a seeded sample, the same for
   the same input however Ray partitions it;
5. the remaining hard negatives: ``groupby`` (pool, bucket) over seeded
   buckets of each relation's sentences;
6. ``groupby`` file bucket: each set is written as ``part-NNNNN.parquet``
   files (rows sorted by a seeded hash: same input + seed -> byte-identical
   files) with a ``manifest.json``.

Hard negatives (RSE, ``docs/methods.md`` section 2):

- entailment: a contradiction hypothesis of the same premise (a SimCSE row's
  own ``hard_neg``), else a random contradiction hypothesis of another
  premise, else (no contradictions at all) a random entailment hypothesis of
  another premise;
- contradiction: an entailment hypothesis of the same premise, else a random
  contradiction hypothesis of another premise;
- any other relation: a random ``sentence2`` of another pair of the same
  relation (never one of the same ``sentence1``, never the pair's own
  ``sentence2``);
- null when there is none. ``hard_negatives`` in the manifest counts each
  kind. Random choices are seeded by the row's content.

Every pair unit is accounted in each set's manifest: written (``relation_triples``)
or used in at least one triplet (``nli_triplets``), or dropped under a reason
(the read reasons above, ``duplicate``, ``other_relation`` and
``missing_premise_partner`` for triplets, ``relation_not_selected`` and
``over_cap``).
"""

from __future__ import annotations

import argparse
import bisect
import csv
import json
import math
import re
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import PurePosixPath

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import ray

from ingest import schemas
from ingest.units import code_version, file_digest, stable_hash, write_json, write_table

KINDS = ("senteval", "simcse_csv", "table", "hf")
NLI_RELATIONS = ("entailment", "contradiction")
FIRST_ROWS = 10  # offending row numbers kept per source and reason
SENTEVAL_SPLITS = ("train", "dev", "test")

# raw NLI labels (text): SNLI/MNLI jsonl, SentEval, SICK (case-insensitive)
NLI_TEXT_LABELS = {"entailment": "entailment", "neutral": "neutral", "contradiction": "contradiction", "-": None}
NLI_INT_LABELS = {"0": "entailment", "1": "neutral", "2": "contradiction", "-1": None}
RSE_RELATIONS = ("entailment", "neutral", "contradiction", "duplicate_question", "non_duplicate_question",
                 "paraphrase", "same_caption", "qa_entailment", "qa_not_entailment", "same_sent")


@dataclass(frozen=True)
class Preset:
    columns: dict
    label_map: dict | None = None
    relation: str | None = None


PRESETS: dict[str, Preset] = {
    # HF snli / multi_nli / glue mnli: ClassLabel 0 entailment, 1 neutral, 2 contradiction, -1 no gold label
    "snli": Preset({"sentence1": "premise", "sentence2": "hypothesis", "label": "label"}, NLI_INT_LABELS),
    "multi_nli": Preset({"sentence1": "premise", "sentence2": "hypothesis", "label": "label"}, NLI_INT_LABELS),
    # glue qqp: 0 not_duplicate, 1 duplicate (-1 in the unlabelled test split)
    "qqp": Preset({"sentence1": "question1", "sentence2": "question2", "label": "label"},
                  {"0": "non_duplicate_question", "1": "duplicate_question", "-1": None}),
    # the old hub "quora" set: {"questions": {"id": [a, b], "text": [a, b]}, "is_duplicate": bool}
    "quora": Preset({"sentence1": "questions.text.0", "sentence2": "questions.text.1", "label": "is_duplicate"},
                    {"True": "duplicate_question", "False": "non_duplicate_question"}),
    # paws labeled_final: 1 paraphrase, 0 not (dropped as excluded_label)
    "paws": Preset({"sentence1": "sentence1", "sentence2": "sentence2", "label": "label"},
                   {"1": "paraphrase", "0": None}),
    # glue qnli: 0 entailment, 1 not_entailment
    "qnli": Preset({"sentence1": "question", "sentence2": "sentence", "label": "label"},
                   {"0": "qa_entailment", "1": "qa_not_entailment", "-1": None}),
    # flickr30k (nlphuji/flickr30k): five captions of one image in "caption" -> same_caption pairs
    "flickr": Preset({"captions": "caption"}, relation="same_caption"),
    # official SNLI / MNLI jsonl
    "snli_jsonl": Preset({"sentence1": "sentence1", "sentence2": "sentence2", "label": "gold_label"},
                         NLI_TEXT_LABELS),
    # SICK (SentEval's SICK_*.txt; original SICK.txt has entailment_label)
    "sick": Preset({"sentence1": "sentence_A", "sentence2": "sentence_B", "label": "entailment_judgment"},
                   NLI_TEXT_LABELS),
    # RSE's own files (binwang/RSE-sentence-relational-data): labels are relation names
    "rse": Preset({"sentence1": "sentence1", "sentence2": "sentence2", "label": "label"},
                  {r: r for r in RSE_RELATIONS}),
}
# hub names (the last path part, or the config name of glue) -> preset
HF_ALIASES = {"snli": "snli", "multi_nli": "multi_nli", "multinli": "multi_nli", "mnli": "multi_nli",
              "qqp": "qqp", "quora": "quora", "paws": "paws", "qnli": "qnli", "flickr30k": "flickr",
              "flickr": "flickr"}


class PairSourceError(ValueError):
    """A pair source cannot be read: missing file or column, unknown preset, bad option."""


@dataclass
class PairSource:
    """One pair corpus. ``path`` is a file, a folder (SentEval) or a hub dataset name."""

    kind: str  # senteval | simcse_csv | table | hf
    path: str
    split: str | None = None  # senteval: "dev", "dev+test" (default: every split present); hf: default "train"
    name: str | None = None  # hf: the dataset config (load_dataset(path, name)), e.g. "qqp" for glue
    columns: dict | None = None  # {"sentence1", "sentence2", "label"} or {"captions"} -> column names
    label_map: dict | None = None  # raw label -> relation (None: excluded_label); updates the preset's map
    relation: str | None = None  # every pair gets this relation (no label column)
    preset: str | None = None  # a key of PRESETS (hf: inferred from the dataset name)
    format: str | None = None  # table: jsonl | json | csv | tsv (default: from the file name)
    tag: str | None = None  # the `source` value written in the sets (default: kind and file name)
    hf_kwargs: dict = field(default_factory=dict)  # more load_dataset arguments (data_files, cache_dir, ...)


@dataclass
class PairIngestConfig:
    sources: list[PairSource]
    out: str
    relations: dict[str, float] | None = None  # relation_triples: relations kept and their weights (None: all, 1.0)
    max_per_relation: dict[str, int] = field(default_factory=dict)  # relation_triples rows per relation
    max_triplets_per_premise: int | None = 4  # nli_triplets: (entailment, contradiction) pairs per premise
    seed: int = 42
    min_chars: int = 1  # shorter texts: too_short (an empty text is empty_text)
    max_chars: int = 1000  # longer texts: too_long
    shuffle_partitions: int | None = None  # default: one per 32 MiB of input, 2 to 200
    file_bytes: int = 128 << 20  # target size of one output file
    hf_chunk_rows: int = 200_000  # rows of a hub dataset per read task
    pool_bucket_rows: int = 4096  # sentences per bucket when drawing random hard negatives

    @classmethod
    def from_dict(cls, data: dict) -> PairIngestConfig:
        data = dict(data)
        names = {f.name for f in fields(PairSource)}
        sources = []
        for s in data.pop("sources", []):
            if isinstance(s, PairSource):
                sources.append(s)
                continue
            unknown = set(s) - names
            if unknown:
                raise PairSourceError(f"source {s}: unknown field(s) {sorted(unknown)}; known: {sorted(names)}")
            sources.append(PairSource(**s))
        return cls(sources=sources, **data)


# ---------------------------------------------------------------- helpers


def _hash(*parts) -> int:
    """63-bit hash of the parts: seeds every sample and choice from the rows' content."""
    return stable_hash("\x1f".join(str(p) for p in parts)) >> 1


def _exists(path: str) -> bool:
    fs, local = fsspec.core.url_to_fs(path)
    return fs.exists(local)


def _open_text(path: str, newline: str | None = None):
    return fsspec.open(path, "rt", compression="infer", encoding="utf-8", newline=newline)


def _count_lines(path: str) -> int:
    count, last = 0, b"\n"
    with fsspec.open(path, "rb", compression="infer") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def _basename(path: str) -> str:
    return PurePosixPath(path.rstrip("/")).name


def _strip_compression(name: str) -> str:
    for ext in (".gz", ".bz2", ".xz", ".zst"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


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


# ---------------------------------------------------------------- resolving sources (driver)


def _label_map(preset: Preset | None, source: PairSource, default: dict | None) -> dict | None:
    base = dict(preset.label_map) if preset and preset.label_map else (dict(default) if default else {})
    for raw, relation in (source.label_map or {}).items():
        base[str(raw)] = relation if relation not in ("", "none", "None", "drop") else None
    return base


def _preset_of(source: PairSource) -> Preset | None:
    key = source.preset
    if key is None and source.kind == "hf":
        for candidate in (source.name, _basename(source.path)):
            if candidate and candidate.lower() in HF_ALIASES:
                key = HF_ALIASES[candidate.lower()]
                break
    if key is None:
        return None
    if key not in PRESETS:
        raise PairSourceError(f"source {source.path}: unknown preset {key!r}; known: {sorted(PRESETS)}")
    return PRESETS[key]


def _default_tag(source: PairSource) -> str:
    if source.tag:
        return source.tag
    if source.kind == "hf":
        return f"hf:{source.path}" + (f"/{source.name}" if source.name else "") + f":{source.split or 'train'}"
    return f"{source.kind}:{_basename(source.path)}"


def _mapping(source: PairSource, preset: Preset | None) -> tuple[dict, str | None]:
    columns = dict(preset.columns) if preset else {}
    columns.update(source.columns or {})
    relation = source.relation or (preset.relation if preset else None)
    if "captions" in columns:
        return {"captions": columns["captions"]}, relation or "same_caption"
    for role in ("sentence1", "sentence2"):
        if role not in columns:
            raise PairSourceError(
                f"source {source.path}: no column given for {role!r} (give columns={{'sentence1': ..., "
                f"'sentence2': ..., 'label': ...}} or a preset: {sorted(PRESETS)})")
    if relation is None and "label" not in columns:
        raise PairSourceError(f"source {source.path}: give a 'label' column or one fixed relation")
    if relation is not None:
        columns.pop("label", None)
    return columns, relation


def _check_columns(path: str, found: list[str], columns: dict) -> None:
    for role, column in columns.items():
        top = column.split(".")[0]
        if top not in found:
            raise PairSourceError(f"{path}: missing column {column!r} (mapped to {role}); found columns: {found}")


def _table_format(source: PairSource) -> str:
    if source.format:
        if source.format not in ("jsonl", "json", "csv", "tsv"):
            raise PairSourceError(f"source {source.path}: format must be jsonl, json, csv or tsv")
        return source.format
    name = _strip_compression(_basename(source.path)).lower()
    for ext, fmt in ((".jsonl", "jsonl"), (".ndjson", "jsonl"), (".json", "json"), (".csv", "csv"),
                     (".tsv", "tsv"), (".txt", "tsv")):
        if name.endswith(ext):
            return fmt
    raise PairSourceError(f"source {source.path}: cannot tell the format from the name; give format=")


def _json_is_list(path: str) -> bool:
    with _open_text(path) as f:
        while True:
            c = f.read(1)
            if not c or not c.isspace():
                return c == "["


def _header(path: str, fmt: str) -> list[str]:
    """Column names: a csv/tsv header, or the keys of the first json record."""
    if fmt in ("csv", "tsv"):
        with _open_text(path, newline="") as f:
            reader = csv.reader(f, delimiter="," if fmt == "csv" else "\t",
                                quoting=csv.QUOTE_MINIMAL if fmt == "csv" else csv.QUOTE_NONE)
            return next(reader, [])
    if fmt == "json" and _json_is_list(path):
        with _open_text(path) as f:
            data = json.load(f)
        return sorted(data[0]) if data and isinstance(data[0], dict) else []
    with _open_text(path) as f:
        for line in f:
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise PairSourceError(f"{path}: first record is not JSON: {e}") from None
                return sorted(record) if isinstance(record, dict) else []
    return []


def _senteval_splits(source: PairSource) -> list[str]:
    folder = source.path.rstrip("/")
    if source.split:
        wanted = [s for s in re.split(r"[+,]", source.split) if s]
    else:
        wanted = [s for s in SENTEVAL_SPLITS if _exists(f"{folder}/s1.{s}")]
        if not wanted:
            raise PairSourceError(f"{folder}: no SentEval split found (s1.train, s1.dev or s1.test)")
    for split in wanted:
        counts = {}
        for part in ("s1", "s2", "labels"):
            path = f"{folder}/{part}.{split}"
            if not _exists(path):
                raise PairSourceError(f"{path}: missing SentEval file (column {part!r} of split {split!r})")
            counts[path] = _count_lines(path)
        if len(set(counts.values())) != 1:
            raise PairSourceError(f"SentEval split {split!r} in {folder}: the files have different line "
                                  f"counts {counts}")
    return wanted


def _load_hf(source: PairSource):
    try:
        import datasets
    except ImportError as e:  # pragma: no cover
        raise PairSourceError("hf sources need the `datasets` package") from e
    try:
        return datasets.load_dataset(source.path, source.name, split=source.split or "train", **source.hf_kwargs)
    except (FileNotFoundError, ValueError, ConnectionError) as e:
        raise PairSourceError(f"hf source {source.path}"
                              + (f" ({source.name})" if source.name else "") + f": {type(e).__name__}: {e}") from e


def _resolve(cfg: PairIngestConfig, work: str, log) -> tuple[list[dict], list[dict]]:
    """Check every source and plan its read units. Returns (sources, units)."""
    resolved, units, tags = [], [], Counter()
    for index, source in enumerate(cfg.sources):
        if source.kind not in KINDS:
            raise PairSourceError(f"source {source.path}: unknown kind {source.kind!r}; known: {list(KINDS)}")
        tag = _default_tag(source)
        tags[tag] += 1
        if tags[tag] > 1:
            tag = f"{tag}#{tags[tag]}"
        entry = {"index": index, "tag": tag, "kind": source.kind, "path": source.path, "split": source.split,
                 "name": source.name}
        spec = {"kind": source.kind, "min_chars": cfg.min_chars, "max_chars": cfg.max_chars}
        if source.kind == "senteval":
            splits = _senteval_splits(source)
            spec.update(label_map=_label_map(_preset_of(source), source, NLI_TEXT_LABELS), relation=source.relation)
            for k, split in enumerate(splits):
                folder = source.path.rstrip("/")
                units.append({"source": index, "unit": k, "label": split,
                              "files": [f"{folder}/{p}.{split}" for p in ("s1", "s2", "labels")],
                              "spec": {**spec, "split": split}})
            entry["split"] = "+".join(splits)
        elif source.kind == "simcse_csv":
            if not _exists(source.path):
                raise FileNotFoundError(f"SimCSE csv not found: {source.path}")
            found = _header(source.path, "csv")
            columns = {"sent0": "sent0", "sent1": "sent1", **(source.columns or {})}
            _check_columns(source.path, found, columns)
            if "hard_neg" not in columns and "hard_neg" in found:
                columns["hard_neg"] = "hard_neg"
            units.append({"source": index, "unit": 0, "label": _basename(source.path), "files": [source.path],
                          "spec": {**spec, "columns": columns}})
        elif source.kind == "table":
            if not _exists(source.path):
                raise FileNotFoundError(f"pair file not found: {source.path}")
            preset = _preset_of(source)
            columns, relation = _mapping(source, preset)
            fmt = _table_format(source)
            if fmt == "json" and not _json_is_list(source.path):
                fmt = "jsonl"
            _check_columns(source.path, _header(source.path, fmt), columns)
            default = {**{r: r for r in RSE_RELATIONS}, **NLI_TEXT_LABELS}
            units.append({"source": index, "unit": 0, "label": _basename(source.path), "files": [source.path],
                          "spec": {**spec, "format": fmt, "columns": columns, "relation": relation,
                                   "label_map": _label_map(preset, source, default) if relation is None else None}})
        else:
            preset = _preset_of(source)
            if preset is None and not source.columns:
                raise PairSourceError(f"hf source {source.path}: unknown dataset; give preset= (one of "
                                      f"{sorted(PRESETS)}) or columns= and label_map=")
            columns, relation = _mapping(source, preset)
            dataset = _load_hf(source)
            _check_columns(f"hf dataset {source.path}" + (f"/{source.name}" if source.name else ""),
                           list(dataset.column_names), columns)
            top = sorted({c.split(".")[0] for c in columns.values()})
            table_ds = dataset.select_columns(top).with_format("arrow")
            n = len(table_ds)
            chunk = max(1, cfg.hf_chunk_rows)
            split = source.split or "train"
            for k, start in enumerate(range(0, max(n, 1), chunk)):
                path = f"{work}/pair_hf/{index:03d}-{k:05d}.parquet"
                write_table(table_ds[start:min(n, start + chunk)], path)
                units.append({"source": index, "unit": k, "label": split, "files": [path],
                              "spec": {**spec, "format": "parquet", "columns": columns, "relation": relation,
                                       "row_offset": start,
                                       "label_map": _label_map(preset, source, None) if relation is None else None}})
            entry["hf"] = {"rows": n, "fingerprint": getattr(dataset, "_fingerprint", None)}
            entry["split"] = split
        resolved.append(entry)
        log(f"[pairs] source {index}: {tag} ({source.kind}) ok")
    return resolved, units


# ---------------------------------------------------------------- stage 1: read units (Ray tasks)

UNITS = pa.schema([
    pa.field("source", pa.int32()), pa.field("unit", pa.int32()), pa.field("row", pa.int64()),
    pa.field("side", pa.string()),  # null: a free pair; "e"/"c": the two halves of one SimCSE row
    pa.field("sentence1", pa.string()), pa.field("relation", pa.string()), pa.field("sentence2", pa.string()),
])


class _UnitStats:
    def __init__(self):
        self.records = 0
        self.pairs = 0
        self.dropped: Counter = Counter()
        self.first: dict[str, list[int]] = {}

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


def _records(unit: dict):
    """(row number, record dict or None when malformed) per input record."""
    spec = unit["spec"]
    kind, files = spec["kind"], unit["files"]
    if kind == "senteval":
        with _open_text(files[0]) as f1, _open_text(files[1]) as f2, _open_text(files[2]) as f3:
            for line, (a, b, label) in enumerate(zip(f1, f2, f3), start=1):
                yield line, {"s1": a, "s2": b, "label": label}
        return
    fmt = spec.get("format", "csv")
    if kind == "simcse_csv" or fmt in ("csv", "tsv"):
        with _open_text(files[0], newline="") as f:
            reader = csv.DictReader(f, delimiter="\t" if fmt == "tsv" else ",",
                                    quoting=csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL)
            start = 2
            for record in reader:
                yield start, record
                start = reader.line_num + 1
        return
    if fmt == "parquet":
        offset = spec.get("row_offset", 0)
        table = pq.read_table(files[0])
        for i, record in enumerate(table.to_pylist()):
            yield offset + i, record
        return
    if fmt == "json":
        with _open_text(files[0]) as f:
            data = json.load(f)
        for i, record in enumerate(data, start=1):  # the record's number in the list
            yield i, record if isinstance(record, dict) else None
        return
    with _open_text(files[0]) as f:
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
    if kind == "simcse_csv":
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
        _units_of(record, number, unit["spec"], stats, out, unit["source"], unit["unit"])
    name = f"{unit['source']:03d}-{unit['unit']:05d}.parquet"
    write_table(pa.Table.from_pylist(out, schema=UNITS), f"{work}/pair_units/{name}")
    digests = [] if unit["spec"].get("format") == "parquet" else [file_digest(p) for p in unit["files"]]
    result = {"source": unit["source"], "unit": unit["unit"], "file": name, "records": stats.records,
              "pairs": stats.pairs, "valid": len(out), "dropped": dict(stats.dropped), "first": stats.first,
              "digests": digests}
    return {"source": unit["source"], "unit": unit["unit"], "result": json.dumps(result)}


# ---------------------------------------------------------------- grouping helper

_STR, _INT, _I32 = pa.string(), pa.int64(), pa.int32()

STAGE = pa.schema([
    pa.field("kind", _STR),  # triplet | relation | fate
    pa.field("source", _I32), pa.field("source2", _I32), pa.field("unit", _I32), pa.field("row", _INT),
    pa.field("side", _STR), pa.field("sentence1", _STR), pa.field("relation", _STR), pa.field("sentence2", _STR),
    pa.field("hard_negative", _STR), pa.field("hn_kind", _STR), pa.field("pool", _STR), pa.field("status", _STR),
    pa.field("rank", _INT),
    pa.field("set", _STR), pa.field("reason", _STR), pa.field("count", _INT), pa.field("first", _STR),
])


def _read_files(batch: pa.Table, schema: pa.Schema) -> pa.Table:
    tables = [pq.read_table(p) for p in batch["path"].to_pylist()]
    return pa.concat_tables(tables).select(schema.names).cast(schema) if tables else schema.empty_table()


def _read_parquet(paths: list[str], schema: pa.Schema):
    return ray.data.from_items([{"path": p} for p in paths], override_num_blocks=max(1, len(paths))).map_batches(
        _read_files, batch_format="pyarrow", batch_size=1, fn_kwargs={"schema": schema})


def _with_bucket(batch: pa.Table, key: list[str], buckets: int) -> pa.Table:
    columns = [batch[k].to_pylist() for k in key]
    hashes = [_hash(*values) % buckets for values in zip(*columns)]
    return batch.append_column("_bucket", pa.array(hashes, _INT))


def _groups(table: pa.Table, key: list[str]) -> list[tuple[tuple, list[dict]]]:
    groups: dict[tuple, list[dict]] = {}
    for row in table.drop_columns(["_bucket"]).to_pylist():
        groups.setdefault(tuple(row[k] for k in key), []).append(row)
    return sorted(groups.items(), key=lambda kv: kv[0])


def _grouped(ds, key: list[str], bucket_fn, partitions: int, **kwargs):
    """``bucket_fn(sorted [(key, rows)], **kwargs) -> pa.Table`` once per hash bucket of ``key``
    (a Ray Data ``groupby().map_groups()``; one call per bucket, not per key)."""
    return (
        ds.map_batches(_with_bucket, batch_format="pyarrow", fn_kwargs={"key": key, "buckets": partitions})
        .groupby("_bucket", num_partitions=partitions)
        .map_groups(_call_bucket, batch_format="pyarrow",
                    fn_kwargs={"key": key, "fn": bucket_fn, "kwargs": kwargs})
    )


def _call_bucket(bucket: pa.Table, key: list[str], fn, kwargs: dict) -> pa.Table:
    return fn(_groups(bucket, key), **kwargs)


def _order(row: dict) -> tuple:
    return row["source"], row["unit"], row["row"], row["side"] or ""


class _Fates:
    """Per (set, source, reason): a count and the first (unit, row) ids."""

    def __init__(self):
        self.counts: Counter = Counter()
        self.first: dict[tuple, list] = {}

    def add(self, set_name: str, row: dict, reason: str) -> None:
        key = (set_name, row["source"], reason)
        self.counts[key] += 1
        if reason not in ("written", "used"):  # the smallest row ids, whatever order the rows come in
            first = self.first.setdefault(key, [])
            item = (row["unit"], row["row"])
            if len(first) < FIRST_ROWS or item < first[-1]:
                bisect.insort(first, item)
                del first[FIRST_ROWS:]

    def rows(self) -> list[dict]:
        return [{"kind": "fate", "set": s, "source": src, "reason": reason, "count": n,
                 "first": json.dumps([list(item) for item in self.first.get((s, src, reason), [])])}
                for (s, src, reason), n in sorted(self.counts.items())]


# ---------------------------------------------------------------- stage 2: per premise


def _premise_rows(rows: list[dict], seed: int, max_triplets: int | None, selected: list[str] | None,
                  fates: _Fates) -> list[dict]:
    rows.sort(key=_order)
    premise = rows[0]["sentence1"]
    out: list[dict] = []
    duplicate: set[int] = set()  # dropped as duplicate from both sets
    explicit: dict[tuple, dict[str, int]] = {}
    free_seen, explicit_seen = set(), set()
    for i, r in enumerate(rows):
        if r["side"]:
            explicit.setdefault((r["source"], r["unit"], r["row"]), {})[r["side"]] = i
        elif (r["relation"], r["sentence2"]) in free_seen:
            duplicate.add(i)
        else:
            free_seen.add((r["relation"], r["sentence2"]))
    partner: dict[int, int] = {}
    for sides in explicit.values():
        if "e" in sides and "c" in sides:
            partner[sides["e"]], partner[sides["c"]] = sides["c"], sides["e"]
    for i, r in enumerate(rows):
        if r["side"]:
            key = (r["relation"], r["sentence2"], rows[partner[i]]["sentence2"] if i in partner else None)
            if key in explicit_seen:
                duplicate.add(i)
            else:
                explicit_seen.add(key)

    # nli_triplets: free entailment x free contradiction, plus each SimCSE row's own triplet
    alive = [i for i in range(len(rows)) if i not in duplicate]
    free_e = [i for i in alive if not rows[i]["side"] and rows[i]["relation"] == "entailment"]
    free_c = [i for i in alive if not rows[i]["side"] and rows[i]["relation"] == "contradiction"]
    candidates = [(e, c) for e in free_e for c in free_c if rows[e]["sentence2"] != rows[c]["sentence2"]]
    candidates += sorted((sides["e"], sides["c"]) for sides in explicit.values() if "e" in sides and "c" in sides)
    in_candidate = {i for pair in candidates for i in pair}
    unique, seen = [], set()
    for e, c in candidates:
        texts = (rows[e]["sentence2"], rows[c]["sentence2"])
        if texts not in seen and texts[0] != texts[1]:
            seen.add(texts)
            unique.append((e, c))
    in_unique = {i for pair in unique for i in pair}
    ranked = sorted(((_hash(seed, "triplet", premise, rows[e]["sentence2"], rows[c]["sentence2"]), e, c)
                     for e, c in unique))
    kept = ranked[:max_triplets] if max_triplets else ranked
    used = set()
    for rank, e, c in kept:
        used.update((e, c))
        out.append({"kind": "triplet", "source": rows[e]["source"], "source2": rows[c]["source"],
                    "sentence1": premise, "sentence2": rows[e]["sentence2"],
                    "hard_negative": rows[c]["sentence2"], "rank": rank})
    for i, r in enumerate(rows):
        if i in duplicate:
            reason = "duplicate"
        elif r["relation"] not in NLI_RELATIONS:
            reason = "other_relation"
        elif i in used:
            reason = "used"
        elif i not in in_candidate:
            reason = "missing_premise_partner"
        elif i not in in_unique:
            reason = "duplicate"
        else:
            reason = "over_cap"
        fates.add("nli_triplets", r, reason)

    # relation_triples candidates, with a same-premise hard negative where the premise has one
    by_relation: dict[str, list[str]] = {}
    for i in alive:
        by_relation.setdefault(rows[i]["relation"], []).append(rows[i]["sentence2"])
    by_relation = {rel: sorted(set(texts)) for rel, texts in by_relation.items()}
    for i, r in enumerate(rows):
        if i in duplicate:
            fates.add("relation_triples", r, "duplicate")
            continue
        relation = r["relation"]
        own_partner = rows[partner[i]]["sentence2"] if i in partner else None
        rank = _hash(seed, "relation", "x" if r["side"] else "f", relation, premise, r["sentence2"],
                     own_partner or "")
        status = None if selected is None or relation in selected else "relation_not_selected"
        hard_negative = hn_kind = pool = None
        if status is None:
            if own_partner is not None and own_partner != r["sentence2"]:
                hard_negative, hn_kind = own_partner, "same_premise"
            elif relation in NLI_RELATIONS:
                other = "contradiction" if relation == "entailment" else "entailment"
                options = [t for t in by_relation.get(other, []) if t != r["sentence2"]]
                if options:
                    hard_negative, hn_kind = options[_hash(seed, "same_premise", rank) % len(options)], "same_premise"
            if hard_negative is None:
                pool = "contradiction" if relation == "entailment" else relation
        out.append({"kind": "relation", "source": r["source"], "unit": r["unit"], "row": r["row"],
                    "side": r["side"], "sentence1": premise, "relation": relation, "sentence2": r["sentence2"],
                    "hard_negative": hard_negative, "hn_kind": hn_kind, "pool": pool, "status": status,
                    "rank": rank})
    return out


def _premise_bucket(groups, seed: int, max_triplets: int | None, selected: list[str] | None) -> pa.Table:
    fates, out = _Fates(), []
    for _, rows in groups:
        out.extend(_premise_rows(rows, seed, max_triplets, selected, fates))
    out.extend(fates.rows())
    return pa.Table.from_pylist(out, schema=STAGE)


def _take_kind(batch: pa.Table, kind: str) -> pa.Table:
    return batch.filter(pc.equal(batch["kind"], kind))


# ---------------------------------------------------------------- stage 3: per-relation caps


def _relation_counts(batch: pa.Table) -> pa.Table:
    selected = pc.is_null(batch["status"])
    counts: Counter = Counter()
    for relation, sel in zip(batch["relation"].to_pylist(), selected.to_pylist()):
        counts[(relation, bool(sel))] += 1
    rows = [{"relation": r, "selected": s, "count": n} for (r, s), n in sorted(counts.items())]
    return pa.Table.from_pylist(rows, schema=pa.schema([("relation", _STR), ("selected", pa.bool_()),
                                                        ("count", _INT)]))


def _cap_threshold(group: pa.Table, caps: dict) -> pa.Table:
    relation = group["relation"][0].as_py()
    ranks = group["rank"].to_numpy()
    cap = caps[relation]
    threshold = int(np.partition(ranks, cap - 1)[cap - 1]) if len(ranks) > cap else int(ranks.max())
    return pa.table({"relation": [relation], "threshold": pa.array([threshold], _INT)})


def _selected_of(batch: pa.Table, relations: list[str]) -> pa.Table:
    keep = pc.and_(pc.is_null(batch["status"]), pc.is_in(batch["relation"], pa.array(relations, _STR)))
    return batch.filter(keep).select(["relation", "rank"])


def _apply_caps(batch: pa.Table, thresholds: dict) -> pa.Table:
    status = batch["status"].to_pylist()
    for i, (relation, rank) in enumerate(zip(batch["relation"].to_pylist(), batch["rank"].to_pylist())):
        if status[i] is None and relation in thresholds and rank > thresholds[relation]:
            status[i] = "over_cap"
    return batch.set_column(batch.schema.get_field_index("status"), "status", pa.array(status, _STR))


def _relation_fates(batch: pa.Table) -> pa.Table:
    fates = _Fates()
    for row in batch.select(["source", "unit", "row", "status"]).to_pylist():
        if row["status"] is not None:
            fates.add("relation_triples", row, row["status"])
    return pa.Table.from_pylist(fates.rows(), schema=STAGE)


# ---------------------------------------------------------------- stage 4: random hard negatives

POOL = pa.schema([
    pa.field("pool", _STR), pa.field("pbucket", _INT), pa.field("member", pa.bool_()),
    pa.field("source", _I32), pa.field("unit", _I32), pa.field("row", _INT), pa.field("side", _STR),
    pa.field("sentence1", _STR), pa.field("relation", _STR), pa.field("sentence2", _STR),
    pa.field("hard_negative", _STR), pa.field("hn_kind", _STR), pa.field("rank", _INT),
])


def _members(batch: pa.Table, buckets: dict) -> pa.Table:
    rows = [{"pool": r["relation"], "pbucket": r["rank"] % buckets[r["relation"]], "member": True,
             "sentence1": r["sentence1"], "sentence2": r["sentence2"], "rank": r["rank"]}
            for r in batch.select(["relation", "sentence1", "sentence2", "rank"]).to_pylist()]
    return pa.Table.from_pylist(rows, schema=POOL)


def _needers(batch: pa.Table, buckets: dict, seed: int) -> pa.Table:
    keep = pc.and_(pc.is_null(batch["status"]), pc.is_valid(batch["pool"]))
    rows = []
    for r in batch.filter(keep).to_pylist():
        pool = r["pool"]
        if pool not in buckets:  # no contradiction anywhere: an entailment takes another entailment
            pool = r["relation"]
        kind = "random_contradiction" if pool == "contradiction" and r["relation"] == "entailment" \
            else "random_same_relation"
        rows.append({**{k: r[k] for k in POOL.names if k in r}, "pool": pool, "member": False,
                     "pbucket": _hash(seed, "pool", r["rank"]) % buckets[pool], "hn_kind": kind})
    return pa.Table.from_pylist(rows, schema=POOL)


def _pool_bucket(groups, seed: int, walk: int = 64) -> pa.Table:
    out = []
    for _, rows in groups:
        members = sorted((r for r in rows if r["member"]), key=lambda r: r["rank"])
        for r in sorted((r for r in rows if not r["member"]), key=lambda r: r["rank"]):
            choice = None
            if members:
                start = _hash(seed, "pick", r["rank"]) % len(members)
                for k in range(min(walk, len(members))):
                    m = members[(start + k) % len(members)]
                    if m["sentence2"] != r["sentence2"] and m["sentence1"] != r["sentence1"]:
                        choice = m["sentence2"]
                        break
            out.append({**r, "hard_negative": choice, "hn_kind": r["hn_kind"] if choice else "none"})
    return pa.Table.from_pylist(out, schema=POOL)


# ---------------------------------------------------------------- stage 5: write

FINAL = pa.schema([
    pa.field("source", _I32), pa.field("source2", _I32), pa.field("unit", _I32), pa.field("row", _INT),
    pa.field("side", _STR), pa.field("sentence1", _STR), pa.field("relation", _STR), pa.field("sentence2", _STR),
    pa.field("hard_negative", _STR), pa.field("hn_kind", _STR), pa.field("rank", _INT), pa.field("file", _INT),
])
WRITTEN = pa.schema([pa.field("file", _STR), pa.field("rows", _INT), pa.field("stats", _STR)])


def _to_final(batch: pa.Table, files: int, mode: str) -> pa.Table:
    """Rows ready to write, in one schema, with their file bucket. ``mode``: ``relation`` (the rows whose
    hard negative came from their premise), ``pool`` (rows resolved in stage 4) or ``triplet``."""
    if mode == "relation":
        batch = batch.filter(pc.and_(pc.is_null(batch["status"]), pc.is_null(batch["pool"])))
    columns = []
    for f in FINAL:
        if f.name == "file":
            columns.append(pa.array(batch["rank"].to_numpy(zero_copy_only=False) % files, _INT))
        elif f.name in batch.column_names:
            columns.append(batch[f.name].cast(f.type))
        else:
            columns.append(pa.nulls(len(batch), f.type))
    return pa.Table.from_arrays(columns, schema=FINAL)


def _write_files(groups, set_name: str, out: str, tags: list[str], weights: dict | None) -> pa.Table:
    written = []
    for (file_index,), rows in groups:
        rows.sort(key=lambda r: (r["rank"], r["source"], r["unit"] or 0, r["row"] or 0, r["side"] or ""))
        name = f"part-{file_index:05d}.parquet"
        stats: dict = {"sources": Counter(), "relations": Counter(), "hard_negatives": Counter()}
        if set_name == "nli_triplets":
            data = []
            for r in rows:
                tag = tags[r["source"]] if r["source"] == r["source2"] else \
                    f"{tags[r['source']]}+{tags[r['source2']]}"
                data.append({"premise": r["sentence1"], "entailment": r["sentence2"],
                             "contradiction": r["hard_negative"], "source": tag})
                stats["sources"][str(r["source"])] += 1
            table = pa.Table.from_pylist(data, schema=schemas.NLI_TRIPLETS)
        else:
            data = []
            for r in rows:
                weight = 1.0 if weights is None else float(weights[r["relation"]])
                data.append({"sentence1": r["sentence1"], "relation": r["relation"], "sentence2": r["sentence2"],
                             "hard_negative": r["hard_negative"], "weight": weight, "source": tags[r["source"]]})
                stats["sources"][str(r["source"])] += 1
                stats["relations"][r["relation"]] += 1
                stats["hard_negatives"][r["hn_kind"] or "none"] += 1
            table = pa.Table.from_pylist(data, schema=schemas.RELATION_TRIPLES)
        write_table(table, f"{out}/{set_name}/{name}")
        written.append({"file": name, "rows": len(rows), "stats": json.dumps({k: dict(v) for k, v in stats.items()})})
    return pa.Table.from_pylist(written, schema=WRITTEN)


def _files_for(n_rows: int, cfg: PairIngestConfig) -> int:
    return max(1, math.ceil(n_rows * 256 / cfg.file_bytes))


def _write_set(final, set_name: str, files: int, out: str, tags: list[str], partitions: int,
               weights: dict | None) -> tuple[list[str], dict]:
    """Write ``final`` (FINAL rows) as ``part-NNNNN.parquet`` files; returns (file names, summed stats)."""
    totals: dict = {"sources": Counter(), "relations": Counter(), "hard_negatives": Counter()}
    names = []
    if final is not None:
        written = _grouped(final, ["file"], _write_files, max(1, min(partitions, files)), set_name=set_name,
                           out=out, tags=tags, weights=weights).take_all()
        for w in written:
            names.append(w["file"])
            for k, v in json.loads(w["stats"]).items():
                totals[k].update(v)
    if not names:  # an empty set is still a readable set
        schema = schemas.NLI_TRIPLETS if set_name == "nli_triplets" else schemas.RELATION_TRIPLES
        write_table(schema.empty_table(), f"{out}/{set_name}/part-00000.parquet")
        names.append("part-00000.parquet")
    return sorted(names), totals


# ---------------------------------------------------------------- the job


def _clear(path: str) -> None:
    fs, local = fsspec.core.url_to_fs(path)
    if fs.exists(local):
        fs.rm(local, recursive=True)


def _row_id(unit_labels: dict, kind: str, unit: int, row: int) -> str:
    """``dev:17`` / ``file.jsonl:17``: line 17 (csv: the record's first line; a json list: record 17);
    ``train[16]``: row 16 (from 0) of a hub split."""
    label = unit_labels.get(unit, "?")
    return f"{label}[{row}]" if kind == "hf" else f"{label}:{row}"


def _source_report(entry: dict, read: dict, fates: dict, set_name: str, written: int, unit_labels: dict) -> dict:
    dropped = Counter(read["dropped"])
    first = {k: list(v) for k, v in read["first"].items()}
    for (s, src, reason), (count, rows) in fates.items():
        if s != set_name or src != entry["index"] or reason in ("used", "written"):
            continue
        dropped[reason] += count
        first.setdefault(reason, []).extend(rows)
    labels = unit_labels.get(entry["index"], {})
    first_rows = {reason: [_row_id(labels, entry["kind"], u, r) for u, r in sorted(map(tuple, rows))[:FIRST_ROWS]]
                  for reason, rows in sorted(first.items())}
    return {"name": entry["tag"], "kind": entry["kind"], "path": entry["path"], "split": entry["split"],
            "rows_in": read["records"], "pairs_in": read["pairs"], "written": written,
            "dropped": dict(sorted(dropped.items())), "dropped_first_rows": first_rows,
            "accounted": read["pairs"] == written + sum(dropped.values())}


def run_pair_ingest(cfg: PairIngestConfig, log=print) -> dict:
    """Run the job; returns the top-level manifest (also written as ``<out>/pairs_manifest.json``)."""
    started = time.time()
    out = cfg.out.rstrip("/")
    work = f"{out}/_work"
    if not cfg.sources:
        raise PairSourceError("no pair sources given")
    if cfg.max_triplets_per_premise is not None and cfg.max_triplets_per_premise < 1:
        raise PairSourceError("max_triplets_per_premise must be >= 1 (or None)")
    caps_config = {rel: int(cap) for rel, cap in (cfg.max_per_relation or {}).items()}
    for relation, cap in caps_config.items():
        if cap < 1:
            raise PairSourceError(f"max_per_relation[{relation!r}] must be >= 1, got {cap}")
    for path in (f"{work}/pair_units", f"{work}/pair_hf"):
        _clear(path)
    sources, units = _resolve(cfg, work, log)  # every source error is raised here, before Ray work
    for path in (f"{out}/nli_triplets", f"{out}/relation_triples"):  # stale parts of an earlier run
        _clear(path)
    tags = [s["tag"] for s in sources]

    if not ray.is_initialized():
        ray.init()
    ctx = ray.data.DataContext.get_current()
    ctx.shuffle_strategy = ray.data.context.ShuffleStrategy.SORT_SHUFFLE_PULL_BASED

    # 1. read
    results = (
        ray.data.from_items([{"unit": json.dumps(u)} for u in units], override_num_blocks=max(1, len(units)))
        .map(read_unit, fn_kwargs={"work": work}, num_cpus=1)
        .take_all()
    )
    read_results = sorted((json.loads(r["result"]) for r in results), key=lambda r: (r["source"], r["unit"]))
    unit_labels: dict[int, dict[int, str]] = {}
    for u in units:
        unit_labels.setdefault(u["source"], {})[u["unit"]] = u["label"]
    read = {s["index"]: {"records": 0, "pairs": 0, "valid": 0, "dropped": Counter(), "first": {}, "digests": []}
            for s in sources}
    input_bytes = 0
    for r in read_results:
        e = read[r["source"]]
        e["records"] += r["records"]
        e["pairs"] += r["pairs"]
        e["valid"] += r["valid"]
        e["dropped"].update(r["dropped"])
        for reason, rows in r["first"].items():
            e["first"].setdefault(reason, []).extend([r["unit"], row] for row in rows)
        e["digests"].extend(r["digests"])
        input_bytes += sum(d["bytes"] for d in r["digests"])
    for s in sources:
        e = read[s["index"]]
        log(f"[pairs] read {s['tag']}: {e['records']} rows, {e['pairs']} pairs, {e['valid']} valid, "
            f"dropped {dict(sorted(e['dropped'].items()))}")
    partitions = cfg.shuffle_partitions or max(2, min(200, input_bytes // (32 << 20) + 1))
    selected = sorted(cfg.relations) if cfg.relations is not None else None

    # 2. per premise
    n_valid = sum(e["valid"] for e in read.values())
    fates: dict[tuple, list] = {}
    relation_counts: Counter = Counter()
    caps_applied: dict[str, dict] = {}
    hn_pending = 0
    n_triplets = n_relations = 0
    trip_files = rel_files = 1
    if n_valid:
        pair_units = _read_parquet([f"{work}/pair_units/{r['file']}" for r in read_results], UNITS)
        stage = _grouped(pair_units, ["sentence1"], _premise_bucket, partitions, seed=cfg.seed,
                         max_triplets=cfg.max_triplets_per_premise, selected=selected).materialize()
        for f in stage.map_batches(_take_kind, batch_format="pyarrow", fn_kwargs={"kind": "fate"}).take_all():
            entry = fates.setdefault((f["set"], f["source"], f["reason"]), [0, []])
            entry[0] += f["count"]
            entry[1].extend(json.loads(f["first"]))
        triplets = stage.map_batches(_take_kind, batch_format="pyarrow", fn_kwargs={"kind": "triplet"})
        relations = stage.map_batches(_take_kind, batch_format="pyarrow", fn_kwargs={"kind": "relation"})
        n_triplets = triplets.count()

        # 3. caps
        for r in relations.map_batches(_relation_counts, batch_format="pyarrow").take_all():
            relation_counts[(r["relation"], r["selected"])] += r["count"]
        capped = {rel: cap for rel, cap in caps_config.items() if relation_counts.get((rel, True), 0) > cap}
        if capped:
            thresholds = {
                t["relation"]: t["threshold"]
                for t in relations.map_batches(_selected_of, batch_format="pyarrow",
                                               fn_kwargs={"relations": sorted(capped)})
                .groupby("relation").map_groups(_cap_threshold, batch_format="pyarrow",
                                                fn_kwargs={"caps": capped}).take_all()
            }
            relations = relations.map_batches(_apply_caps, batch_format="pyarrow",
                                              fn_kwargs={"thresholds": thresholds})
        relations = relations.materialize()
        for rel, cap in sorted(caps_config.items()):
            caps_applied[rel] = {"cap": cap, "available": relation_counts.get((rel, True), 0),
                                 "over_cap": max(0, relation_counts.get((rel, True), 0) - cap)}
        for f in relations.map_batches(_relation_fates, batch_format="pyarrow").take_all():
            entry = fates.setdefault((f["set"], f["source"], f["reason"]), [0, []])
            entry[0] += f["count"]
            entry[1].extend(json.loads(f["first"]))

        # 4. random hard negatives
        members_per_relation = Counter()
        for (rel, _), n in relation_counts.items():
            members_per_relation[rel] += n
        buckets = {rel: max(1, n // cfg.pool_bucket_rows) for rel, n in members_per_relation.items()}
        needers = relations.map_batches(_needers, batch_format="pyarrow",
                                        fn_kwargs={"buckets": buckets, "seed": cfg.seed}).materialize()
        hn_pending = needers.count()
        n_relations = sum(n for (rel, sel), n in relation_counts.items() if sel)
        rel_files = _files_for(n_relations, cfg)
        final_relations = relations.map_batches(_to_final, batch_format="pyarrow",
                                                fn_kwargs={"files": rel_files, "mode": "relation"})
        if hn_pending:
            members = relations.map_batches(_members, batch_format="pyarrow", fn_kwargs={"buckets": buckets})
            resolved = _grouped(members.union(needers), ["pool", "pbucket"], _pool_bucket, partitions,
                                seed=cfg.seed)
            final_relations = final_relations.union(resolved.map_batches(
                _to_final, batch_format="pyarrow", fn_kwargs={"files": rel_files, "mode": "pool"}))
        trip_files = _files_for(n_triplets, cfg)
        final_triplets = triplets.map_batches(_to_final, batch_format="pyarrow",
                                              fn_kwargs={"files": trip_files, "mode": "triplet"})

    # 5. write
    trip_names, trip_stats = _write_set(final_triplets if n_triplets else None, "nli_triplets", trip_files, out,
                                        tags, partitions, cfg.relations)
    rel_names, rel_stats = _write_set(final_relations if n_relations else None, "relation_triples", rel_files,
                                      out, tags, partitions, cfg.relations)
    n_relations_written = sum(rel_stats["relations"].values())

    # manifests
    config = {k: v for k, v in asdict(cfg).items() if k != "out"}
    for source in config["sources"]:  # never write a hub token into a manifest
        source["hf_kwargs"] = {k: ("<redacted>" if "token" in k.lower() else v)
                               for k, v in source["hf_kwargs"].items()}
    common = {"schema_version": schemas.SCHEMA_VERSION, "code_version": code_version(), "config": config}
    source_inputs = [{"name": s["tag"], "kind": s["kind"], "path": s["path"], "split": s["split"],
                      "hf_config": s["name"], "files": read[s["index"]]["digests"],
                      **({"hf": s["hf"]} if "hf" in s else {})}
                     for s in sources]
    reports = {}
    for set_name in ("nli_triplets", "relation_triples"):
        per_source = []
        for s in sources:
            if set_name == "nli_triplets":
                written = fates.get(("nli_triplets", s["index"], "used"), [0])[0]
            else:
                written = rel_stats["sources"].get(str(s["index"]), 0)
            per_source.append(_source_report(s, read[s["index"]], fates, set_name, written, unit_labels))
        totals_dropped = Counter()
        for p in per_source:
            totals_dropped.update(p["dropped"])
        pairs = {"in": sum(p["pairs_in"] for p in per_source), "written": sum(p["written"] for p in per_source),
                 "dropped": dict(sorted(totals_dropped.items())),
                 "accounted": all(p["accounted"] for p in per_source)}
        reports[set_name] = {"per_source": per_source, "pairs": pairs}

    trip_manifest = {
        **common, "set": "nli_triplets", "rows": n_triplets, "files": trip_names, "inputs": source_inputs,
        "sources": reports["nli_triplets"]["per_source"], "pairs": reports["nli_triplets"]["pairs"],
        "triplets_by_source": {tags[int(k)]: v
                               for k, v in sorted(trip_stats["sources"].items(), key=lambda kv: int(kv[0]))},
        "note": "pairs.written counts pair units used in at least one triplet; a triplet's source is its "
                "entailment's source (a+b when the contradiction came from another source)",
    }
    relation_rows = {rel: n for rel, n in sorted(rel_stats["relations"].items())}
    rel_manifest = {
        **common, "set": "relation_triples", "rows": n_relations_written, "files": rel_names,
        "inputs": source_inputs,
        "sources": reports["relation_triples"]["per_source"], "pairs": reports["relation_triples"]["pairs"],
        "relations": {rel: {"rows": relation_rows.get(rel, 0),
                            "weight": 1.0 if cfg.relations is None else float(cfg.relations[rel]),
                            "available": relation_counts.get((rel, True), 0),
                            "cap": caps_applied.get(rel, {}).get("cap")}
                      for rel in sorted({r for r, sel in relation_counts if sel} | set(cfg.relations or {}))},
        "not_selected": {rel: n for (rel, sel), n in sorted(relation_counts.items()) if not sel},
        "hard_negatives": dict(sorted(rel_stats["hard_negatives"].items())),
    }
    write_json(trip_manifest, f"{out}/nli_triplets/manifest.json")
    write_json(rel_manifest, f"{out}/relation_triples/manifest.json")
    _clear(f"{work}/pair_units")
    _clear(f"{work}/pair_hf")
    manifest = {
        **common, "out": out, "inputs": source_inputs,
        "sets": {"nli_triplets": {"path": f"{out}/nli_triplets", "rows": n_triplets,
                                  "pairs": reports["nli_triplets"]["pairs"]},
                 "relation_triples": {"path": f"{out}/relation_triples", "rows": n_relations_written,
                                      "pairs": reports["relation_triples"]["pairs"],
                                      "relations": relation_rows,
                                      "hard_negatives": rel_manifest["hard_negatives"]}},
        "seconds": round(time.time() - started, 2),
    }
    write_json(manifest, f"{out}/pairs_manifest.json")
    log(f"[pairs] wrote {n_triplets} nli_triplets and {n_relations_written} relation_triples "
        f"({relation_rows}) to {out} in {manifest['seconds']} s; accounted: "
        f"{reports['nli_triplets']['pairs']['accounted'] and reports['relation_triples']['pairs']['accounted']}")
    return manifest


# ---------------------------------------------------------------- CLI

SOURCE_HELP = """\
--source KIND:PATH[:KEY=VALUE,KEY=VALUE,...]   (repeatable; one per corpus)

KIND is senteval, simcse_csv, table or hf. PATH is a folder (senteval), a
file (simcse_csv, table; fsspec URIs and .gz/.bz2 work) or a hub dataset name
or local folder (hf). Options follow the first ':' that is followed by KEY=:

  sentence1=COL,sentence2=COL,label=COL   column mapping (table, hf; dotted
                                          paths reach nested fields: questions.text.0)
  captions=COL                            a list column; its members are paired
  relation=REL                            every pair gets REL (no label column)
  label.RAW=REL                           label map entry; label.RAW= drops RAW
                                          (counted as excluded_label)
  preset=NAME                             known columns + labels: """ + ", ".join(sorted(PRESETS)) + """
  split=SPLIT                             senteval: dev, dev+test (default: all
                                          present); hf: train, validation, train[:10%]
  name=CONFIG                             hf config, e.g. glue's qqp
  format=jsonl|json|csv|tsv               table format (default: from the name)
  tag=NAME                                the `source` value in the sets

Examples:
  --source senteval:../shared/data/nli/snli_senteval:split=dev+test
  --source simcse_csv:nli_for_simcse.csv
  --source table:snli_1.0_dev.jsonl:sentence1=sentence1,sentence2=sentence2,label=gold_label
  --source table:SICK_train.txt:preset=sick
  --source hf:snli:split=train
  --source hf:glue:name=qqp,split=train
  --source hf:google-research-datasets/paws:name=labeled_final
"""

_OPTIONS_START = re.compile(r":(?=[A-Za-z_][\w.\-]*=)")


def parse_source(text: str) -> PairSource:
    kind, sep, rest = text.partition(":")
    if not sep or kind not in KINDS or not rest:
        raise PairSourceError(f"--source {text!r}: expected KIND:PATH[:OPTIONS] with KIND in {list(KINDS)}")
    match = _OPTIONS_START.search(rest)
    path, options = (rest[: match.start()], rest[match.end():]) if match else (rest, "")
    source = PairSource(kind=kind, path=path)
    columns, label_map = {}, {}
    for item in filter(None, options.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise PairSourceError(f"--source {text!r}: option {item!r} is not KEY=VALUE")
        if key in ("sentence1", "sentence2", "label", "captions"):
            columns[key] = value
        elif key.startswith("label."):
            label_map[key[len("label."):]] = value or None
        elif key in ("relation", "split", "name", "preset", "format", "tag"):
            setattr(source, key, value)
        else:
            raise PairSourceError(f"--source {text!r}: unknown option {key!r}")
    source.columns = columns or None
    source.label_map = label_map or None
    return source


def _key_values(items: list[str], cast, what: str) -> dict:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise PairSourceError(f"{what} {item!r}: expected RELATION=VALUE")
        out[key] = cast(value)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ingest.pairs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Read sentence-pair corpora with Ray and write the parquet sets `nli_triplets` (premise, "
        "entailment, contradiction: SimCSE sup, GaussCSE) and `relation_triples` (sentence1, relation, sentence2, "
        "in-relation hard negative, weight: RSE), each with a manifest.json that accounts for every pair.",
        epilog=SOURCE_HELP,
    )
    parser.add_argument("--source", action="append", default=[], metavar="KIND:PATH[:OPTIONS]",
                        help="a pair corpus (see below); repeat for several")
    parser.add_argument("--config", help="a YAML/JSON file with PairIngestConfig fields (sources as a list of "
                        "PairSource fields); --source entries are added to its sources")
    parser.add_argument("--out", help="output folder (local path or fsspec URI)")
    parser.add_argument("--relation", action="append", default=[], metavar="REL=WEIGHT",
                        help="keep REL in relation_triples with this weight (repeat; default: every relation, 1.0)")
    parser.add_argument("--max-per-relation", action="append", default=[], metavar="REL=N",
                        help="cap relation_triples rows of REL (a seeded sample; RSE: 330000)")
    parser.add_argument("--max-triplets-per-premise", type=int,
                        help="nli_triplets per premise, a seeded sample of its (entailment, contradiction) "
                        "pairs (default 4; 0: no cap)")
    parser.add_argument("--seed", type=int, help="seed of every sample and random choice (default 42)")
    parser.add_argument("--min-chars", type=int, help="shorter texts are dropped as too_short (default 1)")
    parser.add_argument("--max-chars", type=int, help="longer texts are dropped as too_long (default 1000)")
    parser.add_argument("--num-cpus", type=int, help="start a local Ray with this many CPUs")
    return parser


def parse_args(argv=None) -> tuple[PairIngestConfig, argparse.Namespace]:
    parser = build_parser()
    args = parser.parse_args(argv)
    data: dict = {}
    if args.config:
        import yaml

        with fsspec.open(args.config, "rt", encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    cfg = PairIngestConfig.from_dict({"out": args.out or data.get("out"), **{k: v for k, v in data.items()
                                                                           if k != "out"}})
    cfg.sources += [parse_source(s) for s in args.source]
    if args.relation:
        cfg.relations = _key_values(args.relation, float, "--relation")
    if args.max_per_relation:
        cfg.max_per_relation = _key_values(args.max_per_relation, int, "--max-per-relation")
    if args.max_triplets_per_premise is not None:
        cfg.max_triplets_per_premise = args.max_triplets_per_premise or None
    for name in ("seed", "min_chars", "max_chars"):
        if getattr(args, name) is not None:
            setattr(cfg, name, getattr(args, name))
    if not cfg.out:
        parser.error("--out is required (or `out` in --config)")
    if not cfg.sources:
        parser.error("give at least one --source (or `sources` in --config)")
    return cfg, args


def main(argv=None) -> int:
    try:
        cfg, args = parse_args(argv)
    except PairSourceError as e:
        print(f"ingest.pairs: error: {e}", file=sys.stderr)
        return 2
    if args.num_cpus:
        ray.init(num_cpus=args.num_cpus)
    try:
        run_pair_ingest(cfg)
    except (FileNotFoundError, PairSourceError, schemas.SchemaError) as e:
        print(f"ingest.pairs: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
