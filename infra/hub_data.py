"""Public evaluation data by name: the Hugging Face Hub datasets the tasks read by default, through ``datasets``.

A task's ``--data`` is one of:

* nothing: the task's public datasets (``eval.tasks.DEFAULT_DATA``), e.g. MTEB's seven STS sets for ``sts_all``;
* a hub dataset name, ``owner/name`` (``mteb/stsbenchmark-sts``, ``stanfordnlp/snli``, ``RobZamp/sick``);
* a local folder in SentEval's layout (read by ``score.sts_data``, ``score.sts_sets``, ``score.nli_data``,
  ``eval.mrpc`` as before), or holding a hub dataset's own files: ``Dataset``/``DatasetDict.save_to_disk``
  output, or the repository's data files as downloaded (``data/test-00000-of-00001.parquet``,
  ``test.jsonl.gz``, ...).

``STRUCTCSE_HUB_COPIES=FOLDER`` reads a hub name ``owner/name`` from ``FOLDER/owner/name`` when that folder
exists (an offline machine; ``eval.hub_copies`` writes such copies from SentEval-layout files).

Before anything is loaded, ``check_available`` makes sure a hub name can be read now: in the Hugging Face
cache, or the hub reachable (one TCP connect, 3 s). Offline (``HF_HUB_OFFLINE=1`` / ``HF_DATASETS_OFFLINE=1``,
or no connection) a missing dataset is one :class:`HubDataUnavailable` line naming every missing dataset and
the ``--data`` flag; ``datasets`` itself is imported only to read.

The hub's rows go through the same rule as the SentEval readers: a row with a gold score outside its scale
or not a number, or an empty sentence, is skipped, counted and named (``<source>[<row>]: reason``).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

COPIES_ENV = "STRUCTCSE_HUB_COPIES"
PROBE_TIMEOUT_S = 3.0
MAX_REPORTED_ROWS = 10


@dataclass(frozen=True)
class HubDataset:
    """A dataset on the Hugging Face Hub: its name, the revision read (None: the newest) and config."""

    name: str
    revision: str | None = None
    config: str | None = None


# The papers' STS table from MTEB's copies (revisions as MTEB pins them). STS12–16: each test split is the
# concatenation of the year's subsets with no subset column, so its one Spearman is SentEval's "all" setting.
MTEB_STS = {
    "STS12": HubDataset("mteb/sts12-sts", "a0d554a64d88156834ff5ae9920b964011b16384"),
    "STS13": HubDataset("mteb/sts13-sts", "7e90230a92c190f1bf69ae9002b8cea547a64cca"),
    "STS14": HubDataset("mteb/sts14-sts", "6031580fec1f6af667f0bd2da0a551cf4f0b2375"),
    "STS15": HubDataset("mteb/sts15-sts", "ae752c7c21bf194d8b67fd573edf7ae58183cbe3"),
    "STS16": HubDataset("mteb/sts16-sts", "4d8694f8f0e0100860b497b999b3dbed754a0513"),
    "STSBenchmark": HubDataset("mteb/stsbenchmark-sts", "b0fddb56ed78048fa8b90373c8a3cfc37b684831"),
    "SICK-R": HubDataset("mteb/sickr-sts", "20a6d6f312dd54037fe07a32d58e5e168867909d"),
}
# SICK-R by SentEval's protocol (``eval.sts_all``, ``sick_protocol="senteval"``): the SemEval-2014 test part,
# 4,927 pairs. MTEB's pinned revision above puts all of SICK (train + trial + test, 9,927 pairs) in its one test
# split; the repository's first upload (2022-04-19) kept SemEval's three splits (train, validation, test).
SICK_R_SEMEVAL = HubDataset("mteb/sickr-sts", "b589c9fc99a24743f4f6cc6c7c9633cd0fe40b9d")
SNLI = HubDataset("stanfordnlp/snli")
SICK = HubDataset("RobZamp/sick")  # SICK with its SemEval-2014 splits, relatedness and entailment labels
MRPC = HubDataset("nyu-mll/glue", config="mrpc")
KNOWN = {d.name: d for d in (*MTEB_STS.values(), SNLI, SICK, MRPC)}

HUB_SPLITS = {"dev": "validation", "trial": "validation", "test": "test", "train": "train"}
HUB_NAME = re.compile(r"[A-Za-z0-9][\w.\-]*/[A-Za-z0-9][\w.\-]*")
DATA_FILES = ("*.parquet", "*.jsonl", "*.jsonl.gz", "*.json", "*.json.gz", "*.arrow")


class HubDataUnavailable(FileNotFoundError):
    """A hub dataset that is neither a local copy nor cached, while the hub cannot be reached."""


@dataclass(frozen=True)
class HubSource:
    """Hub data to read: a hub name (``folder`` None) or a local folder in the hub's format."""

    label: str  # what results name as their data: the hub name or the folder
    name: str | None = None  # the hub name (None: a folder given as such)
    folder: Path | None = None
    revision: str | None = None
    config: str | None = None


