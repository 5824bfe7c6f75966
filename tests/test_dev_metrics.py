"""The dev metrics of AspectCSE (``aspect_p10``) and DSBATS (``srsd``) in ``score/dev_metrics.py``. No Ray.

* each against values worked out by hand on embeddings chosen in the test (and ``eval.aspect_retrieval``'s
  ``P@10`` against the same value), and, on a real model folder, against the figure computed here from
  sentence-transformers' embeddings with plain loops — the model's own pair representation included
  (a DSBATS folder's concat_mlp head, applied in numpy from its saved weights);
* the methods' configs with ``dev_data`` validate, their metric keys are ``dev_p10`` / ``dev_srsd``,
  an unknown ``dev_metric`` is still a ConfigError, unusable dev sets fail when read.
(That the pieces live once, under ``score/``, and that nothing imports upward: ``tests/test_imports.py``.)
"""

from __future__ import annotations

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
    from setformat.io import write_table

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
    from setformat.schemas import ASPECT_DOCS

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
    from setformat.schemas import SRSD

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


# ---------------------------------------------------------------- the figures against hand-worked and brute-force values


class ChosenEmbeddings:
    """A sentence encoder whose embeddings are chosen by hand, ``text -> vector`` (SentenceTransformer's
    ``encode``); in a ``TrainedModel`` without heads (so SRSD takes the offset representation)."""

    def __init__(self, vectors: dict[str, tuple[float, ...]]):
        self.vectors = vectors

    def encode(self, texts, batch_size: int = 64, **_) -> np.ndarray:
        return np.asarray([self.vectors[t] for t in texts], dtype=np.float32)


def _chosen(vectors: dict[str, tuple[float, ...]]):
    from score.model import TrainedModel

    return TrainedModel(ChosenEmbeddings(vectors))


def _unit(degrees: float) -> tuple[float, float]:
    return (float(np.cos(np.radians(degrees))), float(np.sin(np.radians(degrees))))


def test_aspect_p10_on_embeddings_chosen_by_hand(tmp_path):
    """P17: docs 0-5 share label a (0-4 at 0°..4°, doc 5 alone at 180°), docs 6-11 share b (at 90°..95°).
    Each seed ranks the 11 others and keeps 10. A seed 0-4 ranks its 4 a's first and doc 5 last:
    4 hits; seed 5 ranks the six b's (cos >= 0) above the a's (cos ~ -1) and keeps the a's 1-4:
    4 hits; a b seed finds its 5 b's first: 5 hits. P@10 = (6 x 4/10 + 6 x 5/10) / 12 = 0.45.
    P452: docs 6 and 7 share one label: 1 hit each in a pool of 1, P@10 = 1/1 (over what was retrieved,
    as Ostendorff's eval_cli). P31: docs 0-2 share no label: no seed, left out of the mean.
    aspect_p10 = (0.45 + 1.0) / 2 = 0.725."""
    from eval.aspect_retrieval import evaluate_aspect_retrieval
    from setformat.schemas import ASPECT_DOCS
    from score.dev_metrics import DEV_METRICS

    angles = [0, 1, 2, 3, 4, 180] + [90 + j for j in range(6)]
    encoder = _chosen({f"doc {i}": _unit(a) for i, a in enumerate(angles)})
    rows = [(i, "P17", ["a" if i < 6 else "b"]) for i in range(12)]
    rows += [(6, "P452", ["Q8148"]), (7, "P452", ["Q8148"])] + [(i, "P31", [f"Q{900 + i}"]) for i in range(3)]
    folder = _write(tmp_path / "aspect_docs", [{"qid": f"Q{100 + i}", "title": f"title {i}", "text": f"doc {i}",
                                                "aspect": a, "labels": labels} for i, a, labels in rows], ASPECT_DOCS)
    metric = DEV_METRICS["aspect_p10"]
    assert (metric.key, metric.mode) == ("dev_p10", "max")
    assert metric.score(encoder, metric.read(str(folder))) == pytest.approx(0.725, abs=1e-12)
    task = evaluate_aspect_retrieval(encoder, folder)  # python -m eval's figure: the same hand-worked value
    assert task["P@10"] == pytest.approx(0.725, abs=1e-12)
    assert {a: (m["n_seeds"], m["P@10"]) for a, m in task["per_aspect"].items()} == {
        "P17": (12, pytest.approx(0.45)), "P452": (2, pytest.approx(1.0)), "P31": (0, 0.0)}


