"""MRPC paraphrase detection on frozen embeddings: SentEval's protocol (Conneau & Kiela 2018, ``senteval/mrpc.py``).

Input: a folder with ``msr_paraphrase_train.txt`` and, for split ``test``,
``msr_paraphrase_test.txt``: UTF-8 (a BOM on the header is stripped),
tab-separated, one header line ``Quality  #1 ID  #2 ID  #1 String  #2 String``,
then one pair per line. A row is read when it has exactly 5 fields, Quality
``0`` or ``1`` and two non-empty strings; any other row is skipped, counted
and reported (``skipped_rows``, ``skipped_lines`` per file: 1-based line
numbers, the first 10 of each file; the first reason is logged). Blank lines
are not rows. ``limit``: the first N pairs of each file.

Or a hub source (``infra.hub_data``): ``nyu-mll/glue`` (config ``mrpc``; the default when no folder is
given) or a folder of its files: split ``train`` reads GLUE's train and validation (together SentEval's
4,076 training pairs, in another order: the folds differ), ``test`` its test split.

Features, as SentEval: [|u − v|, u ∗ v] of the two sentence embeddings (the
model's ``encode``, not normalised; every distinct sentence encoded once).

Classifier (``classifier``):

* ``senteval`` (the default; what ``python -m eval --task mrpc``, ``eval report --mrpc``, ``structcse.api`` and
  ``structcse dsbats`` run; the papers' MRPC figures): SentEval's own classifier as SimCSE ran it
  (``usepytorch=True``): ``nn.Linear`` trained with Adam in batches of 64, early stopping (tenacity 5,
  epoch size 4), the L2 penalty in 1e-5 … 1e-2 chosen by k-fold CV (``eval.senteval_classifier``, which
  says every detail). As SentEval, the rows of each file are first sorted by (tokens of sentence 1,
  tokens of sentence 2, label), which fixes the folds, each sentence is encoded as its whitespace tokens
  joined by one space (SimCSE's batcher), and the features are float32.
* ``sklearn`` (``classifier="sklearn"``, ``--mrpc-classifier sklearn``): scikit-learn
  ``LogisticRegression(C, random_state=seed)`` (SentEval's ``usepytorch=False`` path; lbfgs,
  ``max_iter`` raised so that it converges), C ∈ {2⁻¹ … 2⁵} (test) or {2⁻² … 2³} (train), the rows in
  file order. Not the papers' classifier: its figures are not comparable with theirs.

Seed 1111 (SentEval's), stratified shuffled folds.

* split ``test`` (SentEval's ``KFoldClassifier``, MRPC's protocol): the penalty chosen by k-fold CV
  accuracy on train, refit on all of train, ``accuracy`` and ``f1`` (of class 1) on test;
  ``cv_accuracy`` is the chosen penalty's mean CV accuracy.
* split ``train`` (only train exists; SentEval's ``InnerKFoldClassifier``, as for its train-only tasks;
  not MRPC's protocol, so not comparable with the papers' train → test figures): k outer folds; in each,
  the penalty chosen by an inner k-fold CV on the outer training part, refit there, scored on the
  held-out fold; ``accuracy`` and ``f1`` are the means over the outer folds.

k = ``kfold`` (default 10, SimCSE's full SentEval setting). Accuracy and F1
are fractions (SentEval prints percentages). Cost (sklearn): the train protocol fits
k·(6k + 1) = 610 regressions at k = 10 (the test protocol 7k + 1 = 71); the
fits of one C search can run on ``n_jobs`` threads (default 1: BLAS is
already multi-threaded; the result does not depend on it). SentEval's classifier fits 4k + 1 = 41 (test)
or k·(4k + 1) = 410 (train) early-stopped models, one after another.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from score.sts_data import skip_row, warn_skipped

log = logging.getLogger(__name__)

SPLIT_FILES = {"train": "msr_paraphrase_train.txt", "test": "msr_paraphrase_test.txt"}
MRPC_FIELDS = 5  # Quality, #1 ID, #2 ID, #1 String, #2 String
KFOLD_REGS = [2.0 ** t for t in range(-1, 6)]  # SentEval KFoldClassifier, sklearn
INNER_KFOLD_REGS = [2.0 ** t for t in range(-2, 4)]  # SentEval InnerKFoldClassifier, sklearn
SEED = 1111
MAX_ITER = 1000
CLASSIFIERS = ("senteval", "sklearn")
TASK_CLASSIFIER = "senteval"  # the task's default (CLI, report, API): the papers' classifier
CLASSIFIER_NAMES = {
    "senteval": "SentEval's classifier (nn.Linear + Adam, batch 64, early stopping; L2 in 1e-5..1e-2 by k-fold CV)",
    "sklearn": "scikit-learn LogisticRegression (C by k-fold CV; not SentEval's classifier)",
}


@dataclass
class MrpcPairs:
    """Sentence pairs with 0/1 labels from one file, and the rows that could not be read."""

    sentences1: list[str] = field(default_factory=list)
    sentences2: list[str] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    path: str = ""
    skipped_rows: int = 0
    skipped_lines: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.labels)


def hub_mrpc_source(data: str | Path | None):
    """The hub source ``data`` names (GLUE's MRPC when None), or None for a SentEval MRPC folder."""
    from infra.hub_data import MRPC, hub_source

    folder = Path(data).expanduser() if data is not None else None
    if folder is not None and folder.is_dir() and any((folder / n).is_file() for n in SPLIT_FILES.values()):
        return None
    return hub_source(None if data is None else str(data), MRPC)


HUB_LABELS = {"not_equivalent": 0, "equivalent": 1, "0": 0, "1": 1, "-1": None}


def read_hub_mrpc(source, split: str, limit: int | None = None) -> MrpcPairs:
    """GLUE's MRPC rows of ``split`` (train: GLUE train + validation); label 0/1 or its name."""
    from infra.hub_data import read_labelled

    from infra.hub_data import has_split

    parts = [read_labelled(source, s, HUB_LABELS) for s in (("train", "dev") if split == "train" else (split,))
             if s != "dev" or has_split(source, "dev")]  # a copy of SentEval's train file has no validation
    pairs = MrpcPairs(path="+".join(p.where for p in parts))
    for part in parts:
        pairs.sentences1 += part.sentences1
        pairs.sentences2 += part.sentences2
        pairs.labels += part.values
        pairs.skipped_rows += part.skipped
    if limit is not None:
        pairs.sentences1, pairs.sentences2, pairs.labels = (pairs.sentences1[:limit], pairs.sentences2[:limit],
                                                            pairs.labels[:limit])
    return pairs


def check_mrpc_data(data: str | Path | None, split: str = "train", **_) -> None:
    """The folder exists and holds the files ``split`` needs (test needs train too), or the hub source can be
    read now."""
    if split not in SPLIT_FILES:
        raise ValueError(f"unknown MRPC split {split!r}; expected one of {sorted(SPLIT_FILES)}")
    source = hub_mrpc_source(data)
    if source is not None:
        from infra.hub_data import check_available

        check_available([source])
        return
    folder = Path(data).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"MRPC data folder does not exist: {folder}")
    for name in ([SPLIT_FILES["train"]] + ([SPLIT_FILES["test"]] if split == "test" else [])):
        if not (folder / name).is_file():
            present = [n for n in SPLIT_FILES.values() if (folder / n).is_file()]
            raise FileNotFoundError(f"{folder}: {name} is missing (split {split} needs it); "
                                    f"files present: {', '.join(present) if present else 'none'}"
                                    + ("; --split train cross-validates on the train file (not MRPC's train -> "
                                       "test protocol)" if split == "test" and present else ""))


