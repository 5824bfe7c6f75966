"""SentEval's classifier for its transfer tasks, as SimCSE and the papers after it ran it (``usepytorch=True``).

Written from SentEval's ``senteval/tools/classifier.py`` (``PyTorchClassifier``, ``MLP`` with ``nhid=0``) and
``senteval/tools/validation.py`` (``KFoldClassifier``, ``InnerKFoldClassifier``), with SimCSE's full-mode
classifier config (``evaluation.py``: ``{'nhid': 0, 'optim': 'adam', 'batch_size': 64, 'tenacity': 5,
'epoch_size': 4}``, ``kfold`` 10, seed 1111):

* the model is ``nn.Linear(features, n_classes)`` (a softmax logistic regression, 2 outputs for MRPC), its
  weights drawn after ``torch.manual_seed(seed)``; loss: cross-entropy; optimiser: ``torch.optim.Adam``
  with its defaults (lr 1e-3) and ``weight_decay`` = the L2 penalty being tried;
* ``fit``: an "epoch" is ``epoch_size`` (4) passes over the training rows, each in a fresh
  ``np.random.permutation`` (after ``np.random.seed(seed)``), in batches of 64; after each epoch the
  accuracy on the validation rows is measured, the best model so far is kept, and training stops when
  the accuracy has failed to improve ``tenacity`` + 1 times in all (SentEval's counter is never reset),
  or after ``max_epoch`` (200) epochs; the best model is the fitted one;
* validation rows: the held-out fold itself during the L2 search (``validation_data``), and a random 5%
  of the training rows for the final fit (``validation_split=0.05``: the first ``int(0.05 n)`` of a
  permutation drawn from the same seeded generator);
* the L2 penalty: ``[10**t for t in range(-5, -1)]`` = 1e-5, 1e-4, 1e-3, 1e-2 (SentEval's code; its
  docs say up to 1e-1), chosen by the mean k-fold accuracy rounded to 2 decimals in percent (the first
  wins a tie, ``np.argmax``), folds ``StratifiedKFold(k, shuffle=True, random_state=seed)``.

``kfold_test`` is ``KFoldClassifier`` (train -> test: MRPC's protocol); ``inner_kfold`` is
``InnerKFoldClassifier`` (train only: k outer folds, the L2 search by an inner k-fold CV on each outer
training part, both with ``random_state=1111`` as SentEval hard-codes).

Departures, all numerical: SentEval ran on CUDA (``.cuda()`` throughout); this runs on ``device`` (CPU by
default), on one thread (``torch.set_num_threads(1)`` while it runs, then put back: the figures do not depend on
the machine's cores, and tiny matrix products are not slowed down by threads waiting on each other on a busy
machine), so float rounding can move a prediction near the boundary. SentEval's ``loss_fn.size_average =
False`` set after construction has no effect on PyTorch ≥ 1.0 (the loss is the batch mean), the PyTorch
SimCSE used (1.7.1) included; the mean is used here. Nothing else is left out: same seeds, same order of
random draws, same early stopping.
"""

from __future__ import annotations

import contextlib
import copy

import numpy as np

SEED = 1111
L2_REGS = [10.0 ** t for t in range(-5, -1)]  # senteval/tools/validation.py (usepytorch=True)
CONFIG = {"batch_size": 64, "tenacity": 5, "epoch_size": 4, "max_epoch": 200}  # SimCSE's full mode
VALIDATION_SPLIT = 0.05  # the final fit's early-stopping rows


