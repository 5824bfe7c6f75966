"""Pair sources: what a corpus is (``PairSource``, known ``PRESETS``), the job's
config (``PairIngestConfig``), and the driver's check of every source before
any Ray work (``resolve_sources``: files exist, mapped columns are in the
header or first record, SentEval files have equal line counts, a hub dataset
loads), which also plans the read units (``ingest/pairs/readers.py``).
"""

from __future__ import annotations

import csv
import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import PurePosixPath

from infra.storage import filesystem, open_file
from setformat.labels import NLI_INT_LABELS, NLI_TEXT_LABELS, RSE_RELATIONS
from setformat.io import write_table

log = logging.getLogger(__name__)
KINDS = ("senteval", "simcse_csv", "table", "hf")
FIRST_ROWS = 10  # offending row numbers kept per source and reason
SENTEVAL_SPLITS = ("train", "dev", "test")


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
    # sentence-transformers/all-nli (SNLI + MultiNLI): "triplet" (anchor, positive = entailment, negative =
    # contradiction: SimCSE-sup's rows), "pair" (entailment pairs), "pair-class" (premise, hypothesis, label)
    "all_nli_triplet": Preset({"sent0": "anchor", "sent1": "positive", "hard_neg": "negative"}),
    "all_nli_pair": Preset({"sent0": "anchor", "sent1": "positive"}),
    "all_nli_pair_class": Preset({"sentence1": "premise", "sentence2": "hypothesis", "label": "label"},
                                 NLI_INT_LABELS),
}
# sentence-transformers/all-nli's configs -> preset ("triplet" when no config is named)
ALL_NLI = {"triplet": "all_nli_triplet", "pair": "all_nli_pair", "pair-class": "all_nli_pair_class"}
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
    memory_per_cpu: int = 2 << 30  # memory one CPU's task may use: a shuffle bucket holds 1/32 of it
    file_bytes: int = 128 << 20  # target size of one output file
    hf_chunk_rows: int = 200_000  # rows of a hub dataset per read task
    pool_bucket_rows: int = 4096  # sentences per bucket when drawing random hard negatives
    not_utf8: str = "drop"  # a row with bytes that are not UTF-8: "drop" (counted not_utf8) or "replace" (U+FFFD, counted)

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


# ---------------------------------------------------------------- files


def _exists(path: str) -> bool:
    fs, local = filesystem(path)
    return fs.exists(local)


def open_text(path: str, newline: str | None = None, errors: str = "replace"):
    """A text file (fsspec URI; .gz/.bz2/... decompressed by the name), UTF-8; bytes that are not UTF-8
    read as U+FFFD, for the readers to count (``not_utf8``) instead of a decode error in a worker."""
    return open_file(path, "rt", compression="infer", encoding="utf-8", newline=newline, errors=errors)


def _count_lines(path: str) -> int:
    count, last = 0, b"\n"
    with open_file(path, "rb", compression="infer") as f:
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


# ---------------------------------------------------------------- resolving sources (driver)


def _label_map(preset: Preset | None, source: PairSource, default: dict | None) -> dict | None:
    base = dict(preset.label_map) if preset and preset.label_map else (dict(default) if default else {})
    for raw, relation in (source.label_map or {}).items():
        base[str(raw)] = relation if relation not in ("", "none", "None", "drop") else None
    return base


def _preset_of(source: PairSource) -> Preset | None:
    key = source.preset
    if key is None and source.kind == "hf" and _basename(source.path).lower() == "all-nli":
        key = ALL_NLI.get(source.name or "triplet")
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
    if "sent0" in columns:  # (premise, entailment[, contradiction]) rows, as SimCSE's csv
        return {k: columns[k] for k in ("sent0", "sent1", "hard_neg") if k in columns}, None
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
    with open_text(path) as f:
        while True:
            c = f.read(1)
            if not c or not c.isspace():
                return c == "["


def _header(path: str, fmt: str) -> list[str]:
    """Column names: a csv/tsv header, or the keys of the first json record."""
    if fmt in ("csv", "tsv"):
        with open_text(path, newline="") as f:
            reader = csv.reader(f, delimiter="," if fmt == "csv" else "\t",
                                quoting=csv.QUOTE_MINIMAL if fmt == "csv" else csv.QUOTE_NONE)
            return next(reader, [])
    if fmt == "json" and _json_is_list(path):
        with open_text(path) as f:
            data = json.load(f)
        return sorted(data[0]) if data and isinstance(data[0], dict) else []
    with open_text(path) as f:
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
    from infra.hub_data import HubSource, check_available, is_hub_copy, local_copy, looks_like_hub_name

    path, name = source.path, source.name
    if _basename(path).lower() == "all-nli" and name is None:
        name = "triplet"
    copy = local_copy(path) if looks_like_hub_name(path) else None  # STRUCTCSE_HUB_COPIES
    if copy is not None:
        path, name = str(copy / name) if name and is_hub_copy(copy / name) else str(copy), None
    elif looks_like_hub_name(path):
        try:  # offline and not cached: one line naming the dataset, not the hub client's retries
            check_available([HubSource(path, name=path)], flag="--source hf:FOLDER")
        except FileNotFoundError as e:
            raise PairSourceError(f"hf source {e}") from None
    try:
        return datasets.load_dataset(path, name, split=source.split or "train", **source.hf_kwargs)
    except (FileNotFoundError, ValueError, ConnectionError) as e:
        raise PairSourceError(f"hf source {source.path}"
                              + (f" ({source.name})" if source.name else "") + f": {type(e).__name__}: {e}") from e


