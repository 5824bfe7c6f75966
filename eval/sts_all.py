"""STS as the papers report it: SentEval's STS12–STS16 "all", STS-B and SICK-R, and their mean (methods.md §1e).

Input (``data``): SentEval's ``data/downstream`` tree as its download script
lays it out, or any one folder of it:

* ``STS/STS12-en-test/`` … ``STS/STS16-en-test/``: per subset
  ``STS.input.<subset>.txt`` (two tab-separated sentences a line) and
  ``STS.gs.<subset>.txt`` (a gold score a line, 0–5; a blank gold line is an
  unscored pair and is skipped, as SentEval does). STS13 is scored without SMT
  (its input is LDC-licensed and absent from the download) even when present.
* ``STS/STSBenchmark/``: ``sts-{train,dev,test}.csv`` (``eval.sts``: score in
  column 5, sentences in 6–7), Moses-tokenized or raw.
* ``SICK/``: SentEval's ``SICK_{train,trial,test_annotated}.txt`` (header;
  ``relatedness_score``, 1–5) or the original ``SICK.txt`` (and the
  ``SICK_train_trial.txt`` slice of it) whose ``SemEval_set`` column picks the
  split.

``split``: ``test`` is the papers' protocol (STS12–16 have only test; STS-B
test; SICK test). ``dev``/``train`` score STS-B and SICK on those splits
only (this repository's samples ship no test files: dev = STS-B dev + SICK
trial).

Protocol: each set is ONE Spearman correlation (×100 in the papers; a fraction
here) of the model's pair score against the gold scores; for STS12–16 over the
concatenation of all the year's subsets (SimCSE's "all" setting; SentEval's own
mean/wmean over subsets are reported beside it as ``subsets``). The pair score is
the model's own (``TrainedModel.similarity``): cosine for plain encoders and
SimCSE/EASE/AspectCSE/DSBATS, GaussCSE's symmetric KL similarity, RSE's weighted
relational score; named in ``similarity``; for a model with its own score the
cosine Spearman is reported beside it (``cosine``). Every distinct sentence is
encoded once, sorted by length in batches (``SentenceTransformer.encode``), or, with
``actors`` N, by a pool of N Ray actors (``eval.actor_encode``: Ray Data ``map_batches``).

Result: ``{"task": "sts_all", "split", "similarity", "sets": {name: {"spearman",
"n_pairs", "skipped", "bad_rows", "files", ["subsets"], ["cosine"]}}, "mean": mean over the
sets scored, "missing": the seven names not found, "STS12"…"SICK-R": each
Spearman at top level}``. One rule for a bad row (as every reader in ``score``): a
gold score outside its scale or not a number, or a line without two sentences, is
skipped, counted in ``skipped`` and named in ``bad_rows`` (file:line: reason).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from score.metrics import spearman
from score.sts_data import MAX_REPORTED_LINES, SPLIT_FILES, read_sts

log = logging.getLogger(__name__)

SETS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R")
YEAR_FOLDER = re.compile(r"STS(1[2-6])-en-test")
INPUT_FILE = re.compile(r"STS\.input\.(.+)\.txt")
EXCLUDED_SUBSETS = {"STS13": {"SMT"}}  # LDC-licensed, absent from SentEval's download
STS_SCALE, SICK_SCALE = (0.0, 5.0), (1.0, 5.0)
SICK_SPLIT_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
SICK_SEMEVAL_SET = {"train": "TRAIN", "dev": "TRIAL", "test": "TEST"}
SICK_ORIGINAL_FILES = ("SICK.txt", "SICK_train_trial.txt")


@dataclass
class ScoredPairs:
    name: str
    sentences1: list[str] = field(default_factory=list)
    sentences2: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    subset: list[str] = field(default_factory=list)  # the subset of each pair (STS12–16)
    files: list[str] = field(default_factory=list)
    skipped: int = 0  # unscored pairs (blank gold lines) and malformed rows
    bad_rows: list[str] = field(default_factory=list)  # "file:line: reason" of the first malformed rows

    def skip(self, where: str, reason: str | None = None) -> None:
        """A pair not scored: unscored (no ``reason``) or malformed (counted and reported with its reason)."""
        self.skipped += 1
        if reason is not None and len(self.bad_rows) < MAX_REPORTED_LINES:
            self.bad_rows.append(f"{where}: {reason}")

    def add(self, s1: str, s2: str, score: float, subset: str = "") -> None:
        self.sentences1.append(s1)
        self.sentences2.append(s2)
        self.scores.append(score)
        self.subset.append(subset)

    def __len__(self) -> int:
        return len(self.scores)


# ---------------------------------------------------------------- finding the sets

def find_sets(data: str | Path, split: str = "test") -> dict[str, Path]:
    """``{set name: folder}`` of the sets under ``data`` that have ``split`` (nothing read yet)."""
    if split not in SPLIT_FILES:
        raise ValueError(f"unknown split {split!r}; choose from test, dev, train")
    root = Path(data).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"STS data folder does not exist: {root}")
    found: dict[str, Path] = {}
    candidates = [root, root / "STS", root / "SICK", *sorted(p for p in (root / "STS").glob("*") if p.is_dir()),
                  *sorted(p for p in root.glob("*") if p.is_dir())]
    for folder in dict.fromkeys(candidates):
        if not folder.is_dir():
            continue
        year = YEAR_FOLDER.fullmatch(folder.name)
        if year and split == "test" and any(folder.glob("STS.input.*.txt")):
            found.setdefault(f"STS{year.group(1)}", folder)
        elif (folder / SPLIT_FILES[split]).is_file():
            found.setdefault("STSBenchmark", folder)
        elif _sick_has_split(folder, split):
            found.setdefault("SICK-R", folder)
    return {name: found[name] for name in SETS if name in found}


def check_sts_all_data(data: str | Path, split: str = "test", **_) -> None:
    """Cheap check before a model loads: at least one of the seven sets is there."""
    if not find_sets(data, split):
        raise FileNotFoundError(
            f"{data}: none of {', '.join(SETS)} found for split {split!r} (expected SentEval's data/downstream "
            "tree, its STS/ or SICK/ folder, an STS12-en-test…STS16-en-test folder, an STS-B folder with "
            f"{SPLIT_FILES[split]}, or a SICK folder)")


# ---------------------------------------------------------------- readers

def _gold(text: str, scale: tuple[float, float]) -> float | str:
    """The gold score of ``text``, or why it is not one."""
    try:
        score = float(text)
    except ValueError:
        return f"gold score {text.strip()!r} is not a number"
    if not scale[0] <= score <= scale[1]:
        return f"gold score {score:g} is outside the scale {scale[0]:g}–{scale[1]:g}"
    return score


def read_year(folder: Path, name: str) -> ScoredPairs:
    """One STS12–16 folder: every subset's input and gold files; a blank gold line is an unscored pair, a
    malformed line is counted and reported; both are skipped."""
    pairs = ScoredPairs(name)
    inputs = sorted(folder.glob("STS.input.*.txt"))
    for input_path in inputs:
        subset = INPUT_FILE.fullmatch(input_path.name).group(1)
        if subset in EXCLUDED_SUBSETS.get(name, ()):
            continue
        gold_path = folder / f"STS.gs.{subset}.txt"
        if not gold_path.is_file():
            raise FileNotFoundError(f"{input_path} has no gold file {gold_path.name} beside it")
        lines = input_path.read_text(encoding="utf-8").splitlines()
        golds = gold_path.read_text(encoding="utf-8").splitlines()
        if len(golds) != len(lines):
            raise ValueError(f"{input_path} has {len(lines)} lines but {gold_path.name} has {len(golds)}")
        for number, (line, gold) in enumerate(zip(lines, golds), 1):
            if not gold.strip():
                pairs.skip(f"{gold_path}:{number}")
                continue
            fields = line.split("\t")
            if len(fields) < 2 or not fields[0].strip() or not fields[1].strip():
                pairs.skip(f"{input_path}:{number}", "expected two tab-separated sentences")
                continue
            score = _gold(gold, STS_SCALE)
            if isinstance(score, str):
                pairs.skip(f"{gold_path}:{number}", score)
                continue
            pairs.add(fields[0].strip(), fields[1].strip(), score, subset)
        pairs.files += [str(input_path), str(gold_path)]
    return pairs


def read_stsb(folder: Path, split: str) -> ScoredPairs:
    """STS-B's file of ``split``, through ``score.sts_data`` (the reader the dev metrics use)."""
    stsb = read_sts(folder, split)
    pairs = ScoredPairs("STSBenchmark", stsb.sentences1, stsb.sentences2, stsb.scores, [""] * len(stsb),
                        files=[stsb.path], skipped=stsb.skipped_rows)
    pairs.bad_rows = [f"{stsb.path}:{line}" for line in stsb.skipped_lines]
    return pairs


