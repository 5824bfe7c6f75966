"""MRPC oracles for ``eval.mrpc``, written without eval/ or score/.

* ``nested_cv``: SentEval's train-only protocol with scikit-learn's own model selection (the ``sklearn``
  classifier). The file is read with ``csv`` (header, then ``Quality  #1 ID  #2 ID  #1 String  #2 String``);
  each distinct sentence is encoded once by ``encoder`` (a SentenceTransformer); features [|u − v|, u ∗ v];
  k outer stratified shuffled folds, in each a ``GridSearchCV`` over C ∈ {2⁻² … 2³} with the same k-fold split
  of the outer training part, refit there (SentEval's InnerKFoldClassifier); accuracy and F1 per outer fold.
* ``SentEvalMLP``, ``kfold_classifier``, ``inner_kfold_classifier``, ``senteval_mrpc``: SentEval's pytorch
  classifier and MRPC task (``senteval/tools/classifier.py``, ``senteval/tools/validation.py``,
  ``senteval/mrpc.py``) transcribed statement by statement, on the CPU instead of CUDA, with SimCSE's full-mode
  classifier config, on one CPU thread. Like SentEval it seeds numpy's and torch's global generators; the
  callers' states are put back afterwards (``_own_rngs``). ``eval.senteval_classifier`` was also checked against SentEval's own
  code (facebookresearch/SentEval at 5d6dc11, ``.cuda()`` mapped to the CPU): the same dev and test accuracies
  and F1 on random fixtures, for ``KFoldClassifier`` and ``InnerKFoldClassifier``.
"""

from __future__ import annotations

import contextlib
import copy
import csv
from pathlib import Path

import numpy as np

INNER_CS = [2.0 ** t for t in range(-2, 4)]
SIMCSE_CLASSIFIER = {"nhid": 0, "optim": "adam", "batch_size": 64, "tenacity": 5, "epoch_size": 4}


def read_pairs(path: Path, limit: int | None = None) -> tuple[list[str], list[str], np.ndarray]:
    with path.open(encoding="utf-8-sig", newline="") as f:
        rows = [row for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if row][1:]
    rows = rows[:limit]
    assert all(len(row) == 5 and row[0] in ("0", "1") for row in rows), "the oracle reads well-formed files only"
    return [r[3].strip() for r in rows], [r[4].strip() for r in rows], np.array([int(r[0]) for r in rows])


def features(encoder, first: list[str], second: list[str]) -> np.ndarray:
    sentences = list(dict.fromkeys(first + second))
    e = dict(zip(sentences, np.asarray(encoder.encode(sentences), dtype=np.float64)))
    u, v = np.array([e[s] for s in first]), np.array([e[s] for s in second])
    return np.c_[np.abs(u - v), u * v]


def nested_cv(encoder, path: Path, *, limit: int | None, kfold: int, seed: int = 1111) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_validate

    first, second, y = read_pairs(path, limit)
    x = features(encoder, first, second)
    inner = GridSearchCV(LogisticRegression(random_state=seed, max_iter=1000), {"C": INNER_CS},
                         cv=StratifiedKFold(kfold, shuffle=True, random_state=seed), scoring="accuracy")
    outer = cross_validate(inner, x, y, cv=StratifiedKFold(kfold, shuffle=True, random_state=seed),
                           scoring=("accuracy", "f1"), return_estimator=True)
    return {"n_pairs": len(y), "fold_accuracy": list(outer["test_accuracy"]), "fold_f1": list(outer["test_f1"]),
            "fold_C": [est.best_params_["C"] for est in outer["estimator"]],
            "accuracy": float(np.mean(outer["test_accuracy"])), "f1": float(np.mean(outer["test_f1"]))}


# ---------------------------------------------------------------- SentEval's pytorch classifier, transcribed


@contextlib.contextmanager
def _own_rngs():
    """SentEval reseeds numpy's and torch's global generators; the caller's states come back afterwards. Torch
    runs on one thread inside, as ``eval.senteval_classifier`` does."""
    import torch

    state, threads = np.random.get_state(), torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        np.random.set_state(state)
        torch.set_num_threads(threads)


