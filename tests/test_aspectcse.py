"""AspectCSE (train/methods/aspectcse.py), its MNRL baseline config, and the aspect_retrieval task.

* the retrieval metrics against values worked out by hand on 5 documents with fixed 2-d vectors;
* the task end to end through ``python -m eval`` on a hand-written aspect_docs set with a tiny BERT
  (JSON last line, t-SNE PNGs, the two-model comparison PNG, errors before a model loads);
* AspectCSE and the MNRL baseline train through ``train.run.run`` on a hand-written
  aspect_triplets set, and the method's loss equals InfoNCE with hard negatives computed here
  in numpy from the same embeddings;
* both configs load and validate.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

from train.config import TrainConfig, load_config

REPO = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WORDS = ("steel wine ships grain paper glass music films river company town band bank oil rail "
         "radio coal cars games food").split()


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(4, 14)))) for _ in range(n)]


# ---------------------------------------------------------------- metrics, by hand


def _unit(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


def test_retrieval_metrics_hand_worked():
    """d0..d4 at 0°, 15°, 35°, 90°, 200° (cosine order = angle order); labels A, A, B, {A,B}, C.

    Rankings (seed itself excluded) and relevance (shares a label):
      d0: d1+ d2  d3+ d4   |rel| 2        d1: d0+ d2  d3+ d4   |rel| 2
      d2: d1  d0  d3+ d4   |rel| 1        d3: d2+ d1+ d0+ d4   |rel| 3
      d4: no relevant doc -> not a seed (n_seeds 4). k = 5 exceeds the pool of 4: all 4 taken, / 4
      (the number retrieved, as Ostendorff's eval_cli divides).
    k=1: P (1+1+0+1)/4, R (1/2+1/2+0+1/3)/4, MRR (1+1+0+1)/4
    k=3: P (2/3+2/3+1/3+1)/4, R 1, MRR (1+1+1/3+1)/4
    k=5: P (2/4+2/4+1/4+3/4)/4, R 1, MRR (1+1+1/3+1)/4
    """
    from score.aspects import retrieval_metrics

    emb = np.array([_unit(a) for a in (0, 15, 35, 90, 200)]) * np.array([[1], [3], [0.5], [2], [1]])  # norms ignored
    labels = [frozenset("A"), frozenset("A"), frozenset("B"), frozenset("AB"), frozenset("C")]
    got = retrieval_metrics(emb, labels, ks=(1, 3, 5))
    want = {
        "n_docs": 5, "n_seeds": 4,
        "P@1": 0.75, "R@1": 1 / 3, "MRR@1": 0.75,
        "P@3": 2 / 3, "R@3": 1.0, "MRR@3": 5 / 6,
        "P@5": 0.5, "R@5": 1.0, "MRR@5": 5 / 6,
    }
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=1e-9), key


def test_retrieval_metrics_without_seeds_and_duplicate_rows_in_the_set(tmp_path):
    from score.aspects import read_aspect_docs, retrieval_metrics

    got = retrieval_metrics(np.eye(3), [frozenset("A"), frozenset("B"), frozenset()], ks=(1,))
    assert got == {"n_docs": 3, "n_seeds": 0, "P@1": 0.0, "R@1": 0.0, "MRR@1": 0.0}
    folder = write_aspect_docs(tmp_path / "docs", [("Q1", "a", "P17", ["Q30"]), ("Q1", "a", "P17", ["Q30"]),
                                                   ("Q2", "b", "P17", ["Q30"]), ("Q1", "a", "P452", ["Q5"])])
    aspects = read_aspect_docs(folder)
    assert aspects["P17"].qids == ["Q1", "Q2"] and aspects["P452"].qids == ["Q1"]
    assert [len(d) for d in read_aspect_docs(folder, limit=1).values()] == [1, 1]


# ---------------------------------------------------------------- the task end to end


def write_aspect_docs(folder: Path, rows: list[tuple[str, str, str, list[str]]]) -> Path:
    from setformat.schemas import ASPECT_DOCS
    from setformat.io import write_table

    table = pa.Table.from_pylist(
        [{"qid": q, "title": f"title {q}", "text": t, "aspect": a, "labels": labs} for q, t, a, labs in rows],
        schema=ASPECT_DOCS,
    )
    write_table(table, str(folder / "part-00000.parquet"))
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from train.tiny_bert import build_tiny_bert

    return build_tiny_bert(_texts(np.random.default_rng(0), 200), tmp_path_factory.mktemp("aspect_bert"),
                           vocab_size=300, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)


@pytest.fixture(scope="module")
def st_model(tiny, tmp_path_factory):
    """The tiny BERT saved as a SentenceTransformer folder (CLS + MLP), no training."""
    from train.encoder import Encoder

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("aspect_model") / "model"
    Encoder(str(tiny), pooling="cls", max_len=32).eval().save_sentence_transformer(folder)
    return folder


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    rng = np.random.default_rng(1)
    texts = _texts(rng, 14)
    countries, industries = ["Q30", "Q183", "Q142"], ["Q8148", "Q11631"]
    # P17: 14 docs in 3 countries (doc 4 in two); P452: 7 of them, 4 in one industry and 3 in the other
    rows = [(f"Q{100 + i}", texts[i], "P17", [countries[i % 3]] + (["Q30"] if i == 4 else [])) for i in range(14)]
    rows += [(f"Q{100 + i}", texts[i], "P452", [industries[(i // 2) % 2]]) for i in range(0, 14, 2)]
    return write_aspect_docs(tmp_path_factory.mktemp("aspect_docs"), rows)


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    from eval.cli import main

    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_aspect_retrieval_json_and_plots(st_model, docs, tmp_path, capsys):
    from score.aspects import embed_aspects, read_aspect_docs, retrieval_metrics
    from eval.models import load_encoder

    code, out, err = run_cli(["--task", "aspect-retrieval", "--data", str(docs), "--model", str(st_model),
                              "--plots", str(tmp_path / "plots")], capsys)
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["task"] == "aspect_retrieval" and result["split"] == "test" and result["ks"] == [5, 10, 25, 50]
    per = result["per_aspect"]
    assert set(per) == {"P17", "P452"}
    assert (per["P17"]["n_docs"], per["P17"]["n_seeds"], per["P452"]["n_docs"], per["P452"]["n_seeds"]) == (14, 14, 7, 7)
    for metrics in per.values():
        for k in (5, 10, 25, 50):
            assert 0 <= metrics[f"P@{k}"] <= 1 and 0 <= metrics[f"R@{k}"] <= 1 and 0 <= metrics[f"MRR@{k}"] <= 1
        # the pool (n_docs - 1 others) is smaller than 25: every relevant doc is found, P@k = |rel| / pool
        assert metrics["R@25"] == pytest.approx(1.0)
    # P452: a pool of 6, all taken at k = 50: a seed finds its 3 (4 seeds) or 2 (3 seeds) relevant docs, / 6
    assert per["P452"]["P@50"] == pytest.approx((4 * 3 + 3 * 2) / 7 / 6)
    assert result["P@10"] == pytest.approx((per["P17"]["P@10"] + per["P452"]["P@10"]) / 2)
    # the numbers are the metrics of the model's own embeddings
    aspects = read_aspect_docs(docs)
    emb = embed_aspects(load_encoder(str(st_model)), aspects)
    assert per["P17"]["MRR@5"] == pytest.approx(retrieval_metrics(emb["P17"], aspects["P17"].labels)["MRR@5"])
    assert sorted(Path(p).name for p in result["plots"]) == ["aspect_tsne_P17.png", "aspect_tsne_P452.png"]
    for p in result["plots"]:
        assert Path(p).read_bytes()[:8] == PNG_MAGIC


def test_generic_vs_aspect_model_side_by_side(st_model, tiny, docs, tmp_path):
    from eval.aspect_retrieval import compare_models_tsne
    from eval.models import load_encoder
    from train.encoder import Encoder

    torch.manual_seed(1)
    other = Encoder(str(tiny), pooling="mean", max_len=32).eval().save_sentence_transformer(tmp_path / "mean")
    path = compare_models_tsne({"generic": load_encoder(str(st_model)), "aspect": load_encoder(str(other))},
                               docs, "P17", tmp_path / "side.png", label_names={"Q30": "United States"})
    assert path.read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(ValueError, match="no documents for aspect 'P31'"):
        compare_models_tsne({"generic": load_encoder(str(st_model))}, docs, "P31", tmp_path / "x.png")


def test_cli_bad_aspect_data_errors_name_the_folder_and_column(tmp_path, capsys):
    bad = tmp_path / "bad"
    from setformat.io import write_table

    write_table(pa.table({"qid": ["Q1"], "text": ["a"]}), str(bad / "part-00000.parquet"))
    for data, message in ((tmp_path / "nowhere", "aspect_docs set folder does not exist"),
                          (bad, "missing column 'title'")):
        code, out, err = run_cli(["--task", "aspect_retrieval", "--data", str(data), "--model", "/no/model"], capsys)
        last = err.strip().splitlines()[-1]
        assert code == 2 and out == "" and message in last and str(data) in last, err


# ---------------------------------------------------------------- training


@pytest.fixture(scope="module")
def triplets(tmp_path_factory):
    from setformat.schemas import ASPECT_TRIPLETS
    from setformat.io import write_table

    rng = np.random.default_rng(2)
    n = 24
    a, p, neg = _texts(rng, n), _texts(rng, n), _texts(rng, n)
    table = pa.Table.from_pylist([
        {"anchor": a[i], "positive": p[i], "negative": neg[i], "anchor_qid": f"Q{i}", "positive_qid": f"Q{100 + i}",
         "negative_qid": None if i % 4 == 0 else f"Q{200 + i}", "negative_kind": "random" if i % 4 == 0 else "labelled",
         "variant": "single", "aspects": ["P17"]} for i in range(n)
    ], schema=ASPECT_TRIPLETS)
    out = tmp_path_factory.mktemp("aspect_sets")
    write_table(table, str(out / "aspect_triplets" / "part-00000.parquet"))
    return out


def _cfg(config: str, **kw) -> TrainConfig:
    return load_config(REPO / "configs" / f"{config}.yaml", [f"{k}={v}" for k, v in kw.items()])


@pytest.mark.parametrize("config", ["aspectcse", "aspectcse_mnrl"])
def test_train_a_few_steps(config, ray_session, triplets, tiny, tmp_path):
    from train.saved_models import load
    from train.run import run

    cfg = _cfg(config, model=tiny, data=triplets, batch_size=8, max_len=32, max_steps=3, num_workers=0,
               checkpoint_every_steps=0, log_every_steps=0, storage_path=tmp_path / "runs", chunk_size=4)
    out = run(cfg)
    loss_key = "loss_aspectcse" if config == "aspectcse" else "loss_mnrl"
    assert out.metrics["step"] == 3 and math.isfinite(out.metrics[loss_key])
    info = json.loads((Path(out.model_path) / "structcse_method.json").read_text())
    assert info["method"] == "aspectcse" and info["options"]["hard_negatives"] == (config == "aspectcse")
    assert load(out.model_path).encode(["steel ships", "wine bank"]).shape == (2, 32)


def _numpy_info_nce(a: np.ndarray, p: np.ndarray, n: np.ndarray | None, tau: float) -> float:
    """-log e^{cos(a_i,p_i)/τ} / Σ_j (e^{cos(a_i,p_j)/τ} + e^{cos(a_i,n_j)/τ}), averaged over i (n=None: MNRL)."""
    def unit(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    a, p = unit(a.astype(np.float64)), unit(p.astype(np.float64))
    cands = p if n is None else np.concatenate([p, unit(n.astype(np.float64))])
    total = 0.0
    for i in range(len(a)):
        logits = cands @ a[i] / tau
        total += -logits[i] + math.log(sum(math.exp(x) for x in logits))
    return total / len(a)


@pytest.mark.parametrize("config", ["aspectcse", "aspectcse_mnrl"])
def test_loss_equals_info_nce_with_hard_negatives(config, tiny):
    from train.loop import build_trainee

    cfg = _cfg(config, model=tiny, data="unused", max_len=32, dropout=0.0)
    torch.manual_seed(0)
    trainee = build_trainee(cfg, {})
    rng = np.random.default_rng(3)
    rows = {c: np.array(_texts(rng, 6), dtype=object) for c in ("anchor", "positive", "negative")}
    method = trainee.method
    with torch.no_grad():
        loss, metrics = method.loss(trainee.encoder, method.collate(rows, trainee.encoder))
        emb = {c: trainee.encoder.encode(list(v)).numpy() for c, v in rows.items()}
    hard = config == "aspectcse"
    want = _numpy_info_nce(emb["anchor"], emb["positive"], emb["negative"] if hard else None, 0.05)
    assert float(loss) == pytest.approx(want, rel=1e-4)
    assert set(metrics) == {"loss_aspectcse" if hard else "loss_mnrl"}
    if not hard:  # sentence-transformers' MNRL form: cross-entropy over scale 20 x cosine, labels = diagonal
        a, p = (torch.nn.functional.normalize(torch.as_tensor(emb[c], dtype=torch.float64), dim=1)
                for c in ("anchor", "positive"))
        mnrl = torch.nn.functional.cross_entropy(20.0 * a @ p.T, torch.arange(len(a)))
        assert float(loss) == pytest.approx(float(mnrl), rel=1e-4)


# ---------------------------------------------------------------- configs


def test_configs_load_and_validate(tmp_path):
    from train.methods import get_method

    full = _cfg("aspectcse", data=tmp_path).validate()
    mnrl = _cfg("aspectcse_mnrl", data=tmp_path).validate()
    assert full.method == mnrl.method == "aspectcse"
    assert (full.pooling, mnrl.pooling) == ("cls", "mean")
    assert full.aspectcse.hard_negatives and not mnrl.aspectcse.hard_negatives
    cls = get_method("aspectcse")
    assert cls.train_set == "aspect_triplets" and cls.sets["aspect_triplets"] == ["anchor", "positive", "negative"]
    assert cls.tokenized_columns(mnrl.options) == ("anchor", "positive")
    for key in ("epochs", "batch_size", "lr", "max_len", "temperature", "model", "mixed_precision", "dev_data"):
        assert getattr(full, key) == getattr(mnrl, key), key
