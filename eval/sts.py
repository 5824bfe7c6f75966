"""Semantic textual similarity on the STS Benchmark (SentEval layout).

The files are read by ``score.sts_data`` (one reader, one rule for a bad row:
skipped, counted, reported). The protocol is SimCSE's: cosine similarity of the
two embeddings, no training, Spearman correlation with the gold scores
(reported as a fraction) — the very function the ``sts_spearman`` dev metric
uses (``TrainedModel.cosine`` and ``score.metrics.spearman``), so ``eval --task sts --split
dev`` and a run's ``dev_spearman`` are the same number on the same file.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from score.metrics import pearson, spearman
from score.sts_data import StsPairs, read_sts


def score_pairs(model, pairs: StsPairs, batch_size: int = 64, plot: str | Path | None = None) -> dict:
    """Spearman and Pearson of cosine similarity against the gold scores (``model``: a SentenceTransformer
    or a ``TrainedModel``); ``plot``: a PNG path for the predicted-vs-gold scatter (``plots`` in the result)."""
    from eval.models import as_trained

    if len(pairs) < 2:
        raise ValueError(f"{pairs.path}: need at least 2 readable pairs, found {len(pairs)}")
    started = time.perf_counter()
    predicted = as_trained(model).cosine(pairs.sentences1, pairs.sentences2, batch_size=batch_size)
    gold = np.asarray(pairs.scores, dtype=np.float64)
    result = {
        "spearman": spearman(predicted, gold),
        "pearson": pearson(predicted, gold),
        "n_pairs": len(pairs),
        "skipped_rows": pairs.skipped_rows,
        "skipped_lines": list(pairs.skipped_lines),
        "seconds": round(time.perf_counter() - started, 2),
    }
    if plot is not None:
        from eval.plots import sts_scatter

        title = f"{Path(pairs.path).name}: Spearman {result['spearman']:.4f} ({len(pairs)} pairs)"
        result["plots"] = [str(sts_scatter(predicted, gold, plot, title))]
    return result


def evaluate_sts(model, folder: str | Path, split: str, batch_size: int = 64, plots: str | Path | None = None) -> dict:
    """Evaluate ``model`` (a SentenceTransformer) on one STS split of ``folder``; ``plots``: a folder for
    ``sts_<split>_scatter.png`` (predicted vs gold)."""
    pairs = read_sts(folder, split)
    plot = Path(plots) / f"sts_{split}_scatter.png" if plots else None
    result = score_pairs(model, pairs, batch_size=batch_size, plot=plot)
    return {"task": "sts", "split": split, "data": str(Path(folder).expanduser()), **result}