class SentEvalMLP:
    """``PyTorchClassifier`` + ``MLP`` with ``nhid=0`` (SentEval), ``.cuda()`` left out."""

    def __init__(self, params, inputdim, nclasses, l2reg=0., batch_size=64, seed=1111):
        import torch
        from torch import nn

        np.random.seed(seed)
        torch.manual_seed(seed)
        self.inputdim, self.nclasses, self.l2reg, self.batch_size = inputdim, nclasses, l2reg, batch_size
        self.tenacity = params.get("tenacity", 5)
        self.epoch_size = params.get("epoch_size", 4)
        self.max_epoch = params.get("max_epoch", 200)
        self.batch_size = params.get("batch_size", 64)
        self.model = nn.Sequential(nn.Linear(self.inputdim, self.nclasses))
        self.loss_fn = nn.CrossEntropyLoss()
        self.loss_fn.size_average = False  # as SentEval; PyTorch >= 1.0 ignores it (the loss stays the mean)
        self.optimizer = torch.optim.Adam(self.model.parameters())
        self.optimizer.param_groups[0]["weight_decay"] = self.l2reg

    def prepare_split(self, X, y, validation_data=None, validation_split=None):
        import torch

        if validation_data is not None:
            trainX, trainy = X, y
            devX, devy = validation_data
        else:
            permutation = np.random.permutation(len(X))
            trainidx = permutation[int(validation_split * len(X)):]
            devidx = permutation[0:int(validation_split * len(X))]
            trainX, trainy = X[trainidx], y[trainidx]
            devX, devy = X[devidx], y[devidx]
        return (torch.from_numpy(trainX).to(dtype=torch.float32), torch.from_numpy(trainy).to(dtype=torch.int64),
                torch.from_numpy(devX).to(dtype=torch.float32), torch.from_numpy(devy).to(dtype=torch.int64))

    def fit(self, X, y, validation_data=None, validation_split=None, early_stop=True):
        self.nepoch = 0
        bestaccuracy = -1
        stop_train = False
        early_stop_count = 0
        trainX, trainy, devX, devy = self.prepare_split(X, y, validation_data, validation_split)
        while not stop_train and self.nepoch <= self.max_epoch:
            self.trainepoch(trainX, trainy, epoch_size=self.epoch_size)
            accuracy = self.score(devX, devy)
            if accuracy > bestaccuracy:
                bestaccuracy = accuracy
                bestmodel = copy.deepcopy(self.model)
            elif early_stop:
                if early_stop_count >= self.tenacity:
                    stop_train = True
                early_stop_count += 1
        self.model = bestmodel
        return bestaccuracy

    def trainepoch(self, X, y, epoch_size=1):
        import torch

        self.model.train()
        for _ in range(self.nepoch, self.nepoch + epoch_size):
            permutation = np.random.permutation(len(X))
            for i in range(0, len(X), self.batch_size):
                idx = torch.from_numpy(permutation[i:i + self.batch_size]).long()
                Xbatch, ybatch = X[idx], y[idx]
                output = self.model(Xbatch)
                loss = self.loss_fn(output, ybatch)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        self.nepoch += epoch_size

    def score(self, devX, devy):
        import torch

        self.model.eval()
        correct = 0
        if not isinstance(devX, torch.Tensor):
            devX, devy = torch.FloatTensor(devX), torch.LongTensor(devy)
        with torch.no_grad():
            for i in range(0, len(devX), self.batch_size):
                output = self.model(devX[i:i + self.batch_size])
                pred = output.data.max(1)[1]
                correct += pred.long().eq(devy[i:i + self.batch_size].data.long()).sum().item()
        return 1.0 * correct / len(devX)

    def predict(self, devX):
        import torch

        self.model.eval()
        devX = torch.FloatTensor(devX)
        yhat = np.array([])
        with torch.no_grad():
            for i in range(0, len(devX), self.batch_size):
                yhat = np.append(yhat, self.model(devX[i:i + self.batch_size]).data.max(1)[1].numpy())
        return np.vstack(yhat)


def kfold_classifier(train, test, k=10, seed=1111, nclasses=2):
    """``KFoldClassifier.run`` (usepytorch): (devaccuracy %, testaccuracy %, yhat, optreg)."""
    from sklearn.model_selection import StratifiedKFold

    with _own_rngs():
        regs = [10**t for t in range(-5, -1)]
        skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        scores = []
        for reg in regs:
            scanscores = []
            for train_idx, test_idx in skf.split(train["X"], train["y"]):
                X_train, y_train = train["X"][train_idx], train["y"][train_idx]
                X_test, y_test = train["X"][test_idx], train["y"][test_idx]
                clf = SentEvalMLP(SIMCSE_CLASSIFIER, inputdim=train["X"].shape[1], nclasses=nclasses, l2reg=reg,
                                  seed=seed)
                clf.fit(X_train, y_train, validation_data=(X_test, y_test))
                scanscores.append(clf.score(X_test, y_test))
            scores.append(round(100 * np.mean(scanscores), 2))
        optreg = regs[np.argmax(scores)]
        devaccuracy = np.max(scores)
        clf = SentEvalMLP(SIMCSE_CLASSIFIER, inputdim=train["X"].shape[1], nclasses=nclasses, l2reg=optreg, seed=seed)
        clf.fit(train["X"], train["y"], validation_split=0.05)
        yhat = clf.predict(test["X"])
        testaccuracy = clf.score(test["X"], test["y"])
    return devaccuracy, testaccuracy, yhat, optreg