@contextlib.contextmanager
def one_thread():
    """torch on one CPU thread inside, the caller's thread count put back after."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class SentEvalLogReg:
    """SentEval's ``MLP(nhid=0)``: ``nn.Linear`` trained with Adam, early stopping on validation accuracy."""

    def __init__(self, inputdim: int, nclasses: int, l2reg: float, seed: int = SEED, device: str = "cpu",
                 batch_size: int = 64, tenacity: int = 5, epoch_size: int = 4, max_epoch: int = 200):
        import torch

        self.rng = np.random.RandomState(seed)  # np.random.seed(seed): the same stream as SentEval's
        self.device, self.batch_size = torch.device(device), batch_size
        self.tenacity, self.epoch_size, self.max_epoch = tenacity, epoch_size, max_epoch
        with torch.random.fork_rng(devices=[]):  # torch.manual_seed(seed) for the init, the caller's RNG kept
            torch.manual_seed(seed)
            self.model = torch.nn.Sequential(torch.nn.Linear(inputdim, nclasses)).to(self.device)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.optimizer = torch.optim.Adam(self.model.parameters(), weight_decay=l2reg)
        self.nepoch = 0

    def _tensors(self, x, y=None):
        import torch

        x = torch.as_tensor(np.asarray(x, dtype=np.float32), device=self.device)
        return x if y is None else (x, torch.as_tensor(np.asarray(y, dtype=np.int64), device=self.device))

    def fit(self, x, y, validation_data=None, validation_split: float | None = None) -> float:
        """Train with early stopping on the validation rows; the best validation accuracy."""
        with one_thread():
            return self._fit(x, y, validation_data, validation_split)

    def _fit(self, x, y, validation_data, validation_split) -> float:
        if validation_data is not None:
            train_x, train_y = self._tensors(x, y)
            dev_x, dev_y = self._tensors(*validation_data)
        else:
            permutation = self.rng.permutation(len(x))
            cut = int(validation_split * len(x))
            train_x, train_y = self._tensors(np.asarray(x)[permutation[cut:]], np.asarray(y)[permutation[cut:]])
            dev_x, dev_y = self._tensors(np.asarray(x)[permutation[:cut]], np.asarray(y)[permutation[:cut]])
        self.nepoch, best, best_model, stop, misses = 0, -1.0, None, False, 0
        while not stop and self.nepoch <= self.max_epoch:
            self._train_epoch(train_x, train_y)
            accuracy = self._accuracy(dev_x, dev_y)
            if accuracy > best:
                best, best_model = accuracy, copy.deepcopy(self.model)
            else:
                if misses >= self.tenacity:
                    stop = True
                misses += 1
        self.model = best_model
        return best

    def _train_epoch(self, x, y) -> None:
        import torch

        self.model.train()
        for _ in range(self.epoch_size):
            permutation = self.rng.permutation(len(x))
            for start in range(0, len(x), self.batch_size):
                index = torch.as_tensor(permutation[start:start + self.batch_size], device=self.device)
                loss = self.loss_fn(self.model(x.index_select(0, index)), y.index_select(0, index))
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        self.nepoch += self.epoch_size

    def _predict(self, x):
        import torch

        self.model.eval()
        with torch.no_grad():
            return torch.cat([self.model(x[i:i + self.batch_size]).max(1)[1]
                              for i in range(0, len(x), self.batch_size)])

    def _accuracy(self, x, y) -> float:
        return int((self._predict(x) == y).sum().item()) / len(x)

    def predict(self, x) -> np.ndarray:
        with one_thread():
            return self._predict(self._tensors(x)).cpu().numpy()

    def score(self, x, y) -> float:
        with one_thread():
            return self._accuracy(*self._tensors(x, y))


def _classifier(x, nclasses: int, l2reg: float, seed: int, device: str) -> SentEvalLogReg:
    return SentEvalLogReg(x.shape[1], nclasses, l2reg, seed, device, **CONFIG)


def choose_l2(x, y, folds, seed: int, device: str, nclasses: int = 2) -> tuple[float, float, list[float]]:
    """(the L2 penalty with the best mean fold accuracy in percent rounded to 2 decimals, that percentage / 100,
    every penalty's percentage / 100), each fold's classifier stopped early on its own held-out fold."""
    scores = []
    for reg in L2_REGS:
        fold_scores = []
        for train, held_out in folds:
            clf = _classifier(x, nclasses, reg, seed, device)
            clf.fit(x[train], y[train], validation_data=(x[held_out], y[held_out]))
            fold_scores.append(clf.score(x[held_out], y[held_out]))
        scores.append(round(100 * float(np.mean(fold_scores)), 2))
    best = int(np.argmax(scores))
    return L2_REGS[best], scores[best] / 100, [s / 100 for s in scores]


