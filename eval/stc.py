"""Short-text clustering (STC) on frozen embeddings, as EASE evaluates it (Nishikawa et al. 2022, NAACL;
``studio-ousia/ease``, ``downstreams/text-clustering``; methods.md §3e).

Input (``data``): one dataset file, or a folder whose top-level files hold one
or more datasets, each scored separately and keyed by its name (the file's
stem). The format is told per file (UTF-8, a BOM is stripped; trailing blank
lines are ignored):

* ``label<TAB>text``, one text per line: AG News and GoogleNews TS/T/S
  (EASE's ``agnews.txt``, ``ts.txt``, ``t.txt``, ``s.txt``); a ``*.txt`` or
  ``*.tsv`` whose first non-blank line has a tab. The text is everything after
  the first tab.
* JSON lines ``{"text": ..., "cluster": ...}``: Tweet; a ``*.json`` or
  ``*.jsonl``, or a ``*.txt`` whose first non-blank line starts with ``{``
  (EASE ships it as ``tweet.txt``). ``cluster`` is an integer or a string.
* parallel files ``<name>.txt`` (one text a line) and ``<name>_label.txt``
  (one label a line): Biomedical, StackOverflow, SearchSnippets.
* MewsC-16: ``<lang>_sentences.txt`` and ``<lang>_categories.txt`` (parallel
  lines), dataset name ``MewsC16-<lang>``.

Giving either file of a parallel pair as ``data`` reads the pair. Labels are
compared as strings (stripped). Blank lines inside a tab or JSON file are not
rows; a text that is empty after stripping is skipped and counted
(``skipped_empty``; EASE drops them for MewsC-16), its label unchecked. Errors,
raised by ``check_stc_data`` before any model is loaded: a ``ValueError``
naming the file and the 1-based line for a line without a tab, an empty
label, JSON that does not parse or lacks ``text``/``cluster``, and one naming
both files when a parallel pair has unequal line counts; a
``FileNotFoundError`` for a missing path or partner file. Other files in a
folder (README.md, ...) are ignored. ``limit``: the first N texts of each
dataset. The only split is ``test`` (the datasets are used whole).

Protocol: every distinct text is embedded once with the model's ``encode``
(sentence-transformers' truncation at the model's max length; EASE truncates
at 512 tokens); embeddings are the raw output as float64, **not
L2-normalised** (EASE's code clusters the raw pooled vectors). scikit-learn
``KMeans(n_clusters=number of distinct labels, n_init=10, random_state=seed)``
(n_init=10 is the default of the scikit-learn EASE ran; newer versions
default to 1 run) on all texts, for each seed in ``seeds`` (default 0–4) and
for EASE's single seed 42, reported apart. Accuracy: the clusters are mapped
one-to-one onto the classes by the Hungarian algorithm
(``scipy.optimize.linear_sum_assignment`` maximising the contingency matrix's
matched counts, as EASE's ``coclust`` accuracy), then the fraction of texts
whose mapped cluster is their class. NMI: ``normalized_mutual_info_score``
(arithmetic mean normalisation).

Result: ``per_dataset[name]`` = ``{accuracy_mean, accuracy_std, nmi_mean,
nmi_std`` (over ``seeds``, population std), ``accuracy_per_seed,
nmi_per_seed, seed42: {accuracy, nmi}, n_texts, n_clusters, skipped_empty,
format, path, label_path}``; at the top level ``accuracy`` (the mean over
datasets of ``accuracy_mean``: the headline), ``nmi`` (likewise),
``accuracy_seed42`` (the mean of the seed-42 accuracies: EASE's "Avg."),
``n_datasets``, ``n_texts`` (over all datasets; also as ``n_items``, which the
CLI summary prints), ``seeds``, ``task: "stc"``, ``split``, ``data``,
``seconds``. Accuracies and NMI are fractions (EASE prints percentages).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

SPLITS = ("test",)
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
EASE_SEED = 42
N_INIT = 10
TEXT_SUFFIXES = (".txt", ".tsv")
JSON_SUFFIXES = (".json", ".jsonl")
LABEL_SUFFIX = "_label.txt"
SENTENCES_SUFFIX, CATEGORIES_SUFFIX = "_sentences.txt", "_categories.txt"
MEWSC_PREFIX = "MewsC16-"
FORMATS = ("tab", "jsonl", "parallel", "mewsc16")


@dataclass(frozen=True)
class StcSource:
    """Where one dataset lies and how it is written (found without reading it whole)."""

    name: str
    format: str  # one of FORMATS
    path: Path  # the texts (tab / jsonl: texts and labels)
    label_path: Path | None = None  # parallel / mewsc16: the labels


@dataclass
class StcDataset:
    """The texts and gold labels of one dataset."""

    name: str
    format: str
    path: str
    label_path: str | None = None
    texts: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    skipped_empty: int = 0

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def n_clusters(self) -> int:
        return len(set(self.labels))


# ---------------------------------------------------------------- finding the datasets


def _lines(path: Path) -> list[str]:
    """The file's lines without their line ends (universal newlines, as EASE's ``readlines``)."""
    with path.open(encoding="utf-8-sig") as handle:
        return [line.rstrip("\r\n") for line in handle]


def _first_line(path: Path) -> tuple[int, str] | None:
    """(1-based number, text) of the first non-blank line, or None for a blank file."""
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                return number, line.rstrip("\r\n")
    return None


def _sniff(path: Path) -> str:
    """``jsonl`` or ``tab`` for a single-file dataset, from its first non-blank line."""
    if path.suffix.lower() in JSON_SUFFIXES:
        return "jsonl"
    first = _first_line(path)
    if first is None:
        raise ValueError(f"{path}: no text (the file is empty or blank)")
    number, line = first
    if line.lstrip().startswith("{"):
        return "jsonl"
    if "\t" in line:
        return "tab"
    hint = (f"{path.name[:-len(SENTENCES_SUFFIX)]}{CATEGORIES_SUFFIX} is missing beside it"
            if path.name.endswith(SENTENCES_SUFFIX) else f"there is no {path.stem}{LABEL_SUFFIX} beside it")
    raise ValueError(f"{path}, line {number}: cannot tell the STC format: the line has no tab (label<TAB>text), "
                     f"is not JSON, and {hint}")


def _partner(path: Path, name: str, role: str) -> Path:
    partner = path.with_name(name)
    if not partner.is_file():
        raise FileNotFoundError(f"{path}: its {role} file {partner} is missing")
    return partner


def source_of_file(path: str | Path) -> StcSource:
    """The dataset one file stands for (a file of a parallel pair: the pair)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"STC data file does not exist: {path}")
    name = path.name
    if name.endswith(CATEGORIES_SUFFIX):
        lang = name[:-len(CATEGORIES_SUFFIX)]
        return StcSource(MEWSC_PREFIX + lang, "mewsc16", _partner(path, lang + SENTENCES_SUFFIX, "sentences"), path)
    if name.endswith(SENTENCES_SUFFIX) and path.with_name(name[:-len(SENTENCES_SUFFIX)] + CATEGORIES_SUFFIX).is_file():
        lang = name[:-len(SENTENCES_SUFFIX)]
        return StcSource(MEWSC_PREFIX + lang, "mewsc16", path, path.with_name(lang + CATEGORIES_SUFFIX))
    if name.endswith(LABEL_SUFFIX):
        stem = name[:-len(LABEL_SUFFIX)]
        return StcSource(stem, "parallel", _partner(path, stem + ".txt", "text"), path)
    if path.suffix.lower() == ".txt" and path.with_name(path.stem + LABEL_SUFFIX).is_file():
        return StcSource(path.stem, "parallel", path, path.with_name(path.stem + LABEL_SUFFIX))
    if path.suffix.lower() not in TEXT_SUFFIXES + JSON_SUFFIXES:
        raise ValueError(f"{path}: not an STC data file (expected {', '.join(TEXT_SUFFIXES + JSON_SUFFIXES)})")
    return StcSource(path.stem, _sniff(path), path)


