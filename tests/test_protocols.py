"""The papers' protocols by default: SICK-R is its SemEval-2014 test part (SentEval's 4,927 pairs, not MTEB's
9,927), MRPC is scored with SentEval's own classifier (nn.Linear + Adam, early stopping, L2 by k-fold CV), and
the other protocols stay reachable by an option (``sick_protocol="mteb"``, ``mrpc_classifier="sklearn"``)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tests.conftest import shared_data

SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"


# ---------------------------------------------------------------- MRPC: SentEval's classifier


def _separable(rng, n: int, d: int = 8, noise: float = 1.5):
    w = rng.normal(size=d)
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x, ((x @ w + rng.normal(scale=noise, size=n)) > 0).astype(np.int64)


def test_senteval_classifier_is_sentevals_kfold_and_inner_kfold_classifiers():
    """``eval.senteval_classifier`` against SentEval's KFoldClassifier and InnerKFoldClassifier transcribed in
    tests/mrpc_oracle.py: the same chosen L2 penalty, CV accuracy, test accuracy and F1, fold by fold."""
    from sklearn.metrics import f1_score

    from eval.senteval_classifier import L2_REGS, inner_kfold, kfold_test
    from tests.mrpc_oracle import inner_kfold_classifier, kfold_classifier

    x, y = _separable(np.random.default_rng(7), 120)
    ours = kfold_test(x[:90], y[:90], x[90:], y[90:], kfold=3)
    dev, test, yhat, reg = kfold_classifier({"X": x[:90], "y": y[:90]}, {"X": x[90:], "y": y[90:]}, k=3)
    assert L2_REGS == [1e-5, 1e-4, 1e-3, 1e-2] and ours["l2reg"] == reg
    assert ours["cv_accuracy"] == pytest.approx(dev / 100, abs=1e-12)
    assert ours["accuracy"] == test and ours["f1"] == f1_score(y[90:], yhat.ravel())

    ours = inner_kfold(x[:60], y[:60], kfold=2)
    dev, fold_accuracy, yhats, held, regs = inner_kfold_classifier(x[:60], y[:60], k=2)
    assert ours["fold_l2reg"] == regs and ours["fold_accuracy"] == fold_accuracy
    assert ours["cv_accuracy"] == pytest.approx(dev / 100, abs=1e-12)
    assert ours["f1"] == pytest.approx(np.mean([f1_score(t, p) for t, p in zip(held, yhats)]), abs=1e-12)


def test_the_classifier_leaves_the_callers_random_state_alone():
    import torch

    from eval.senteval_classifier import SentEvalLogReg

    x, y = _separable(np.random.default_rng(3), 40)
    np.random.seed(5)
    torch.manual_seed(5)
    SentEvalLogReg(8, 2, 1e-4).fit(x, y, validation_split=0.25)
    after = (np.random.random(), torch.rand(1).item())
    np.random.seed(5)
    torch.manual_seed(5)
    assert after == (np.random.random(), torch.rand(1).item())


@pytest.fixture(scope="module")
def minilm():
    from eval.models import load_encoder
    from tests.test_eval import minilm_folder

    return load_encoder(minilm_folder(), device="cpu")


def test_mrpc_task_is_sentevals_protocol_and_classifier_by_default(minilm, mrpc_train_test):
    """``python -m eval --task mrpc`` (the task) trains on train and scores test with SentEval's classifier:
    the figures of SentEval's MRPC task run with the same encoder (tests/mrpc_oracle.py); scikit-learn's
    logistic regression is the option ``mrpc_classifier="sklearn"``."""
    from eval.tasks import get_task
    from tests.mrpc_oracle import senteval_mrpc

    encoder = minilm
    result = get_task("mrpc").run(encoder, mrpc_train_test, "test", kfold=3)
    want = senteval_mrpc(encoder, mrpc_train_test, kfold=3)
    assert result["classifier"] == "senteval" and "SentEval's classifier" in result["classifier_name"]
    assert (result["n_train"], result["n_test"], result["l2reg"]) == (60, 40, want["l2reg"])
    assert result["cv_accuracy"] == pytest.approx(want["cv_accuracy"], abs=1e-12)
    assert (result["accuracy"], result["f1"]) == pytest.approx((want["accuracy"], want["f1"]), abs=1e-12)
    sklearn = get_task("mrpc").run(encoder, mrpc_train_test, "test", kfold=3, limit=24, mrpc_classifier="sklearn")
    assert sklearn["classifier"] == "sklearn" and sklearn["C"] in [2.0 ** t for t in range(-1, 6)]
    with pytest.raises(ValueError, match="unknown MRPC classifier"):
        get_task("mrpc").run(encoder, mrpc_train_test, "test", mrpc_classifier="adam")


def test_mrpc_is_train_then_test_by_default(tmp_path, capsys):
    """The CLI's MRPC split is test (train -> test, the papers' protocol); a folder with only the train file is
    one line saying so and naming --split train, before any model loads."""
    from eval.cli import main
    from eval.tasks import get_task

    assert get_task("mrpc").default_split == "test"
    assert main(["--task", "mrpc", "--data", str(shared_data("mrpc")), "--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "msr_paraphrase_test.txt is missing (split test needs it)" in err and "--split train" in err


def test_senteval_order_sorts_as_senteval_and_joins_tokens():
    from eval.mrpc import MrpcPairs, senteval_order

    pairs = MrpcPairs(["a b c", "a  b", "x", "y z"], ["p", "q r", "s t", "u"], [1, 0, 1, 0])
    ordered = senteval_order(pairs)
    # keys (tokens of 1, tokens of 2, label): (3,1,1) (2,2,0) (1,2,1) (2,1,0) -> stable sort
    assert ordered.sentences1 == ["x", "y z", "a b", "a b c"] and ordered.labels == [1, 0, 0, 1]


# ---------------------------------------------------------------- SICK-R: the SemEval test part


def _sick_rows(n: int, start: int = 0) -> str:
    return "".join(f"{start + i}\ta man plays thing {start + i} .\ta person plays item {start + i} ."
                   f"\t{1 + (i * 7 % 40) / 10:.1f}\tNEUTRAL\n" for i in range(n))


@pytest.fixture(scope="module")
def sick_folder(tmp_path_factory):
    """SentEval's SICK folder: the shared SICK_train.txt (4,500 pairs) and SICK_trial.txt (500), and the test
    file: the real SICK_test_annotated.txt (4,927) where the shared data has it, else 30 pairs."""
    senteval = shared_data("sick", "senteval")
    folder = tmp_path_factory.mktemp("SICK")
    for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        if (senteval / name).is_file():
            shutil.copy(senteval / name, folder / name)
    if not (folder / "SICK_test_annotated.txt").is_file():
        (folder / "SICK_test_annotated.txt").write_text(SICK_HEADER + _sick_rows(30), encoding="utf-8")
    return folder


def test_sick_r_is_the_semeval_test_part_by_default_and_all_of_sick_as_an_option(sick_folder):
    from eval.sts_all import read_sts_all

    test_rows = len((sick_folder / "SICK_test_annotated.txt").read_text(encoding="utf-8").splitlines()) - 1
    senteval = read_sts_all(sick_folder, "test")["SICK-R"]
    assert len(senteval) == test_rows and senteval.files == [str(sick_folder / "SICK_test_annotated.txt")]
    if test_rows > 30:  # the real file
        assert len(senteval) == 4927
    mteb = read_sts_all(sick_folder, "test", sick_protocol="mteb")["SICK-R"]
    assert len(mteb) == 4500 + 500 + test_rows and len(mteb.files) == 3
    assert mteb.sentences1[-test_rows:] == senteval.sentences1 and mteb.scores[-test_rows:] == senteval.scores
    assert len(read_sts_all(sick_folder, "dev")["SICK-R"]) == 500  # trial under either protocol
    assert len(read_sts_all(sick_folder, "dev", sick_protocol="mteb")["SICK-R"]) == 500
    with pytest.raises(ValueError, match="unknown SICK-R protocol"):
        read_sts_all(sick_folder, "test", sick_protocol="all")


def test_by_name_sick_r_is_read_at_the_revision_with_semevals_splits(monkeypatch, tmp_path):
    """No --data: MTEB's STS sets by name, SICK-R at mteb/sickr-sts's first revision (SemEval's train,
    validation and test splits); MTEB's pinned revision (all of SICK in its test split) with sick_protocol
    mteb."""
    from eval.sts_all import protocol_sources
    from eval.tasks import DEFAULT_DATA
    from infra.hub_data import MTEB_STS, SICK_R_SEMEVAL
    from score.sts_sets import hub_sets

    monkeypatch.delenv("STRUCTCSE_HUB_COPIES", raising=False)
    sources = hub_sets(DEFAULT_DATA["sts_all"], "test")
    senteval = protocol_sources(sources, "senteval")["SICK-R"]
    assert (senteval.name, senteval.revision) == ("mteb/sickr-sts", SICK_R_SEMEVAL.revision)
    assert SICK_R_SEMEVAL.revision != MTEB_STS["SICK-R"].revision
    assert protocol_sources(sources, "mteb")["SICK-R"].revision == MTEB_STS["SICK-R"].revision
    assert all(protocol_sources(sources, "senteval")[k] == sources[k] for k in sources if k != "SICK-R")
    assert protocol_sources(hub_sets(DEFAULT_DATA["sts_all"], "dev"), "senteval")["SICK-R"].revision == \
        SICK_R_SEMEVAL.revision


def test_a_sick_split_holding_all_of_sick_is_refused_unless_mteb_is_asked_for(minilm, tmp_path):
    """A copy of mteb/sickr-sts as MTEB has it (9,927 pairs in its one test split) is not the papers' SICK-R: an
    error that says so, before any encoding; with sick_protocol="mteb" it is scored."""
    from eval.hub_copies import write_copy
    from eval.sts_all import evaluate_sts_all

    n = 9927
    write_copy(tmp_path, "mteb/sickr-sts", {"test": {
        "sentence1": [f"a man plays thing {i}" for i in range(n)],
        "sentence2": [f"a person plays item {i % 97}" for i in range(n)],
        "score": [1 + (i * 7 % 40) / 10 for i in range(n)]}})
    model = minilm
    with pytest.raises(ValueError, match=r"9,927 pairs.*not SentEval's SemEval-2014 test part \(4,927"):
        evaluate_sts_all(model, tmp_path / "mteb" / "sickr-sts", "test", limit=20)
    result = evaluate_sts_all(model, tmp_path / "mteb" / "sickr-sts", "test", limit=20, sick_protocol="mteb")
    assert result["sets"]["SICK-R"]["n_pairs"] == 20 and result["sick_protocol"] == "mteb"
    assert "all of SICK" in result["sets"]["SICK-R"]["protocol"] and "all of SICK" in result["protocol"]
