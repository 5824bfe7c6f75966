"""The Papers-with-Code aspect folds of Ostendorff et al. (JCDL 2022) as
``aspect_triplets`` (per aspect) and ``aspect_docs`` sets (AspectCSE §4.1, Table 3).

Input: a folder as published in ``malteos/aspect-document-embeddings``:

- ``docs.jsonl``: one JSON object per line with the paper id (``paper_id``;
  also accepted: ``id``, ``paperId``), ``title`` and ``abstract`` (also
  ``paperAbstract``); the text is ``title + ": " + abstract`` as in the
  paper's code. A line without an id, title or abstract (or not a JSON
  object) is a ``PwcFormatError`` naming the file and the line.
- ``folds/{aspect}/{k}/{train,test}.csv`` with the header
  ``from_paper_id,to_paper_id,label`` and labels ``y`` / ``n``; aspects
  ``task``, ``method``, ``dataset`` and folds 1..4 (plus ``sample``) in the
  published archive, but any folder names found are accepted.

A pair naming a paper id that ``docs.jsonl`` lacks is **counted and skipped**
(``skipped.unknown_paper_id`` in the manifests, with a few example ids), or a
``PwcFormatError`` naming file and line with ``unknown="error"``. A self pair
(``from == to``) is skipped (``skipped.self_pair``); a repeated line
(same direction and label) is kept once (``skipped.duplicate``). A bad
header or a label other than ``y`` / ``n`` is always an error naming file
and line.

Output (``build_pwc_sets``), per aspect, from the fold's TRAIN csv:
``OUT/<aspect>/aspect_triplets/`` (``variant`` = ``single``, ``aspects`` =
``[aspect]``, the qid columns hold paper ids). Each anchor (a ``from`` paper
with ≥1 ``y`` pair) gets up to ``triplets_per_anchor`` triplets (``None``:
one per ``y`` pair), its ``y`` partners taken in a seeded order: positive = the
``to`` paper of a ``y`` pair; negative = the ``to`` paper of an ``n`` pair of
the same anchor when there is one (``negative_kind`` ``labelled``, distinct
``n`` partners first), else a seeded random paper of the train fold that is not
the anchor nor a ``y`` partner of it (``negative_kind`` ``random``,
``negative_qid`` set: the paper is known, only unlabelled for this anchor).
Random negatives are drawn from the papers of the TRAIN csv only, so no test
text enters training.

From the fold's TEST csv: ``OUT/aspect_docs/`` with one row per (paper of the
test pairs, aspect). Label encoding: **one label per unordered ``y`` pair**,
``f"{aspect}:pair{i}"`` (``i`` = the pair's index in sorted order), given to
both papers. Two papers then share a label iff a ``y`` pair links them, so
``eval/aspect_retrieval.py``'s "relevant = shares ≥1 label" is exactly
Ostendorff's ``eval_cli.py`` relevance (``doc_id2related_ids``: for a seed, the
papers with a ``y`` pair to it in the test csv, either direction). Connected
components of the ``y`` graph would not be: papers hold several aspect values,
so A~B (value 1) and B~C (value 2) do not make A~C relevant. The original
aspect values are not in the folds, so a label-per-value encoding cannot be
rebuilt.

Candidates: Ostendorff embeds every paper of the test csv (``from`` ∪
``to``) and ranks them all; seeds are those with ≥1 relevant paper. Papers of
the test csv with no ``y`` pair (only ``n`` pairs) are therefore kept as rows
with an EMPTY label list: ``eval/aspect_retrieval.py`` treats them as
candidates that are never seeds (no shared label), which is the same pool.
(Ostendorff's KFold test split may hold papers that appear in no test pair;
those are not in the csv files and so cannot be candidates here either.)
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa

from setformat import schemas
from setformat.io import stable_hash, write_json, write_manifest, write_table

log = logging.getLogger(__name__)
HEADER = ["from_paper_id", "to_paper_id", "label"]
LABELS = ("y", "n")
ID_KEYS = ("paper_id", "id", "paperId")
TITLE_KEYS = ("title",)
ABSTRACT_KEYS = ("abstract", "paperAbstract")
FILE_ROWS = 50_000  # rows per parquet file
EXAMPLES = 5  # example ids kept in manifests per skip reason


class PwcFormatError(ValueError):
    """A PwC aspect folder is malformed; the message names the file (and line)."""


@dataclass(frozen=True)
class Doc:
    paper_id: str
    title: str
    text: str  # title + ": " + abstract


class Pair(NamedTuple):
    from_id: str
    to_id: str
    label: str  # y | n
    line: int  # line in its csv (header = 1)


class FoldPairs(list):
    """The kept pairs of one csv, plus what was read and skipped (and why)."""

    def __init__(self, pairs=(), *, path: str = "", read: int = 0, skipped: Counter | None = None,
                 examples: dict | None = None):
        super().__init__(pairs)
        self.path = path
        self.read = read
        self.skipped = skipped if skipped is not None else Counter()
        self.examples = examples if examples is not None else {}

    def summary(self) -> dict:
        return {"path": self.path, "read": self.read, "kept": len(self),
                "kept_by_label": dict(sorted(Counter(p.label for p in self).items())),
                "skipped": dict(sorted(self.skipped.items())), "skipped_examples": self.examples}


# ---------------------------------------------------------------- reading


def _first(obj: dict, keys: tuple[str, ...]):
    for key in keys:
        if obj.get(key) is not None:
            return obj[key]
    return None


def read_docs(root: str | Path) -> tuple[dict[str, Doc], dict]:
    """``({paper_id: Doc}, stats)`` from ``root/docs.jsonl``; a repeated id keeps its first line."""
    path = os.path.join(os.fspath(root), "docs.jsonl")
    if not os.path.isfile(path):
        raise PwcFormatError(f"{path}: no such file (a PwC aspect folder holds docs.jsonl and folds/)")
    docs: dict[str, Doc] = {}
    stats = Counter()
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                stats["blank_lines"] += 1
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise PwcFormatError(f"{path}:{line_no}: not valid JSON ({e.msg})") from None
            if not isinstance(obj, dict):
                raise PwcFormatError(f"{path}:{line_no}: expected a JSON object, got {type(obj).__name__}")
            for what, keys in (("paper id", ID_KEYS), ("title", TITLE_KEYS), ("abstract", ABSTRACT_KEYS)):
                if _first(obj, keys) is None:
                    raise PwcFormatError(f"{path}:{line_no}: no {what} (expected one of {list(keys)}; "
                                         f"found keys {sorted(obj)})")
            pid, title, abstract = str(_first(obj, ID_KEYS)), str(_first(obj, TITLE_KEYS)), str(_first(obj, ABSTRACT_KEYS))
            stats["lines"] += 1
            if pid in docs:
                stats["duplicate_paper_id"] += 1
                continue
            docs[pid] = Doc(pid, title, f"{title}: {abstract}")
    if not docs:
        raise PwcFormatError(f"{path}: no documents")
    stats["docs"] = len(docs)
    return docs, dict(sorted(stats.items()))


def aspects_in(root: str | Path) -> list[str]:
    """The aspect folders under ``root/folds/``, sorted."""
    folds = os.path.join(os.fspath(root), "folds")
    if not os.path.isdir(folds):
        raise PwcFormatError(f"{folds}: no such folder (a PwC aspect folder holds docs.jsonl and folds/)")
    return sorted(d for d in os.listdir(folds) if os.path.isdir(os.path.join(folds, d)))


def folds_in(root: str | Path, aspect: str) -> list[str]:
    """The fold folders of ``aspect`` (e.g. ``1`` .. ``4``, ``sample``), sorted."""
    folder = os.path.join(os.fspath(root), "folds", aspect)
    if not os.path.isdir(folder):
        raise PwcFormatError(f"{folder}: no such aspect folder (aspects found: {aspects_in(root)})")
    return sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))


def read_pairs(path: str, docs: dict[str, Doc], *, unknown: str = "skip") -> FoldPairs:
    """The pairs of one fold csv (see the module doc for what is skipped and what is an error)."""
    if unknown not in ("skip", "error"):
        raise ValueError(f"unknown={unknown!r}: expected 'skip' or 'error'")
    if not os.path.isfile(path):
        raise PwcFormatError(f"{path}: no such file")
    out = FoldPairs(path=path)
    seen: set[tuple[str, str, str]] = set()
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or [h.strip() for h in header] != HEADER:
            raise PwcFormatError(f"{path}:1: bad header {header!r}, expected {','.join(HEADER)}")
        for row in reader:
            line = reader.line_num
            if not row or not any(c.strip() for c in row):
                continue
            if len(row) != 3:
                raise PwcFormatError(f"{path}:{line}: expected 3 fields ({','.join(HEADER)}), got {len(row)}")
            a, b, label = (c.strip() for c in row)
            out.read += 1
            if label not in LABELS:
                raise PwcFormatError(f"{path}:{line}: label {label!r} is not 'y' or 'n'")
            missing = [p for p in (a, b) if p not in docs]
            if missing:
                if unknown == "error":
                    raise PwcFormatError(f"{path}:{line}: paper id {missing[0]!r} is not in docs.jsonl")
                reason = "unknown_paper_id"
                ex = out.examples.setdefault(reason, [])
                ex.extend(m for m in missing if len(ex) < EXAMPLES and m not in ex)
            elif a == b:
                reason = "self_pair"
            elif (a, b, label) in seen:
                reason = "duplicate"
            else:
                seen.add((a, b, label))
                out.append(Pair(a, b, label, line))
                continue
            out.skipped[reason] += 1
    return out


def _fold_dir(root: str | Path, aspect: str, fold) -> str:
    folder = os.path.join(os.fspath(root), "folds", aspect, str(fold))
    if not os.path.isdir(folder):
        raise PwcFormatError(f"{folder}: no such fold folder (folds of {aspect!r}: {folds_in(root, aspect)})")
    return folder


def read_pwc_fold(root: str | Path, aspect: str, fold=1, *, unknown: str = "skip",
                  docs: dict[str, Doc] | None = None) -> tuple[FoldPairs, FoldPairs, dict[str, Doc]]:
    """``(train_pairs, test_pairs, docs)`` of one aspect's fold: the pairs are ``FoldPairs`` (lists of
    ``Pair``, with ``read`` / ``skipped`` counts), ``docs`` maps paper id -> ``Doc``. Pairs with an
    unknown paper id are counted and skipped (``unknown="error"``: a ``PwcFormatError`` naming file
    and line). ``docs`` may be passed in to read ``docs.jsonl`` once for several folds."""
    folder = _fold_dir(root, aspect, fold)
    if docs is None:
        docs, _ = read_docs(root)
    train = read_pairs(os.path.join(folder, "train.csv"), docs, unknown=unknown)
    test = read_pairs(os.path.join(folder, "test.csv"), docs, unknown=unknown)
    return train, test, docs


# ---------------------------------------------------------------- building


def _draw(seed: int, *parts) -> int:
    return stable_hash(":".join(map(str, (seed, *parts))))


def pwc_triplets(aspect: str, train: FoldPairs, docs: dict[str, Doc], *, seed: int = 42,
                 triplets_per_anchor: int | None = 1) -> tuple[list[dict], dict]:
    """Triplet rows (``schemas.ASPECT_TRIPLETS``) of one aspect's train pairs, and their counts."""
    ys: dict[str, list[str]] = defaultdict(list)  # directed, as in the csv: from -> to
    ns: dict[str, list[str]] = defaultdict(list)
    y_any: dict[str, set[str]] = defaultdict(set)  # undirected
    for p in train:
        if p.label == "y":
            ys[p.from_id].append(p.to_id)
            y_any[p.from_id].add(p.to_id)
            y_any[p.to_id].add(p.from_id)
        else:
            ns[p.from_id].append(p.to_id)
    pool = sorted({q for p in train for q in (p.from_id, p.to_id)})
    stats = Counter(anchors=len(ys), y_pairs=sum(map(len, ys.values())), n_pairs=sum(map(len, ns.values())))
    rows = []
    for anchor in sorted(ys):
        partners = sorted(set(ys[anchor]), key=lambda q: (_draw(seed, aspect, "pos", anchor, q), q))
        if triplets_per_anchor is not None:
            stats["y_pairs_beyond_triplets_per_anchor"] += len(partners) - min(len(partners), triplets_per_anchor)
            partners = partners[:triplets_per_anchor]
        labelled = sorted({q for q in ns[anchor] if q not in y_any[anchor] and q != anchor},
                          key=lambda q: (_draw(seed, aspect, "neg", anchor, q), q))
        stats["n_partners_also_y"] += len({q for q in ns[anchor] if q in y_any[anchor]})
        excluded = y_any[anchor] | {anchor}
        for i, positive in enumerate(partners):
            if labelled:
                negative, kind = labelled[i % len(labelled)], "labelled"
            else:
                negative, kind = None, "random"
                if len(pool) > len(excluded):
                    for j in range(64):
                        cand = pool[_draw(seed, aspect, "rand", anchor, i, j) % len(pool)]
                        if cand not in excluded:
                            negative = cand
                            break
                    if negative is None:  # unlucky draws: the first allowed paper after a seeded start
                        start = _draw(seed, aspect, "rand", anchor, i) % len(pool)
                        negative = next(pool[(start + k) % len(pool)] for k in range(len(pool))
                                        if pool[(start + k) % len(pool)] not in excluded)
                if negative is None:
                    stats["skipped_no_negative"] += 1
                    continue
            stats[f"negative_{kind}"] += 1
            a, pos, neg = docs[anchor], docs[positive], docs[negative]
            rows.append({"anchor": a.text, "positive": pos.text, "negative": neg.text, "anchor_qid": anchor,
                         "positive_qid": positive, "negative_qid": negative, "negative_kind": kind,
                         "variant": "single", "aspects": [aspect]})
    stats["triplets"] = len(rows)
    return rows, dict(sorted(stats.items()))