def parse_mrpc_row(fields: list[str]) -> tuple[str, str, int] | str:
    """(string1, string2, label) or the reason the row is malformed."""
    if len(fields) != MRPC_FIELDS:
        return f"{len(fields)} fields, need {MRPC_FIELDS}"
    if fields[0].strip() not in ("0", "1"):
        return f"Quality {fields[0]!r} is not 0 or 1"
    first, second = fields[3].strip(), fields[4].strip()
    if not first or not second:
        return "empty string"
    return first, second, int(fields[0])


def read_mrpc(path: str | Path, limit: int | None = None) -> MrpcPairs:
    """One MRPC file (header skipped); malformed rows skipped, counted and logged."""
    pairs, first_reason = MrpcPairs(path=str(path)), ""
    with Path(path).open(encoding="utf-8-sig", newline="") as handle:
        for line_number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if line_number == 1 and fields[0].strip().lower().startswith("quality"):
                continue  # the header
            if limit is not None and len(pairs) >= limit:
                break
            parsed = parse_mrpc_row(fields)
            if isinstance(parsed, str):
                first_reason = skip_row(pairs, line_number, parsed, first_reason)
                continue
            pairs.sentences1.append(parsed[0])
            pairs.sentences2.append(parsed[1])
            pairs.labels.append(parsed[2])
    warn_skipped(pairs, first_reason, log)
    return pairs


