"""score/metrics.py: worked examples for every metric, and a hand-written PR curve as the oracle of sklearn's."""

from __future__ import annotations

import numpy as np
import pytest

from score.metrics import (
    accuracy_at,
    auprc_trapezoid,
    average_precision,
    direction_accuracy,
    length_baseline_direction,
    rank_of_true,
    ranking_metrics,
    pearson,
    spearman,
    tune_threshold,
)

# the GaussCSE reference code's own example: accuracies 4/8 3/8 4/8 5/8 6/8 5/8 4/8 3/8 4/8 across the cuts
Y = [1, 0, 0, 0, 1, 1, 1, 0]
S = [0.1, 0.2, 0.3, 0.349, 0.4, 0.7, 0.8, 0.9]


def test_tune_threshold_exact_and_grid():
    t, acc = tune_threshold(S, Y)
    assert acc == 0.75
    assert t == pytest.approx((0.349 + 0.4) / 2)  # the midpoint of the best gap
    assert accuracy_at(S, Y, t) == 0.75
    t, acc = tune_threshold(S, Y, grid=np.arange(1001) / 1000)
    assert acc == 0.75 and t == pytest.approx(0.35)  # first grid point above 0.349
    # applied to a test set: the midpoint and the grid's threshold can differ inside the dev gap
    assert accuracy_at([0.36, 0.38, 0.5], [0, 1, 1], (0.349 + 0.4) / 2) == 1.0
    assert accuracy_at([0.36, 0.38, 0.5], [0, 1, 1], t) == pytest.approx(2 / 3)


def test_tune_threshold_edges():
    t, acc = tune_threshold([0.1, 0.11, 0.12], [0, 0, 0])  # all negative: a threshold above the maximum
    assert acc == 1.0 and t > 0.12 and accuracy_at([0.1, 0.11, 0.12], [0, 0, 0], t) == 1.0
    t, acc = tune_threshold([0.2, 0.1, 0.8], [1, 1, 1])  # all positive: the minimum (>=)
    assert (t, acc) == (0.1, 1.0)
    t, acc = tune_threshold([0.5, 0.5, 0.5, 0.9], [1, 0, 0, 1])  # ties move together
    assert acc == 0.75 and accuracy_at([0.5, 0.5, 0.5, 0.9], [1, 0, 0, 1], t) == 0.75
    with pytest.raises(ValueError):
        tune_threshold([0.1, float("nan")], [0, 1])


def test_accuracy_at_uses_greater_or_equal():
    assert accuracy_at([0.5, 0.4, 0.6], [1, 0, 1], 0.5) == 1.0
    assert accuracy_at([0.5, 0.4, 0.6], [1, 0, 1], 0.55) == pytest.approx(2 / 3)


def test_average_precision_worked_examples():
    # ranks 1..4 = pos, neg, pos, neg: P@1 = 1 (R .5), P@3 = 2/3 (R 1) -> (1 + 2/3)/2
    assert average_precision([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]) == pytest.approx(5 / 6)
    # perfect and worst rankings
    assert average_precision([0.9, 0.8, 0.1], [1, 1, 0]) == 1.0
    assert average_precision([0.9, 0.8, 0.1], [0, 0, 1]) == pytest.approx(1 / 3)
    # a tie enters as one step: (P .5, R .5) at 0.5 then (P 2/3, R 1) at 0.2
    assert average_precision([0.5, 0.5, 0.2], [1, 0, 1]) == pytest.approx(0.5 * 0.5 + 0.5 * 2 / 3)
    assert np.isnan(average_precision([0.3, 0.2], [0, 0]))


def test_auprc_trapezoid_worked_example():
    # PR points (R, P): (0,1) (.5,1) (.5,.5) (1,2/3) (1,.5): .5·1 + 0 + .5·(.5+2/3)/2 + 0
    assert auprc_trapezoid([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]) == pytest.approx(0.5 + 0.5 * (0.5 + 2 / 3) / 2)
    assert auprc_trapezoid([0.9, 0.8, 0.1], [1, 1, 0]) == 1.0


def _pr_points_by_hand(s, y):
    """(precision, recall) at each distinct score threshold, highest first: a second implementation, in plain
    numpy, of what sklearn's precision_recall_curve gives score.metrics."""
    order = np.argsort(-s, kind="stable")
    s_desc, y_desc = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s_desc)), s.size - 1]  # the last index of each run of equal scores
    tps = np.cumsum(y_desc)[last]
    return tps / (last + 1), tps / y.sum()