def _sick_has_split(folder: Path, split: str) -> bool:
    if (folder / SICK_SPLIT_FILES[split]).is_file():
        return True
    for name in SICK_ORIGINAL_FILES:
        path = folder / name
        if path.is_file():
            with path.open(encoding="utf-8") as f:
                if any(line.rstrip("\n").endswith("\t" + SICK_SEMEVAL_SET[split]) for line in f):
                    return True
    return False


def read_sick(folder: Path, split: str) -> ScoredPairs:
    """SentEval's SICK file of ``split``, else the original SICK.txt's rows of that SemEval_set."""
    path = folder / SICK_SPLIT_FILES[split]
    wanted = None
    if not path.is_file():
        path = next(folder / n for n in SICK_ORIGINAL_FILES if (folder / n).is_file())
        wanted = SICK_SEMEVAL_SET[split]
    pairs = ScoredPairs("SICK-R", files=[str(path)])
    with path.open(encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        needed = ["sentence_A", "sentence_B", "relatedness_score"] + (["SemEval_set"] if wanted else [])
        missing = [c for c in needed if c not in header]
        if missing:
            raise ValueError(f"{path}:1: header lacks {missing} (has {header})")
        col = {c: header.index(c) for c in needed}
        for number, line in enumerate(f, 2):
            if not line.strip():
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) < len(header):
                pairs.skip(f"{path}:{number}", f"{len(fields)} fields, the header has {len(header)}")
                continue
            if wanted and fields[col["SemEval_set"]] != wanted:
                continue
            score = _gold(fields[col["relatedness_score"]], SICK_SCALE)
            if isinstance(score, str):
                pairs.skip(f"{path}:{number}", score)
                continue
            pairs.add(fields[col["sentence_A"]].strip(), fields[col["sentence_B"]].strip(), score)
    return pairs


