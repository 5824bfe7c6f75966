"""Each method's dev metric: the one definition that checkpoint selection (``python -m train``) and
Ray Tune's evaluation pool (``eval.pool``) both score with.

A method declares the metric it is selected on (``Method.dev_metric``); ``dev_metric=NAME`` in a
config overrides it, and ``dev_data`` names the data the metric reads. An unknown name is a
``ConfigError``. A :class:`DevMetric` reads its dev data once (``read(path)``: in a long-lived
evaluation actor, once per search) and scores a trained model folder loaded by
``train.model.load`` (``score(model, data)``); the figure is reported under ``key``.

=====================  ==========================  ===============================================
metric                 reported as                 what it is (methods.md)
=====================  ==========================  ===============================================
``sts_spearman``       ``dev_spearman``            Spearman of cos(e1, e2) vs gold on STS-B dev
                                                   (SimCSE, EASE: §1, §3; every plain encoder)
``relational_spearman`` ``dev_relational_spearman`` Spearman of RSE's weighted relational score,
                                                   max over both directions (§2)
``nli_auprc``          ``dev_auprc``               entailment vs the rest on SNLI dev scored by
                                                   sim(hypothesis‖premise), trapezoidal AUPRC, the
                                                   reference code's ``auc(recall, precision)`` (§4)
``aspect_p10``         ``dev_p10``                 aspect retrieval P@10, mean over the aspects
                                                   with seeds: ``eval.aspect_retrieval``'s ``P@10``
                                                   (AspectCSE §6.1)
``srsd``               ``dev_srsd``                SRSD accuracy on the ``other_cluster`` items
                                                   under the model's own pair representation:
                                                   ``eval.srsd``'s ``accuracy`` (DSBATS, §6)
=====================  ==========================  ===============================================

Dev data layouts: STS metrics read ``sts-dev.csv`` (SentEval STS-B: tab-separated, no header,
``genre file year id score s1 s2``) or that file itself; ``nli_auprc`` reads a SentEval NLI folder
(``s1.dev``, ``s2.dev``, ``labels.dev``: line i of each is one pair); ``aspect_p10`` reads an
``aspect_docs`` set folder (``ingest.schemas.ASPECT_DOCS``) and ``srsd`` an ``srsd`` set folder
(``ingest.schemas.SRSD``). Those two score with the very functions ``python -m eval`` does, which
live in ``train.dev_tasks`` (train never imports eval).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SCORE_BATCH = 128


@dataclass(frozen=True)
class DevMetric:
    name: str
    key: str  # the metric name in reports, checkpoints and Tune
    data: str  # what dev_data must be (error messages, --help)
    read: Callable[[str], Any]
    score: Callable[[Any, Any], float]  # (train.model.TrainedModel, read(...)) -> float
    mode: str = "max"


# ---------------------------------------------------------------- readers


def read_sts_dev(path: str | Path) -> tuple[list[str], list[str], np.ndarray]:
    from train.sts_dev import load_sts

    s1, s2, gold = load_sts(path)
    return s1, s2, np.asarray(gold, dtype=np.float64)


def read_nli_dev(path: str | Path) -> tuple[list[str], list[str], np.ndarray]:
    """(premises, hypotheses, is_entailment) of a SentEval NLI folder's dev split."""
    folder = Path(path)
    files = [folder / f"{part}.dev" for part in ("s1", "s2", "labels")]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"NLI dev data {folder}: missing {', '.join(missing)} (SentEval layout)")
    premises, hypotheses, labels = ([line.rstrip("\n") for line in f.open(encoding="utf-8")] for f in files)
    if not len(premises) == len(hypotheses) == len(labels):
        raise ValueError(f"{folder}: s1.dev, s2.dev and labels.dev have {len(premises)}, {len(hypotheses)} and "
                         f"{len(labels)} lines")
    y = np.asarray([label.strip().lower() == "entailment" for label in labels])
    if y.all() or not y.any():
        raise ValueError(f"{folder}/labels.dev: needs both entailment and non-entailment pairs")
    return premises, hypotheses, y


def read_aspect_dev(path: str | Path):
    """``{aspect: AspectDocs}`` of an aspect_docs set folder (``train.dev_tasks.read_aspect_docs``);
    a set where no document shares a label with another on its aspect is a ValueError (nothing to
    retrieve: found before any model is scored)."""
    from train.dev_tasks import has_seeds, read_aspect_docs

    aspects = read_aspect_docs(path)
    if not has_seeds(aspects):
        raise ValueError(f"{path}: no document shares a label with another on its aspect; nothing to retrieve")
    return aspects


