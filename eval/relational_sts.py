"""STS with RSE's weighted relational score (Wang & Li §3.3, §4.1) on STS-Benchmark-layout files.

Input: an RSE model and a folder read by :func:`eval.sts.read_sts` (``sts-dev.csv``, ...).
Score of a pair: max over both directions of Σ_k w̃_k cos(h_a + r_k, h_b),
w̃ = w / Σw, with the model's trained ``sts_weights`` (paper: entailment 1.0,
duplicate_question 0.5; a relation the model was not trained on counts 0) or
``weights`` given as ``{relation: w}`` or ``"entailment=1,duplicate_question=0.5"``.
``plots``: a folder for the relation-embedding heatmap.
Reported: ``spearman`` (fraction) of that score against the gold scores, and
``cosine_spearman``, the same model scored by plain cosine, for comparison.

The protocol is the split alone (SimCSE's), not the reference code's
train+dev+test concatenation for STS-B (``docs/methods.md`` §2e).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from eval.plots import rse_relation_plot
from score.sts_data import check_sts_data, read_sts


def parse_weights(weights) -> dict | None:
    """``{relation: w}`` from a dict or ``"rel=w,rel=w"``; None stays None."""
    if weights is None or isinstance(weights, dict):
        return weights
    out = {}
    for item in filter(None, (p.strip() for p in str(weights).split(","))):
        name, eq, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"relation weights {weights!r}: {item!r} is not RELATION=NUMBER") from None
        if not eq or not name.strip() or out[name.strip()] < 0:
            raise ValueError(f"relation weights {weights!r}: {item!r} is not RELATION=NUMBER (>= 0)")
    if not out:
        raise ValueError(f"relation weights {weights!r}: no RELATION=NUMBER item")
    return out


def check_relational_sts_data(data: str, split: str, weights=None, **_) -> None:
    check_sts_data(data, split)
    parse_weights(weights)


def evaluate_relational_sts(model, data: str | Path, split: str, *, weights=None, batch_size: int = 64,
                            limit: int | None = None, plots: str | Path | None = None, **_) -> dict:
    """Spearman of the weighted relational score (and of cosine) on one STS split."""
    from scipy.stats import spearmanr

    started = time.perf_counter()
    weights = parse_weights(weights)
    pairs = read_sts(data, split)
    if limit is not None:
        pairs = pairs.head(limit)
    if len(pairs) < 2:
        raise ValueError(f"{pairs.path}: need at least 2 readable pairs, found {len(pairs)}")
    relational = model.relational_similarity(pairs.sentences1, pairs.sentences2, weights, batch_size=batch_size)
    used = weights if weights is not None else dict(model.method.options.sts_weights)
    cosine = model.cosine(pairs.sentences1, pairs.sentences2, batch_size=batch_size)
    gold = np.asarray(pairs.scores, dtype=np.float64)
    return {
        "task": "relational_sts", "split": split, "data": str(Path(data).expanduser()),
        "method": model.method_name, "weights": used,
        "spearman": float(spearmanr(relational, gold).statistic),
        "cosine_spearman": float(spearmanr(cosine, gold).statistic),
        "n_pairs": len(pairs), "skipped_rows": pairs.skipped_rows, "skipped_lines": list(pairs.skipped_lines),
        "plots": [str(rse_relation_plot(model, plots))] if plots else [],
        "seconds": round(time.perf_counter() - started, 2),
    }
