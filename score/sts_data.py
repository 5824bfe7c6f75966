"""The STS Benchmark's files (SentEval layout): the one reader of them (``score.sts_sets`` reads the rest of
the papers' STS table with the same rule).

The same pairs come from the Hugging Face Hub by name (``mteb/stsbenchmark-sts``, the default when no
folder is given; ``hub_sts_source``) or from a folder of a hub dataset's files, through ``infra.hub_data``.

A folder holds ``sts-train.csv``, ``sts-dev.csv`` and ``sts-test.csv``:
UTF-8, tab-separated, no header, columns ``genre filename year id score
sentence1 sentence2``; raw release lines may carry extra trailing
source/license fields, which are ignored. Sentences contain ``"``, so the
files are read with ``csv.QUOTE_NONE``.

One rule for a bad row, in every reader here: it is skipped, counted
(``skipped_rows``, the first line numbers in ``skipped_lines``) and logged with
its reason; checkpoint selection (``score.dev_metrics``) and ``python -m eval``
read through these functions, so they score the same pairs. A blank line is not
a row.
"""

from __future__ import annotations

import csv
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

SPLIT_FILES = {"train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test.csv"}
STS_COLUMNS = 7  # genre, filename, year, id, score, sentence1, sentence2
SCORE_COLUMN, SENTENCE1_COLUMN, SENTENCE2_COLUMN = 4, 5, 6
MAX_REPORTED_LINES = 10
STS_LAYOUT = "a folder in the SentEval STS-B layout: sts-train.csv, sts-dev.csv, sts-test.csv"


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
    from infra.preflight import did_you_mean, missing_path, subfolders_holding

    folder = Path(folder).expanduser()
    if folder.is_file():
        hint = f"; did you mean {folder.parent}?" if folder.name in SPLIT_FILES.values() else ""
        raise FileNotFoundError(f"{folder} is a file, not an STS data folder (expected {STS_LAYOUT}){hint}")
    if not folder.is_dir():
        raise FileNotFoundError(missing_path(folder, "STS data folder", STS_LAYOUT))
    path = folder / SPLIT_FILES[split]
    if not path.is_file():
        present = splits_present(folder)
        inside = did_you_mean(subfolders_holding(folder, lambda sub: (sub / SPLIT_FILES[split]).is_file()))
        if not present:  # the wrong layout (a dataset's top folder, say: stsb/ holding raw/ and senteval_processed/)
            raise FileNotFoundError(f"{folder} is not an STS data folder: it holds none of {', '.join(SPLIT_FILES.values())} "
                                    f"(the SentEval STS-B layout){inside}")
        raise FileNotFoundError(
            f"no {split} split in {folder}: {SPLIT_FILES[split]} is missing; "
            f"splits present: {', '.join(present)}{inside}"
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


def hub_sts_source(data: str | Path | None):
    """The hub source ``data`` names (``infra.hub_data``: a hub name, a folder of a hub dataset's files; None:
    MTEB's STS-B), or None for a SentEval folder."""
    from infra.hub_data import MTEB_STS, hub_source

    if data is not None and Path(data).expanduser().is_dir() and splits_present(Path(data).expanduser()):
        return None  # SentEval's files win over anything else in the folder
    return hub_source(data, MTEB_STS["STSBenchmark"])


def check_sts_data(data: str | Path | None, split: str) -> None:
    """Before a model loads: the split's file of a SentEval folder, or a hub source that can be read now."""
    source = hub_sts_source(data)
    if source is None:
        sts_split_path(data, split)
    else:
        from infra.hub_data import check_available

        check_available([source])


def read_sts(folder: str | Path | None, split: str) -> StsPairs:
    """Read one split of an STS-B folder or hub source (``hub_sts_source``); malformed rows are skipped,
    counted and logged."""
    source = hub_sts_source(folder)
    if source is not None:
        from infra.hub_data import read_scored

        rows = read_scored(source, split)
        return StsPairs(rows.sentences1, rows.sentences2, rows.values, path=rows.where, skipped_rows=rows.skipped,
                        skipped_lines=[])
    return read_sts_file(sts_split_path(folder, split))


def read_dev_file(path: str | Path) -> StsPairs:
    """STS-B dev pairs of ``path``: an ``sts-dev.csv`` file, a folder that has one, or a hub source
    (``mteb/stsbenchmark-sts`` or a folder of its files: its validation split) (the dev metrics' data)."""
    path = Path(path).expanduser()
    if path.is_dir() or (not path.exists() and hub_sts_source(str(path)) is not None):
        return read_sts(path if path.is_dir() else str(path), "dev")  # a folder, or a hub name (infra.hub_data)
    return read_sts_file(path)


def skip_row(pairs, line: int, reason: str, first_reason: str) -> str:
    """Count the malformed row at ``line`` in ``pairs`` (``skipped_rows``; the first line numbers in
    ``skipped_lines``); the first reason seen, for :func:`warn_skipped`."""
    pairs.skipped_rows += 1
    if len(pairs.skipped_lines) < MAX_REPORTED_LINES:
        pairs.skipped_lines.append(line)
    return first_reason or f"line {line}: {reason}"


def warn_skipped(pairs, first_reason: str, logger: logging.Logger = log) -> None:
    """One warning for the rows of ``pairs`` that were skipped, if any."""
    if pairs.skipped_rows:
        logger.warning("%s: skipped %d malformed rows (lines %s; first: %s)", pairs.path, pairs.skipped_rows,
                       pairs.skipped_lines, first_reason)


def read_sts_file(path: str | Path) -> StsPairs:
    """Every row of one STS-B file; malformed rows are skipped, counted and logged."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"STS file does not exist: {path}")
    pairs = StsPairs([], [], [], path=str(path))
    first_reason = ""
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line, not a row
            parsed = parse_sts_row(row)
            if isinstance(parsed, str):
                first_reason = skip_row(pairs, reader.line_num, parsed, first_reason)
                continue
            pairs.sentences1.append(parsed[0])
            pairs.sentences2.append(parsed[1])
            pairs.scores.append(parsed[2])
    warn_skipped(pairs, first_reason)
    return pairs