def pair_features(model, files: list[MrpcPairs], batch_size: int = 64, dtype=np.float64) -> list[np.ndarray]:
    """[|u − v|, u ∗ v] per file, in ``dtype``; every distinct sentence of all files encoded once."""
    from eval.models import as_trained

    unique = list(dict.fromkeys(s for p in files for s in p.sentences1 + p.sentences2))
    index = {s: i for i, s in enumerate(unique)}
    emb = np.asarray(as_trained(model).encode(unique, batch_size=batch_size), dtype=dtype)
    out = []
    for p in files:
        u, v = emb[[index[s] for s in p.sentences1]], emb[[index[s] for s in p.sentences2]]
        out.append(np.c_[np.abs(u - v), u * v])
    return out


def senteval_order(pairs: MrpcPairs) -> MrpcPairs:
    """The pairs as SentEval's MRPC task feeds them to its classifier: each sentence's whitespace tokens joined
    by one space (SimCSE's batcher), the rows sorted by (tokens of sentence 1, tokens of sentence 2, label),
    stably (``senteval/mrpc.py``: "Sort to reduce padding"; the order fixes the folds)."""
    first = [" ".join(s.split()) for s in pairs.sentences1]
    second = [" ".join(s.split()) for s in pairs.sentences2]
    order = sorted(range(len(pairs)), key=lambda i: (len(first[i].split()), len(second[i].split()), pairs.labels[i]))
    return MrpcPairs([first[i] for i in order], [second[i] for i in order], [pairs.labels[i] for i in order],
                     pairs.path, pairs.skipped_rows, list(pairs.skipped_lines))


def _logreg(c: float, seed: int):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, random_state=seed, max_iter=MAX_ITER)


def choose_c(x: np.ndarray, y: np.ndarray, regs, kfold: int, seed: int, n_jobs: int | None = None) -> tuple[float, float]:
    """(C with the best mean k-fold CV accuracy, that accuracy); the first C wins a tie, as np.argmax.
    The len(regs) × k fits run on ``n_jobs`` threads (joblib; the result does not depend on it)."""
    from joblib import Parallel, delayed
    from sklearn.model_selection import StratifiedKFold

    folds = list(StratifiedKFold(n_splits=kfold, shuffle=True, random_state=seed).split(x, y))

    def fold_score(c, tr, te):
        return _logreg(c, seed).fit(x[tr], y[tr]).score(x[te], y[te])

    scores = Parallel(n_jobs=n_jobs, prefer="threads")(delayed(fold_score)(c, tr, te) for c in regs for tr, te in folds)
    means = [float(np.mean(scores[i * kfold:(i + 1) * kfold])) for i in range(len(regs))]
    best = int(np.argmax(means))
    return regs[best], float(means[best])