def pwc_docs(aspect: str, test: FoldPairs, docs: dict[str, Doc]) -> tuple[list[dict], dict]:
    """``aspect_docs`` rows of one aspect's test pairs: a label per unordered ``y`` pair (module doc)."""
    y_pairs = sorted({(min(p.from_id, p.to_id), max(p.from_id, p.to_id)) for p in test if p.label == "y"})
    labels: dict[str, list[str]] = {q: [] for p in test for q in (p.from_id, p.to_id)}
    for i, (a, b) in enumerate(y_pairs):
        labels[a].append(f"{aspect}:pair{i}")
        labels[b].append(f"{aspect}:pair{i}")
    rows = [{"qid": q, "title": docs[q].title, "text": docs[q].text, "aspect": aspect, "labels": labels[q]}
            for q in sorted(labels)]
    stats = {"docs": len(rows), "seeds": sum(1 for r in rows if r["labels"]),
             "candidates_without_label": sum(1 for r in rows if not r["labels"]), "y_pairs": len(y_pairs)}
    return rows, stats


def _write_rows(rows: list[dict], schema: pa.Schema, path: str) -> tuple[int, list[str]]:
    """(rows written, the files written: what the set's manifest lists)."""
    files = max(1, math.ceil(len(rows) / FILE_ROWS))
    names = [f"part-{i:05d}.parquet" for i in range(files)]
    for i, name in enumerate(names):
        write_table(pa.Table.from_pylist(rows[i * FILE_ROWS:(i + 1) * FILE_ROWS], schema=schema), f"{path}/{name}")
    return len(rows), names


