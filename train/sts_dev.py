"""A tiny STS-B dev reader + Spearman scorer for in-loop best-checkpoint selection.

(The full evaluation lives in ``eval/``, which depends on train; this is the
minimum train needs, kept here so the dependency stays one way.)

``sts-dev.csv``: UTF-8, tab-separated, no header, columns ``genre filename
year id score sentence1 sentence2`` (raw files may carry extra trailing
fields: ignored). Read with QUOTE_NONE because sentences contain ``"``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import torch.nn.functional as F


def load_sts(path: str | Path) -> tuple[list[str], list[str], list[float]]:
    """(sentences1, sentences2, gold scores) of ``path`` (a file, or a folder with sts-dev.csv)."""
    path = Path(path)
    if path.is_dir():
        path = path / "sts-dev.csv"
    s1, s2, gold = [], [], []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(row) < 7:
                continue
            try:
                score = float(row[4])
            except ValueError:
                continue
            s1.append(row[5])
            s2.append(row[6])
            gold.append(score)
    if not gold:
        raise ValueError(f"{path}: no STS rows (expected 7 tab-separated columns)")
    return s1, s2, gold


def spearman(x, y) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def sts_spearman(encoder, data: tuple[list[str], list[str], list[float]], batch_size: int = 128) -> float:
    """Spearman (as a fraction) between cos(encode(s1), encode(s2)) and the gold scores."""
    s1, s2, gold = data
    e1 = encoder.encode(s1, batch_size=batch_size)
    e2 = encoder.encode(s2, batch_size=batch_size)
    sims = F.cosine_similarity(e1, e2, dim=-1)
    return spearman(sims.tolist(), gold)