def inner_kfold_classifier(X, y, k=10, seed=1111, nclasses=2):
    """``InnerKFoldClassifier.run`` (usepytorch), unrounded per fold: (dev %, [fold test accuracies],
    [fold yhat], [fold held-out y], [fold optreg])."""
    from sklearn.model_selection import StratifiedKFold

    with _own_rngs():
        regs = [10**t for t in range(-5, -1)]
        skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=1111)
        innerskf = StratifiedKFold(n_splits=k, shuffle=True, random_state=1111)
        devresults, testresults, yhats, held, optregs = [], [], [], [], []
        for train_idx, test_idx in skf.split(X, y):
            X_train, X_test = X[train_idx], X[test_idx]
            y_train, y_test = y[train_idx], y[test_idx]
            scores = []
            for reg in regs:
                regscores = []
                for inner_train_idx, inner_test_idx in innerskf.split(X_train, y_train):
                    X_in_train, X_in_test = X_train[inner_train_idx], X_train[inner_test_idx]
                    y_in_train, y_in_test = y_train[inner_train_idx], y_train[inner_test_idx]
                    clf = SentEvalMLP(SIMCSE_CLASSIFIER, inputdim=X.shape[1], nclasses=nclasses, l2reg=reg, seed=seed)
                    clf.fit(X_in_train, y_in_train, validation_data=(X_in_test, y_in_test))
                    regscores.append(clf.score(X_in_test, y_in_test))
                scores.append(round(100 * np.mean(regscores), 2))
            optreg = regs[np.argmax(scores)]
            devresults.append(np.max(scores))
            clf = SentEvalMLP(SIMCSE_CLASSIFIER, inputdim=X.shape[1], nclasses=nclasses, l2reg=optreg, seed=seed)
            clf.fit(X_train, y_train, validation_split=0.05)
            testresults.append(clf.score(X_test, y_test))
            yhats.append(clf.predict(X_test).ravel())
            held.append(y_test)
            optregs.append(optreg)
    return float(np.mean(devresults)), testresults, yhats, held, optregs


def _load_senteval_file(fpath: Path, limit: int | None):
    """``MRPCEval.loadFile`` (a BOM on the header is harmless: the header is dropped), then the first ``limit``."""
    data = {"X_A": [], "X_B": [], "y": []}
    with open(fpath, encoding="utf-8") as f:
        for line in f:
            text = line.strip().split("\t")
            data["X_A"].append(text[3].split())
            data["X_B"].append(text[4].split())
            data["y"].append(text[0])
    return {"X_A": data["X_A"][1:][:limit], "X_B": data["X_B"][1:][:limit],
            "y": [int(s) for s in data["y"][1:]][:limit]}


def senteval_mrpc(encoder, folder: Path, *, limit: int | None = None, kfold: int = 10, seed: int = 1111) -> dict:
    """``MRPCEval.run`` with SimCSE's batcher (tokens joined by a space): train -> test when the folder has
    ``msr_paraphrase_test.txt``, else SentEval's ``InnerKFoldClassifier`` on train. Every distinct sentence is
    encoded once (all files together), not in SentEval's batches of sorted sentences."""
    from sklearn.metrics import f1_score

    names = ["train"] + (["test"] if (folder / "msr_paraphrase_test.txt").is_file() else [])
    data = {n: _load_senteval_file(folder / f"msr_paraphrase_{n}.txt", limit) for n in names}
    for key in data:
        sorted_corpus = sorted(zip(data[key]["X_A"], data[key]["X_B"], data[key]["y"]),
                               key=lambda z: (len(z[0]), len(z[1]), z[2]))
        data[key] = {"A": [" ".join(x) for (x, y, z) in sorted_corpus],
                     "B": [" ".join(y) for (x, y, z) in sorted_corpus], "y": np.array([z for (x, y, z) in sorted_corpus])}
    sentences = list(dict.fromkeys(s for n in names for s in data[n]["A"] + data[n]["B"]))
    vectors = dict(zip(sentences, np.asarray(encoder.encode(sentences), dtype=np.float32)))
    feats = {}
    for n in names:
        a = np.array([vectors[s] for s in data[n]["A"]])
        b = np.array([vectors[s] for s in data[n]["B"]])
        feats[n] = np.c_[np.abs(a - b), a * b]
    if "test" in names:
        dev, test, yhat, reg = kfold_classifier({"X": feats["train"], "y": data["train"]["y"]},
                                                {"X": feats["test"], "y": data["test"]["y"]}, kfold, seed)
        return {"cv_accuracy": dev / 100, "accuracy": test, "f1": f1_score(data["test"]["y"], yhat.ravel()),
                "l2reg": reg}
    dev, fold_accuracy, yhats, held, regs = inner_kfold_classifier(feats["train"], data["train"]["y"], kfold, seed)
    return {"cv_accuracy": dev / 100, "fold_accuracy": fold_accuracy, "accuracy": float(np.mean(fold_accuracy)),
            "f1": float(np.mean([f1_score(t, p) for t, p in zip(held, yhats)])), "fold_l2reg": regs}