def find_stc_sources(data: str | Path) -> list[StcSource]:
    """The datasets in ``data`` (a file or a folder's top-level files), in name order."""
    root = Path(data).expanduser()
    if not root.exists():
        raise FileNotFoundError(f"STC data path does not exist: {root}")
    if root.is_file():
        return [source_of_file(root)]
    files = sorted(p for p in root.iterdir() if p.is_file() and not p.name.startswith("."))
    used: set[Path] = set()
    sources: list[StcSource] = []
    for path in files:  # pairs first, so that their files are not read as single-file datasets
        if path.name.endswith(CATEGORIES_SUFFIX) or path.name.endswith(LABEL_SUFFIX):
            source = source_of_file(path)
            sources.append(source)
            used.update((source.path, source.label_path))
    for path in files:
        if path not in used and path.suffix.lower() in TEXT_SUFFIXES + JSON_SUFFIXES:
            sources.append(StcSource(path.stem, _sniff(path), path))
    if not sources:
        raise FileNotFoundError(
            f"no STC dataset in {root}: expected label<TAB>text .txt/.tsv files, JSON lines .json/.jsonl files, "
            f"<name>.txt + <name>{LABEL_SUFFIX} pairs or <lang>{SENTENCES_SUFFIX} + <lang>{CATEGORIES_SUFFIX} pairs")
    names: dict[str, Path] = {}
    for source in sources:
        if source.name in names:
            raise ValueError(f"two STC datasets named {source.name!r} in {root}: {names[source.name].name} "
                             f"and {source.path.name}")
        names[source.name] = source.path
    return sorted(sources, key=lambda s: s.name)


