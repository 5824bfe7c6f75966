"""Each method's dev metric: the one definition that checkpoint selection (``python -m train``), Ray Tune's
evaluation actors (``tune.scorers``) and ``python -m eval`` score with.

A method declares the metric it is selected on (``Method.dev_metric``); ``dev_metric=NAME`` in a
config overrides it (``train.config``: an unknown name is a ``ConfigError``), and ``dev_data`` names the
data the metric reads. A :class:`DevMetric` reads its dev data once (``read(path)``: in a long-lived
evaluation actor, once per search) and scores a :class:`score.model.TrainedModel`
(``score(model, data)``; ``train.saved_models.score_model_dir`` loads a folder and scores it); the
figure is reported under ``key``. The readers and metrics are this package's, the ones ``eval``'s tasks
use: a dev figure and an eval figure on the same file are the same number.

=====================  ==========================  ===============================================
metric                 reported as                 what it is (methods.md)
=====================  ==========================  ===============================================
``sts_spearman``       ``dev_spearman``            Spearman of cos(e1, e2) vs gold on STS-B dev
                                                   (``eval --task sts``'s ``spearman``)
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
``aspect_docs`` set folder (``setformat.schemas.ASPECT_DOCS``) and ``srsd`` an ``srsd`` set folder
(``setformat.schemas.SRSD``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from score.aspects import embed_aspects, has_seeds, read_aspect_docs, retrieval_by_aspect
from score.metrics import auprc_trapezoid, spearman
from score.nli_data import NliPairs, hub_nli_source, read_nli
from score.srsd import HEADLINE_KIND, is_correct, read_srsd, score_srsd_items
from score.sts_data import StsPairs, hub_sts_source, read_dev_file

SCORE_BATCH = 128


@dataclass(frozen=True)
class DevMetric:
    name: str
    key: str  # the metric name in reports, checkpoints and Tune
    data: str  # what dev_data must be (error messages, --help)
    data_format: str  # the format read: sts (STS-B), nli (SentEval NLI), aspect_docs, srsd
    read: Callable[[str], Any]
    score: Callable[[Any, Any], float]  # (score.model.TrainedModel, read(...)) -> float
    mode: str = "max"
    # the Hugging Face Hub source a name (or a folder of a hub dataset's files) gives, None when it names none;
    # None for a metric that reads no hub dataset (infra.hub_data)
    hub_source: Callable[[str], Any] | None = None

    def named_on_the_hub(self, data: str) -> bool:
        """``data`` is a hub dataset name this metric reads (``mteb/stsbenchmark-sts``, ``stanfordnlp/snli``)."""
        from infra.hub_data import looks_like_hub_name

        return self.hub_source is not None and looks_like_hub_name(data) and self.hub_source(data) is not None

    def check_available(self, data: str) -> None:
        """Before Ray starts: a hub name can be read now (the Hugging Face cache, ``STRUCTCSE_HUB_COPIES``, or the
        hub reachable), else ``infra.hub_data.HubDataUnavailable`` in one line. Anything else: nothing to do."""
        if self.named_on_the_hub(data):
            from infra.hub_data import check_available

            check_available([self.hub_source(data)], flag="dev_data=FOLDER (--dev-data)")


# ---------------------------------------------------------------- readers


def read_sts_dev(path: str | Path) -> StsPairs:
    """STS-B dev pairs (``score.sts_data``: bad rows skipped, counted, logged)."""
    pairs = read_dev_file(path)
    if len(pairs) < 2:
        raise ValueError(f"{pairs.path}: need at least 2 readable STS pairs, found {len(pairs)}")
    return pairs


def read_nli_dev(path: str | Path) -> NliPairs:
    """(premises, hypotheses, labels) of a SentEval NLI folder's dev split (``score.nli_data.read_nli``)."""
    pairs = read_nli(path, "dev")
    y = pairs.is_entailment()
    if all(y) or not any(y):
        raise ValueError(f"{pairs.path}: needs both entailment and non-entailment pairs")
    return pairs


def read_aspect_dev(path: str | Path):
    """``{aspect: AspectDocs}`` of an aspect_docs set folder (``score.aspects.read_aspect_docs``);
    a set where no document shares a label with another on its aspect is a ValueError (nothing to
    retrieve: found before any model is scored)."""
    aspects = read_aspect_docs(path)
    if not has_seeds(aspects):
        raise ValueError(f"{path}: no document shares a label with another on its aspect; nothing to retrieve")
    return aspects


def read_srsd_dev(path: str | Path):
    """The ``other_cluster`` items of an srsd set folder (``score.srsd.read_srsd``), set order."""
    items = [item for item in read_srsd(path) if item.kind == HEADLINE_KIND]
    if not items:
        raise ValueError(f"srsd set at {path} has no {HEADLINE_KIND} items (the srsd dev metric scores those)")
    return items


# ---------------------------------------------------------------- scores


def _sts_cosine(model, pairs: StsPairs) -> float:
    return spearman(model.cosine(pairs.sentences1, pairs.sentences2, batch_size=SCORE_BATCH), pairs.scores)


def _sts_relational(model, pairs: StsPairs) -> float:
    return spearman(model.relational_similarity(pairs.sentences1, pairs.sentences2, batch_size=SCORE_BATCH),
                    pairs.scores)


def _nli_auprc(model, pairs: NliPairs) -> float:
    scores = model.asymmetric_similarity(pairs.hypotheses, pairs.premises, batch_size=SCORE_BATCH)
    return auprc_trapezoid(scores, pairs.is_entailment())


def _aspect_p10(model, aspects) -> float:
    _, means = retrieval_by_aspect(embed_aspects(model, aspects, SCORE_BATCH), aspects, ks=(10,))
    return means["P@10"]


def _srsd_accuracy(model, items) -> float:
    scores, _ = score_srsd_items(model, items, batch_size=SCORE_BATCH)
    return sum(is_correct(s, item.answer) for s, item in zip(scores, items)) / len(items)


STS_DEV = "a folder with sts-dev.csv (or the file), or a hub dataset name (mteb/stsbenchmark-sts: its validation split)"
DEV_METRICS = {
    m.name: m
    for m in (
        DevMetric("sts_spearman", "dev_spearman", STS_DEV, "sts", read_sts_dev, _sts_cosine,
                  hub_source=hub_sts_source),
        DevMetric("relational_spearman", "dev_relational_spearman", STS_DEV, "sts", read_sts_dev, _sts_relational,
                  hub_source=hub_sts_source),
        DevMetric("nli_auprc", "dev_auprc", "a SentEval NLI folder (s1.dev, s2.dev, labels.dev), or a hub dataset "
                  "name (stanfordnlp/snli: its validation split)", "nli", read_nli_dev, _nli_auprc,
                  hub_source=hub_nli_source),
        DevMetric("aspect_p10", "dev_p10", "an aspect_docs set folder", "aspect_docs", read_aspect_dev, _aspect_p10),
        DevMetric("srsd", "dev_srsd", "an srsd set folder", "srsd", read_srsd_dev, _srsd_accuracy),
    )
}