def _check_classes(y: np.ndarray, kfold: int, nested: bool, what: str) -> None:
    """Each class must fill every stratified fold (nested: every inner fold of every outer training part)."""
    need = kfold
    while nested and need - -(-need // kfold) < kfold:  # an outer training part keeps c - ceil(c/k) of c
        need += 1
    counts = np.bincount(y, minlength=2)
    if counts.min() < need:
        raise ValueError(f"{what}: {counts[0]} negative and {counts[1]} positive pairs; {kfold}-fold stratified "
                         f"{'nested ' if nested else ''}CV needs at least {need} of each (raise limit or lower kfold)")


def kfold_test(train_x, train_y, test_x, test_y, kfold: int = 10, seed: int = SEED, n_jobs: int | None = None) -> dict:
    """SentEval KFoldClassifier: C by k-fold CV on train, refit on train, accuracy / F1 on test."""
    from sklearn.metrics import f1_score

    c, cv_accuracy = choose_c(train_x, train_y, KFOLD_REGS, kfold, seed, n_jobs)
    predicted = _logreg(c, seed).fit(train_x, train_y).predict(test_x)
    return {"accuracy": float(np.mean(predicted == test_y)), "f1": float(f1_score(test_y, predicted)),
            "cv_accuracy": cv_accuracy, "C": c}


def nested_cv(x, y, kfold: int = 10, seed: int = SEED, n_jobs: int | None = None) -> dict:
    """SentEval InnerKFoldClassifier: k outer folds, C by inner k-fold CV; accuracy / F1 means over outer folds."""
    from sklearn.model_selection import StratifiedKFold

    from eval.senteval_classifier import outer_folds

    def fit(tr):
        c, inner_accuracy = choose_c(x[tr], y[tr], INNER_KFOLD_REGS, kfold, seed, n_jobs)
        return _logreg(c, seed).fit(x[tr], y[tr]).predict, c, inner_accuracy

    scores, regs = outer_folds(x, y, StratifiedKFold(n_splits=kfold, shuffle=True, random_state=seed).split(x, y), fit)
    return {**scores, "fold_C": regs}


def evaluate_mrpc(model, data: str | Path, split: str = "train", *, batch_size: int = 64, limit: int | None = None,
                  kfold: int = 10, seed: int = SEED, n_jobs: int | None = None, classifier: str | None = None,
                  **_) -> dict:
    """MRPC accuracy and F1 of a logistic regression on [|u − v|, u ∗ v] (protocol and ``classifier``: see the
    module docstring; None: ``senteval``, the papers')."""
    classifier = classifier or TASK_CLASSIFIER
    if classifier not in CLASSIFIERS:
        raise ValueError(f"unknown MRPC classifier {classifier!r}; choose from {', '.join(CLASSIFIERS)}")
    started = time.perf_counter()
    check_mrpc_data(data, split)
    names = ["train"] + (["test"] if split == "test" else [])
    source = hub_mrpc_source(data)
    if source is not None:
        folder = source.label
        files = [read_hub_mrpc(source, n, limit) for n in names]
    else:
        folder = Path(data).expanduser()
        files = [read_mrpc(folder / SPLIT_FILES[n], limit) for n in names]
    if kfold < 2:
        raise ValueError(f"kfold must be >= 2, got {kfold}")
    _check_classes(np.asarray(files[0].labels, dtype=np.int64), kfold, split == "train", files[0].path)
    if split == "test" and not len(files[1]):
        raise ValueError(f"{files[1].path}: no readable pair")
    if classifier == "senteval":
        from eval import senteval_classifier

        ordered = [senteval_order(p) for p in files]
        features = pair_features(model, ordered, batch_size, dtype=np.float32)
        labels = [np.asarray(p.labels, dtype=np.int64) for p in ordered]
        if split == "test":
            scores = senteval_classifier.kfold_test(features[0], labels[0], features[1], labels[1], kfold, seed)
        else:
            scores = senteval_classifier.inner_kfold(features[0], labels[0], kfold, seed)
    else:
        features = pair_features(model, files, batch_size)
        labels = [np.asarray(p.labels, dtype=np.int64) for p in files]
        if split == "test":
            scores = kfold_test(features[0], labels[0], features[1], labels[1], kfold, seed, n_jobs)
        else:
            scores = nested_cv(features[0], labels[0], kfold, seed, n_jobs)
    protocol = ("train -> test (SentEval KFoldClassifier)" if split == "test" else
                f"{kfold}-fold CV on train, inner CV for the penalty (SentEval InnerKFoldClassifier; not MRPC's "
                "train -> test protocol)")
    return {
        "task": "mrpc", "split": split, "data": str(folder), "protocol": protocol, **scores,
        "classifier": classifier, "classifier_name": CLASSIFIER_NAMES[classifier], "kfold": kfold, "seed": seed,
        "n_train": len(files[0]), "n_test": len(files[1]) if split == "test" else 0,
        "n_pairs": sum(len(p) for p in files),
        "skipped_rows": sum(p.skipped_rows for p in files),
        "skipped_lines": {Path(p.path).name: list(p.skipped_lines) for p in files if p.skipped_rows},
        "seconds": round(time.perf_counter() - started, 2),
    }