# ---------------------------------------------------------------- reading


def _add(dataset: StcDataset, text: str, label: str) -> None:
    if text:
        dataset.texts.append(text)
        dataset.labels.append(label)
    else:
        dataset.skipped_empty += 1


def _rows(path: Path, dataset: StcDataset, limit: int | None):
    """(1-based number, line) of the file's non-blank lines, until ``dataset`` holds ``limit`` texts."""
    for number, line in enumerate(_lines(path), start=1):
        if limit is not None and len(dataset) >= limit:
            return
        if line.strip():
            yield number, line


def read_tab(path: str | Path, limit: int | None = None, name: str | None = None) -> StcDataset:
    """``label<TAB>text`` lines."""
    path = Path(path)
    dataset = StcDataset(name or path.stem, "tab", str(path))
    for number, line in _rows(path, dataset, limit):
        if "\t" not in line:
            raise ValueError(f"{path}, line {number}: no tab; expected label<TAB>text")
        label, text = line.split("\t", 1)
        if not label.strip():
            raise ValueError(f"{path}, line {number}: empty label before the tab")
        _add(dataset, text.strip(), label.strip())
    return dataset


def parse_json_line(line: str) -> tuple[str | None, str]:
    """(text, label) of one ``{"text", "cluster"}`` line, or (None, the reason it cannot be read)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        return None, f"not valid JSON ({error.msg} at column {error.colno})"
    if not isinstance(row, dict):
        return None, f"expected a JSON object with text and cluster, got {type(row).__name__}"
    missing = [key for key in ("text", "cluster") if key not in row]
    if missing:
        return None, f"the JSON object lacks {' and '.join(repr(k) for k in missing)}"
    text, cluster = row["text"], row["cluster"]
    if not isinstance(text, str):
        return None, f"'text' is {type(text).__name__}, not a string"
    if isinstance(cluster, bool) or not isinstance(cluster, (int, str)) or not str(cluster).strip():
        return None, f"'cluster' is {cluster!r}, not an integer or a non-empty string"
    return text.strip(), str(cluster).strip()


def read_jsonl(path: str | Path, limit: int | None = None, name: str | None = None) -> StcDataset:
    """JSON lines ``{"text": ..., "cluster": ...}``."""
    path = Path(path)
    dataset = StcDataset(name or path.stem, "jsonl", str(path))
    for number, line in _rows(path, dataset, limit):
        text, label = parse_json_line(line)
        if text is None:
            raise ValueError(f"{path}, line {number}: {label}")
        _add(dataset, text, label)
    return dataset


def _trim_blank_tail(lines: list[str], keep: int = 0) -> list[str]:
    """``lines`` without trailing blank lines, but at least the first ``keep`` (when there are that many)."""
    end = len(lines)
    while end > keep and not lines[end - 1].strip():
        end -= 1
    return lines[:end]


def read_parallel(text_path: str | Path, label_path: str | Path, limit: int | None = None,
                  name: str | None = None, fmt: str = "parallel") -> StcDataset:
    """One text a line in ``text_path``, its label on the same line of ``label_path``."""
    text_path, label_path = Path(text_path), Path(label_path)
    labels = _trim_blank_tail(_lines(label_path))
    texts = _trim_blank_tail(_lines(text_path), keep=len(labels))  # a blank last text keeps its line
    if len(texts) != len(labels):
        raise ValueError(f"{text_path} has {len(texts)} lines but {label_path} has {len(labels)} "
                         f"(trailing blank lines not counted): one label per text is needed")
    dataset = StcDataset(name or text_path.stem, fmt, str(text_path), str(label_path))
    for number, (text, label) in enumerate(zip(texts, labels), start=1):
        if limit is not None and len(dataset) >= limit:
            break
        if text.strip() and not label.strip():
            raise ValueError(f"{label_path}, line {number}: empty label (for line {number} of {text_path.name})")
        _add(dataset, text.strip(), label.strip())
    return dataset


def read_source(source: StcSource, limit: int | None = None) -> StcDataset:
    if source.format == "tab":
        return read_tab(source.path, limit, source.name)
    if source.format == "jsonl":
        return read_jsonl(source.path, limit, source.name)
    return read_parallel(source.path, source.label_path, limit, source.name, source.format)


def _check_limit(limit) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer, got {limit!r}")


def read_stc_data(data: str | Path, limit: int | None = None) -> list[StcDataset]:
    """Every dataset of ``data``, read and checked (>= 2 classes), in name order."""
    _check_limit(limit)
    datasets = [read_source(source, limit) for source in find_stc_sources(data)]
    for dataset in datasets:
        where = dataset.path + (f" + {Path(dataset.label_path).name}" if dataset.label_path else "")
        if not len(dataset):
            raise ValueError(f"{where}: no text to cluster")
        if dataset.n_clusters < 2:
            raise ValueError(f"{where}: {len(dataset)} texts but only {dataset.n_clusters} distinct label; "
                             f"clustering needs at least 2" + (" (raise limit)" if limit else ""))
    return datasets


def check_stc_data(data: str | Path, split: str = "test", limit: int | None = None, **_) -> list[StcDataset]:
    """Split ``test``, and every dataset of ``data`` readable (read whole: the files are small)."""
    if split not in SPLITS:
        raise ValueError(f"unknown STC split {split!r}; expected one of {list(SPLITS)}")
    return read_stc_data(data, limit)


# ---------------------------------------------------------------- scoring


def cluster_accuracy(gold: Sequence, predicted: Sequence) -> float:
    """Accuracy after the best one-to-one mapping of clusters onto classes (Hungarian algorithm on the
    contingency matrix); clusters left unmapped (more clusters than classes) count as wrong."""
    from scipy.optimize import linear_sum_assignment
    from sklearn.metrics.cluster import contingency_matrix

    if len(gold) != len(predicted):
        raise ValueError(f"gold has {len(gold)} labels, predicted {len(predicted)}")
    if not len(gold):
        raise ValueError("no labels")
    counts = contingency_matrix(np.asarray(gold), np.asarray(predicted))
    rows, cols = linear_sum_assignment(counts, maximize=True)
    return float(counts[rows, cols].sum() / len(gold))


def kmeans_scores(embeddings: np.ndarray, gold: Sequence, n_clusters: int, seed: int) -> dict:
    """KMeans (n_init=10, ``random_state=seed``) accuracy and NMI against ``gold``."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import normalized_mutual_info_score

    predicted = KMeans(n_clusters=n_clusters, n_init=N_INIT, random_state=seed).fit_predict(embeddings)
    return {"accuracy": cluster_accuracy(gold, predicted),
            "nmi": float(normalized_mutual_info_score(np.asarray(gold), predicted))}


