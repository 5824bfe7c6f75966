"""MRPC under SentEval's train-only protocol, written with scikit-learn's own model selection, as the tests'
oracle for ``eval.mrpc``: nothing of eval/ or score/ is used.

The file is read with ``csv`` (header, then ``Quality  #1 ID  #2 ID  #1 String  #2 String``); each distinct
sentence is encoded once by ``encoder`` (a SentenceTransformer); features [|u − v|, u ∗ v]; k outer
stratified shuffled folds, in each a ``GridSearchCV`` over C ∈ {2⁻² … 2³} with the same k-fold split of the
outer training part, refit there (SentEval's InnerKFoldClassifier); accuracy and F1 per outer fold.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

INNER_CS = [2.0 ** t for t in range(-2, 4)]


def read_pairs(path: Path, limit: int | None = None) -> tuple[list[str], list[str], np.ndarray]:
    with path.open(encoding="utf-8-sig", newline="") as f:
        rows = [row for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if row][1:]
    rows = rows[:limit]
    assert all(len(row) == 5 and row[0] in ("0", "1") for row in rows), "the oracle reads well-formed files only"
    return [r[3].strip() for r in rows], [r[4].strip() for r in rows], np.array([int(r[0]) for r in rows])


def features(encoder, first: list[str], second: list[str]) -> np.ndarray:
    sentences = list(dict.fromkeys(first + second))
    e = dict(zip(sentences, np.asarray(encoder.encode(sentences), dtype=np.float64)))
    u, v = np.array([e[s] for s in first]), np.array([e[s] for s in second])
    return np.c_[np.abs(u - v), u * v]


def nested_cv(encoder, path: Path, *, limit: int | None, kfold: int, seed: int = 1111) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_validate

    first, second, y = read_pairs(path, limit)
    x = features(encoder, first, second)
    inner = GridSearchCV(LogisticRegression(random_state=seed, max_iter=1000), {"C": INNER_CS},
                         cv=StratifiedKFold(kfold, shuffle=True, random_state=seed), scoring="accuracy")
    outer = cross_validate(inner, x, y, cv=StratifiedKFold(kfold, shuffle=True, random_state=seed),
                           scoring=("accuracy", "f1"), return_estimator=True)
    return {"n_pairs": len(y), "fold_accuracy": list(outer["test_accuracy"]), "fold_f1": list(outer["test_f1"]),
            "fold_C": [est.best_params_["C"] for est in outer["estimator"]],
            "accuracy": float(np.mean(outer["test_accuracy"])), "f1": float(np.mean(outer["test_f1"]))}
