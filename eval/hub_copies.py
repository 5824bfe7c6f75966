"""Local copies in the Hugging Face Hub's format, written from SentEval-layout files: for a machine that
reaches no hub (``STRUCTCSE_HUB_COPIES=FOLDER``, or ``--data FOLDER/<owner>/<name>``) and for the tests.

Each copy is ``FOLDER/<owner>/<name>/`` as the hub repository lays it out,
``data/<split>-00000-of-00001.parquet`` (``fmt="parquet"``), or ``datasets``' own ``save_to_disk`` output
(``fmt="disk"``), with the columns the hub dataset has:

* ``mteb/stsbenchmark-sts`` (sentence1, sentence2, score) from a SentEval STS-B folder (``sts-*.csv``);
* ``mteb/sts12-sts`` … ``mteb/sts16-sts`` (test: the year's subsets concatenated, as MTEB has them) from
  SentEval's ``STS/STS1x-en-test`` folders under ``--senteval``;
* ``mteb/sickr-sts`` (sentence1, sentence2, score) and ``RobZamp/sick`` (sentence_A, sentence_B, label)
  from SentEval's ``SICK_*.txt``;
* ``stanfordnlp/snli`` (premise, hypothesis, label 0 entailment / 1 neutral / 2 contradiction) from a
  SentEval SNLI folder;
* ``nyu-mll/glue/mrpc`` (sentence1, sentence2, label, idx) from ``msr_paraphrase_{train,test}.txt``;
* ``sentence-transformers/all-nli/triplet`` (anchor, positive, negative; split train) from a SimCSE-format
  csv (``sent0,sent1,hard_neg``).

Splits: dev is written as ``validation``, SICK's trial as ``validation``. The rows are the project's own
readers' (``score.sts_data``, ``score.sts_sets``, ``score.nli_data``, ``eval.mrpc``), so a copy scores the
same pairs as the folder it came from. A copy holds the splits its source has (the repository's samples
have no test files: their copies have none either).

    python -m eval.hub_copies --out hub --stsb STSB_DIR --sick SICK_DIR --snli SNLI_DIR --mrpc MRPC_DIR \
        --allnli nli_for_simcse.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from infra.hub_data import HUB_SPLITS, MTEB_STS, MRPC, SICK, SNLI

NLI_IDS = {"entailment": 0, "neutral": 1, "contradiction": 2}
ALL_NLI = "sentence-transformers/all-nli"


def write_copy(root: str | Path, name: str, splits: dict[str, dict[str, list]], fmt: str = "parquet") -> Path:
    """``root/name`` holding ``splits`` ({project split: {column: values}}) in the hub's layout."""
    folder = Path(root) / name
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "disk":
        import datasets

        datasets.DatasetDict({HUB_SPLITS.get(s, s): datasets.Dataset.from_dict(c) for s, c in splits.items()}) \
            .save_to_disk(str(folder))
        return folder
    if fmt != "parquet":
        raise ValueError(f"fmt must be parquet or disk, not {fmt!r}")
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "data").mkdir(exist_ok=True)
    for split, columns in splits.items():
        pq.write_table(pa.table(columns), folder / "data" / f"{HUB_SPLITS.get(split, split)}-00000-of-00001.parquet")
    return folder


def _scored(pairs) -> dict[str, list]:
    return {"sentence1": list(pairs.sentences1), "sentence2": list(pairs.sentences2),
            "score": [float(s) for s in pairs.scores]}


def stsb_splits(folder: str | Path) -> dict:
    from score.sts_data import read_sts, splits_present

    return {split: _scored(read_sts(Path(folder), split)) for split in splits_present(Path(folder))}


def year_splits(folder: str | Path, name: str) -> dict:
    from score.sts_sets import read_year

    return {"test": _scored(read_year(Path(folder), name))}


def sick_splits(folder: str | Path) -> tuple[dict, dict]:
    """(mteb/sickr-sts's splits, RobZamp/sick's) from SentEval's SICK files (in ``folder`` or its senteval/)."""
    from score.nli_data import read_nli, splits_present
    from score.sts_sets import _sick_has_split, read_sick

    folder = Path(folder)
    sts_folder = folder if any(_sick_has_split(folder, s) for s in HUB_SPLITS if s != "trial") else folder / "senteval"
    sts = {split: _scored(read_sick(sts_folder, split)) for split in ("train", "dev", "test")
           if _sick_has_split(sts_folder, split)}
    nli = {}
    for split in splits_present(folder):
        pairs = read_nli(folder, split)
        nli[split] = {"sentence_A": pairs.premises, "sentence_B": pairs.hypotheses,
                      "label": [NLI_IDS[label] for label in pairs.labels]}
    return sts, nli