def embed_texts(model, texts: list[str], batch_size: int = 64) -> np.ndarray:
    """(len(texts), d) float64 raw embeddings (not normalised); every distinct text encoded once."""
    from eval.models import as_trained

    unique = list(dict.fromkeys(texts))
    index = {t: i for i, t in enumerate(unique)}
    emb = np.asarray(as_trained(model).encode(unique, batch_size=batch_size), dtype=np.float64)
    if emb.ndim != 2 or emb.shape[0] != len(unique):
        raise ValueError(f"the model's encode gave shape {emb.shape} for {len(unique)} texts")
    return emb[[index[t] for t in texts]]


def score_dataset(embeddings: np.ndarray, dataset: StcDataset, seeds: Sequence[int]) -> dict:
    """The per-dataset result (see the module docstring)."""
    if not np.all(np.isfinite(embeddings)):
        raise ValueError(f"{dataset.name}: the model gave non-finite embeddings")
    k = dataset.n_clusters
    runs = {seed: kmeans_scores(embeddings, dataset.labels, k, seed) for seed in dict.fromkeys([*seeds, EASE_SEED])}
    accuracy = [runs[s]["accuracy"] for s in seeds]
    nmi = [runs[s]["nmi"] for s in seeds]
    return {
        "accuracy_mean": float(np.mean(accuracy)), "accuracy_std": float(np.std(accuracy)),
        "nmi_mean": float(np.mean(nmi)), "nmi_std": float(np.std(nmi)),
        "accuracy_per_seed": accuracy, "nmi_per_seed": nmi,
        "seed42": dict(runs[EASE_SEED]),
        "n_texts": len(dataset), "n_clusters": k, "skipped_empty": dataset.skipped_empty,
        "format": dataset.format, "path": dataset.path, "label_path": dataset.label_path,
    }


