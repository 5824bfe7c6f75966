"""Registry of evaluation tasks the CLI can run.

A task is a name, the splits it knows, a cheap ``check_data(data, split,
**options)`` that raises a clear ``FileNotFoundError``/``ValueError`` before
any model is loaded, and ``run(model, data, split, batch_size=, **options) -> dict``.
``model_kind`` says what ``run`` takes: ``"encoder"`` a SentenceTransformer
(``eval.models.load_encoder``), ``"trained"`` a :class:`score.model.TrainedModel`
with the method's heads (``eval.models.load_trained``); ``requires`` names
the capability the model's method must have (``TrainedModel.has``; None: any);
``options`` are the extra CLI options the task accepts (``tune_data``,
``tune_split``, ``plots``, ``limit``, ``weights``). Adding a task (retrieval,
srsd, ...) is one module plus one ``register`` call here.

Tasks: ``sts`` (cosine, Spearman), ``sts_all`` (the papers' seven STS sets and their mean), ``nli`` and ``direction`` (GaussCSE §3),
``relational_sts`` and ``link_prediction`` (RSE §3.3, App. B), ``aspect_retrieval``
(AspectCSE §6.1), ``srsd`` (DSBATS slides' intrinsic task), ``mrpc`` (SentEval's
MRPC protocol on frozen embeddings), ``stc`` (EASE's short-text clustering: KMeans
accuracy and NMI over seeds). On the CLI a ``-`` in a task name reads as ``_`` (``aspect-retrieval``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from eval import aspect_retrieval, direction, link_prediction, mrpc, nli, relational_sts, srsd, stc, sts, sts_all
from infra.hub_data import MRPC, MTEB_STS, SNLI
from score.sts_data import check_sts_data

# task -> the public datasets it reads when no --data is given (docs/data.md)
DEFAULT_DATA = {
    "sts": MTEB_STS["STSBenchmark"].name,
    "relational_sts": MTEB_STS["STSBenchmark"].name,
    "sts_all": ",".join(d.name for d in MTEB_STS.values()),
    "nli": SNLI.name,
    "direction": SNLI.name,
    "link_prediction": SNLI.name,
    "mrpc": MRPC.name,
}


@dataclass(frozen=True)
class EvalTask:
    name: str
    description: str
    splits: tuple[str, ...]
    check_data: Callable[..., object]
    run: Callable[..., dict]
    model_kind: str = "encoder"  # encoder (SentenceTransformer) | trained (score.model.TrainedModel)
    requires: str | None = None  # e.g. relation_scores: an RSE model
    options: tuple[str, ...] = ()
    default_split: str | None = None  # None: dev when the task has it, else its first split


TASKS: dict[str, EvalTask] = {}


def register(task: EvalTask) -> EvalTask:
    TASKS[task.name] = task
    return task


def default_data(name: str) -> str | None:
    """The public data a task reads when ``--data`` is not given (``DEFAULT_DATA``), or None."""
    return DEFAULT_DATA.get(name)


def get_task(name: str) -> EvalTask:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; available: {', '.join(sorted(TASKS))}")
    return TASKS[name]


register(EvalTask(
    name="sts",
    description="STS Benchmark (mteb/stsbenchmark-sts, or a SentEval-layout folder): Spearman of cosine "
                "similarity vs gold scores",
    splits=("dev", "test", "train"),
    check_data=lambda data, split, **_: check_sts_data(data, split),
    run=lambda model, data, split, batch_size=64, plots=None: sts.evaluate_sts(model, data, split,
                                                                               batch_size=batch_size, plots=plots),
    options=("plots",),
))

register(EvalTask(
    name="sts_all",
    description="the papers' STS table (MTEB's mteb/sts12-sts ... mteb/sickr-sts, or SentEval's data/downstream "
                "tree or any folder of it): STS12-16 'all' "
                "(one Spearman over a year's subsets), STS-B, SICK-R (its SemEval test part, 4,927 pairs, as "
                "SentEval; --sick-protocol mteb: all of SICK) and their mean, with the model's own "
                "similarity (cosine; GaussCSE symmetric KL; RSE relational score)",
    splits=("test", "dev", "train"),
    check_data=sts_all.check_sts_all_data,
    run=sts_all.evaluate_sts_all,
    model_kind="trained",
    options=("limit", "actors", "sick_protocol"),
    default_split="test",  # the papers' table; every MTEB set has it
))

NLI_SPLITS = ("test", "dev", "train", "trial")  # SentEval NLI: train/dev/test; SICK: train/trial/test

register(EvalTask(
    name="nli",
    description="entailment vs rest (stanfordnlp/snli, RobZamp/sick, or a SentEval NLI or SICK folder): accuracy at a threshold tuned on a dev split, "
                "AUPRC; score sim(hyp||prem) for GaussCSE, cosine otherwise",
    splits=NLI_SPLITS,
    check_data=nli.check_nli_data,
    run=nli.evaluate_nli,
    model_kind="trained",
    options=("tune_data", "tune_split", "limit"),
))

register(EvalTask(
    name="direction",
    description="entailment direction on entailment pairs: GaussCSE sim and log-det accuracy vs the length baseline",
    splits=NLI_SPLITS,
    check_data=direction.check_direction_data,
    run=direction.evaluate_direction,
    model_kind="trained",
    options=("limit", "plots"),
))

register(EvalTask(
    name="relational_sts",
    description="STS Benchmark layout: Spearman of RSE's weighted relational score (and of cosine)",
    splits=("dev", "test", "train"),
    check_data=relational_sts.check_relational_sts_data,
    run=relational_sts.evaluate_relational_sts,
    model_kind="trained",
    requires="relation_scores",
    options=("weights", "limit", "plots"),
))

register(EvalTask(
    name="link_prediction",
    description="RSE tail retrieval on a SentEval NLI folder: MR, MRR, Hits@1/3/10 per relation and overall",
    splits=NLI_SPLITS,
    check_data=link_prediction.check_link_data,
    run=link_prediction.evaluate_link_prediction,
    model_kind="trained",
    requires="relation_scores",
    options=("limit", "plots"),
))

register(EvalTask(
    name="aspect_retrieval",
    description="AspectCSE / Ostendorff et al. 2022 retrieval on an aspect_docs set: P@k, R@k, MRR@k "
                "(k = 5, 10, 25, 50) per aspect and their mean over aspects",
    splits=("test",),  # the aspect_docs folder is the test side of the entity split
    check_data=aspect_retrieval.check_aspect_data,
    run=aspect_retrieval.evaluate_aspect_retrieval,
    options=("limit", "plots"),
))

register(EvalTask(
    name="srsd",
    description="DSBATS sentence relationship similarity distinguishing on an srsd set: accuracy of cos(r(query), "
                "r(candidate)) picking the answer pair (other_cluster: accuracy; reversed: accuracy_reversed), "
                "per cluster",
    splits=("test",),  # the srsd folder is the test side
    check_data=srsd.check_srsd_data,
    run=srsd.evaluate_srsd,
    model_kind="trained",  # a dsbats model's pair head (concat_mlp) when it has one; offset otherwise
    options=("limit", "representation"),
))

def run_mrpc(model, data, split, mrpc_classifier: str | None = None, **options) -> dict:
    """MRPC with SentEval's classifier unless ``mrpc_classifier`` says otherwise (``mrpc.TASK_CLASSIFIER``)."""
    return mrpc.evaluate_mrpc(model, data, split, classifier=mrpc_classifier or mrpc.TASK_CLASSIFIER, **options)


register(EvalTask(
    name="mrpc",
    description="MRPC paraphrase detection (nyu-mll/glue mrpc, or SentEval's files): SentEval's classifier on "
                "[|u-v|, u*v] (nn.Linear + Adam, early stopping, L2 by 10-fold CV; --mrpc-classifier sklearn: "
                "scikit-learn's logistic regression); test: train -> test accuracy/F1 (the papers' protocol), "
                "train: nested 10-fold CV accuracy/F1",
    splits=("train", "test"),  # train: CV on the train file (our sample has no test file)
    check_data=mrpc.check_mrpc_data,
    run=run_mrpc,
    options=("limit", "mrpc_classifier"),
    default_split="test",  # the papers' protocol: train -> test (GLUE's MRPC, the default data, has both)
))

register(EvalTask(
    name="stc",
    description="short-text clustering (EASE): KMeans (k = number of labels) on raw embeddings, accuracy after "
                "Hungarian matching and NMI, mean/std over seeds 0-4 plus seed 42, per dataset of a file or folder",
    splits=("test",),  # the datasets are used whole
    check_data=stc.check_stc_data,
    run=stc.evaluate_stc,
    options=("limit",),
))
