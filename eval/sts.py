"""Semantic textual similarity on the STS Benchmark (SentEval layout).

A folder holds ``sts-train.csv``, ``sts-dev.csv`` and ``sts-test.csv``:
UTF-8, tab-separated, no header, columns ``genre filename year id score
sentence1 sentence2``; raw release lines may carry extra trailing
source/license fields, which are ignored. Sentences contain ``"``, so the
files are read with ``csv.QUOTE_NONE``.

The protocol is SimCSE's: cosine similarity of the two embeddings, no
training, Spearman correlation with the gold scores (reported as a fraction).
"""

from __future__ import annotations

import csv
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

SPLIT_FILES = {"train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test.csv"}
STS_COLUMNS = 7  # genre, filename, year, id, score, sentence1, sentence2
SCORE_COLUMN, SENTENCE1_COLUMN, SENTENCE2_COLUMN = 4, 5, 6
MAX_REPORTED_LINES = 10


@dataclass
class StsPairs:
    """Sentence pairs with gold scores, and the rows that could not be read."""

    sentences1: list[str]
    sentences2: list[str]
    scores: list[float]
    path: str = ""
    skipped_rows: int = 0
    skipped_lines: list[int] = field(default_factory=list)  # first few, 1-based

    def __len__(self) -> int:
        return len(self.scores)

    def head(self, n: int) -> "StsPairs":
        """The first ``n`` pairs (same skip report)."""
        return StsPairs(self.sentences1[:n], self.sentences2[:n], self.scores[:n],
                        self.path, self.skipped_rows, list(self.skipped_lines))


def splits_present(folder: Path) -> list[str]:
    return [split for split, name in SPLIT_FILES.items() if (folder / name).is_file()]


def sts_split_path(folder: str | Path, split: str) -> Path:
    """The file of ``split`` in ``folder``; a clear error when it is not there."""
    if split not in SPLIT_FILES:
        raise ValueError(f"unknown STS split {split!r}; expected one of {sorted(SPLIT_FILES)}")
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"STS data folder does not exist: {folder}")
    path = folder / SPLIT_FILES[split]
    if not path.is_file():
        present = splits_present(folder)
        raise FileNotFoundError(
            f"no {split} split in {folder}: {SPLIT_FILES[split]} is missing; "
            f"splits present: {', '.join(present) if present else 'none'}"
        )
    return path


def parse_sts_row(row: list[str]) -> tuple[str, str, float] | str:
    """(sentence1, sentence2, score) or the reason the row is malformed."""
    if len(row) < STS_COLUMNS:
        return f"{len(row)} fields, need {STS_COLUMNS}"
    try:
        score = float(row[SCORE_COLUMN])
    except ValueError:
        return f"score {row[SCORE_COLUMN]!r} is not a number"
    if not math.isfinite(score):
        return f"score {row[SCORE_COLUMN]!r} is not finite"
    if not 0.0 <= score <= 5.0:
        return f"score {row[SCORE_COLUMN]!r} is outside the STS scale 0-5"
    sentence1, sentence2 = row[SENTENCE1_COLUMN].strip(), row[SENTENCE2_COLUMN].strip()
    if not sentence1 or not sentence2:
        return "empty sentence"
    return sentence1, sentence2, score


def read_sts(folder: str | Path, split: str) -> StsPairs:
    """Read one split; malformed rows are skipped, counted and logged."""
    path = sts_split_path(folder, split)
    pairs = StsPairs([], [], [], path=str(path))
    first_reason = ""
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line, not a row
            parsed = parse_sts_row(row)
            if isinstance(parsed, str):
                pairs.skipped_rows += 1
                if len(pairs.skipped_lines) < MAX_REPORTED_LINES:
                    pairs.skipped_lines.append(reader.line_num)
                first_reason = first_reason or f"line {reader.line_num}: {parsed}"
                continue
            pairs.sentences1.append(parsed[0])
            pairs.sentences2.append(parsed[1])
            pairs.scores.append(parsed[2])
    if pairs.skipped_rows:
        log.warning("%s: skipped %d malformed rows (lines %s; first: %s)", path,
                    pairs.skipped_rows, pairs.skipped_lines, first_reason)
    return pairs


def cosine_scores(model, pairs: StsPairs, batch_size: int = 64) -> np.ndarray:
    """Cosine similarity of each pair; every distinct sentence is encoded once."""
    unique = list(dict.fromkeys(pairs.sentences1 + pairs.sentences2))
    index = {sentence: i for i, sentence in enumerate(unique)}
    embeddings = model.encode(unique, batch_size=batch_size, convert_to_numpy=True,
                              normalize_embeddings=True, show_progress_bar=False)
    embeddings = np.asarray(embeddings, dtype=np.float64)
    left = embeddings[[index[s] for s in pairs.sentences1]]
    right = embeddings[[index[s] for s in pairs.sentences2]]
    return np.sum(left * right, axis=1)


def score_pairs(model, pairs: StsPairs, batch_size: int = 64, plot: str | Path | None = None) -> dict:
    """Spearman and Pearson of cosine similarity against the gold scores; ``plot``: a PNG path for the
    predicted-vs-gold scatter (``plots`` in the result)."""
    from scipy.stats import pearsonr, spearmanr

    if len(pairs) < 2:
        raise ValueError(f"{pairs.path}: need at least 2 readable pairs, found {len(pairs)}")
    started = time.perf_counter()
    predicted = cosine_scores(model, pairs, batch_size=batch_size)
    gold = np.asarray(pairs.scores, dtype=np.float64)
    result = {
        "spearman": float(spearmanr(predicted, gold).statistic),
        "pearson": float(pearsonr(predicted, gold).statistic),
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
