"""STS as the papers report it: SentEval's STS12–STS16 "all", STS-B and SICK-R, and their mean (methods.md §1e).

Input (``data``): by default MTEB's copies on the Hugging Face Hub, read through ``datasets``
(``mteb/sts12-sts`` … ``mteb/sts16-sts``, ``mteb/stsbenchmark-sts``, ``mteb/sickr-sts``: columns
sentence1, sentence2, score; ``score.sts_sets.hub_sets``, ``infra.hub_data``), hub names or folders of
their files; or SentEval's ``data/downstream`` tree as its download script lays it out, or any one
folder of it:

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

SICK-R (``sick_protocol``):

* ``senteval`` (the default; SentEval's and SimCSE's protocol, the papers' SICK-R figures): the SemEval-2014
  test part, SentEval's ``SICK_test_annotated.txt``, 4,927 pairs (``SICK_trial.txt`` for dev,
  ``SICK_train.txt`` for train). From the hub: ``mteb/sickr-sts`` at its first revision
  (``infra.hub_data.SICK_R_SEMEVAL``), which keeps SemEval's three splits; from the original ``SICK.txt``:
  its rows whose ``SemEval_set`` is TEST (4,906: ``SICK.txt`` lacks 21 of SentEval's test pairs; the result
  says so). A source whose split holds all of SICK (9,927 pairs, MTEB's pinned copy; or 9,840, all of
  ``SICK.txt``) is an error that says so: it is not the papers' protocol.
* ``mteb``: all of SICK, train + trial + test (9,927 pairs), MTEB's protocol: MTEB's pinned copy
  (``mteb/sickr-sts``, whose one test split holds them), or SentEval's three files (``SICK.txt``'s
  9,840 rows) concatenated for split test. Not comparable with the papers' SICK-R figures.

MTEB's STS12–16 test splits are the years' subsets concatenated, with no subset column: their one
Spearman is the "all" figure below (no ``subsets`` entry).

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

Result: ``{"task": "sts_all", "split", "similarity", "sick_protocol", "protocol": one line naming the
protocol and split of every set scored, "sets": {name: {"spearman", "n_pairs", "skipped", "bad_rows",
"files", "protocol", ["note": SICK-R read whole with another number of pairs than SentEval's files have],
["subsets"], ["cosine"]}}, "mean": mean over the sets scored, "missing": the seven names not found,
"STS12"…"SICK-R": each Spearman at top level}``. One rule for a bad row (as every reader in ``score``): a
gold score outside its scale or not a number, or a line without two sentences, is
skipped, counted in ``skipped`` and named in ``bad_rows`` (file:line: reason); the files are found
and read by ``score.sts_sets``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from score.metrics import spearman
from score.nli_data import SICK_ORIGINAL_FILES
from score.sts_data import SPLIT_FILES
from infra.hub_data import check_available
from score.sts_sets import SETS, ScoredPairs, find_sets, hub_sets, read_hub_sets, read_sets

log = logging.getLogger(__name__)

SICK_PROTOCOLS = ("senteval", "mteb")
SENTEVAL_SICK_PAIRS = {"train": 4500, "dev": 500, "test": 4927}  # SentEval's SICK_{train,trial,test_annotated}.txt
ALL_OF_SICK = {9927: "the SemEval files' train + trial + test: MTEB's copy", 9840: "all of the original SICK.txt"}


def sick_protocol_name(protocol: str, split: str) -> str:
    """What SICK-R is under ``protocol`` for ``split``, in words (results, the report's header)."""
    if protocol == "mteb" and split == "test":
        return "SICK-R: all of SICK, SemEval train + trial + test (9,927 pairs; MTEB's protocol, not the papers')"
    part = {"test": "test", "dev": "trial", "train": "train"}[split]
    return (f"SICK-R: the SemEval-2014 {part} part ({SENTEVAL_SICK_PAIRS[split]:,} pairs"
            + ("; SentEval's protocol, as SimCSE)" if split == "test" else ")"))


def _check_protocol(sick_protocol: str) -> None:
    if sick_protocol not in SICK_PROTOCOLS:
        raise ValueError(f"unknown SICK-R protocol {sick_protocol!r}; choose from {', '.join(SICK_PROTOCOLS)}")


def protocol_sources(sources: dict, sick_protocol: str) -> dict:
    """The hub sources with SICK-R's MTEB copy read at the revision that keeps SemEval's splits when the protocol
    is SentEval's (``infra.hub_data.SICK_R_SEMEVAL``); a local copy or folder is read as it is."""
    from infra.hub_data import MTEB_STS, SICK_R_SEMEVAL, HubSource

    source = sources.get("SICK-R")
    if (sick_protocol != "senteval" or source is None or source.folder is not None
            or source.name != MTEB_STS["SICK-R"].name):
        return sources
    semeval = HubSource(f"{SICK_R_SEMEVAL.name}@{SICK_R_SEMEVAL.revision[:7]}", name=SICK_R_SEMEVAL.name,
                        revision=SICK_R_SEMEVAL.revision)
    return {**sources, "SICK-R": semeval}


def _all_of_sick(folder: Path) -> ScoredPairs:
    """SentEval's three SICK files (or SICK.txt's three SemEval sets) as one set: the pairs MTEB's copy holds."""
    from score.sts_sets import _sick_has_split, read_sick

    out = ScoredPairs("SICK-R")
    for split in ("train", "dev", "test"):
        if _sick_has_split(folder, split):
            part = read_sick(folder, split)
            for attr in ("sentences1", "sentences2", "scores", "subset", "bad_rows"):
                getattr(out, attr).extend(getattr(part, attr))
            out.skipped += part.skipped
            out.files += [f for f in part.files if f not in out.files]
    return out


def read_sts_all(data: str | Path | None, split: str = "test", sick_protocol: str = "senteval") -> dict:
    """The seven STS sets present under ``data`` (``score.sts_sets``), SICK-R by ``sick_protocol``."""
    _check_protocol(sick_protocol)
    sources = hub_sets(data, split)
    if sources is not None:
        sources = protocol_sources(sources, sick_protocol)
        sets = read_hub_sets(sources, split)
        for name, pairs in sets.items():
            if len(pairs) < 2:
                raise ValueError(f"{name} at {sources[name].label}: fewer than 2 scored pairs")
    else:
        sets = read_sets(data, split)
        if sick_protocol == "mteb" and split == "test" and "SICK-R" in sets:
            sets["SICK-R"] = _all_of_sick(find_sets(data, split)["SICK-R"])
    sick = sets.get("SICK-R")
    if sick is not None and sick_protocol == "senteval" and len(sick) + sick.skipped in ALL_OF_SICK:
        rows = len(sick) + sick.skipped
        raise ValueError(
            f"SICK-R at {', '.join(sick.files)}: its {split} split holds {rows:,} pairs, {ALL_OF_SICK[rows]}, not "
            f"SentEval's SemEval-2014 {split} part ({SENTEVAL_SICK_PAIRS[split]:,} pairs, the papers' protocol); "
            "give SentEval's SICK folder or mteb/sickr-sts by name (read at the revision with SemEval's splits), "
            "or --sick-protocol mteb for MTEB's figure over all of SICK")
    return sets


def check_sts_all_data(data: str | Path | None, split: str = "test", sick_protocol: str = "senteval", **_) -> None:
    """Cheap check before a model loads: at least one of the seven sets is there, or can be read from the
    hub now (``score.sts_sets.hub_sets``, ``infra.hub_data.check_available``)."""
    _check_protocol(sick_protocol)
    sources = hub_sets(data, split)
    if sources is not None:
        sources = protocol_sources(sources, sick_protocol)
        if not sources:
            raise FileNotFoundError(f"{data or 'MTEB'}: none of {', '.join(SETS)} has a {split} split "
                                    "(STS12-16 are test sets)")
        check_available(list(sources.values()))
        return
    if not find_sets(data, split):
        raise FileNotFoundError(
            f"{data}: none of {', '.join(SETS)} found for split {split!r} (expected SentEval's data/downstream "
            "tree, its STS/ or SICK/ folder, an STS12-en-test…STS16-en-test folder, an STS-B folder with "
            f"{SPLIT_FILES[split]}, or a SICK folder)")


def evaluate_sts_all(model, data: str | Path, split: str = "test", *, batch_size: int = 64, limit: int | None = None,
                     actors: int | None = None, sick_protocol: str = "senteval", **_) -> dict:
    """The seven STS sets present under ``data`` (see the module docstring) scored with ``model``'s own score;
    SICK-R by ``sick_protocol`` (``senteval``: the SemEval test part, the papers'; ``mteb``: all of SICK)."""
    from eval.models import as_trained

    started = time.perf_counter()
    sets = read_sts_all(data, split, sick_protocol)
    model = as_trained(model)
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
    out_sets = {set_name: _score_set(model, set_name, pairs, split, sick_protocol, limit, batch_size)
                for set_name, pairs in sets.items()}
    result = {"task": "sts_all", "split": split, "data": str(Path(data).expanduser()) if data else
              ",".join(p.files[0] for p in sets.values()), "similarity": name,
              "method": model.method_name, "sick_protocol": sick_protocol,
              "protocol": "; ".join(e["protocol"] for e in out_sets.values()), "sets": out_sets,
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


def _score_set(model, set_name: str, pairs, split: str, sick_protocol: str, limit: int | None,
               batch_size: int) -> dict:
    """One set's Spearman with the model's own score (and cosine's, when that is another), per subset where
    the set has them, and a note when SICK-R has fewer pairs than its protocol."""
    predicted = np.asarray(model.similarity(pairs.sentences1, pairs.sentences2, batch_size), dtype=np.float64)
    gold = np.asarray(pairs.scores, dtype=np.float64)
    entry = {"spearman": spearman(predicted, gold), "n_pairs": len(pairs), "skipped": pairs.skipped,
             "bad_rows": pairs.bad_rows, "files": pairs.files, "protocol": _set_protocol(set_name, split,
                                                                                         sick_protocol)}
    if set_name == "SICK-R" and limit is None:
        rows, whole = len(pairs) + pairs.skipped, _sick_pairs(sick_protocol, split)
        if rows != whole:
            entry["note"] = (f"{rows:,} pairs read, where {whole:,} were expected"
                             + (" (the original SICK.txt lacks some of SemEval's pairs)"
                                if any(Path(f).name in SICK_ORIGINAL_FILES for f in pairs.files) else ""))
            log.warning("sts_all: SICK-R: %s", entry["note"])
    if model.similarity_name != "cosine":
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
    return entry


def _sick_pairs(sick_protocol: str, split: str) -> int:
    """How many pairs SICK-R has under ``sick_protocol`` for ``split`` (SentEval's files)."""
    return sum(SENTEVAL_SICK_PAIRS.values()) if sick_protocol == "mteb" and split == "test" else \
        SENTEVAL_SICK_PAIRS[split]


def _set_protocol(name: str, split: str, sick_protocol: str) -> str:
    """One set's protocol in words: which split, pooled how."""
    if name == "SICK-R":
        return sick_protocol_name(sick_protocol, split)
    if name == "STSBenchmark":
        return f"STS-B {split}"
    return f"{name} test, its subsets pooled into one Spearman (SentEval 'all', as SimCSE)"
