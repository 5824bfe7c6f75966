"""NLI as entailment vs. non-entailment (GaussCSE §3.1, App. C): a score per pair and a tuned threshold.

Input: a model (:class:`score.model.TrainedModel`), a SentEval NLI or SICK
folder (:mod:`score.nli_data`) and its split, and the split the threshold is
tuned on (``tune_data`` / ``tune_split``, default: the same folder's dev; SICK
has only train/trial here, so pass a SNLI folder as ``tune_data``).

Score: sim(hypothesis‖premise) for a GaussCSE model (paper: "entailment" when
it is greater than a threshold), cosine of the two embeddings for any other
model (the paper's SimCSE baseline). Neutral and contradiction are both
"non-entailment".

Reported, all as fractions: ``accuracy`` on the evaluated split at the
threshold of best accuracy on the tuning split (``score.metrics.tune_threshold``,
an exact search; the reference code searches 0..1 in steps of 0.001), the
tuning split's own accuracy, ``auprc`` (step-wise average precision, as
sklearn's ``average_precision_score``) and ``auprc_trapezoid`` (the
reference code's ``auc(recall, precision)``, the figure the paper's Table 3
reports; it is the more optimistic of the two).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from score.nli_data import NliPairs, nli_split_files, read_nli
from score.metrics import (
    accuracy_at,
    auprc_trapezoid,
    average_precision,
    tune_threshold,
)

log = logging.getLogger(__name__)


def entailment_scores(model, pairs: NliPairs, batch_size: int = 64) -> tuple[np.ndarray, str]:
    """(scores, what the score is): sim(hyp‖prem) for a model with an asymmetric similarity (GaussCSE), else
    cosine(prem, hyp)."""
    if model.has("asymmetric_similarity"):
        return np.asarray(model.asymmetric_similarity(pairs.hypotheses, pairs.premises, batch_size=batch_size)), \
            "sim(hyp||prem)"
    return np.asarray(model.cosine(pairs.premises, pairs.hypotheses, batch_size=batch_size)), "cosine"


def check_nli_data(data: str, split: str, tune_data: str | None = None, tune_split: str | None = None, **_) -> None:
    """Raise FileNotFoundError / ValueError before any model is loaded."""
    nli_split_files(data, split)
    tune_folder, tune_split = tune_data or data, tune_split or "dev"
    try:
        nli_split_files(tune_folder, tune_split)
    except FileNotFoundError as e:
        hint = "" if tune_data else " (pass --tune-data FOLDER with a dev split, e.g. a SentEval SNLI folder)"
        raise FileNotFoundError(f"threshold tuning: {e}{hint}") from None


def evaluate_nli(model, data: str | Path, split: str, *, tune_data: str | Path | None = None,
                 tune_split: str | None = None, batch_size: int = 64, limit: int | None = None,
                 tune_limit: int | None = None, **_) -> dict:
    """Accuracy (threshold tuned on ``tune_data``/``tune_split``) and AUPRC of entailment vs. the rest.

    ``limit`` / ``tune_limit``: use the first N pairs of the evaluated / tuning split (``tune_limit``
    defaults to ``limit``).
    """
    started = time.perf_counter()
    tune_folder, tune_split = Path(tune_data or data).expanduser(), tune_split or "dev"
    test = read_nli(data, split, limit)
    tune = read_nli(tune_folder, tune_split, tune_limit if tune_limit is not None else limit)
    same = tune_folder.resolve() == Path(data).expanduser().resolve() and tune_split == split
    if same:
        log.warning("the threshold is tuned on the evaluated split itself (%s %s)", data, split)
    for name, pairs in (("evaluated", test), ("tuning", tune)):
        if all(pairs.is_entailment()) or not any(pairs.is_entailment()):
            raise ValueError(f"{pairs.path}: the {name} split needs both entailment and non-entailment pairs")
    test_scores, score_name = entailment_scores(model, test, batch_size)
    tune_scores, _ = entailment_scores(model, tune, batch_size)
    threshold, tune_acc = tune_threshold(tune_scores, tune.is_entailment())
    y = test.is_entailment()
    return {
        "task": "nli", "split": split, "data": str(Path(data).expanduser()),
        "tune_data": str(tune_folder), "tune_split": tune_split, "tuned_on_evaluated_split": same,
        "method": model.method_name, "score": score_name,
        "accuracy": accuracy_at(test_scores, y, threshold),
        "auprc": average_precision(test_scores, y),
        "auprc_trapezoid": auprc_trapezoid(test_scores, y),
        "threshold": threshold, "tune_accuracy": tune_acc,
        "n_pairs": len(test), "n_entailment": int(sum(y)), "tune_pairs": len(tune),
        "skipped_rows": test.skipped_rows,
        "seconds": round(time.perf_counter() - started, 2),
    }