def read_srsd_dev(path: str | Path):
    """The ``other_cluster`` items of an srsd set folder (``train.dev_tasks.read_srsd``), set order."""
    from train.dev_tasks import HEADLINE_KIND, read_srsd

    items = [item for item in read_srsd(path) if item.kind == HEADLINE_KIND]
    if not items:
        raise ValueError(f"srsd set at {path} has no {HEADLINE_KIND} items (the srsd dev metric scores those)")
    return items


# ---------------------------------------------------------------- scores


def spearman(x, y) -> float:
    """Spearman's rho; 0.0 when the model gives every pair the same score (a collapsed encoder, e.g.
    after a diverged trial): no ranking information, and a figure a scheduler can compare (NaN is
    never below a rung's cutoff, so ASHA would keep the trial)."""
    from scipy.stats import spearmanr

    x = np.asarray(x, dtype=np.float64)
    if x.size == 0 or np.ptp(x) == 0:
        return 0.0
    return float(spearmanr(x, y).statistic)


def auprc_trapezoid(scores, is_positive) -> float:
    """The GaussCSE code's ``auc(recall, precision)`` over sklearn's PR curve."""
    from sklearn.metrics import auc, precision_recall_curve

    precision, recall, _ = precision_recall_curve(np.asarray(is_positive, dtype=int), np.asarray(scores))
    return float(auc(recall, precision))


def _sts_cosine(model, data) -> float:
    s1, s2, gold = data
    return spearman(model.cosine(s1, s2, batch_size=SCORE_BATCH), gold)


def _sts_relational(model, data) -> float:
    s1, s2, gold = data
    return spearman(model.relational_similarity(s1, s2, batch_size=SCORE_BATCH), gold)


def _nli_auprc(model, data) -> float:
    premises, hypotheses, y = data
    return auprc_trapezoid(model.asymmetric_similarity(hypotheses, premises, batch_size=SCORE_BATCH), y)


def _aspect_p10(model, aspects) -> float:
    from train.dev_tasks import embed_aspects, retrieval_by_aspect

    _, means = retrieval_by_aspect(embed_aspects(model, aspects, SCORE_BATCH), aspects, ks=(10,))
    return means["P@10"]


def _srsd_accuracy(model, items) -> float:
    from train.dev_tasks import is_correct, score_srsd_items

    scores, _ = score_srsd_items(model, items, batch_size=SCORE_BATCH)
    return sum(is_correct(s, item.answer) for s, item in zip(scores, items)) / len(items)


DEV_METRICS = {
    m.name: m
    for m in (
        DevMetric("sts_spearman", "dev_spearman", "a folder with sts-dev.csv (or the file)", read_sts_dev, _sts_cosine),
        DevMetric("relational_spearman", "dev_relational_spearman", "a folder with sts-dev.csv (or the file)",
                  read_sts_dev, _sts_relational),
        DevMetric("nli_auprc", "dev_auprc", "a SentEval NLI folder (s1.dev, s2.dev, labels.dev)", read_nli_dev,
                  _nli_auprc),
        DevMetric("aspect_p10", "dev_p10", "an aspect_docs set folder", read_aspect_dev, _aspect_p10),
        DevMetric("srsd", "dev_srsd", "an srsd set folder", read_srsd_dev, _srsd_accuracy),
    )
}


def metric_for(cfg) -> DevMetric:
    """The dev metric of a ``TrainConfig``: ``cfg.dev_metric``, else the method's declared one."""
    from train.config import ConfigError
    from train.methods import get_method

    name = cfg.dev_metric or get_method(cfg.method).dev_metric
    if name not in DEV_METRICS:
        declared = "" if cfg.dev_metric else f" (declared by method {cfg.method!r})"
        raise ConfigError(f"dev_metric {name!r}{declared} is not one of {sorted(DEV_METRICS)}")
    return DEV_METRICS[name]


def score_model_dir(metric: DevMetric, model_dir: str | Path, data, device: str | None = None) -> float:
    """``metric`` of the model folder ``model_dir`` on data already read by ``metric.read``."""
    from train.model import load

    return metric.score(load(model_dir, device=device), data)
