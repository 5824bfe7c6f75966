"""DSBATS (train/methods/dsbats.py, configs/dsbats.yaml) and its evaluation tasks srsd and mrpc.

* the slides' loss against numbers worked out by hand; other rows' positives are not in the
  denominator; the offset representation makes the reversed pair exactly −r(p);
* the method's loss from a tiny BERT equals the formula computed here in numpy; concat_mlp heads
  are saved and rebuilt (``load_method_heads``); a short ``train.run.run`` with GradCache and a
  checkpoint saves a model that ``train.saved_models.load`` reloads with its head;
  (cross-worker equivalence and GradCache: ``tests/test_train_scale.py``, METHODS);
* SRSD on a hand-written srsd set whose answers are known for any encoder (the answer pair is the
  query itself; a tie is wrong; one item's answer is the reversed query), both representations;
* MRPC on the shared sample against scikit-learn's own nested CV (``tests/mrpc_oracle.py``; skipped when
  absent) and on a file with malformed rows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

from tests.conftest import shared_data
from train.config import load_config

REPO = Path(__file__).resolve().parents[1]
WORDS = ("dog bark cat meow duck quack bee buzz king queen man woman beach sand ocean water "
         "sound animal female male small stones salt liquid").split()
COLUMNS = ("anchor_first", "anchor_second", "positive_first", "positive_second")


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 10)))) for _ in range(n)]


# ---------------------------------------------------------------- the loss, by hand


def _unit(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


def test_loss_hand_worked():
    """2-d pair vectors, τ = 0.5. Row 0: p 0°, p⁺ 60°; row 1: p 90°, p⁺ 90°; p⁻ = −p (offset): 180°, 270°.

    loss_0 = −cos60/τ + log(e^{cos180/τ} + e^{cos270/τ}) = −1 + log(e^{−2} + 1)
    loss_1 = −cos0/τ  + log(e^{cos270/τ} + e^{cos180/τ}) = −2 + log(1 + e^{−2})
    With the positive in the denominator (InfoNCE reading): log(e^{2cos60} + e^{−2} + 1) − 1, etc.
    """
    from train.methods.dsbats import dsbats_loss

    tau = 0.5
    anchor = torch.tensor([_unit(0), _unit(90)], dtype=torch.float64)
    positive = torch.tensor([_unit(60), _unit(90)], dtype=torch.float64) * torch.tensor([[3.0], [0.5]])  # norms ignored
    negatives = -anchor
    want = ((-1 + math.log(math.exp(-2) + 1)) + (-2 + math.log(1 + math.exp(-2)))) / 2
    assert float(dsbats_loss(anchor, positive, negatives, tau)) == pytest.approx(want, abs=1e-12)
    want_nce = ((math.log(math.exp(1) + math.exp(-2) + 1) - 1) + (math.log(math.exp(2) + 1 + math.exp(-2)) - 2)) / 2
    assert float(dsbats_loss(anchor, positive, negatives, tau, positive_in_denominator=True)) == pytest.approx(
        want_nce, abs=1e-12)
    assert want < 0  # literally the slides' formula: not a cross-entropy, it can be negative (>= log S − 2/τ)
    assert want >= math.log(2) - 2 / tau


def test_other_rows_positives_are_not_in_the_denominator():
    from train.methods.dsbats import dsbats_loss

    torch.manual_seed(0)
    a, p = torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64)
    negatives = torch.randn(5, 8, dtype=torch.float64)

    def per_row(p_):
        return torch.stack([dsbats_loss(a[i:i + 1], p_[i:i + 1], negatives, 0.05) for i in range(5)])

    changed = p.clone()
    changed[1:] = torch.randn(4, 8, dtype=torch.float64)  # every positive but row 0's
    assert float(per_row(changed)[0]) == pytest.approx(float(per_row(p)[0]), abs=1e-12)
    assert not torch.allclose(per_row(changed)[1:], per_row(p)[1:])  # those rows' own losses do move
    # the negatives are: changing p_j⁻ (j != 0) changes loss_0
    moved = negatives.clone()
    moved[3] = -moved[3]
    assert float(dsbats_loss(a[:1], p[:1], moved, 0.05)) != pytest.approx(float(dsbats_loss(a[:1], p[:1], negatives, 0.05)))


def test_other_clusters_positives_join_the_denominator_own_cluster_masked():
    """negatives: reversed+other_clusters, τ = 0.5, the hand test's rows plus their clusters.
    Rows 0 and 1 in clusters A and B: row 0's denominator gains e^{cos(0°, 90°)/τ} = 1 (row 1's p⁺),
    row 1's gains e^{cos(90°, 60°)/τ} = e^{2 cos 30°} (row 0's p⁺); a row's own p⁺ is its own cluster: masked.
    Same clusters: nothing joins (the slides' loss)."""
    from train.methods.dsbats import dsbats_loss

    tau = 0.5
    anchor = torch.tensor([_unit(0), _unit(90)], dtype=torch.float64)
    positive = torch.tensor([_unit(60), _unit(90)], dtype=torch.float64)
    clusters = torch.tensor([7, 9])
    want = ((-1 + math.log(math.exp(-2) + 1 + 1)) + (-2 + math.log(1 + math.exp(-2) + math.exp(2 * math.cos(math.radians(30)))))) / 2
    got = dsbats_loss(anchor, positive, -anchor, tau, other_negatives=positive, anchor_clusters=clusters,
                      other_clusters=clusters)
    assert float(got) == pytest.approx(want, abs=1e-12)
    same = torch.tensor([3, 3])
    assert float(dsbats_loss(anchor, positive, -anchor, tau, other_negatives=positive, anchor_clusters=same,
                             other_clusters=same)) == \
        pytest.approx(float(dsbats_loss(anchor, positive, -anchor, tau)), abs=1e-12)


def test_offset_reversal_identity_and_pair_vectors():
    from score.model import TrainedModel
    from train.methods.dsbats import DSBATS

    method = DSBATS(DSBATS.Options(), hidden_size=4, temperature=0.05)
    e1, e2 = torch.randn(3, 4), torch.randn(3, 4)
    assert torch.equal(method.pair(e1, e2), e2 - e1)
    assert torch.equal(method.pair(e2, e1), -method.pair(e1, e2))
    assert not list(method.parameters())  # offset: no heads
    plain = TrainedModel(encoder=None)  # a model without heads: the offset, computed by hand
    assert torch.equal(plain.pair_vectors(e1.numpy(), e2.numpy()), e2 - e1)
    with pytest.raises(ValueError, match="concat_mlp needs a model trained with it"):
        TrainedModel(None, method).pair_vectors(e1, e2, "concat_mlp")
    mlp = DSBATS(DSBATS.Options(pair_representation="concat_mlp"), hidden_size=4, temperature=0.05)
    assert not torch.allclose(mlp.pair(e2, e1), -mlp.pair(e1, e2))
    with_head = TrainedModel(None, mlp)
    first = torch.cat([e1, e2], -1)
    by_hand = mlp.pair_head.mlp[2](torch.tanh(mlp.pair_head.mlp[0](first)))  # Linear -> tanh -> Linear
    assert torch.allclose(with_head.pair_vectors(e1, e2), by_hand.detach())
    assert not torch.allclose(with_head.pair_vectors(e2, e1), by_hand.detach())
    assert torch.equal(with_head.pair_vectors(e1, e2, "offset"), e2 - e1)


# ---------------------------------------------------------------- the method on a tiny BERT


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from train.tiny_bert import build_tiny_bert

    return build_tiny_bert(_texts(np.random.default_rng(0), 200), tmp_path_factory.mktemp("dsbats_bert"),
                           vocab_size=200, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)


def _cfg(**kw):
    return load_config(REPO / "configs" / "dsbats.yaml", [f"{k}={v}" for k, v in kw.items()])


@pytest.mark.parametrize("representation,negatives,reversed_pair", [
    ("offset", "reversed", "positive"), ("concat_mlp", "reversed", "positive"),
    ("offset", "reversed+other_clusters", "positive"), ("offset", "reversed", "anchor"),
    ("concat_mlp", "reversed", "anchor")])
def test_method_loss_equals_the_formula_in_numpy(tiny, representation, negatives, reversed_pair):
    from train.loop import build_trainee

    cfg = _cfg(model=tiny, data="unused", max_len=32, dropout=0.0,
               **{"dsbats.pair_representation": representation, "dsbats.negatives": negatives,
                  "dsbats.reversed_pair": reversed_pair})
    torch.manual_seed(0)
    trainee = build_trainee(cfg, {}).double()
    rng = np.random.default_rng(3)
    rows = {c: np.array(_texts(rng, 6), dtype=object) for c in COLUMNS}
    clusters = ["E01", "E01", "L02", "E01", "L02", "L07"]
    rows["cluster"] = np.array(clusters, dtype=object)
    method = trainee.method
    with torch.no_grad():
        batch = method.collate(rows, trainee.encoder)
        loss, metrics = method.loss(trainee.encoder, batch)
        e = method.embed(trainee.encoder, batch)  # float64, the embeddings the loss took
        assert set(e) == set(COLUMNS) and all(v.shape == (6, 32) for v in e.values())
        r = (lambda a, b: (b - a).numpy()) if representation == "offset" else (lambda a, b: method.pair(a, b).numpy())
        side = "positive" if reversed_pair == "positive" else "anchor"
        p, pos, neg = r(e["anchor_first"], e["anchor_second"]), r(e["positive_first"], e["positive_second"]), \
            r(e[f"{side}_second"], e[f"{side}_first"])
    p, pos, neg = (x / np.linalg.norm(x, axis=1, keepdims=True) for x in (p, pos, neg))
    others = [[j for j in range(6) if clusters[j] != clusters[i]] if negatives != "reversed" else [] for i in range(6)]
    want = np.mean([-(p[i] @ pos[i]) / 0.05 + math.log(np.exp(neg @ p[i] / 0.05).sum()
                                                         + np.exp(pos[others[i]] @ p[i] / 0.05).sum())
                    for i in range(6)])
    assert float(loss) == pytest.approx(want, rel=1e-9)
    assert set(metrics) == {"loss_dsbats"}


@pytest.fixture(scope="module")
def dsbats4cl(tmp_path_factory):
    from setformat.schemas import DSBATS4CL
    from setformat.io import write_table

    rng = np.random.default_rng(4)
    texts = {c: _texts(rng, 16) for c in COLUMNS}
    rows = [{**{c: texts[c][i] for c in COLUMNS}, "cluster": f"E0{i % 3}", "anchor_id": f"a{i}",
             "positive_id": f"p{i}"} for i in range(16)]
    out = tmp_path_factory.mktemp("dsbats_sets")
    write_table(pa.Table.from_pylist(rows, schema=DSBATS4CL), str(out / "dsbats4cl" / "part-00000.parquet"))
    return out


def test_train_a_few_steps_with_grad_cache_and_heads(ray_session, dsbats4cl, tiny, tmp_path):
    """concat_mlp through ``train.run.run`` (GradCache chunks, a checkpoint): the head is saved and reloads."""
    from train.saved_models import load
    from train.run import run

    cfg = _cfg(model=tiny, data=dsbats4cl, batch_size=8, max_len=32, max_steps=2, num_workers=0, chunk_size=4,
               checkpoint_every_steps=1, log_every_steps=0, storage_path=tmp_path / "runs",
               **{"dsbats.pair_representation": "concat_mlp", "dsbats.negatives": "reversed+other_clusters"})
    out = run(cfg)
    assert out.metrics["step"] == 2 and math.isfinite(out.metrics["loss_dsbats"])
    model = load(out.model_path)
    assert model.method_name == "dsbats" and model.method.options.pair_representation == "concat_mlp"
    assert model.encode(["dog animal", "sound of a dog"]).shape == (2, 32)


def test_concat_mlp_heads_saved_and_reloaded(tmp_path):
    from train.methods import load_method_heads
    from train.methods.dsbats import DSBATS

    torch.manual_seed(1)
    method = DSBATS(DSBATS.Options(pair_representation="concat_mlp"), hidden_size=8, temperature=0.05)
    method.save_heads(tmp_path)
    info = json.loads((tmp_path / "structcse_method.json").read_text())
    assert info["method"] == "dsbats" and info["options"]["pair_representation"] == "concat_mlp"
    assert info["heads_file"] == "structcse_heads.pt"
    again = load_method_heads(tmp_path)
    e1, e2 = torch.randn(4, 8), torch.randn(4, 8)
    assert isinstance(again, DSBATS) and torch.equal(again.pair(e1, e2), method.pair(e1, e2))
    offset = DSBATS(DSBATS.Options(), hidden_size=8, temperature=0.05)
    offset.save_heads(tmp_path / "offset")
    assert not (tmp_path / "offset" / "structcse_heads.pt").exists()
    assert load_method_heads(tmp_path / "offset").pair_head is None


def test_config_loads_validates_and_names_bad_values(tmp_path):
    from train.config import ConfigError
    from train.methods import get_method

    cfg = _cfg(data=tmp_path).validate()
    assert (cfg.method, cfg.pooling, cfg.max_len, cfg.temperature, cfg.dev_data) == ("dsbats", "mean", 64, 0.05, None)
    cls = get_method("dsbats")
    assert cls.train_set == "dsbats4cl" and cls.sets["dsbats4cl"] == [*COLUMNS, "cluster"]
    with pytest.raises(ConfigError, match="dsbats.pair_representation"):
        _cfg(data=tmp_path, **{"dsbats.pair_representation": "concat"}).validate()
    with pytest.raises(ConfigError, match="dsbats.negatives 'in_batch' is not one of"):
        _cfg(data=tmp_path, **{"dsbats.negatives": "in_batch"}).validate()
    other = load_config(REPO / "configs" / "dsbats_other_clusters.yaml", [f"data={tmp_path}"]).validate()
    assert other.method == "dsbats" and other.options.negatives == "reversed+other_clusters"


# ---------------------------------------------------------------- SRSD


def write_srsd(folder: Path, items: list[dict]) -> Path:
    from setformat.schemas import SRSD
    from setformat.io import write_table

    write_table(pa.Table.from_pylist(items, schema=SRSD), str(folder / "part-00000.parquet"))
    return folder


@pytest.fixture(scope="module")
def srsd_set(tmp_path_factory):
    """Known for any encoder whose distinct sentences embed differently: the answer pair is the query
    itself (cosine 1) -> correct, unless a distractor is the same pair (a tie -> wrong) or the answer is
    the reversed query and the query itself a distractor (-> wrong)."""
    s = [" ".join(t) for t in (("dog", "animal"), ("sound", "of", "a", "dog"), ("cat", "animal"), ("cat", "sound"),
                               ("queen", "female"), ("king", "male"), ("ocean", "salt", "water"), ("beach", "sand"))]

    def item(i, cluster, kind, query, candidates, answer):
        return {"item_id": f"i{i}", "cluster": cluster, "kind": kind, "query_first": query[0],
                "query_second": query[1], "candidates_first": [c[0] for c in candidates],
                "candidates_second": [c[1] for c in candidates], "answer": answer}

    q0, q1, q2 = (s[0], s[1]), (s[2], s[3]), (s[4], s[5])
    items = [
        item(0, "E07", "other_cluster", q0, [(s[6], s[7]), q0, (s[4], s[5])], 1),  # correct
        item(1, "E07", "other_cluster", q1, [q1, (s[6], s[7])], 0),  # correct
        item(2, "E10", "other_cluster", q2, [q2, (s[0], s[3]), q2], 0),  # tie with candidate 2 -> wrong
        item(3, "E10", "other_cluster", q2, [(s[5], s[4]), q2], 0),  # answer = the reversed query -> wrong
        item(4, "E07", "reversed", q0, [(s[1], s[0]), q0], 1),  # correct
        item(5, "E10", "reversed", q2, [q2, (s[5], s[4])], 0),  # correct
    ]
    return write_srsd(tmp_path_factory.mktemp("srsd"), items)


@pytest.fixture(scope="module")
def st_model(tiny, tmp_path_factory):
    from train.encoder import Encoder

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("dsbats_model") / "model"
    Encoder(str(tiny), pooling="mean", max_len=32).eval().save_sentence_transformer(folder)
    return folder


def test_srsd_accuracy_known_answers(st_model, srsd_set, tmp_path):
    import shutil

    from eval.models import load_trained
    from eval.srsd import evaluate_srsd
    from train.methods.dsbats import DSBATS

    plain = evaluate_srsd(load_trained(str(st_model)), srsd_set)
    assert plain["representation"] == "offset" and plain["method"] is None and plain["n_items"] == 6
    assert plain["accuracy"] == pytest.approx(0.5) and plain["accuracy_reversed"] == pytest.approx(1.0)
    per = plain["per_kind"]["other_cluster"]["per_cluster"]
    assert per == {"E07": {"accuracy": 1.0, "n_items": 2}, "E10": {"accuracy": 0.0, "n_items": 2}}
    assert plain["per_kind"]["reversed"]["n_items"] == 2
    limited = evaluate_srsd(load_trained(str(st_model)), srsd_set, limit=1)
    assert limited["n_items"] == 2 and limited["accuracy"] == 1.0  # the first item of each kind

    heads = tmp_path / "mlp_model"  # the same encoder with a (random) concat_mlp head beside it
    shutil.copytree(st_model, heads)
    torch.manual_seed(2)
    DSBATS(DSBATS.Options(pair_representation="concat_mlp"), hidden_size=32, temperature=0.05).save_heads(heads)
    model = load_trained(str(heads))
    mlp = evaluate_srsd(model, srsd_set)
    assert (mlp["representation"], mlp["method"], mlp["accuracy"], mlp["accuracy_reversed"]) == (
        "concat_mlp", "dsbats", 0.5, 1.0)
    assert evaluate_srsd(model, srsd_set, representation="offset")["representation"] == "offset"
    with pytest.raises(ValueError, match="concat_mlp needs a model trained with it"):
        evaluate_srsd(load_trained(str(st_model)), srsd_set, representation="concat_mlp")


def test_srsd_cli_and_bad_folders(st_model, srsd_set, tmp_path, capsys):
    from eval.cli import main
    from eval.srsd import check_srsd_data
    from setformat.io import write_table

    assert main(["--task", "srsd", "--data", str(srsd_set), "--model", str(st_model)]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["task"] == "srsd" and result["split"] == "test" and result["accuracy"] == pytest.approx(0.5)
    with pytest.raises(FileNotFoundError, match="srsd set folder does not exist"):
        check_srsd_data(tmp_path / "nowhere")
    write_table(pa.table({"item_id": ["a"], "cluster": ["E07"]}), str(tmp_path / "bad" / "part-00000.parquet"))
    with pytest.raises(ValueError, match="missing column 'kind'"):
        check_srsd_data(tmp_path / "bad")
    with pytest.raises(ValueError, match="split 'dev'"):
        check_srsd_data(srsd_set, "dev")


# ---------------------------------------------------------------- MRPC


def test_mrpc_cross_validated_on_the_shared_sample(st_model):
    """The first 80 pairs, 3 outer folds: every fold's chosen C, accuracy and F1 are those of scikit-learn's
    GridSearchCV inside cross_validate on features computed here (tests/mrpc_oracle.py)."""
    from sentence_transformers import SentenceTransformer

    from eval.models import load_encoder
    from eval.mrpc import evaluate_mrpc, read_mrpc
    from tests.mrpc_oracle import nested_cv

    folder = shared_data("mrpc")
    full = read_mrpc(folder / "msr_paraphrase_train.txt")
    assert len(full) + full.skipped_rows == 4076 and full.skipped_rows == 0
    result = evaluate_mrpc(load_encoder(str(st_model)), folder, "train", limit=80, kfold=3, classifier="sklearn")
    want = nested_cv(SentenceTransformer(str(st_model), device="cpu"), folder / "msr_paraphrase_train.txt",
                     limit=80, kfold=3)
    assert (result["n_train"], result["n_test"], result["skipped_rows"], result["skipped_lines"]) == (80, 0, 0, {})
    assert result["fold_C"] == want["fold_C"]
    assert result["fold_accuracy"] == pytest.approx(want["fold_accuracy"], abs=1e-12)
    assert result["accuracy"] == pytest.approx(want["accuracy"], abs=1e-12)
    assert result["f1"] == pytest.approx(want["f1"], abs=1e-12)
    with pytest.raises(FileNotFoundError, match="msr_paraphrase_test.txt is missing"):
        evaluate_mrpc(load_encoder(str(st_model)), folder, "test")


def test_mrpc_malformed_rows_are_counted_and_test_protocol(st_model, tmp_path):
    from eval.models import load_encoder
    from eval.mrpc import evaluate_mrpc, read_mrpc

    rng = np.random.default_rng(5)
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    good = [f"{i % 2}\t{i}\t{1000 + i}\t{a}\t{b}\n" for i, (a, b) in enumerate(zip(_texts(rng, 30), _texts(rng, 30)))]
    bad = ["2\t1\t2\tlabel two\tnot a label\n", "1\t1\t2\tonly four fields\n", "0\t1\t2\t\tempty first\n"]
    lines = good[:10] + [bad[0]] + good[10:20] + ["\n", bad[1]] + good[20:] + [bad[2]]
    (tmp_path / "msr_paraphrase_train.txt").write_text(header + "".join(lines), encoding="utf-8")
    (tmp_path / "msr_paraphrase_test.txt").write_text(header + "".join(good[:12]), encoding="utf-8")
    pairs = read_mrpc(tmp_path / "msr_paraphrase_train.txt")
    assert len(pairs) == 30 and pairs.skipped_rows == 3 and pairs.skipped_lines == [12, 24, 35]
    result = evaluate_mrpc(load_encoder(str(st_model)), tmp_path, "test", kfold=3, classifier="sklearn")
    assert (result["n_train"], result["n_test"], result["skipped_rows"]) == (30, 12, 3)
    assert result["skipped_lines"] == {"msr_paraphrase_train.txt": [12, 24, 35]}
    assert result["C"] in [2.0 ** t for t in range(-1, 6)] and 0 <= result["accuracy"] <= 1
    with pytest.raises(ValueError, match="needs at least"):
        evaluate_mrpc(load_encoder(str(st_model)), tmp_path, "train", limit=8, kfold=10)