def build_pwc_sets(root: str | Path, out: str, *, aspects: list[str] | None = None, fold=1, seed: int = 42,
                   triplets_per_anchor: int | None = 1, unknown: str = "skip") -> dict:
    """Write ``OUT/<aspect>/aspect_triplets/`` (train csv) and ``OUT/aspect_docs/`` (test csv) of one
    fold, with manifests; returns the overall manifest (also ``OUT/manifest.json``). ``aspects``:
    default every aspect folder found under ``root/folds``."""
    if triplets_per_anchor is not None and triplets_per_anchor < 1:
        raise ValueError(f"triplets_per_anchor must be >= 1 (or None: every y pair), got {triplets_per_anchor}")
    root = os.fspath(root)
    out = os.fspath(out).rstrip("/")
    found = aspects_in(root)
    aspects = list(aspects) if aspects else found
    unknown_aspects = [a for a in aspects if a not in found]
    if unknown_aspects:
        raise PwcFormatError(f"{root}/folds: no aspect folder {unknown_aspects} (aspects found: {found})")
    if not aspects:
        raise PwcFormatError(f"{root}/folds: no aspect folders")
    for aspect in aspects:
        _fold_dir(root, aspect, fold)  # every fold folder exists before anything is written
    docs, doc_stats = read_docs(root)
    inputs = {"root": root, "docs": os.path.join(root, "docs.jsonl"), "fold": str(fold)}
    config = {"aspects": aspects, "fold": str(fold), "seed": seed, "triplets_per_anchor": triplets_per_anchor,
              "unknown": unknown}
    per_aspect, doc_rows, doc_stats_by_aspect, test_summaries = {}, [], {}, {}
    for aspect in aspects:
        train, test, _ = read_pwc_fold(root, aspect, fold, unknown=unknown, docs=docs)
        rows, stats = pwc_triplets(aspect, train, docs, seed=seed, triplets_per_anchor=triplets_per_anchor)
        path = f"{out}/{aspect}/aspect_triplets"
        written, files = _write_rows(rows, schemas.ASPECT_TRIPLETS, path)
        write_manifest(path, "aspect_triplets", written, variant="single", kind="single", aspects=[aspect],
                       source="pwc", config=config, inputs=inputs, pairs=train.summary(), files=files, **stats)
        rows_d, stats_d = pwc_docs(aspect, test, docs)
        doc_rows.extend(rows_d)
        doc_stats_by_aspect[aspect] = stats_d
        test_summaries[aspect] = test.summary()
        per_aspect[aspect] = {"triplets": written, "train_pairs": train.summary(), **stats,
                              "test_pairs": test.summary(), "docs": stats_d}
        log.info(f"[pwc] {aspect} fold {fold}: {written} triplets from {train.read} train pairs "
                 f"(skipped {dict(train.skipped)}); {stats_d['docs']} test docs, {stats_d['seeds']} seeds")
    written_docs, doc_files = _write_rows(doc_rows, schemas.ASPECT_DOCS, f"{out}/aspect_docs")
    write_manifest(f"{out}/aspect_docs", "aspect_docs", written_docs, source="pwc", config=config, inputs=inputs,
                   files=doc_files,
                   label_encoding="one label '<aspect>:pair<i>' per unordered y pair of the test csv",
                   pairs=test_summaries, docs_per_aspect={a: s["docs"] for a, s in doc_stats_by_aspect.items()},
                   per_aspect=doc_stats_by_aspect)
    manifest = {"source": "pwc", "config": config, "inputs": inputs, "docs_jsonl": doc_stats,
                "aspects": per_aspect, "aspect_docs": {"rows": written_docs}}
    write_json(manifest, f"{out}/manifest.json")
    return manifest
