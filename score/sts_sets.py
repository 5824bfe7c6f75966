"""SentEval's STS12–STS16 "all" test sets, STS-B and SICK-R, as the papers' STS table reads them: finding them
under a SentEval ``data/downstream`` tree and reading them (``eval.sts_all`` scores them; the layouts are
described there). STS-B is read by ``score.sts_data`` (the dev metrics' reader); every reader here follows
the same rule for a bad row: skipped, counted in ``skipped``, named in ``bad_rows`` (file:line: reason).
A blank gold line is an unscored pair (skipped, as SentEval does); a file-level fault (a gold file of
another length, a header without its columns) is an error naming the file.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from score.nli_data import SICK_ORIGINAL_FILES
from score.sts_data import MAX_REPORTED_LINES, SPLIT_FILES, read_sts

log = logging.getLogger(__name__)

SETS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R")
YEAR_FOLDER = re.compile(r"STS(1[2-6])-en-test")
INPUT_FILE = re.compile(r"STS\.input\.(.+)\.txt")
EXCLUDED_SUBSETS = {"STS13": {"SMT"}}  # LDC-licensed, absent from SentEval's download
STS_SCALE, SICK_SCALE = (0.0, 5.0), (1.0, 5.0)
SICK_SPLIT_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
SICK_SEMEVAL_SET = {"train": "TRAIN", "dev": "TRIAL", "test": "TEST"}


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


# ---------------------------------------------------------------- the same sets from the hub (infra.hub_data)

def _set_of(source) -> str:
    from infra.hub_data import MTEB_STS

    by_name = {d.name: s for s, d in MTEB_STS.items()}
    by_folder = {d.name.split("/")[1]: s for s, d in MTEB_STS.items()}
    if source.name in by_name:
        return by_name[source.name]
    folder = source.folder or Path(source.label)
    for part in (folder.name, folder.parent.name):
        if part in by_folder:
            return by_folder[part]
    raise ValueError(f"{source.label}: cannot tell which of {', '.join(SETS)} it is; name it like MTEB's copy "
                     f"({', '.join(by_name)}) or its folder like the repo ({', '.join(by_folder)})")


def hub_sets(data: str | Path | None, split: str = "test") -> dict | None:
    """``{set name: HubSource}`` of the STS table's sets ``data`` names from the hub (None: MTEB's seven; a hub
    name; a folder of a hub dataset's files; a folder holding such copies as ``<owner>/<name>`` or ``<name>``;
    a comma-separated list of these), or None when ``data`` is a SentEval tree (``find_sets``). STS12–16 are
    test sets: for another split they are left out, as in SentEval's layout."""
    from infra.hub_data import MTEB_STS, hub_source, is_hub_copy

    text = ",".join(d.name for d in MTEB_STS.values()) if data is None else str(data)
    root = Path(text).expanduser()
    if root.is_dir():
        if find_sets(root, split):
            return None
        inside = [root / d.name for d in MTEB_STS.values()] + [root / d.name.split("/")[1] for d in MTEB_STS.values()]
        parts = [str(p) for p in inside if is_hub_copy(p)] or ([str(root)] if is_hub_copy(root) else [])
        if not parts:
            return None
    else:
        parts = [p.strip() for p in text.split(",") if p.strip()]
    sources = {}
    for part in parts:
        source = hub_source(part)
        if source is None:
            if "," not in text and len(parts) == 1:
                return None  # not a hub source: the SentEval reader's error
            raise FileNotFoundError(f"{part}: neither a hub dataset name nor a folder of a hub dataset's files")
        name = _set_of(source)
        if name in sources:
            raise ValueError(f"{name} given twice: {sources[name].label} and {source.label}")
        sources[name] = source
    return {name: sources[name] for name in SETS if name in sources
            and (split == "test" or name in ("STSBenchmark", "SICK-R"))}


def read_hub_sets(sources: dict, split: str) -> dict[str, ScoredPairs]:
    """Each hub set's ``split``; STS-B or SICK-R without that split is left out (logged), a year without its
    test split is an error."""
    from infra.hub_data import read_scored

    out = {}
    for name, source in sources.items():
        try:
            rows = read_scored(source, split, SICK_SCALE if name == "SICK-R" else STS_SCALE)
        except FileNotFoundError as e:
            if name in ("STSBenchmark", "SICK-R") and str(e).startswith("no "):
                log.info("%s: %s", name, e)
                continue
            raise
        out[name] = ScoredPairs(name, rows.sentences1, rows.sentences2, rows.values, [""] * len(rows.values),
                                files=[rows.where], skipped=rows.skipped, bad_rows=list(rows.bad_rows))
    if not out:
        raise FileNotFoundError(f"none of {', '.join(s.label for s in sources.values())} has a {split} split")
    return out


def read_sets(data: str | Path | None, split: str = "test") -> dict[str, ScoredPairs]:
    sources = hub_sets(data, split)
    if sources is not None:
        out = read_hub_sets(sources, split)
        for name, pairs in out.items():
            if len(pairs) < 2:
                raise ValueError(f"{name} at {sources[name].label}: fewer than 2 scored pairs")
        return out
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