def _brute_force_p10(embeddings: dict[str, np.ndarray], rows: list[dict]) -> float:
    """P@10 written out: per aspect, every doc with a label in common with another is a seed; its top 10
    of the aspect's other docs by cosine; hits / 10; mean over seeds, then over aspects with seeds."""
    per_aspect = {}
    for aspect in dict.fromkeys(r["aspect"] for r in rows):
        docs = [(r["qid"], set(r["labels"])) for r in rows if r["aspect"] == aspect]
        unit = {q: embeddings[q] / np.linalg.norm(embeddings[q]) for q, _ in docs}
        precisions = []
        for qid, labels in docs:
            others = [(float(unit[qid] @ unit[o]), bool(labels & olabels)) for o, olabels in docs if o != qid]
            if not any(relevant for _, relevant in others):
                continue
            top = sorted(others, key=lambda other: -other[0])[:10]
            precisions.append(sum(relevant for _, relevant in top) / 10)
        if precisions:
            per_aspect[aspect] = sum(precisions) / len(precisions)
    return sum(per_aspect.values()) / len(per_aspect)


def test_aspect_p10_of_a_model_folder_is_the_brute_force_p10(model_dir, aspect_docs):
    from sentence_transformers import SentenceTransformer

    from setformat.io import read_table
    from score.dev_metrics import DEV_METRICS
    from train.saved_models import score_model_dir

    metric = DEV_METRICS["aspect_p10"]
    got = score_model_dir(metric, model_dir, metric.read(str(aspect_docs)))
    rows = read_table(aspect_docs).to_pylist()
    texts = {r["qid"]: r["text"] for r in rows}
    vectors = SentenceTransformer(str(model_dir), device="cpu").encode(list(texts.values()))
    want = _brute_force_p10({q: v.astype(np.float64) for q, v in zip(texts, vectors)}, rows)
    assert 0 < want < 1 and got == pytest.approx(want, abs=1e-9)


def _srsd_rows(items) -> list[dict]:
    return [_srsd_item(i, cluster, kind, query, candidates, answer)
            for i, (cluster, kind, query, candidates, answer) in enumerate(items)]


def test_srsd_on_embeddings_chosen_by_hand(tmp_path):
    """e(p) = (0,0), e(q) = (1,0), e(r) = (0,1), e(s) = (1,1), e(t) = (2,0); a pair is e(second) − e(first).
    Item 0: query (p,q) = (1,0); candidates (p,r) cos 0, (r,s) cos 1, (q,p) cos −1; answer 1: right.
    Item 1: query (p,q); (r,s) and (p,t) both cos 1; answer 0: a tie, wrong.
    Item 2: query (p,r) = (0,1); (q,s) cos 1, (p,q) cos 0; answer 0: right.
    Item 3: query (p,r); (p,q) cos 0, (q,p) cos 0, (s,q) = (0,−1) cos −1; answer 2: wrong.
    A reversed item (wrong: its answer is the reversed query) is not scored. Accuracy 2/4."""
    from setformat.schemas import SRSD
    from score.dev_metrics import DEV_METRICS

    encoder = _chosen({"p": (0, 0), "q": (1, 0), "r": (0, 1), "s": (1, 1), "t": (2, 0)})
    items = _srsd_rows([
        ("E01", "other_cluster", ("p", "q"), [("p", "r"), ("r", "s"), ("q", "p")], 1),
        ("E01", "other_cluster", ("p", "q"), [("r", "s"), ("p", "t")], 0),
        ("E02", "other_cluster", ("p", "r"), [("q", "s"), ("p", "q")], 0),
        ("E02", "other_cluster", ("p", "r"), [("p", "q"), ("q", "p"), ("s", "q")], 2),
        ("E01", "reversed", ("p", "q"), [("q", "p"), ("r", "s")], 0),
    ])
    metric = DEV_METRICS["srsd"]
    assert (metric.key, metric.mode) == ("dev_srsd", "max")
    data = metric.read(str(_write(tmp_path / "srsd", items, SRSD)))
    assert [item.kind for item in data] == ["other_cluster"] * 4
    assert metric.score(encoder, data) == 0.5