def _check_seeds(seeds) -> list[int]:
    seeds = list(seeds) if seeds is not None else []
    if not seeds or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of integers, got {seeds!r}")
    return [int(s) for s in seeds]


def evaluate_stc(model, data: str | Path, split: str = "test", *, batch_size: int = 64, limit: int | None = None,
                 seeds: Sequence[int] = DEFAULT_SEEDS, **_) -> dict:
    """KMeans accuracy (Hungarian) and NMI of ``model``'s embeddings on each STC dataset of ``data``
    (protocol and result: see the module docstring)."""
    started = time.perf_counter()
    seeds = _check_seeds(seeds)
    datasets = check_stc_data(data, split, limit)
    per_dataset = {}
    for dataset in datasets:
        per_dataset[dataset.name] = score_dataset(embed_texts(model, dataset.texts, batch_size), dataset, seeds)
        log.info("stc %s: accuracy %.4f ± %.4f, nmi %.4f (%d texts, %d clusters)", dataset.name,
                 per_dataset[dataset.name]["accuracy_mean"], per_dataset[dataset.name]["accuracy_std"],
                 per_dataset[dataset.name]["nmi_mean"], len(dataset), dataset.n_clusters)
    scores = list(per_dataset.values())
    return {
        "task": "stc", "split": split, "data": str(Path(data).expanduser()),
        "accuracy": float(np.mean([s["accuracy_mean"] for s in scores])),
        "nmi": float(np.mean([s["nmi_mean"] for s in scores])),
        "accuracy_seed42": float(np.mean([s["seed42"]["accuracy"] for s in scores])),
        "n_datasets": len(scores), "n_texts": sum(s["n_texts"] for s in scores),
        "n_items": sum(s["n_texts"] for s in scores), "seeds": seeds,
        "per_dataset": per_dataset,
        "seconds": round(time.perf_counter() - started, 2),
    }