def read_sets(data: str | Path, split: str = "test") -> dict[str, ScoredPairs]:
    out = {}
    for name, folder in find_sets(data, split).items():
        if name == "STSBenchmark":
            out[name] = read_stsb(folder, split)
        elif name == "SICK-R":
            out[name] = read_sick(folder, split)
        else:
            out[name] = read_year(folder, name)
        if out[name].bad_rows:
            log.warning("%s: skipped %d malformed rows (first: %s)", name, len(out[name].bad_rows),
                        "; ".join(out[name].bad_rows[:3]))
        if len(out[name]) < 2:
            raise ValueError(f"{name} at {folder}: fewer than 2 scored pairs")
    return out


# ---------------------------------------------------------------- scoring

def evaluate_sts_all(model, data: str | Path, split: str = "test", *, batch_size: int = 64, limit: int | None = None,
                     actors: int | None = None, **_) -> dict:
    """The seven STS sets present under ``data`` (see the module docstring) scored with ``model``'s own score."""
    from eval.models import as_trained

    started = time.perf_counter()
    model = as_trained(model)
    sets = read_sets(data, split)
    if limit is not None:
        for pairs in sets.values():
            for attr in ("sentences1", "sentences2", "scores", "subset"):
                setattr(pairs, attr, getattr(pairs, attr)[:limit])
    sentences = [s for p in sets.values() for s in dict.fromkeys(p.sentences1 + p.sentences2)]
    model.enable_cache()
    if actors:  # a pool of Ray actors encodes, the scoring below reads the cache
        from eval.actor_encode import fill_cache

        fill_cache(model, sentences, actors=actors, batch_size=batch_size)
    model.encode(sentences, batch_size)
    name = model.similarity_name
    out_sets = {}
    for set_name, pairs in sets.items():
        predicted = np.asarray(model.similarity(pairs.sentences1, pairs.sentences2, batch_size), dtype=np.float64)
        gold = np.asarray(pairs.scores, dtype=np.float64)
        entry = {"spearman": spearman(predicted, gold), "n_pairs": len(pairs), "skipped": pairs.skipped,
                 "bad_rows": pairs.bad_rows, "files": pairs.files}
        if name != "cosine":
            cosine = np.asarray(model.cosine(pairs.sentences1, pairs.sentences2, batch_size), dtype=np.float64)
            entry["cosine"] = spearman(cosine, gold)
        subset = np.asarray(pairs.subset)
        masks = {s: subset == s for s in sorted(set(pairs.subset) - {""})}
        masks = {s: m for s, m in masks.items() if m.sum() > 1}
        if masks:
            per = {s: spearman(predicted[m], gold[m]) for s, m in masks.items()}
            sizes = {s: int(m.sum()) for s, m in masks.items()}
            entry["subsets"] = {**per, "mean": float(np.mean(list(per.values()))),
                                "wmean": float(sum(per[s] * sizes[s] for s in per) / sum(sizes.values()))}
        out_sets[set_name] = entry
    result = {"task": "sts_all", "split": split, "data": str(Path(data).expanduser()), "similarity": name,
              "method": model.method_name, "sets": out_sets,
              "mean": float(np.mean([e["spearman"] for e in out_sets.values()])),
              "missing": [s for s in SETS if s not in out_sets],
              "n_pairs": sum(e["n_pairs"] for e in out_sets.values()),
              "skipped_rows": sum(e["skipped"] for e in out_sets.values()),
              "seconds": round(time.perf_counter() - started, 2)}
    result.update({s: e["spearman"] for s, e in out_sets.items()})
    if result["missing"]:
        log.info("sts_all: scored %s; not found under %s: %s", ", ".join(out_sets), data,
                    ", ".join(result["missing"]))
    return result
