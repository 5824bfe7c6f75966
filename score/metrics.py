"""Every metric of the evaluations and dev metrics, once: correlation, thresholded accuracy, PR curves,
entailment direction, ranking.

* STS: :func:`spearman` (the one rule for constant predictions: 0.0), :func:`pearson`.
* NLI as binary entailment-vs-rest (GaussCSE §3.1): score = sim(hyp ‖ prem);
  :func:`tune_threshold` on a dev set, :func:`accuracy_at` on test sets,
  :func:`average_precision` (AUPRC, sklearn's ``average_precision_score``) and
  :func:`auprc_trapezoid` (the reference code's ``auc(recall, precision)``,
  sklearn's curve: GaussCSE's dev metric).
* Entailment direction (GaussCSE §3.2): :func:`direction_accuracy`,
  :func:`length_baseline_direction`.
* Relation prediction / link prediction (RSE App. B): :func:`rank_of_true`,
  :func:`ranking_metrics` (MR, MRR, Hits@1/3/10).

Scores are "higher = more likely positive" throughout. Labels are 0/1 (or bool).
"""

from __future__ import annotations

import numpy as np


def _scores_labels(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(labels).ravel().astype(bool)
    if s.shape != y.shape:
        raise ValueError(f"scores ({s.size}) and labels ({y.size}) differ in length")
    if s.size == 0:
        raise ValueError("no scores")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN")
    return s, y


# ---------------------------------------------------------------- correlation


def spearman(predicted, gold) -> float:
    """Spearman's rho of a model's pair scores against gold scores (a fraction, not ×100).

    The one rule for a model that gives every pair the same score (a collapsed encoder, e.g. a
    diverged trial): 0.0 — no ranking information, and a figure a scheduler can compare (NaN is
    never below an ASHA rung's cutoff, so the trial would be kept) and a report can print.
    """
    from scipy.stats import spearmanr

    x = np.asarray(predicted, dtype=np.float64).ravel()
    g = np.asarray(gold, dtype=np.float64).ravel()
    if x.shape != g.shape:
        raise ValueError(f"predicted ({x.size}) and gold ({g.size}) scores differ in length")
    if x.size < 2:
        raise ValueError(f"need at least 2 scored pairs, got {x.size}")
    if np.ptp(x) == 0:
        return 0.0
    return float(spearmanr(x, g).statistic)


def pearson(predicted, gold) -> float:
    """Pearson's r, under :func:`spearman`'s rule (0.0 for constant predictions)."""
    from scipy.stats import pearsonr

    x = np.asarray(predicted, dtype=np.float64).ravel()
    if x.size < 2 or np.ptp(x) == 0:
        return 0.0
    return float(pearsonr(x, np.asarray(gold, dtype=np.float64).ravel()).statistic)


# ---------------------------------------------------------------- thresholded accuracy


def accuracy_at(scores, labels, threshold: float) -> float:
    """Accuracy of predicting positive iff score >= threshold (the reference code's ``>=``)."""
    s, y = _scores_labels(scores, labels)
    return float(np.mean((s >= threshold) == y))


def tune_threshold(scores, labels, grid=None) -> tuple[float, float]:
    """(threshold, accuracy): the threshold of best accuracy on a dev set (prediction: score >= threshold).

    Default: an exact search over every cut between consecutive distinct
    scores (plus "all positive" and "all negative"); the returned threshold is
    the midpoint of the chosen gap (the lowest score for "all positive", just
    above the highest for "all negative"), so it transfers to a test set
    without favouring either side. Ties in accuracy go to the lowest threshold.
    ``grid``: only these candidate thresholds (GaussCSE's reference code uses
    thresholds i/1000, i = 0..1000, for similarities in (0, 1]: pass
    ``np.arange(1001) / 1000``, not ``np.arange(0, 1.001, 0.001)`` whose
    accumulated rounding moves grid points off the scores); first best wins.
    """
    s, y = _scores_labels(scores, labels)
    if grid is not None:
        grid = np.asarray(grid, dtype=np.float64).ravel()
        accs = np.array([np.mean((s >= t) == y) for t in grid])
        k = int(np.argmax(accs))
        return float(grid[k]), float(accs[k])
    order = np.argsort(s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    uniq = np.unique(s_sorted)
    first = np.searchsorted(s_sorted, uniq, side="left")  # predicted positive: sorted[first_k:]
    cut = np.append(first, s.size)  # the last cut = all negative
    neg_below = np.concatenate([[0], np.cumsum(~y_sorted)])[cut]
    pos_above = y.sum() - np.concatenate([[0], np.cumsum(y_sorted)])[cut]
    correct = neg_below + pos_above
    k = int(np.argmax(correct))
    if k == 0:
        threshold = uniq[0]
    elif k == uniq.size:
        threshold = np.nextafter(uniq[-1], np.inf)
    else:
        threshold = (uniq[k - 1] + uniq[k]) / 2
        if not uniq[k - 1] < threshold <= uniq[k]:  # adjacent floats: the midpoint rounds down
            threshold = uniq[k]
    return float(threshold), float(correct[k] / s.size)


# ---------------------------------------------------------------- precision-recall


def average_precision(scores, labels) -> float:
    """AUPRC as step-wise average precision, sklearn's ``average_precision_score``:
    AP = Σ_k (R_k - R_{k-1}) · P_k (R_0 = 0), one (P_k, R_k) point per distinct score (tied scores
    enter together). NaN when there is no positive.
    Example: scores [.9, .8, .7, .6], labels [1, 0, 1, 0] -> ½·1 + ½·⅔ = 5/6.
    """
    from sklearn.metrics import average_precision_score

    s, y = _scores_labels(scores, labels)
    if not y.any():
        return float("nan")
    return float(average_precision_score(y, s))


def auprc_trapezoid(scores, labels) -> float:
    """AUPRC by the trapezoidal rule over sklearn's PR curve (which ends at R=0, P=1).

    The GaussCSE reference code's ``auc(recall, precision)`` on sklearn's
    ``precision_recall_curve`` (methods.md §4e): GaussCSE's dev metric, and for
    comparing with numbers produced that way; it is optimistic against
    :func:`average_precision`. NaN when there is no positive.
    """
    from sklearn.metrics import auc, precision_recall_curve

    s, y = _scores_labels(scores, labels)
    if not y.any():
        return float("nan")
    precision, recall, _ = precision_recall_curve(y.astype(int), s)
    return float(auc(recall, precision))


# ---------------------------------------------------------------- entailment direction


def direction_accuracy(score_forward, score_backward, ties: str = "half") -> float:
    """Fraction of pairs whose TRUE direction scores higher: mean(forward > backward).

    GaussCSE §3.2: forward = sim(hyp ‖ prem), backward = sim(prem ‖ hyp) of
    entailment pairs (or forward = log-det of the premise, backward = that of
    the hypothesis, the code's ``det_acc``). ``ties``: ``"half"`` a tie counts
    ½ (a coin flip; default); ``"wrong"`` a tie counts 0 (the reference code's strict ``>``).
    """
    f = np.asarray(score_forward, dtype=np.float64).ravel()
    b = np.asarray(score_backward, dtype=np.float64).ravel()
    if f.shape != b.shape or f.size == 0:
        raise ValueError(f"need two non-empty score arrays of equal length, got {f.size} and {b.size}")
    tie_credit = {"half": 0.5, "wrong": 0.0}
    if ties not in tie_credit:
        raise ValueError(f"unknown ties {ties!r} (half, wrong)")
    return float(np.mean(f > b) + tie_credit[ties] * np.mean(f == b))


def length_baseline_direction(prem_lengths, hyp_lengths, ties: str = "half") -> float:
    """Accuracy of GaussCSE's length baseline: the longer sentence is predicted to be the premise.

    Lengths in any unit (words, tokens; the paper does not say which); equal
    lengths count ½ by default (``ties`` as :func:`direction_accuracy`).
    """
    return direction_accuracy(prem_lengths, hyp_lengths, ties=ties)


# ---------------------------------------------------------------- ranking


def rank_of_true(scores_matrix, true_index, ties: str = "pessimistic", exclude=None) -> np.ndarray:
    """1-based rank of each query's true candidate among its row of scores, (Q,).

    ``scores_matrix`` (Q, C), higher = better; ``true_index`` (Q,) column of the
    true candidate. ``exclude``: candidates removed from a query's list, as a
    (Q,) index array (e.g. the query sentence itself, as RSE's relation
    prediction does) or a (Q, C) bool mask; the true candidate is never removed
    (RSE keeps it when sentence1 == sentence2).
    ``ties`` among equal scores: ``"pessimistic"`` (default) rank = 1 + #(>)
    + #(= others), so constant scores cannot look good; ``"optimistic"`` 1 + #(>)
    (the RSE reference code: the first position of the true score in the
    sorted list); ``"average"`` 1 + #(>) + #(= others)/2. The paper does not say.
    """
    S = np.asarray(scores_matrix, dtype=np.float64)
    t = np.asarray(true_index, dtype=np.int64).ravel()
    if S.ndim != 2 or t.size != S.shape[0]:
        raise ValueError(f"need scores (Q, C) and Q true indices, got {S.shape} and {t.size}")
    if np.isnan(S).any():
        raise ValueError("scores contain NaN")
    q = np.arange(S.shape[0])
    keep = np.ones(S.shape, dtype=bool)
    if exclude is not None:
        ex = np.asarray(exclude)
        if ex.dtype == bool:
            keep &= ~ex.reshape(S.shape)
        else:
            keep[q, ex.astype(np.int64).ravel()] = False
    keep[q, t] = True
    true = S[q, t][:, None]
    greater = ((S > true) & keep).sum(1)
    equal = ((S == true) & keep).sum(1) - 1
    if ties == "pessimistic":
        return 1 + greater + equal
    if ties == "optimistic":
        return 1 + greater
    if ties == "average":
        return 1 + greater + equal / 2
    raise ValueError(f"unknown ties {ties!r} (pessimistic, optimistic, average)")


def ranking_metrics(ranks, ks=(1, 3, 10)) -> dict[str, float]:
    """{MR, MRR, Hits@k...} of 1-based ranks: mean rank, mean 1/rank, fraction with rank <= k.

    Example: ranks [1, 2, 4] -> MR 7/3, MRR (1 + ½ + ¼)/3, Hits@1 ⅓, Hits@3 ⅔, Hits@10 1.
    """
    r = np.asarray(ranks, dtype=np.float64).ravel()
    if r.size == 0 or (r < 1).any():
        raise ValueError("need a non-empty array of ranks >= 1")
    out = {"MR": float(r.mean()), "MRR": float((1.0 / r).mean())}
    for k in ks:
        out[f"Hits@{k}"] = float((r <= k).mean())
    return out
