"""The dev metrics of AspectCSE (``aspect_p10``) and DSBATS (``srsd``) in ``train/dev_metrics.py``. No Ray.

* each equals the headline figure of its evaluation task (``eval.aspect_retrieval``'s ``P@10``,
  ``eval.srsd``'s ``accuracy``) on the same model folder and set, to 1e-9 — the model's own pair
  representation included (a DSBATS folder with a concat_mlp head);
* the methods' configs with ``dev_data`` validate, their metric keys are ``dev_p10`` / ``dev_srsd``,
  an unknown ``dev_metric`` is still a ConfigError, unusable dev sets fail when read;
* the shared pieces live once, under ``train/`` (``train.dev_tasks``), re-exported by eval, and no
  module under ``train/`` imports ``eval``.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

from train.config import ConfigError, TrainConfig

REPO = Path(__file__).resolve().parents[1]
WORDS = ["steel", "wine", "ships", "grain", "paper", "glass", "music", "films", "river", "company", "town", "band",
         "bank", "oil", "rail", "radio", "coal", "cars", "games", "food", "dog", "bark", "cat", "meow", "king", "queen",
         "man", "woman", "beach", "sand", "ocean", "water"]


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 12)))) for _ in range(n)]


def _write(folder: Path, rows: list[dict], schema) -> Path:
    from ingest.sets import write_table

    write_table(pa.Table.from_pylist(rows, schema=schema), str(folder / "part-00000.parquet"))
    return folder


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A tiny BERT (random weights) saved as a SentenceTransformer folder, mean pooling."""
    from train.encoder import Encoder
    from train.tiny_bert import build_tiny_bert

    root = tmp_path_factory.mktemp("dev_metrics_model")
    tiny = build_tiny_bert(_texts(np.random.default_rng(0), 200) + WORDS, root / "bert", vocab_size=200,
                           hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    folder = root / "model"
    Encoder(str(tiny), "mean", 32, None).eval().save_sentence_transformer(folder)
    return folder


@pytest.fixture(scope="module")
def dsbats_dir(model_dir, tmp_path_factory) -> Path:
    """The same encoder with a (random) DSBATS concat_mlp pair head beside it."""
    from train.methods.dsbats import DSBATS

    folder = tmp_path_factory.mktemp("dev_metrics_dsbats") / "model"
    shutil.copytree(model_dir, folder)
    torch.manual_seed(3)
    DSBATS(DSBATS.Options(pair_representation="concat_mlp"), hidden_size=32, temperature=0.05).save_heads(folder)
    return folder


@pytest.fixture(scope="module")
def aspect_docs(tmp_path_factory) -> Path:
    """P17: 24 documents in 4 countries (doc 5 in two); P452: 12 of them in 3 industries; P31: 3 documents
    that share no label (an aspect without seeds: left out of the mean)."""
    from ingest.schemas import ASPECT_DOCS

    texts = _texts(np.random.default_rng(1), 24)
    countries, industries = ["Q30", "Q183", "Q142", "Q38"], ["Q8148", "Q11631", "Q190117"]
    rows = [(i, "P17", [countries[i % 4]] + (["Q30"] if i == 5 else [])) for i in range(24)]
    rows += [(i, "P452", [industries[i % 3]]) for i in range(0, 24, 2)]
    rows += [(i, "P31", [f"Q{900 + i}"]) for i in range(3)]
    return _write(tmp_path_factory.mktemp("aspect_docs"),
                  [{"qid": f"Q{100 + i}", "title": f"title {i}", "text": texts[i], "aspect": a, "labels": labs}
                   for i, a, labs in rows], ASPECT_DOCS)


def _srsd_item(i, cluster, kind, query, candidates, answer) -> dict:
    return {"item_id": f"i{i}", "cluster": cluster, "kind": kind, "query_first": query[0], "query_second": query[1],
            "candidates_first": [c[0] for c in candidates], "candidates_second": [c[1] for c in candidates],
            "answer": answer}


@pytest.fixture(scope="module")
def srsd_set(tmp_path_factory) -> Path:
    """20 other_cluster items with random pairs (accuracy depends on the model) and 4 reversed items."""
    from ingest.schemas import SRSD

    rng = np.random.default_rng(2)
    s = _texts(rng, 60)
    items = []
    for i in range(20):
        pairs = [(s[j], s[k]) for j, k in rng.choice(60, size=(4, 2), replace=False)]
        items.append(_srsd_item(i, f"E{i % 3:02d}", "other_cluster", pairs[0], pairs[1:], int(rng.integers(0, 3))))
    for i in range(20, 24):
        q = (s[i], s[i + 1])
        items.append(_srsd_item(i, "E01", "reversed", q, [q[::-1], q], 1))
    return _write(tmp_path_factory.mktemp("srsd"), items, SRSD)


# ---------------------------------------------------------------- the figures equal the evaluation tasks'


def test_aspect_p10_is_the_aspect_retrieval_tasks_p10(model_dir, aspect_docs):
    from eval.aspect_retrieval import evaluate_aspect_retrieval
    from eval.models import load_encoder
    from train.dev_metrics import DEV_METRICS, score_model_dir
    from train.model import load

    metric = DEV_METRICS["aspect_p10"]
    assert (metric.key, metric.mode) == ("dev_p10", "max")
    got = score_model_dir(metric, model_dir, metric.read(str(aspect_docs)))
    task = evaluate_aspect_retrieval(load_encoder(str(model_dir)), aspect_docs)  # as python -m eval: plain encoder
    assert task["per_aspect"]["P31"]["n_seeds"] == 0 and task["per_aspect"]["P17"]["n_seeds"] == 24
    assert got == pytest.approx(task["P@10"], abs=1e-9)
    assert got == pytest.approx(evaluate_aspect_retrieval(load(model_dir), aspect_docs)["P@10"], abs=1e-9)
    assert 0 < got < 1


def test_srsd_is_the_srsd_tasks_accuracy_under_the_models_own_representation(model_dir, dsbats_dir, srsd_set):
    from eval.models import load_encoder, load_trained
    from eval.srsd import evaluate_srsd
    from train.dev_metrics import DEV_METRICS, score_model_dir

    metric = DEV_METRICS["srsd"]
    assert (metric.key, metric.mode) == ("dev_srsd", "max")
    items = metric.read(str(srsd_set))
    assert len(items) == 20 and {item.kind for item in items} == {"other_cluster"}  # reversed items not scored
    plain = score_model_dir(metric, model_dir, items)
    assert plain == pytest.approx(evaluate_srsd(load_encoder(str(model_dir)), srsd_set)["accuracy"], abs=1e-9)
    task = evaluate_srsd(load_trained(str(dsbats_dir)), srsd_set)
    assert task["representation"] == "concat_mlp"
    assert score_model_dir(metric, dsbats_dir, items) == pytest.approx(task["accuracy"], abs=1e-9)
    offset = evaluate_srsd(load_trained(str(dsbats_dir)), srsd_set, representation="offset")["accuracy"]
    assert offset == pytest.approx(plain, abs=1e-9)  # the same encoder; only the pair representation differs


# ---------------------------------------------------------------- configs and unusable dev sets


def test_the_methods_configs_name_their_own_dev_metric(aspect_docs, srsd_set, tmp_path):
    from train.dev_metrics import metric_for

    aspect = TrainConfig.from_dict({"method": "aspectcse", "data": "x", "dev_data": str(aspect_docs)}).validate()
    assert metric_for(aspect).key == "dev_p10"
    dsbats = TrainConfig.from_dict({"method": "dsbats", "data": "x", "dev_data": str(srsd_set)}).validate()
    assert metric_for(dsbats).key == "dev_srsd"
    with pytest.raises(ConfigError, match="dev_metric 'nonsense'"):
        TrainConfig.from_dict({"method": "aspectcse", "data": "x", "dev_data": str(aspect_docs),
                               "dev_metric": "nonsense"}).validate()
    with pytest.raises(ConfigError, match="an aspect_docs set folder"):
        TrainConfig.from_dict({"method": "aspectcse", "data": "x", "dev_data": str(tmp_path / "nowhere")}).validate()


def test_unusable_dev_sets_fail_when_read(tmp_path, srsd_set):
    from ingest.schemas import ASPECT_DOCS, SRSD
    from ingest.sets import read_table
    from train.dev_metrics import DEV_METRICS

    no_seeds = _write(tmp_path / "no_seeds", [{"qid": f"Q{i}", "title": "t", "text": f"text {i}", "aspect": "P17",
                                               "labels": [f"Q{i}"]} for i in range(4)], ASPECT_DOCS)
    with pytest.raises(ValueError, match="no document shares a label"):
        DEV_METRICS["aspect_p10"].read(str(no_seeds))
    rows = [r for r in read_table(srsd_set).to_pylist() if r["kind"] == "reversed"]
    reversed_only = _write(tmp_path / "reversed_only", rows, SRSD)
    with pytest.raises(ValueError, match="no other_cluster items"):
        DEV_METRICS["srsd"].read(str(reversed_only))


# ---------------------------------------------------------------- one copy, imported one way


def test_the_shared_pieces_live_under_train_and_eval_re_exports_them():
    from eval import aspect_retrieval, srsd
    from train import dev_tasks

    for name in ("AspectDocs", "read_aspect_docs", "normalise", "label_matrix", "retrieval_metrics", "embed_aspects",
                 "KS"):
        assert getattr(aspect_retrieval, name) is getattr(dev_tasks, name), name
    for name in ("SrsdItem", "read_srsd", "is_correct", "HEADLINE_KIND", "REVERSED_KIND"):
        assert getattr(srsd, name) is getattr(dev_tasks, name), name
    assert aspect_retrieval.COLUMNS is dev_tasks.ASPECT_COLUMNS and srsd.COLUMNS is dev_tasks.SRSD_COLUMNS


def test_no_module_under_train_imports_eval():
    offenders = []
    for path in sorted((REPO / "train").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{path.relative_to(REPO)}:{node.lineno} {n}" for n in names
                          if n == "eval" or n.startswith("eval.")]
    assert not offenders, offenders
