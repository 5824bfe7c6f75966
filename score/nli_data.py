"""NLI evaluation pairs: SentEval NLI folders and SICK, read into :class:`NliPairs`.

A hub source comes first when no folder is given (``hub_nli_source``: ``stanfordnlp/snli``, or
``RobZamp/sick``, or a folder of such a dataset's files; read through ``datasets`` by ``infra.hub_data``:
premise/hypothesis or sentence_A/sentence_B and a label, 0 entailment, 1 neutral, 2 contradiction, -1 none;
SICK's entailment_BA marks the bilateral pairs). Two local layouts, told apart by the files present:

* **SentEval** (SNLI, MNLI, the demo world's ``nli/``): ``s1.<split>``,
  ``s2.<split>``, ``labels.<split>``; line i of the three files is one
  (premise, hypothesis, label) pair. Splits: train, dev, test.
* **SICK** (SemEval-2014 Task 1, SentEval's copies): ``SICK_<split>.txt``
  (tab-separated, header ``pair_ID sentence_A sentence_B relatedness_score
  entailment_judgment``) in the folder or in its ``senteval/`` subfolder;
  splits train, trial, test (``SICK_test_annotated.txt``). sentence_A is the
  premise. When the original ``SICK.txt`` (or the ``SICK_train_trial.txt``
  cut of it) is found (folder, ``original/``, or ``../original/``), its
  ``entailment_BA`` column marks the bilateral entailments (B also entails
  A), which GaussCSE's direction task excludes (paper §3.2).

Labels go through ingest's NLI label map (``setformat.labels.NLI_TEXT_LABELS``,
case-insensitive): entailment / neutral / contradiction are kept as relation
names; ``-`` (no gold label) rows are skipped and counted (the GaussCSE code
keeps them as non-entailment; SentEval's files have none); any other label is
a ``ValueError`` naming the file, line and label.
"""

from __future__ import annotations

import csv
import logging
from dataclasses import dataclass, replace
from pathlib import Path

from setformat.labels import NLI_INT_LABELS, NLI_TEXT_LABELS

log = logging.getLogger(__name__)

SENTEVAL_PARTS = ("s1", "s2", "labels")
SENTEVAL_SPLITS = ("train", "dev", "test")
SICK_FILES = {"train": ("SICK_train.txt",), "trial": ("SICK_trial.txt",),
              "test": ("SICK_test_annotated.txt", "SICK_test.txt")}
SICK_ORIGINAL_FILES = ("SICK.txt", "SICK_train_trial.txt")
SICK_COLUMNS = ("pair_ID", "sentence_A", "sentence_B", "entailment_judgment")


@dataclass
class NliPairs:
    """Premise/hypothesis pairs with relation labels (entailment, neutral, contradiction)."""

    premises: list[str]
    hypotheses: list[str]
    labels: list[str]
    path: str = ""
    layout: str = "senteval"
    skipped_rows: int = 0  # rows without a gold label ("-")
    bilateral: list[bool | None] | None = None  # SICK: B also entails A (None: pair not in the original file)

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, keep) -> NliPairs:
        idx = [i for i, k in enumerate(keep) if k]
        return replace(self, premises=[self.premises[i] for i in idx], hypotheses=[self.hypotheses[i] for i in idx],
                       labels=[self.labels[i] for i in idx],
                       bilateral=None if self.bilateral is None else [self.bilateral[i] for i in idx])

    def head(self, n: int | None) -> NliPairs:
        """The first ``n`` pairs (all when ``n`` is None)."""
        return self if n is None or n >= len(self) else self.subset([i < n for i in range(len(self))])

    def is_entailment(self) -> list[bool]:
        return [label == "entailment" for label in self.labels]


# ---------------------------------------------------------------- locating files


def _sick_dirs(folder: Path) -> list[Path]:
    return [folder, folder / "senteval"]


def _sick_file(folder: Path, split: str) -> Path | None:
    for d in _sick_dirs(folder):
        for name in SICK_FILES.get(split, ()):
            if (d / name).is_file():
                return d / name
    return None


def _layout(folder: Path) -> str | None:
    if any((folder / f"s1.{s}").is_file() for s in SENTEVAL_SPLITS):
        return "senteval"
    if any(_sick_file(folder, s) for s in SICK_FILES):
        return "sick"
    return None


def splits_present(folder: str | Path) -> list[str]:
    folder = Path(folder).expanduser()
    layout = _layout(folder)
    if layout == "senteval":
        return [s for s in SENTEVAL_SPLITS if (folder / f"s1.{s}").is_file()]
    if layout == "sick":
        return [s for s in SICK_FILES if _sick_file(folder, s)]
    return []


def hub_nli_source(data: str | Path | None):
    """The hub source ``data`` names (``infra.hub_data``: a hub name such as ``stanfordnlp/snli`` or
    ``RobZamp/sick``, a folder of a hub dataset's files; None: SNLI), or None for a SentEval or SICK folder."""
    from infra.hub_data import SNLI, hub_source

    if data is not None and Path(data).expanduser().is_dir() and _layout(Path(data).expanduser()):
        return None
    return hub_source(None if data is None else str(data), SNLI)


