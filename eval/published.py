"""The papers' published figures, as reference rows of ``python -m eval report`` (never measured here).

Spearman ×100 → fractions; STS sets in the SimCSE "all" protocol, STS-B test and
SICK-R's SemEval test part (4,927 pairs), MRPC train → test with SentEval's classifier
(docs/methods.md, evaluation protocols; ``eval.scoreboard`` shows a figure only beside
one measured by the same protocol). Sources: RSE paper Table 2 (STS) and Table 4
(transfer: MRPC accuracy); EASE paper Table 1 (STS avg), Table 8 (STS per
set) and Table 9 (short-text clustering accuracy, mean over 8 sets).
"""

from __future__ import annotations

STS_KEYS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R")


def _sts(*values: float) -> dict:
    *sets, avg = values
    return {**{k: v / 100 for k, v in zip(STS_KEYS, sets)}, "sts_avg": avg / 100}


PUBLISHED = [
    {"model": "SimCSE-unsup BERT-base (published: RSE Tab. 2, 4)", "method": "simcse_unsup",
     **_sts(68.40, 82.41, 74.38, 80.91, 78.56, 76.85, 72.23, 76.25), "mrpc_accuracy": 0.7443},
    {"model": "SimCSE-sup BERT-base (published: RSE Tab. 2, 4)", "method": "simcse_sup",
     **_sts(75.30, 84.67, 80.19, 85.40, 80.82, 84.25, 80.39, 81.57), "mrpc_accuracy": 0.7351},
    {"model": "EASE BERT-base (published: EASE Tab. 8, 9)", "method": "ease",
     **_sts(72.8, 81.8, 73.7, 82.3, 79.5, 78.9, 69.7, 77.0), "stc_accuracy": 0.631},
    {"model": "RSE BERT-base (published: RSE Tab. 2, 4)", "method": "rse",
     **_sts(76.27, 84.43, 80.60, 86.03, 81.86, 84.34, 81.73, 82.18), "mrpc_accuracy": 0.7739},
]
