"""The pair ingest as one Ray Data job: ``run_pair_ingest``.

1. the driver checks every source and plans its read units
   (``sources.resolve_sources``): a bad source is a ``PairSourceError``
   naming file and column before any Ray work;
2. one Ray Data task per unit reads it and writes its pair units
   (``readers.read_unit``);
3. grouping by premise, caps and hard negatives (``negatives``);
4. the two sets and their manifests (``output``), then the top-level
   ``pairs_manifest.json``.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field

import ray

from ingest.pairs.negatives import cap_relations, per_premise, random_negatives
from ingest.pairs.output import files_for, to_final, write_manifests, write_set
from ingest.pairs.readers import UNITS, read_unit
from ingest.pairs.sources import PairIngestConfig, PairSourceError, resolve_sources
from setformat.io import read_dataset, write_json

log = logging.getLogger(__name__)


def _clear(out: str, path: str) -> None:
    """Remove a work folder of the job writing ``out`` (structcse's own: ``infra.owned.remove_owned``)."""
    from setformat.integrity import remove_in_out

    remove_in_out(out, path, "a work folder of the pairs job", "python -m ingest.pairs")


def _caps(cfg: PairIngestConfig) -> dict[str, int]:
    """Check the config's numbers; returns the per-relation caps."""
    if not cfg.sources:
        raise PairSourceError("no pair sources given")
    if cfg.max_triplets_per_premise is not None and cfg.max_triplets_per_premise < 1:
        raise PairSourceError("max_triplets_per_premise must be >= 1 (or None)")
    caps = {rel: int(cap) for rel, cap in (cfg.max_per_relation or {}).items()}
    for relation, cap in caps.items():
        if cap < 1:
            raise PairSourceError(f"max_per_relation[{relation!r}] must be >= 1, got {cap}")
    return caps


def _start_ray() -> None:
    if not ray.is_initialized():
        from infra.ray_local import local_init_kwargs

        ray.init(**local_init_kwargs({}))
    ctx = ray.data.DataContext.get_current()
    ctx.shuffle_strategy = ray.data.context.ShuffleStrategy.SORT_SHUFFLE_PULL_BASED


@dataclass
class _Read:
    """Stage 1's results: per source (by index) records, pairs, valid pairs, drops and
    their first rows, input digests; the pair-unit files; each unit's label."""

    per_source: dict[int, dict]
    files: list[str]
    unit_labels: dict[int, dict[int, str]]
    input_bytes: int = 0


def _read_units(sources: list[dict], units: list[dict], work: str) -> _Read:
    results = (
        ray.data.from_items([{"unit": json.dumps(u)} for u in units], override_num_blocks=max(1, len(units)))
        .map(read_unit, fn_kwargs={"work": work}, num_cpus=1)
        .take_all()
    )
    results = sorted((json.loads(r["result"]) for r in results), key=lambda r: (r["source"], r["unit"]))
    unit_labels: dict[int, dict[int, str]] = {}
    for u in units:
        unit_labels.setdefault(u["source"], {})[u["unit"]] = u["label"]
    read = _Read({s["index"]: {"records": 0, "pairs": 0, "valid": 0, "dropped": Counter(), "first": {},
                               "digests": [], "not_utf8_replaced": 0, "not_utf8_replaced_first": []}
                  for s in sources},
                 [f"{work}/pair_units/{r['file']}" for r in results], unit_labels)
    for r in results:
        e = read.per_source[r["source"]]
        e["records"] += r["records"]
        e["pairs"] += r["pairs"]
        e["valid"] += r["valid"]
        e["dropped"].update(r["dropped"])
        for reason, rows in r["first"].items():
            e["first"].setdefault(reason, []).extend([r["unit"], row] for row in rows)
        e["digests"].extend(r["digests"])
        e["not_utf8_replaced"] += r.get("not_utf8_replaced", 0)
        e["not_utf8_replaced_first"].extend([r["unit"], row] for row in r.get("not_utf8_replaced_first", []))
        read.input_bytes += sum(d["bytes"] for d in r["digests"])
    for s in sources:
        e = read.per_source[s["index"]]
        log.info(f"[pairs] read {s['tag']}: {e['records']} rows, {e['pairs']} pairs, {e['valid']} valid, "
                 f"dropped {dict(sorted(e['dropped'].items()))}"
                 + (f"; {e['not_utf8_replaced']} row(s) kept with U+FFFD for bytes that are not UTF-8"
                    if e["not_utf8_replaced"] else ""))
    return read


@dataclass
class _Rows:
    """Stages 2–4's results: the rows of each set (Ray Datasets of ``output.FINAL``
    rows, None when there are none), their file counts, and what the manifests count."""

    triplets: object = None
    relations: object = None
    triplet_files: int = 1
    relation_files: int = 1
    fates: dict = field(default_factory=dict)
    relation_counts: Counter = field(default_factory=Counter)
    caps_applied: dict = field(default_factory=dict)


def _build_rows(cfg: PairIngestConfig, read: _Read, caps: dict[str, int], shuffle) -> _Rows:
    rows = _Rows()
    if not sum(e["valid"] for e in read.per_source.values()):
        return rows
    selected = sorted(cfg.relations) if cfg.relations is not None else None
    pair_units = read_dataset(read.files, columns=UNITS.names)
    triplets, relations = per_premise(pair_units, shuffle, cfg.seed, cfg.max_triplets_per_premise, selected,
                                      rows.fates)
    n_triplets = triplets.count()
    relations, rows.caps_applied = cap_relations(relations, caps, rows.relation_counts, rows.fates)
    resolved = random_negatives(relations, rows.relation_counts, cfg.pool_bucket_rows, cfg.seed, shuffle)

    n_relations = sum(n for (_, sel), n in rows.relation_counts.items() if sel)
    rows.relation_files = files_for(n_relations, cfg)
    final = relations.map_batches(to_final, batch_format="pyarrow",
                                  fn_kwargs={"files": rows.relation_files, "mode": "relation"})
    if resolved is not None:
        final = final.union(resolved.map_batches(to_final, batch_format="pyarrow",
                                                 fn_kwargs={"files": rows.relation_files, "mode": "pool"}))
    rows.relations = final if n_relations else None
    rows.triplet_files = files_for(n_triplets, cfg)
    rows.triplets = triplets.map_batches(to_final, batch_format="pyarrow",
                                         fn_kwargs={"files": rows.triplet_files, "mode": "triplet"}) \
        if n_triplets else None
    return rows


def run_pair_ingest(cfg: PairIngestConfig) -> dict:
    """Run the job; returns the top-level manifest (also written as ``<out>/pairs_manifest.json``)."""
    from dataclasses import asdict

    from infra.secrets import check_no_secrets

    check_no_secrets(asdict(cfg), "pair ingest config")
    started = time.time()
    out = cfg.out.rstrip("/")
    work = f"{out}/_work"
    caps = _caps(cfg)
    from infra.owned import check_destination, claim

    check_destination(out, "--out")  # a bucket root or a user's folder: refused before anything is written
    claim(out, "python -m ingest.pairs")  # the sources' work files (resolve_sources) are written into it
    for path in (f"{work}/pair_units", f"{work}/pair_hf"):
        _clear(out, path)
    sources, units = resolve_sources(cfg, work)  # every source error is raised here, before Ray work
    from setformat.integrity import finish_job, start_job

    # its sets are whole once it is done; the stale parts of an earlier run are removed now
    job_id = start_job(out, "pairs", "python -m ingest.pairs", sets=("nli_triplets", "relation_triples"))
    tags = [s["tag"] for s in sources]
    _start_ray()

    read = _read_units(sources, units, work)
    from ingest.shuffle import Shuffle

    shuffle = Shuffle.in_work(work, cfg.memory_per_cpu)  # every shuffle's buckets sized from its rows
    try:
        rows = _build_rows(cfg, read, caps, shuffle)
        triplets = write_set(rows.triplets, "nli_triplets", rows.triplet_files, out, tags, shuffle, cfg.relations)
        relations = write_set(rows.relations, "relation_triples", rows.relation_files, out, tags, shuffle,
                              cfg.relations)
    finally:
        shuffle.remove()
    manifest = write_manifests(cfg, out, sources, read.per_source, read.unit_labels, rows.fates, triplets,
                               relations, rows.relation_counts, rows.caps_applied)
    _clear(out, f"{work}/pair_units")
    _clear(out, f"{work}/pair_hf")
    manifest["seconds"] = round(time.time() - started, 2)
    write_json(manifest, f"{out}/pairs_manifest.json")
    finish_job(out, job_id)
    accounted = all(s["pairs"]["accounted"] for s in manifest["sets"].values())
    log.info(f"[pairs] wrote {triplets.rows} nli_triplets and {relations.rows} relation_triples "
             f"({manifest['sets']['relation_triples']['relations']}) to {out} in {manifest['seconds']} s; "
             f"accounted: {accounted}")
    return manifest