def nli_split_files(folder: str | Path | None, split: str) -> tuple[str, list[Path]]:
    """(layout, files) of ``split`` in ``folder``; a clear error when a file is missing. A hub source
    (``hub_nli_source``) is ``("hub", [])`` once it can be read now."""
    source = hub_nli_source(folder)
    if source is not None:
        from infra.hub_data import check_available

        check_available([source])
        return "hub", []
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"NLI data folder does not exist: {folder}")
    layout = _layout(folder)
    if layout is None:
        raise FileNotFoundError(
            f"{folder} is not an NLI folder: no SentEval files (s1/s2/labels.<split>) and no SICK_<split>.txt "
            f"(in it or in senteval/)")
    if layout == "senteval":
        files = [folder / f"{part}.{split}" for part in SENTEVAL_PARTS]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            present = splits_present(folder)
            raise FileNotFoundError(f"no {split} split in {folder}: {', '.join(missing)} missing; "
                                    f"splits present: {', '.join(present) or 'none'}")
        return layout, files
    path = _sick_file(folder, split)
    if path is None:
        raise FileNotFoundError(f"no {split} split in SICK folder {folder}: none of "
                                f"{', '.join(SICK_FILES.get(split, (f'SICK_{split}.txt',)))}; "
                                f"splits present: {', '.join(splits_present(folder)) or 'none'}")
    return layout, [path]


# ---------------------------------------------------------------- labels


def _label_map() -> dict:
    return {k.lower(): v for k, v in NLI_TEXT_LABELS.items()}


def _relation(raw: str, labels: dict, path: Path, line: int) -> str | None:
    key = raw.strip().lower()
    if key not in labels:
        known = ", ".join(k for k in labels if labels[k]) + ", - (no gold label, skipped)"
        raise ValueError(f"{path} line {line}: unknown NLI label {raw.strip()!r}; known: {known}")
    return labels[key]


# ---------------------------------------------------------------- readers


def read_senteval_nli(files: list[Path]) -> NliPairs:
    s1_path, s2_path, labels_path = files
    texts = [p.read_text(encoding="utf-8").splitlines() for p in files]
    counts = {p.name: len(t) for p, t in zip(files, texts)}
    if len(set(counts.values())) != 1:
        raise ValueError(f"SentEval NLI files in {s1_path.parent} have different line counts: {counts}")
    labels = _label_map()
    pairs = NliPairs([], [], [], path=str(labels_path), layout="senteval")
    for line, (a, b, raw) in enumerate(zip(*texts), start=1):
        relation = _relation(raw, labels, labels_path, line)
        if relation is None:
            pairs.skipped_rows += 1
            continue
        a, b = a.strip(), b.strip()
        if not a or not b:
            raise ValueError(f"{s1_path if not a else s2_path} line {line}: empty sentence")
        pairs.premises.append(a)
        pairs.hypotheses.append(b)
        pairs.labels.append(relation)
    return pairs


def _find_sick_original(path: Path) -> Path | None:
    roots = [path.parent, path.parent / "original", path.parent.parent / "original"]
    for root in roots:
        for name in SICK_ORIGINAL_FILES:
            if (root / name).is_file():
                return root / name
    return None


def _sick_bilateral(original: Path) -> dict[str, bool]:
    """pair_ID -> True when the original SICK row says B entails A too (``entailment_BA == B_entails_A``)."""
    with original.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        if "entailment_BA" not in (reader.fieldnames or []) or "pair_ID" not in (reader.fieldnames or []):
            raise ValueError(f"{original}: no pair_ID / entailment_BA column; found {reader.fieldnames}")
        return {row["pair_ID"]: row["entailment_BA"].strip() == "B_entails_A" for row in reader}


def read_sick(path: Path) -> NliPairs:
    labels = _label_map()
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        missing = [c for c in SICK_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: column(s) {missing} missing from the header; found {reader.fieldnames}")
        rows = [(reader.line_num, row) for row in reader]
    original = _find_sick_original(path)
    bilateral_of = _sick_bilateral(original) if original else None
    pairs = NliPairs([], [], [], path=str(path), layout="sick", bilateral=[] if bilateral_of is not None else None)
    for line, row in rows:
        if any(row.get(c) is None for c in SICK_COLUMNS):
            raise ValueError(f"{path} line {line}: fewer fields than the header")
        relation = _relation(row["entailment_judgment"], labels, path, line)
        if relation is None:
            pairs.skipped_rows += 1
            continue
        pairs.premises.append(row["sentence_A"].strip())
        pairs.hypotheses.append(row["sentence_B"].strip())
        pairs.labels.append(relation)
        if bilateral_of is not None:
            pairs.bilateral.append(bilateral_of.get(row["pair_ID"].strip()))
    return pairs


def read_hub_nli(source, split: str) -> NliPairs:
    """A hub split's premise/hypothesis/label rows (SNLI's columns, or SICK's sentence_A/sentence_B; integer
    labels 0 entailment, 1 neutral, 2 contradiction, -1 none, or their names); SICK's entailment_BA marks the
    bilateral entailments."""
    from infra.hub_data import read_labelled

    labels = {**{k.lower(): v for k, v in NLI_TEXT_LABELS.items()}, **NLI_INT_LABELS}
    rows = read_labelled(source, split, labels)
    return NliPairs(rows.sentences1, rows.sentences2, rows.values, path=rows.where, layout="hub",
                    skipped_rows=rows.skipped, bilateral=rows.bilateral)


def read_nli(folder: str | Path, split: str, limit: int | None = None) -> NliPairs:
    """The pairs of ``split`` in a SentEval NLI folder or a SICK folder (the first ``limit`` pairs)."""
    layout, files = nli_split_files(folder, split)
    if layout == "hub":
        pairs = read_hub_nli(hub_nli_source(folder), split)
    else:
        pairs = read_senteval_nli(files) if layout == "senteval" else read_sick(files[0])
    if not len(pairs):
        raise ValueError(f"{pairs.path}: no labelled pair")
    if pairs.skipped_rows:
        log.info("%s: skipped %d rows without a gold label", pairs.path, pairs.skipped_rows)
    return pairs.head(limit)