def resolve_sources(cfg: PairIngestConfig, work: str) -> tuple[list[dict], list[dict]]:
    """Check every source and plan its read units (hub datasets are cut into row
    chunks written under ``work``). Returns (sources, units); raises
    ``PairSourceError`` / ``FileNotFoundError`` naming the file and column."""
    if cfg.not_utf8 not in ("drop", "replace"):
        raise PairSourceError(f"not_utf8 must be 'drop' or 'replace', not {cfg.not_utf8!r}")
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
        spec = {"kind": source.kind, "min_chars": cfg.min_chars, "max_chars": cfg.max_chars, "not_utf8": cfg.not_utf8}
        plan = {"senteval": _senteval_units, "simcse_csv": _simcse_csv_units, "table": _table_units}.get(
            source.kind, _hf_units)
        units += plan(source, index, spec, entry, cfg=cfg, work=work)
        resolved.append(entry)
        log.info(f"[pairs] source {index}: {tag} ({source.kind}) ok")
    return resolved, units


def _senteval_units(source, index: int, spec: dict, entry: dict, **_) -> list[dict]:
    """A SentEval NLI folder: a unit per split (its s1, s2 and labels files)."""
    splits = _senteval_splits(source)
    spec = {**spec, "label_map": _label_map(_preset_of(source), source, NLI_TEXT_LABELS), "relation": source.relation}
    entry["split"] = "+".join(splits)
    folder = source.path.rstrip("/")
    return [{"source": index, "unit": k, "label": split,
             "files": [f"{folder}/{p}.{split}" for p in ("s1", "s2", "labels")], "spec": {**spec, "split": split}}
            for k, split in enumerate(splits)]


def _simcse_csv_units(source, index: int, spec: dict, entry: dict, **_) -> list[dict]:
    """SimCSE's training csv (sent0, sent1, hard_neg): one unit; a warning when it has no hard_neg column."""
    if not _exists(source.path):
        raise FileNotFoundError(f"SimCSE csv not found: {source.path}")
    found = _header(source.path, "csv")
    columns = {"sent0": "sent0", "sent1": "sent1", **(source.columns or {})}
    _check_columns(source.path, found, columns)
    if "hard_neg" not in columns and "hard_neg" in found:
        columns["hard_neg"] = "hard_neg"
    if "hard_neg" not in columns:
        entry["warning"] = (f"{source.path} has no hard_neg column (found {found}): its rows are "
                            "entailment pairs only, so it adds no nli_triplets (SimCSE-sup's "
                            "premise/entailment/contradiction rows); map one with columns={'hard_neg': ...}")
        log.warning(f"[pairs] warning: {entry['warning']}")
    return [{"source": index, "unit": 0, "label": _basename(source.path), "files": [source.path],
             "spec": {**spec, "columns": columns}}]


def _table_units(source, index: int, spec: dict, entry: dict, **_) -> list[dict]:
    """A csv / tsv / json / jsonl / parquet file of pairs: one unit, its columns mapped and checked."""
    if not _exists(source.path):
        raise FileNotFoundError(f"pair file not found: {source.path}")
    preset = _preset_of(source)
    columns, relation = _mapping(source, preset)
    fmt = _table_format(source)
    if fmt == "json" and not _json_is_list(source.path):
        fmt = "jsonl"
    _check_columns(source.path, _header(source.path, fmt), columns)
    default = {**{r: r for r in RSE_RELATIONS}, **NLI_TEXT_LABELS}
    return [{"source": index, "unit": 0, "label": _basename(source.path), "files": [source.path],
             "spec": {**spec, "format": fmt, "columns": columns, "relation": relation,
                      "label_map": _label_map(preset, source, default) if relation is None else None}}]


def _hf_units(source, index: int, spec: dict, entry: dict, *, cfg: PairIngestConfig, work: str) -> list[dict]:
    """A Hugging Face dataset: its columns checked, cut into chunks of ``cfg.hf_chunk_rows`` rows written under
    ``work``, a unit per chunk."""
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
    units = []
    for k, start in enumerate(range(0, max(n, 1), chunk)):
        path = f"{work}/pair_hf/{index:03d}-{k:05d}.parquet"
        write_table(table_ds[start:min(n, start + chunk)], path)
        units.append({"source": index, "unit": k, "label": split, "files": [path],
                      "spec": {**spec, "format": "parquet", "columns": columns, "relation": relation,
                               "row_offset": start,
                               "label_map": _label_map(preset, source, None) if relation is None else None}})
    entry["hf"] = {"rows": n, "fingerprint": getattr(dataset, "_fingerprint", None)}
    entry["split"] = split
    return units