def test_pr_metrics_agree_with_a_hand_written_pr_curve():
    rng = np.random.default_rng(0)
    for _ in range(5):
        y = rng.integers(0, 2, 40).astype(bool)
        y[0] = True
        s = np.round(rng.random(40), 1)  # many ties
        precision, recall = _pr_points_by_hand(s, y)
        assert average_precision(s, y) == pytest.approx(np.sum(np.diff(np.r_[0.0, recall]) * precision))
        p, r = np.r_[1.0, precision], np.r_[0.0, recall]  # the curve starts at (R 0, P 1)
        assert auprc_trapezoid(s, y) == pytest.approx(np.sum(np.diff(r) * (p[1:] + p[:-1]) / 2))


def test_direction_accuracy_ties():
    f, b = [3.0, 2.0, 1.0, 1.0], [1.0, 2.0, 2.0, 1.0]  # right, tie, wrong, tie
    assert direction_accuracy(f, b) == pytest.approx((1 + 0.5 * 2) / 4)
    assert direction_accuracy(f, b, ties="wrong") == pytest.approx(1 / 4)
    with pytest.raises(ValueError):
        direction_accuracy([1.0], [1.0, 2.0])


def test_length_baseline_direction():
    # premise longer (right), shorter (wrong), equal (½), longer (right)
    assert length_baseline_direction([10, 5, 7, 12], [4, 8, 7, 3]) == pytest.approx(2.5 / 4)
    assert length_baseline_direction([10, 5, 7, 12], [4, 8, 7, 3], ties="wrong") == pytest.approx(2 / 4)


def test_ranking_metrics_worked_example():
    m = ranking_metrics([1, 2, 4])
    assert m["MR"] == pytest.approx(7 / 3)
    assert m["MRR"] == pytest.approx((1 + 1 / 2 + 1 / 4) / 3)
    assert (m["Hits@1"], m["Hits@3"], m["Hits@10"]) == pytest.approx((1 / 3, 2 / 3, 1.0))
    assert ranking_metrics([11])["Hits@10"] == 0.0
    with pytest.raises(ValueError):
        ranking_metrics([0, 1])


def test_rank_of_true_ties_and_exclusion():
    scores = np.array(
        [
            [0.9, 0.5, 0.5, 0.1, 0.5],  # true col 1: one higher, two equal others
            [0.2, 0.3, 0.8, 0.7, 0.1],  # true col 2: the best
            [0.4, 0.4, 0.4, 0.4, 0.4],  # constant scores, true col 0
        ]
    )
    true = [1, 2, 0]
    np.testing.assert_array_equal(rank_of_true(scores, true), [4, 1, 5])
    np.testing.assert_array_equal(rank_of_true(scores, true, ties="optimistic"), [2, 1, 1])
    np.testing.assert_allclose(rank_of_true(scores, true, ties="average"), [3, 1, 3])
    # excluding the query itself (an index per row), e.g. col 0 of row 0 (the 0.9)
    np.testing.assert_array_equal(rank_of_true(scores, true, exclude=[0, 3, 4]), [3, 1, 4])
    # a bool mask; the true candidate is never excluded
    mask = np.zeros_like(scores, dtype=bool)
    mask[1, 2] = True
    mask[2, 1:3] = True
    np.testing.assert_array_equal(rank_of_true(scores, true, exclude=mask), [4, 1, 3])
    assert ranking_metrics(rank_of_true(scores, true))["MRR"] == pytest.approx((1 / 4 + 1 + 1 / 5) / 3)
    with pytest.raises(ValueError):
        rank_of_true(scores, [0, 1])


def test_spearman_worked_examples_and_the_one_rule_for_constant_scores():
    # ranks of predicted 1 2 3 4 vs gold 1 3 2 4: d² = 0+1+1+0 = 2 -> 1 - 6·2/(4·15) = 0.8
    assert spearman([0.1, 0.2, 0.3, 0.4], [1.0, 3.0, 2.0, 4.0]) == pytest.approx(0.8)
    assert spearman([0.4, 0.3, 0.2, 0.1], [1.0, 2.0, 3.0, 4.0]) == pytest.approx(-1.0)
    # a collapsed model: every pair the same score -> 0.0 (no ranking), for Spearman and Pearson alike
    assert spearman([0.5, 0.5, 0.5], [1.0, 2.0, 3.0]) == 0.0
    assert pearson([0.5, 0.5, 0.5], [1.0, 2.0, 3.0]) == 0.0
    # Pearson of (1, 2, 3) vs (1, 2, 4): cov 1.5 / (1 · sqrt(7/3)) = 0.98198...
    assert pearson([1.0, 2.0, 3.0], [1.0, 2.0, 4.0]) == pytest.approx(1.5 / np.sqrt(7 / 3))
    with pytest.raises(ValueError, match="differ in length"):
        spearman([0.1, 0.2], [1.0])