def test_srsd_of_a_model_folder_under_its_own_representation(model_dir, dsbats_dir, srsd_set):
    """The figure of a plain folder (offset) and of a DSBATS folder (its concat_mlp head, applied here in numpy
    from the saved weights) against the accuracy counted here, item by item."""
    from sentence_transformers import SentenceTransformer

    from setformat.io import read_table
    from score.dev_metrics import DEV_METRICS
    from train.saved_models import score_model_dir

    metric = DEV_METRICS["srsd"]
    items = [r for r in read_table(srsd_set).to_pylist() if r["kind"] == "other_cluster"]
    assert len(items) == 20
    sentences = sorted({s for r in items for col in ("query_first", "query_second", "candidates_first",
                                                     "candidates_second") for s in np.atleast_1d(r[col])})
    e = dict(zip(sentences, SentenceTransformer(str(model_dir), device="cpu").encode(sentences).astype(np.float64)))
    heads = {k: v.double().numpy() for k, v in torch.load(dsbats_dir / "structcse_heads.pt").items()}

    def concat_mlp(first, second):
        hidden = np.tanh(heads["pair_head.mlp.0.weight"] @ np.r_[first, second] + heads["pair_head.mlp.0.bias"])
        return heads["pair_head.mlp.2.weight"] @ hidden + heads["pair_head.mlp.2.bias"]

    def accuracy(represent) -> float:
        right = 0
        for r in items:
            query = represent(e[r["query_first"]], e[r["query_second"]])
            cosines = [float(query @ c / np.linalg.norm(query) / np.linalg.norm(c)) for c in
                       (represent(e[a], e[b]) for a, b in zip(r["candidates_first"], r["candidates_second"]))]
            right += all(cosines[r["answer"]] > c for i, c in enumerate(cosines) if i != r["answer"])
        return right / len(items)

    offset, mlp = accuracy(lambda a, b: b - a), accuracy(concat_mlp)
    data = metric.read(str(srsd_set))
    assert score_model_dir(metric, model_dir, data) == pytest.approx(offset, abs=1e-12)
    assert score_model_dir(metric, dsbats_dir, data) == pytest.approx(mlp, abs=1e-12)
    assert 0 < offset < 1 and 0 < mlp < 1


# ---------------------------------------------------------------- configs and unusable dev sets


def test_the_methods_configs_name_their_own_dev_metric(aspect_docs, srsd_set, tmp_path):
    from train.config import metric_for

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
    from setformat.schemas import ASPECT_DOCS, SRSD
    from setformat.io import read_table
    from score.dev_metrics import DEV_METRICS

    no_seeds = _write(tmp_path / "no_seeds", [{"qid": f"Q{i}", "title": "t", "text": f"text {i}", "aspect": "P17",
                                               "labels": [f"Q{i}"]} for i in range(4)], ASPECT_DOCS)
    with pytest.raises(ValueError, match="no document shares a label"):
        DEV_METRICS["aspect_p10"].read(str(no_seeds))
    rows = [r for r in read_table(srsd_set).to_pylist() if r["kind"] == "reversed"]
    reversed_only = _write(tmp_path / "reversed_only", rows, SRSD)
    with pytest.raises(ValueError, match="no other_cluster items"):
        DEV_METRICS["srsd"].read(str(reversed_only))


# ---------------------------------------------------------------- one copy, imported one way
