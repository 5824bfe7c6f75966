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

MTEB's STS12–16 test splits are the years' subsets concatenated, with no subset column: their one
Spearman is the "all" figure below (no ``subsets`` entry). MTEB's SICK-R ``test`` holds all of SICK
(9,927 pairs), SentEval's the SemEval test part (4,927).

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
skipped, counted in ``skipped`` and named in ``bad_rows`` (file:line: reason); the files are found
and read by ``score.sts_sets``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from score.metrics import spearman
from score.sts_data import SPLIT_FILES
from infra.hub_data import check_available
from score.sts_sets import SETS, find_sets, hub_sets, read_sets

log = logging.getLogger(__name__)


def check_sts_all_data(data: str | Path | None, split: str = "test", **_) -> None:
    """Cheap check before a model loads: at least one of the seven sets is there, or can be read from the
    hub now (``score.sts_sets.hub_sets``, ``infra.hub_data.check_available``)."""
    sources = hub_sets(data, split)
    if sources is not None:
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
    result = {"task": "sts_all", "split": split, "data": str(Path(data).expanduser()) if data else
              ",".join(p.files[0] for p in sets.values()), "similarity": name,
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
