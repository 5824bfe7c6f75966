"""Entailment direction (GaussCSE §3.2, Table 2): which sentence of an entailment pair is the premise?

Input: a model, a SentEval NLI or SICK folder and split. Only the pairs
labelled entailment are used; SICK pairs whose original row says B entails A
too (bilateral entailment) are excluded, as in the paper (pairs missing from
the original SICK file are kept and counted).

Reported side by side (fractions; a tie counts ½, see
``score.metrics.direction_accuracy``):

* ``length_baseline_acc``: the longer sentence (whitespace words) is the
  premise (the paper's length-baseline: 92.63 on SNLI, 69.14 on SICK);
* GaussCSE: ``sim_acc`` = P[sim(hyp‖prem) > sim(prem‖hyp)] (the paper's
  metric: the premise is A when sim(B‖A) > sim(A‖B)) and ``det_acc`` =
  P[Σ log σ²(prem) > Σ log σ²(hyp)] (the reference code's: the premise has
  the broader Gaussian);
* RSE with an ``entailment`` relation: ``rse_acc`` = P[cos(h_p + r_ent, h_h) >
  cos(h_h + r_ent, h_p)] (not in either paper; a translation can be directed too);
* any other model: no directional score (cosine is symmetric), baseline only.

``plots``: a folder; for a GaussCSE model the premise-vs-hypothesis
log-det scatter is written there (``eval.plots.variance_scatter``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from score.nli_data import nli_split_files, read_nli
from score.metrics import direction_accuracy, length_baseline_direction


def check_direction_data(data: str, split: str, **_) -> None:
    nli_split_files(data, split)


def word_lengths(texts: list[str]) -> np.ndarray:
    return np.array([len(t.split()) for t in texts], dtype=np.int64)


def evaluate_direction(model, data: str | Path, split: str, *, batch_size: int = 64, limit: int | None = None,
                       plots: str | Path | None = None, **_) -> dict:
    """Direction accuracies on the entailment pairs of ``split`` (the first ``limit`` pairs of the file)."""
    started = time.perf_counter()
    pairs = read_nli(data, split, limit)
    pairs = pairs.subset(pairs.is_entailment())
    excluded = unknown = 0
    if pairs.bilateral is not None:
        excluded = sum(1 for b in pairs.bilateral if b)
        unknown = sum(1 for b in pairs.bilateral if b is None)
        pairs = pairs.subset([not b for b in pairs.bilateral])
    if not len(pairs):
        raise ValueError(f"{pairs.path}: no (unilateral) entailment pair to predict the direction of")
    prem, hyp = pairs.premises, pairs.hypotheses
    result = {
        "task": "direction", "split": split, "data": str(Path(data).expanduser()), "method": model.method_name,
        "n_pairs": len(pairs), "excluded_bilateral": excluded, "bilateral_unknown": unknown,
        "length_baseline_acc": length_baseline_direction(word_lengths(prem), word_lengths(hyp)),
        "sim_acc": None, "det_acc": None, "plots": [],
    }
    if model.has("asymmetric_similarity"):
        forward = np.asarray(model.asymmetric_similarity(hyp, prem, batch_size=batch_size))
        backward = np.asarray(model.asymmetric_similarity(prem, hyp, batch_size=batch_size))
        ld_prem, ld_hyp = model.log_det(prem, batch_size), model.log_det(hyp, batch_size)
        result["sim_acc"] = direction_accuracy(forward, backward)
        result["det_acc"] = direction_accuracy(ld_prem, ld_hyp)
        if plots:
            from eval.plots import model_label, variance_scatter

            path = variance_scatter(ld_prem, ld_hyp, Path(plots) / f"gausscse_variance_{split}.png",
                                    title=f"{model_label(model)}: entailment pairs of {split} (n={len(pairs)})")
            result["plots"].append(str(path))
    elif model.has("relation_scores") and "entailment" in model.relation_names:
        fwd = model.relation_scores(prem, hyp, "forward", batch_size)
        bwd = model.relation_scores(prem, hyp, "backward", batch_size)
        result["rse_acc"] = direction_accuracy([s["entailment"] for s in fwd], [s["entailment"] for s in bwd])
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result