def _folds(x, y, kfold: int, seed: int) -> list:
    from sklearn.model_selection import StratifiedKFold

    return list(StratifiedKFold(n_splits=kfold, shuffle=True, random_state=seed).split(x, y))


def kfold_test(train_x, train_y, test_x, test_y, kfold: int = 10, seed: int = SEED, device: str = "cpu",
               nclasses: int = 2) -> dict:
    """SentEval's ``KFoldClassifier``: L2 by k-fold CV on train, refit on train (5% held out for early stopping),
    accuracy and F1 (class 1) on test."""
    from sklearn.metrics import f1_score

    train_x, test_x = np.asarray(train_x, dtype=np.float32), np.asarray(test_x, dtype=np.float32)
    train_y, test_y = np.asarray(train_y, dtype=np.int64), np.asarray(test_y, dtype=np.int64)
    reg, cv_accuracy, by_reg = choose_l2(train_x, train_y, _folds(train_x, train_y, kfold, seed), seed, device,
                                         nclasses)
    clf = _classifier(train_x, nclasses, reg, seed, device)
    clf.fit(train_x, train_y, validation_split=VALIDATION_SPLIT)
    predicted = clf.predict(test_x)
    return {"accuracy": float(np.mean(predicted == test_y)), "f1": float(f1_score(test_y, predicted)),
            "cv_accuracy": cv_accuracy, "l2reg": reg, "cv_accuracy_by_l2reg": dict(zip(map(str, L2_REGS), by_reg))}


def outer_folds(x, y, folds, fit) -> tuple[dict, list]:
    """The outer loop of SentEval's ``InnerKFoldClassifier``, whatever the classifier: for each ``(train, held_out)``
    of ``folds``, ``fit(train) -> (predict, penalty, inner CV accuracy)``, its predictions scored on ``held_out``.
    (means over the folds and each fold's accuracy, each fold's penalty)."""
    from sklearn.metrics import f1_score

    accuracy, f1, penalties, inner = [], [], [], []
    for train, held_out in folds:
        predict, penalty, inner_accuracy = fit(train)
        predicted = predict(x[held_out])
        accuracy.append(float(np.mean(predicted == y[held_out])))
        f1.append(float(f1_score(y[held_out], predicted)))
        penalties.append(penalty)
        inner.append(inner_accuracy)
    return ({"accuracy": float(np.mean(accuracy)), "f1": float(np.mean(f1)), "cv_accuracy": float(np.mean(inner)),
             "fold_accuracy": accuracy}, penalties)


def inner_kfold(x, y, kfold: int = 10, seed: int = SEED, device: str = "cpu", nclasses: int = 2) -> dict:
    """SentEval's ``InnerKFoldClassifier`` (train only): k outer folds, the L2 penalty by an inner k-fold CV on
    each outer training part, refit there (5% held out), scored on the outer fold; means over the outer folds.
    SentEval fixes both fold splitters' ``random_state`` at 1111; ``seed`` seeds the classifiers."""
    x, y = np.asarray(x, dtype=np.float32), np.asarray(y, dtype=np.int64)

    def fit(train):
        reg, inner_accuracy, _ = choose_l2(x[train], y[train], _folds(x[train], y[train], kfold, SEED), seed, device,
                                           nclasses)
        clf = _classifier(x, nclasses, reg, seed, device)
        clf.fit(x[train], y[train], validation_split=VALIDATION_SPLIT)
        return clf.predict, reg, inner_accuracy

    scores, regs = outer_folds(x, y, _folds(x, y, kfold, SEED), fit)
    return {**scores, "fold_l2reg": regs}