def snli_splits(folder: str | Path) -> dict:
    from score.nli_data import read_nli, splits_present

    out = {}
    for split in splits_present(folder):
        pairs = read_nli(folder, split)
        out[split] = {"premise": pairs.premises, "hypothesis": pairs.hypotheses,
                      "label": [NLI_IDS[label] for label in pairs.labels]}
    return out


def mrpc_splits(folder: str | Path) -> dict:
    from eval.mrpc import SPLIT_FILES, read_mrpc

    out = {}
    for split, name in SPLIT_FILES.items():
        if (Path(folder) / name).is_file():
            pairs = read_mrpc(Path(folder) / name)
            out[split] = {"sentence1": pairs.sentences1, "sentence2": pairs.sentences2, "label": pairs.labels,
                          "idx": list(range(len(pairs)))}
    return out


def allnli_splits(csv_path: str | Path) -> dict:
    import csv

    with open(csv_path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    missing = [c for c in ("sent0", "sent1", "hard_neg") if rows and c not in rows[0]]
    if not rows or missing:
        raise ValueError(f"{csv_path}: expected SimCSE's header sent0,sent1,hard_neg and rows"
                         + (f" (missing {missing})" if missing else ""))
    return {"train": {"anchor": [r["sent0"] for r in rows], "positive": [r["sent1"] for r in rows],
                      "negative": [r["hard_neg"] for r in rows]}}


def write_hub_copies(out: str | Path, *, stsb=None, sick=None, snli=None, mrpc=None, senteval=None, allnli=None,
                     fmt: str = "parquet") -> dict[str, Path]:
    """Every copy the given folders allow (see the module docstring): ``{hub name: folder}``."""
    written = {}
    if stsb:
        written[MTEB_STS["STSBenchmark"].name] = write_copy(out, MTEB_STS["STSBenchmark"].name, stsb_splits(stsb), fmt)
    if senteval:
        from score.sts_sets import find_sets

        for name, folder in find_sets(senteval, "test").items():
            if name.startswith("STS1"):
                written[MTEB_STS[name].name] = write_copy(out, MTEB_STS[name].name, year_splits(folder, name), fmt)
    if sick:
        sts, nli = sick_splits(sick)
        written[MTEB_STS["SICK-R"].name] = write_copy(out, MTEB_STS["SICK-R"].name, sts, fmt)
        written[SICK.name] = write_copy(out, SICK.name, nli, fmt)
    if snli:
        written[SNLI.name] = write_copy(out, SNLI.name, snli_splits(snli), fmt)
    if mrpc:
        written[MRPC.name] = write_copy(Path(out) / MRPC.name, MRPC.config, mrpc_splits(mrpc), fmt)
    if allnli:
        written[ALL_NLI] = write_copy(Path(out) / ALL_NLI, "triplet", allnli_splits(allnli), fmt)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.hub_copies", description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder the copies go to, as OUT/<owner>/<name>")
    parser.add_argument("--stsb", help="SentEval STS-B folder (sts-train.csv, sts-dev.csv, sts-test.csv)")
    parser.add_argument("--senteval", help="SentEval data/downstream tree (STS/STS12-en-test ...)")
    parser.add_argument("--sick", help="SentEval SICK folder (SICK_train.txt, SICK_trial.txt, ...)")
    parser.add_argument("--snli", help="SentEval SNLI folder (s1/s2/labels.<split>)")
    parser.add_argument("--mrpc", help="folder with msr_paraphrase_train.txt (and _test.txt)")
    parser.add_argument("--allnli", help="SimCSE-format csv (sent0,sent1,hard_neg) -> all-nli's triplet config")
    parser.add_argument("--format", default="parquet", choices=("parquet", "disk"),
                        help="the hub repository's parquet files (default) or datasets' save_to_disk output")
    args = parser.parse_args(argv)
    try:
        written = write_hub_copies(args.out, stsb=args.stsb, sick=args.sick, snli=args.snli, mrpc=args.mrpc,
                                   senteval=args.senteval, allnli=args.allnli, fmt=args.format)
    except (FileNotFoundError, ValueError) as error:
        print(f"python -m eval.hub_copies: error: {error}", file=sys.stderr)
        return 2
    if not written:
        print("python -m eval.hub_copies: error: give at least one of --stsb, --senteval, --sick, --snli, --mrpc, "
              "--allnli",
              file=sys.stderr)
        return 2
    for name, folder in written.items():
        print(f"{name}: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