# ---------------------------------------------------------------- telling a hub source from a SentEval folder

def is_hub_copy(folder: Path) -> bool:
    """True when ``folder`` holds a hub dataset's files: ``save_to_disk`` output or parquet/json(l)/arrow data
    files (at its top, or one or two folders down: ``data/``, a config's or a split's folder)."""
    if not folder.is_dir():
        return False
    if (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file():
        return True
    return any(next(folder.glob(depth + p), None) is not None for depth in ("", "*/", "*/*/") for p in DATA_FILES)


def looks_like_hub_name(text: str) -> bool:
    """``owner/name``, and not a local path: nothing there, and no local folder ``owner`` either (a typo in a
    local path keeps its own error)."""
    return "://" not in text and HUB_NAME.fullmatch(text) is not None and not Path(text).expanduser().exists() \
        and not Path(text).expanduser().parent.is_dir()


def local_copy(name: str) -> Path | None:
    """``$STRUCTCSE_HUB_COPIES/<name>`` when it exists."""
    root = os.environ.get(COPIES_ENV)
    if root and (Path(root).expanduser() / name).is_dir():
        return Path(root).expanduser() / name
    return None


def hub_source(data: str | os.PathLike | None, default: HubDataset | None = None) -> HubSource | None:
    """The hub source ``data`` names (a hub name, or a folder of a hub dataset's files), or None: ``data`` is
    something else (a SentEval folder, a path that does not exist: the SentEval readers' errors then).
    ``default``: the revision and config a task reads its dataset with (``MRPC``: config mrpc)."""
    text = os.fspath(data) if data is not None else (default.name if default else "")
    folder = Path(text).expanduser()
    config = default.config if default else None
    if folder.is_dir():
        if config and is_hub_copy(folder / config):  # the whole repo copied: its config's subfolder
            folder = folder / config
        if not is_hub_copy(folder):
            return None
        return HubSource(str(folder), folder=folder, config=None)
    if not looks_like_hub_name(text):
        return None
    known = KNOWN.get(text) or (default if default and default.name == text else None)
    copy = local_copy(text)
    if copy is not None:
        if known and known.config and is_hub_copy(copy / known.config):
            copy = copy / known.config
        return HubSource(text, name=text, folder=copy)
    return HubSource(text, name=text, revision=known.revision if known else None,
                     config=known.config if known else config)


# ---------------------------------------------------------------- available now?

def _offline() -> bool:
    return any(os.environ.get(v, "").strip().upper() in ("1", "ON", "YES", "TRUE")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _cache_roots() -> tuple[Path, Path]:
    """(the hub's download cache, datasets' cache), as ``huggingface_hub`` and ``datasets`` find them."""
    home = Path(os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "huggingface")
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or home / "hub"
    return Path(hub).expanduser(), Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets").expanduser()


def is_cached(name: str) -> bool:
    hub, data = _cache_roots()
    owner, _, repo = name.partition("/")
    return (hub / f"datasets--{owner}--{repo}" / "snapshots").is_dir() or (data / f"{owner}___{repo}").is_dir()


def probe_host(endpoint: str, timeout_s: float) -> tuple[str, OSError | None, bool]:
    """Whether the host of ``endpoint`` (a hub URL) answers a TCP connect within ``timeout_s``: its
    ``host:port``, the error of a failed connect (None when it did not answer in time), and whether it answered."""
    import socket
    import threading
    from urllib.parse import urlparse

    url = urlparse(endpoint)
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)
    outcome: dict[str, object] = {}

    def probe() -> None:  # in a thread: the connect's timeout does not bound the name lookup before it
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            outcome["reached"] = True
        except OSError as e:
            outcome["error"] = e

    thread = threading.Thread(target=probe, name="hub-probe", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return f"{host}:{port}", outcome.get("error"), bool(outcome.get("reached"))


def _hub_unreachable(timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the hub's host answers a TCP connect within ``timeout_s``; else why not."""
    address, error, reached = probe_host(os.environ.get("HF_ENDPOINT") or "https://huggingface.co", timeout_s)
    if reached:
        return None
    return f"{address} cannot be reached ({str(error).strip() or type(error).__name__})" if error \
        else f"{address} did not answer within {timeout_s:g} s"


def check_available(sources: list[HubSource], flag: str = "--data FOLDER") -> None:
    """Return when every source can be read now; else one :class:`HubDataUnavailable` line naming them all
    and ``flag``, the way to give a local folder instead."""
    missing = [s.name for s in sources if s.folder is None and not is_cached(s.name)]
    if not missing:
        return
    why = "HF_HUB_OFFLINE is set" if _offline() else _hub_unreachable()
    if why is None:
        return
    names = ", ".join(dict.fromkeys(missing))
    raise HubDataUnavailable(
        f"{names}: not in the Hugging Face cache and {why}; pass a local folder with {flag} (SentEval "
        f"layout, or the datasets' own files: save_to_disk output or the hub repo's parquet/jsonl files), or set "
        f"{COPIES_ENV}=FOLDER holding them as FOLDER/<owner>/<name>")


# ---------------------------------------------------------------- reading

def load_split(source: HubSource, split: str):
    """The ``datasets.Dataset`` of ``split`` (a project split: dev reads the hub's validation). A missing split
    is a ``FileNotFoundError`` naming the splits there are."""
    hub_split = HUB_SPLITS.get(split, split)
    check_available([source])
    import datasets

    try:
        if source.folder is not None and (source.folder / "dataset_dict.json").is_file():
            every = datasets.load_from_disk(str(source.folder))
            if hub_split not in every:
                raise FileNotFoundError(f"no {hub_split} split in {source.label} (splits: {', '.join(every)})")
            return every[hub_split]
        if source.folder is not None and (source.folder / "state.json").is_file():
            return datasets.load_from_disk(str(source.folder))  # one Dataset saved: the split it was saved for
        path = str(source.folder) if source.folder is not None else source.name
        return datasets.load_dataset(path, None if source.folder is not None else source.config, split=hub_split,
                                     revision=None if source.folder is not None else source.revision)
    except ValueError as e:  # datasets: Unknown split "validation". Should be one of ['test'].
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "split" in text.lower():
            raise FileNotFoundError(f"no {hub_split} split in {source.label}: {text}") from None
        raise ValueError(f"{source.label}: {text}") from None
    except (FileNotFoundError, ConnectionError, OSError) as e:
        if isinstance(e, HubDataUnavailable) or str(e).startswith("no "):
            raise
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FileNotFoundError(f"{source.label}: {text}") from None


def has_split(source: HubSource, split: str) -> bool:
    try:
        load_split(source, split)
    except FileNotFoundError as e:
        if isinstance(e, HubDataUnavailable) or not str(e).startswith("no "):
            raise
        return False
    return True


def _column(dataset, names: tuple[str, ...], where: str) -> str:
    for name in names:
        if name in dataset.column_names:
            return name
    raise ValueError(f"{where}: no column {' or '.join(names)} (columns: {', '.join(dataset.column_names)})")


@dataclass
class HubRows:
    """What a reader took from a hub split: the kept rows and the skipped ones."""

    where: str
    sentences1: list
    sentences2: list
    values: list  # gold scores (STS) or labels (NLI relation names, MRPC 0/1)
    skipped: int = 0
    bad_rows: list | None = None
    bilateral: list | None = None  # SICK: B also entails A

    def skip(self, row: int, reason: str | None) -> None:
        self.skipped += 1
        if reason is not None and len(self.bad_rows) < MAX_REPORTED_ROWS:
            self.bad_rows.append(f"{self.where}[{row}]: {reason}")


def read_scored(source: HubSource, split: str, scale: tuple[float, float] = (0.0, 5.0)) -> HubRows:
    """sentence1, sentence2, score (MTEB's STS columns; a ``label`` or ``relatedness_score`` column serves too)."""
    dataset = load_split(source, split)
    where = f"{source.label}:{HUB_SPLITS.get(split, split)}"
    first, second = _column(dataset, ("sentence1", "sentence_A"), where), _column(dataset, ("sentence2", "sentence_B"),
                                                                                  where)
    gold = _column(dataset, ("score", "relatedness_score", "label"), where)
    rows = HubRows(where, [], [], [], bad_rows=[])
    for number, (a, b, score) in enumerate(zip(dataset[first], dataset[second], dataset[gold])):
        try:
            value = float(score)
        except (TypeError, ValueError):
            rows.skip(number, f"gold score {score!r} is not a number")
            continue
        if not scale[0] <= value <= scale[1]:
            rows.skip(number, f"gold score {value:g} is outside the scale {scale[0]:g}–{scale[1]:g}")
            continue
        a, b = (a or "").strip(), (b or "").strip()
        if not a or not b:
            rows.skip(number, "empty sentence")
            continue
        rows.sentences1.append(a)
        rows.sentences2.append(b)
        rows.values.append(value)
    if rows.bad_rows:
        log.warning("%s: skipped %d malformed rows (first: %s)", where, len(rows.bad_rows), rows.bad_rows[0])
    return rows


def _label_names(dataset, column: str) -> list[str] | None:
    feature = dataset.features.get(column)
    return list(feature.names) if hasattr(feature, "names") else None


def read_labelled(source: HubSource, split: str, labels: dict) -> HubRows:
    """premise/hypothesis (or sentence_A/B, sentence1/2) and a label mapped by ``labels`` (raw label as text,
    lower case -> relation; None: no gold label, skipped and counted). A ClassLabel's names are its text."""
    dataset = load_split(source, split)
    where = f"{source.label}:{HUB_SPLITS.get(split, split)}"
    first = _column(dataset, ("premise", "sentence_A", "sentence1"), where)
    second = _column(dataset, ("hypothesis", "sentence_B", "sentence2"), where)
    label = _column(dataset, ("label", "gold_label", "entailment_judgment"), where)
    names = _label_names(dataset, label)
    both_ways = dataset["entailment_BA"] if "entailment_BA" in dataset.column_names else None
    rows = HubRows(where, [], [], [], bad_rows=[], bilateral=[] if both_ways is not None else None)
    for number, (a, b, raw) in enumerate(zip(dataset[first], dataset[second], dataset[label])):
        key = names[raw] if names and isinstance(raw, int) and 0 <= raw < len(names) else str(raw)
        key = key.strip().lower()
        if key not in labels:
            raise ValueError(f"{where}[{number}]: unknown label {raw!r}; known: {', '.join(map(str, labels))}")
        if labels[key] is None:
            rows.skip(number, None)
            continue
        a, b = (a or "").strip(), (b or "").strip()
        if not a or not b:
            raise ValueError(f"{where}[{number}]: empty sentence")
        rows.sentences1.append(a)
        rows.sentences2.append(b)
        rows.values.append(labels[key])
        if both_ways is not None:
            rows.bilateral.append(str(both_ways[number]).strip() == "B_entails_A")
    return rows
