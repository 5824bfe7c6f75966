"""train.saved_models.load and the pair evaluations (nli, direction, relational_sts, link_prediction, plots).

Model folders are built directly (a tiny BERT + ``Encoder.save_sentence_transformer``
+ ``Method.save_heads``, no training): the heads are random, so the tests
check the figures against independent computations from the same model, and
use hand-made SentEval folders where the answer is known whatever the weights.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import shared_data

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RELATIONS = ["contradiction", "entailment"]


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from structcse.demo import generate_demo_world

    return generate_demo_world(tmp_path_factory.mktemp("pair_world"), seed=0)


@pytest.fixture(scope="module")
def tiny(world, tmp_path_factory):
    from train.tiny_bert import build_tiny_bert

    texts = []
    for f in sorted(Path(world.nli_dir).glob("s[12].*")):
        texts += f.read_text(encoding="utf-8").splitlines()
    texts += ["a b c d e f g h i j k", "the cat sat on the mat", "a dog runs in the park"]
    return build_tiny_bert(texts, tmp_path_factory.mktemp("tiny"), vocab_size=1500, hidden_size=32,
                           num_layers=1, num_heads=2, intermediate_size=64)


def _method(name: str, **kwargs):
    from train.methods import get_method

    cls = get_method(name)
    data_info = {"relations": RELATIONS} if name == "rse" else None
    return cls(cls.Options(**kwargs), hidden_size=32, temperature=0.05, data_info=data_info).eval()


def build_model(tiny, folder: Path, method: str | None, pooling: str = "cls", seed: int = 0, **options):
    """A structcse model folder: the tiny BERT as a SentenceTransformer (+ the method's random heads)."""
    from train.encoder import Encoder
    from train.saved_models import save_model

    torch.manual_seed(seed)
    enc = Encoder(str(tiny), pooling=pooling, max_len=32).eval()
    enc.save_sentence_transformer(folder)  # before the heads: its Dense module's init draws from the seeded RNG
    if method is None:
        return folder, enc, None
    m = _method(method, **options)
    if method == "rse":
        torch.nn.init.normal_(m.relations.embedding.weight, std=0.5)  # scores that differ per relation
    save_model(enc, m, folder)  # as training saves: the method's embedding modules (GaussCSE's μ) too
    return folder, enc, m


@pytest.fixture(scope="module")
def gauss(tiny, tmp_path_factory):
    return build_model(tiny, tmp_path_factory.mktemp("gauss") / "model", "gausscse", pooling="cls_raw")


@pytest.fixture(scope="module")
def rse(tiny, tmp_path_factory):
    return build_model(tiny, tmp_path_factory.mktemp("rse") / "model", "rse")


@pytest.fixture(scope="module")
def simcse(tiny, tmp_path_factory):
    return build_model(tiny, tmp_path_factory.mktemp("simcse") / "model", "simcse_sup")


def write_senteval(folder: Path, split: str, rows: list[tuple[str, str, str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, col in (("s1", 0), ("s2", 1), ("labels", 2)):
        (folder / f"{name}.{split}").write_text("".join(r[col] + "\n" for r in rows), encoding="utf-8")
    return folder


SENTS = ["the cat sat on the mat", "a dog runs in the park", "a b c d e f g h i j k", "the mat sat on a dog",
         "the park runs a cat", "g h i j k a b", "the cat runs", "a dog sat"]


def identity_nli(folder: Path, split: str) -> Path:
    """Entailment pairs are (s, s); every other pair has two different sentences: any encoder
    scores entailment highest (cosine 1, sim(s‖s) = 1), so accuracy and AUPRC are exactly 1."""
    rows = []
    for i, s in enumerate(SENTS):
        rows.append((s, s, "entailment"))
        rows.append((s, SENTS[(i + 1) % len(SENTS)], "contradiction" if i % 2 else "neutral"))
    return write_senteval(folder, split, rows)


# ---------------------------------------------------------------- load()


def test_load_gausscse_round_trip(gauss):
    import structcse
    from train.methods.pair_losses import symmetric_similarity
    from train.saved_models import load

    folder, enc, method = gauss
    model = load(folder)
    assert model.method_name == "gausscse" and not model.method.training
    a, b = SENTS[:4], SENTS[4:]
    pooled = enc.encode(a)
    assert np.allclose(model.pooled(a), pooled.numpy(), atol=1e-5)
    mu, var = model.gaussian(a)
    g = method.gaussian(pooled)
    assert np.allclose(mu, g.mu.detach().numpy(), atol=1e-5) and np.allclose(var, g.var.detach().numpy(), rtol=1e-4)
    gb = method.gaussian(enc.encode(b))
    with torch.no_grad():
        want = method.asymmetric_similarity(g, gb).numpy()
        want_sym = symmetric_similarity(g, gb, method.options.similarity).numpy()
    assert np.allclose(model.asymmetric_similarity(a, b), want, rtol=1e-4)
    assert np.allclose(model.similarity(a, b), want_sym, rtol=1e-4)  # the natural score: symmetric KL
    # and against the closed form, in float64 numpy from the loaded μ, σ² (GaussCSE Eq. 1-2, diagonal KL)
    assert method.options.similarity == "kl_sum"
    mu_b, var_b = (np.asarray(x, dtype=np.float64) for x in model.gaussian(b))
    mu_a, var_a = np.asarray(mu, dtype=np.float64), np.asarray(var, dtype=np.float64)
    kl_ab = 0.5 * (np.log(var_b) - np.log(var_a) + var_a / var_b + (mu_a - mu_b) ** 2 / var_b - 1).sum(axis=1)
    kl_ba = 0.5 * (np.log(var_a) - np.log(var_b) + var_b / var_a + (mu_b - mu_a) ** 2 / var_a - 1).sum(axis=1)
    assert np.allclose(model.asymmetric_similarity(a, b), 1 / (1 + kl_ab), rtol=1e-3)
    assert np.allclose(model.similarity(a, b), 1 / (1 + (kl_ab + kl_ba) / 2), rtol=1e-3)
    one = model.asymmetric_similarity(a[0], b[0])
    assert isinstance(one, float) and one == pytest.approx(float(want[0]), rel=1e-4)
    assert model.asymmetric_similarity(a[0], a[0]) == pytest.approx(1.0)  # KL(N‖N) = 0
    assert np.allclose(structcse.load(folder).asymmetric_similarity(a, b), want, rtol=1e-4)


def test_gausscse_folder_encodes_mu(gauss):
    """``SentenceTransformer(path).encode`` is GaussCSE's μ (a Dense module after the pooling) and its similarity
    function is cosine; ``structcse.load`` does not apply μ twice, and its ``cosine`` is the cosine of μ."""
    from sentence_transformers import SentenceTransformer

    import structcse

    folder, enc, method = gauss
    a, b = SENTS[:4], SENTS[4:]
    plain = SentenceTransformer(str(folder), device="cpu")
    assert type(plain[len(plain) - 1]).__name__ == "Dense" and plain.similarity_fn_name == "cosine"
    mu_a = method.gaussian(enc.encode(a)).mu.detach().numpy()
    assert np.abs(plain.encode(a) - mu_a).max() < 1e-5
    model = structcse.load(folder)
    assert len(model.encoder) == len(plain) - 1  # the pooled vector, which the heads take
    assert np.abs(model.gaussian(a)[0] - mu_a).max() < 1e-5 and np.abs(model.encode(a) - mu_a).max() < 1e-5
    st_cos = plain.similarity(plain.encode(a), plain.encode(b)).diagonal().numpy()
    assert np.abs(model.cosine(a, b) - st_cos).max() < 1e-5


def test_load_rse_round_trip(rse):
    from train.saved_models import load

    folder, enc, method = rse
    model = load(folder)
    assert model.method_name == "rse" and model.relation_names == RELATIONS
    a, b = SENTS[:3], SENTS[3:6]
    ha, hb = enc.encode(a), enc.encode(b)
    scores = model.relation_scores(a, b)
    want = method.relation_scores(ha, hb).detach().numpy()
    assert [sorted(s) for s in scores] == [sorted(RELATIONS)] * 3
    assert np.allclose([[s[r] for r in RELATIONS] for s in scores], want, atol=1e-5)
    single = model.relation_scores(a[0], b[0])
    assert isinstance(single, dict) and single["entailment"] == pytest.approx(float(want[0, 1]), abs=1e-5)
    with torch.no_grad():
        want_rel = method.similarity(ha, hb).numpy()  # trained sts_weights: entailment 1.0 (no duplicate_question)
        want_w = method.similarity(ha, hb, {"contradiction": 1.0}).numpy()
    assert np.allclose(model.relational_similarity(a, b), want_rel, atol=1e-5)
    assert np.allclose(model.similarity(a, b), want_rel, atol=1e-5)
    assert np.allclose(model.relational_similarity(a, b, {"contradiction": 1.0}), want_w, atol=1e-5)
    assert np.allclose(model.relation_table(), method.relations.table.detach().numpy())


def test_load_plain_and_headless_models_use_cosine(simcse, tiny, tmp_path):
    from score.model import MethodMismatchError
    from train.saved_models import load

    folder, enc, _ = simcse
    model = load(folder)
    assert model.method_name == "simcse_sup"
    h = enc.encode(SENTS[:2]).numpy()
    cos = float(h[0] @ h[1] / np.linalg.norm(h[0]) / np.linalg.norm(h[1]))
    assert model.similarity(SENTS[0], SENTS[1]) == pytest.approx(cos, abs=1e-5)
    with pytest.raises(MethodMismatchError, match=r"needs a model whose method has asymmetric_similarity.*a simcse_sup model"):
        model.asymmetric_similarity(SENTS[:1], SENTS[1:2])
    plain, _, _ = build_model(tiny, tmp_path / "plain", None)
    bare = load(plain)
    assert bare.method_name is None and bare.similarity(SENTS[0], SENTS[0]) == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(MethodMismatchError, match=r"relation_scores\(\) needs a model whose method has relation_scores.*plain encoder"):
        bare.relation_scores(SENTS[0], SENTS[1])
    with pytest.raises(ValueError, match="same length"):
        bare.similarity(SENTS[:2], SENTS[:3])


def test_load_errors_name_the_folder_and_file(gauss, tmp_path):
    import shutil

    from score.model import ModelLoadError
    from train.saved_models import load

    with pytest.raises(ModelLoadError, match="does not exist"):
        load(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match=r"empty.*modules\.json is missing"):
        load(tmp_path / "empty")
    broken = tmp_path / "broken"
    shutil.copytree(gauss[0], broken)
    (broken / "structcse_heads.pt").unlink()
    with pytest.raises(ModelLoadError, match=r"broken: structcse_heads\.pt is missing.*gausscse"):
        load(broken)
    (broken / "structcse_method.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match=r"structcse_method\.json: not valid JSON"):
        load(broken)
    orphan = tmp_path / "orphan"
    shutil.copytree(gauss[0], orphan)
    (orphan / "structcse_method.json").unlink()
    with pytest.raises(ModelLoadError, match=r"structcse_heads\.pt is there but structcse_method\.json is missing"):
        load(orphan)
    unknown = tmp_path / "unknown"
    shutil.copytree(gauss[0], unknown)
    info = json.loads((unknown / "structcse_method.json").read_text())
    (unknown / "structcse_method.json").write_text(json.dumps({**info, "method": "nope"}))
    with pytest.raises(ModelLoadError, match="unknown method 'nope'"):
        load(unknown)


# ---------------------------------------------------------------- nli


def test_nli_known_answer_for_gausscse_and_cosine(gauss, simcse, tmp_path):
    from eval.nli import evaluate_nli
    from train.saved_models import load

    data = identity_nli(tmp_path / "nli", "test")
    identity_nli(data, "dev")
    for folder, score in ((gauss[0], "sim(hyp||prem)"), (simcse[0], "cosine")):
        r = evaluate_nli(load(folder), data, "test")
        assert r["score"] == score
        assert r["accuracy"] == 1.0 and r["tune_accuracy"] == 1.0
        assert r["auprc"] == pytest.approx(1.0) and r["auprc_trapezoid"] == pytest.approx(1.0)
        assert r["n_pairs"] == 16 and r["n_entailment"] == 8 and r["tuned_on_evaluated_split"] is False


def test_nli_on_demo_world_matches_independent_computations(gauss, world):
    """evaluate_nli against figures computed here without score.metrics: sklearn's
    average precision, and a brute-force threshold search over every dev score."""
    from sklearn.metrics import average_precision_score

    from eval.nli import evaluate_nli
    from score.nli_data import read_nli
    from train.saved_models import load

    model = load(gauss[0])
    r = evaluate_nli(model, world.nli_dir, "test")
    test, dev = read_nli(world.nli_dir, "test"), read_nli(world.nli_dir, "dev")
    s_test = np.asarray(model.asymmetric_similarity(test.hypotheses, test.premises), dtype=np.float64)
    s_dev = np.asarray(model.asymmetric_similarity(dev.hypotheses, dev.premises), dtype=np.float64)
    y_test = np.array([label == "entailment" for label in test.labels])
    y_dev = np.array([label == "entailment" for label in dev.labels])
    # predicting "entailment" iff score >= t: every distinct dev score, and above all of them
    candidates = np.append(np.unique(s_dev), np.inf)
    best_dev = max(np.mean((s_dev >= t) == y_dev) for t in candidates)
    assert r["tune_accuracy"] == pytest.approx(best_dev)
    assert np.mean((s_dev >= r["threshold"]) == y_dev) == pytest.approx(best_dev)  # the threshold it chose is a best one
    assert r["accuracy"] == pytest.approx(np.mean((s_test >= r["threshold"]) == y_test))
    assert r["auprc"] == pytest.approx(average_precision_score(y_test, s_test))
    assert r["n_pairs"] == len(test) and r["n_entailment"] == int(y_test.sum()) == len(test) // 3


def test_sick_reader_and_tuning_on_another_folder(simcse, world):
    from eval.nli import evaluate_nli
    from score.nli_data import read_nli
    from train.saved_models import load

    sick = shared_data("sick")
    pairs = read_nli(sick, "trial")
    assert len(pairs) == 500 and pairs.labels.count("entailment") == 144
    assert pairs.premises[0].startswith("The young boys are playing outdoors")
    assert sum(1 for b in pairs.bilateral if b) == 84  # B_entails_A in the original SICK rows
    r = evaluate_nli(load(simcse[0]), sick, "trial", tune_data=world.nli_dir, limit=60)
    assert r["n_pairs"] == 60 and r["tune_data"] == str(world.nli_dir) and 0 <= r["accuracy"] <= 1


# ---------------------------------------------------------------- direction + plots


def test_direction_length_baseline_and_gausscse_figures(gauss, tmp_path):
    from eval.direction import evaluate_direction
    from train.saved_models import load

    rows = [("the cat sat on the mat", "the cat sat", "entailment"),  # premise longer
            ("a dog runs in the park", "a dog runs", "entailment"),  # longer
            ("a dog", "a dog sat on the mat", "entailment"),  # shorter
            ("the cat runs", "a dog sat", "entailment"),  # tie: ½
            ("a b c d e f g h i j k", "a", "neutral")]  # not entailment: not used
    data = write_senteval(tmp_path / "dir", "test", rows)
    model = load(gauss[0])
    r = evaluate_direction(model, data, "test", plots=tmp_path / "plots")
    assert r["n_pairs"] == 4 and r["length_baseline_acc"] == pytest.approx(2.5 / 4)
    prem, hyp = [x[0] for x in rows[:4]], [x[1] for x in rows[:4]]
    fwd, bwd = model.asymmetric_similarity(hyp, prem), model.asymmetric_similarity(prem, hyp)
    assert r["sim_acc"] == pytest.approx(np.mean(fwd > bwd) + 0.5 * np.mean(fwd == bwd))
    ld_p, ld_h = model.log_det(prem), model.log_det(hyp)
    assert r["det_acc"] == pytest.approx(np.mean(ld_p > ld_h) + 0.5 * np.mean(ld_p == ld_h))
    png = Path(r["plots"][0])
    assert png.name == "gausscse_variance_test.png" and png.read_bytes()[:8] == PNG_MAGIC


def test_direction_constant_variance_is_a_coin_flip(tiny, world, tmp_path):
    """Equal σ² for every sentence: KL(a‖b) = KL(b‖a) and equal log-dets, so every pair is a tie (½)."""
    from eval.direction import evaluate_direction
    from train.saved_models import load

    folder, _, method = build_model(tiny, tmp_path / "flat", "gausscse", pooling="cls_raw")
    with torch.no_grad():
        method.head.logvar.weight.zero_()
        method.head.logvar.bias.fill_(0.3)
    method.save_heads(folder)
    r = evaluate_direction(load(folder), world.nli_dir, "test")
    assert r["sim_acc"] == 0.5 and r["det_acc"] == 0.5
    assert r["n_pairs"] == Path(world.nli_dir, "labels.test").read_text().split().count("entailment")


def test_direction_for_a_cosine_model_reports_the_baseline_only(simcse, world):
    from eval.direction import evaluate_direction
    from train.saved_models import load

    r = evaluate_direction(load(simcse[0]), world.nli_dir, "dev")
    assert r["sim_acc"] is None and r["det_acc"] is None and 0 <= r["length_baseline_acc"] <= 1


def test_relation_heatmap_png(rse, tmp_path):
    from PIL import Image

    from eval.plots import relation_cosines, relation_heatmap

    table = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    assert np.allclose(relation_cosines(table), [[1, 0, 2**-0.5], [0, 1, 2**-0.5], [2**-0.5, 2**-0.5, 1]])
    path = relation_heatmap(["a", "b", "c"], table, tmp_path / "h.png")
    assert path.read_bytes()[:8] == PNG_MAGIC
    with Image.open(path) as image:
        image.verify()
    with pytest.raises(ValueError, match="2 relation names for 3"):
        relation_heatmap(["a", "b"], table, tmp_path / "x.png")


# ---------------------------------------------------------------- RSE tasks


def _cos(x, y) -> float:
    return float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))


def brute_force_ranks(model, pairs) -> list[int]:
    """Oracle: rank of the true tail among the split's unique sentences except the head, ties against."""
    names, table = model.relation_names, model.relation_table().astype(np.float64)
    sentences = list(dict.fromkeys(pairs.premises + pairs.hypotheses))
    h = {s: v.astype(np.float64) for s, v in zip(sentences, model.encode(sentences))}
    ranks = []
    for p, hyp, label in zip(pairs.premises, pairs.hypotheses, pairs.labels):
        if label not in names:
            continue
        q = h[p] + table[names.index(label)]
        true = _cos(q, h[hyp])
        others = [_cos(q, h[s]) for s in sentences if s not in (p, hyp)]
        ranks.append(1 + sum(o >= true for o in others))
    return ranks


def test_link_prediction_matches_brute_force(rse, world, tmp_path):
    from eval.link_prediction import evaluate_link_prediction
    from score.nli_data import read_nli
    from train.saved_models import load

    model = load(rse[0])
    r = evaluate_link_prediction(model, world.nli_dir, "test", plots=tmp_path / "plots")
    pairs = read_nli(world.nli_dir, "test")
    ranks = np.array(brute_force_ranks(model, pairs), dtype=float)
    assert r["n_pairs"] == len(ranks) == 2 * len(pairs) // 3
    assert r["skipped_labels"] == {"neutral": len(pairs) // 3}  # the model knows contradiction + entailment only
    assert r["MR"] == pytest.approx(ranks.mean()) and r["MRR"] == pytest.approx((1 / ranks).mean())
    assert r["Hits@10"] == pytest.approx((ranks <= 10).mean())
    assert set(r["per_relation"]) == set(RELATIONS)
    assert sum(v["n_pairs"] for v in r["per_relation"].values()) == r["n_pairs"]
    assert r["n_candidates"] == len(set(pairs.premises + pairs.hypotheses))
    assert Path(r["plots"][0]).read_bytes()[:8] == PNG_MAGIC


def test_link_prediction_known_answer_with_zero_relations(tiny, tmp_path):
    """r = 0 and sentence2 == sentence1: the tail is the head itself (kept), cos 1, rank 1 for every pair."""
    from eval.link_prediction import evaluate_link_prediction
    from train.saved_models import load

    folder, _, method = build_model(tiny, tmp_path / "zero", "rse")
    with torch.no_grad():
        method.relations.embedding.weight.zero_()
    method.save_heads(folder)
    data = write_senteval(tmp_path / "lp", "test", [(s, s, "entailment") for s in SENTS[:5]])
    r = evaluate_link_prediction(load(folder), data, "test")
    assert r["MR"] == 1.0 and r["MRR"] == 1.0 and r["Hits@1"] == 1.0 and r["n_candidates"] == 5


def test_relational_sts_against_the_formula_in_numpy(rse, world):
    """RSE §3.3/§4.1 written out here: the dev file read with csv, sentence-transformers' embeddings, the
    relation table from the saved heads; s(a, b) = max over both directions of Σ_k w̃_k cos(h_a + r_k, h_b),
    w̃ = w / Σw; Spearman by scipy."""
    import csv

    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer

    from eval.relational_sts import evaluate_relational_sts
    from train.saved_models import load

    folder = rse[0]
    r = evaluate_relational_sts(load(folder), world.sts_dir, "dev", weights="entailment=1,contradiction=0.5")
    with (Path(world.sts_dir) / "sts-dev.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    gold = np.array([float(row[4]) for row in rows])
    sentences = list(dict.fromkeys(row[col] for row in rows for col in (5, 6)))  # each encoded once: a repeated
    h = dict(zip(sentences, SentenceTransformer(str(folder), device="cpu").encode(sentences).astype(np.float64)))
    h1, h2 = (np.array([h[row[col]] for row in rows]) for col in (5, 6))  # pair's scores tie, as they must
    table = torch.load(folder / "structcse_heads.pt")["relations.embedding.weight"].double().numpy()
    weights = np.array([0.5, 1.0]) / 1.5  # RELATIONS order: contradiction, entailment

    def cos(x, y):
        return (x * y).sum(-1) / np.linalg.norm(x, axis=-1) / np.linalg.norm(y, axis=-1)

    def directed(a, b):  # Σ_k w̃_k cos(h_a + r_k, h_b), per pair
        return sum(w * cos(a + table[k], b) for k, w in enumerate(weights))

    want = spearmanr(np.maximum(directed(h1, h2), directed(h2, h1)), gold).statistic
    assert r["n_pairs"] == len(rows) and r["skipped_rows"] == 0
    assert r["spearman"] == pytest.approx(want, abs=1e-6)
    # (not cosine_spearman: this random tiny encoder's cosines all lie within 1e-6 of 1, below float32's
    # resolution, so their ranks are ties of rounding; the cosine Spearman's oracle is in tests/test_eval.py)
    assert r["weights"] == {"entailment": 1.0, "contradiction": 0.5}


# ---------------------------------------------------------------- CLI and bad input


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    from eval.cli import main

    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_runs_the_pair_tasks(gauss, rse, world, tmp_path, capsys):
    code, out, _ = run_cli(["--task", "nli", "--data", str(world.nli_dir), "--split", "test",
                            "--model", str(gauss[0])], capsys)
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and result["task"] == "nli" and result["score"] == "sim(hyp||prem)"
    code, out, _ = run_cli(["--task", "link_prediction", "--data", str(world.nli_dir), "--split", "test",
                            "--model", str(rse[0]), "--plots", str(tmp_path / "p")], capsys)
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and "MRR" in result and (tmp_path / "p" / "rse_relations.png").is_file()


@pytest.mark.parametrize("args, message", [
    (["--task", "nli", "--split", "trial", "--data", "SICK"], "pass --tune-data"),
    (["--task", "nli", "--split", "test", "--data", "NLI", "--plots", "x"], "--plots does not apply to task nli"),
    (["--task", "link_prediction", "--split", "test", "--data", "NLI"], "needs a model whose method has relation_scores; .* is a gausscse model"),
    (["--task", "direction", "--split", "dev", "--data", "NOWHERE"], "NLI data folder does not exist"),
])
def test_cli_errors_are_one_message(gauss, world, args, message, capsys):
    sick = str(shared_data("sick"))
    args = [{"SICK": sick, "NLI": str(world.nli_dir), "NOWHERE": "/nonexistent/nli"}.get(a, a) for a in args]
    code, out, err = run_cli([*args, "--model", str(gauss[0])], capsys)
    assert code == 2 and out == ""
    last = err.strip().splitlines()[-1]  # (model loading may draw a progress bar above it)
    assert last.startswith("python -m eval: error: ") and re.search(message, last), err


def test_bad_nli_files_give_clear_errors(tmp_path):
    from score.nli_data import read_nli

    data = write_senteval(tmp_path / "bad", "test", [("a b", "a", "entailment"), ("c d", "c", "maybe")])
    with pytest.raises(ValueError, match=r"labels\.test line 2: unknown NLI label 'maybe'"):
        read_nli(data, "test")
    (data / "s2.test").unlink()
    with pytest.raises(FileNotFoundError, match=r"no test split in .*bad: s2\.test missing"):
        read_nli(data, "test")
    write_senteval(tmp_path / "uneven", "dev", [("a", "b", "entailment")])
    (tmp_path / "uneven" / "s1.dev").write_text("a\nb\n")
    with pytest.raises(ValueError, match="different line counts"):
        read_nli(tmp_path / "uneven", "dev")
    dash = write_senteval(tmp_path / "dash", "dev", [("a", "b", "entailment"), ("c", "d", "-")])
    assert read_nli(dash, "dev").skipped_rows == 1
