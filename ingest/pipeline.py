"""The ingest job: Wikipedia + Wikidata dumps -> ``sentences``, ``wikidata``,
``entities`` and ``entity_pairs`` sets, each a folder of parquet files with a
``_manifest.json`` (and the job's own ``manifest.json`` in the output folder).

Pass 1 (``ingest/units.py``) runs one task per unit, units of about equal
compressed size: Wikipedia shards (runs of multistream bz2 streams, or whole
non-indexed files) and Wikidata line ranges, many more units than CPUs. By
default each unit is a plain Ray task (``ray.remote``, 1 CPU, 3 retries of a
task whose worker died), gathered with ``ray.get``; ``pass1="data"``
(``--pass1 data``) runs the same units as the read tasks of a Ray Data
datasource (``ingest/pass1.py``) instead, with the same output. Plain tasks
stay the default because they measured faster on a 2-core machine (Ray
Data's start-up and scheduling latency; figures in ``docs/performance.md``). Each
unit writes its own deterministic files and a done-marker, so a rerun of a
killed job skips the finished units and writes byte-identical files.

Pass 2 (``ingest/entity_pairs.py``) builds EASE's entity pairs with joins and
aggregations over pass 1's files (redirects, multilingual sitelinks, link
counts, the frequency threshold, same-type hard negatives), each a shuffle
through files in ``_work`` whose buckets are sized from the rows they hold
(``ingest/shuffle.py``): a task's memory is bounded by ``memory_per_cpu``
whatever the dump's size.

The manifests count every page and every Wikidata line as written or dropped
under a named reason; ``accounted`` says the counts add up to the input.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import ray

from ingest import duplicates, entity_pairs, intros, multistream, wikidata
from setformat import schemas
from setformat.integrity import finish_job, start_job
from setformat.io import check_set, code_version, file_digest, write_json, write_set_manifest
from ingest.shuffle import Shuffle, limit_ray_data
from ingest.units import process_unit, remove_stale_unit_files
from infra.secrets import redact_text
from infra.storage import filesystem, is_uri, local_path

log = logging.getLogger(__name__)
PASS1_RUNNERS = ("tasks", "data")  # how pass 1 runs its units (IngestConfig.pass1)


@dataclass
class IngestConfig:
    wikipedia: list[str]
    out: str
    wikidata: list[str] = field(default_factory=list)
    wikidata_set: str | None = None  # an existing `wikidata` set to join against instead of dumps
    wikis: list[str] | None = None  # sitelinks kept; default: the wikis of the given Wikipedia dumps
    languages: list[str] = field(default_factory=lambda: list(wikidata.DEFAULT_LANGUAGES))
    properties: list[str] = field(default_factory=lambda: list(wikidata.DEFAULT_PROPERTIES))
    type_property: str = "P31"  # hard negatives share a value of this property
    shard_bytes: int = 32 << 20  # compressed Wikipedia bytes per task
    wikidata_range_bytes: int = 256 << 20  # uncompressed (or gzip-member) Wikidata bytes per task
    wikidata_prefilter: bool = False  # count item lines naming no configured wiki without parsing them
    entity_link_threshold: int = 10  # keep entities linked more than this many times (EASE §3.1: "more than ten")
    max_pairs_per_entity: int = 1000  # global per-entity cap, a seeded sample
    negative_candidates: int = 8  # same-type draws per pair before giving up on a hard negative
    pairs_file_bytes: int = 128 << 20  # target size of one entity_pairs file
    # memory one CPU's task may use: sizes pass 2's shuffle buckets (1/32 of it each) and Ray Data's
    # object-store budget (a quarter of it per CPU); the same at any input size (docs/performance.md)
    memory_per_cpu: int = 2 << 30
    min_sentence_chars: int = 20
    max_sentence_chars: int = 1000
    default_wiki: str = "enwiki"  # for a dump whose header and file name do not say
    seed: int = 42
    resume: bool = True  # skip pass-1 units whose done-marker matches
    pass1: str = "tasks"  # how pass 1's units run: "tasks" (plain Ray tasks) or "data" (a Ray Data read)


@ray.remote(num_cpus=1)
def plan_wikidata(paths: list[str], range_bytes: int, index_dir: str) -> list[str]:
    """Plan on a worker: a bz2 block index decompresses the file once."""
    return [r.to_json() for r in wikidata.plan_ranges(paths, range_bytes, index_dir)]


def _check_exists(paths: list[str], what: str) -> None:
    for path in paths:
        fs, local = filesystem(path)
        if not fs.exists(local):
            raise FileNotFoundError(f"{what} not found: {path}")


def _wikipedia_manifest(results: list[dict]) -> tuple[list[dict], dict]:
    per_source: dict[str, dict] = {}
    for r in results:
        e = per_source.setdefault(r["source"], {"wiki": r["wiki"], "pages_in_input": 0, "status": Counter(),
                                                "errors": [], "quarantined": [], "truncated": False,
                                                "damaged": False})
        e["pages_in_input"] += r["pages_in_input"]
        e["truncated"] |= bool(r["truncated"])
        e["damaged"] |= bool(r.get("damaged"))
        e["status"].update(json.loads(r["status"]))
        e["errors"].extend(json.loads(r["errors"]))
        e["quarantined"].extend(json.loads(r["quarantined"]))
    sources = [
        {"path": path, "wiki": e["wiki"], "pages_in_input": e["pages_in_input"], "pages": dict(sorted(e["status"].items())),
         "errors_first": e["errors"][:20], "quarantined": e["quarantined"], "truncated": e["truncated"],
         "damaged": e["damaged"],
         "accounted": not (e["truncated"] or e["damaged"]) and sum(e["status"].values()) == e["pages_in_input"]}
        for path, e in per_source.items()
    ]
    status = Counter()
    for e in per_source.values():
        status.update(e["status"])
    pages = {
        "in_input": sum(e["pages_in_input"] for e in per_source.values()),
        "written": status.get("written", 0),
        "dropped": {k: v for k, v in sorted(status.items()) if k != "written"},
        "accounted": all(s["accounted"] for s in sources),
    }
    return sources, pages


def _wikidata_manifest(results: list[dict]) -> list[dict]:
    per_source: dict[str, dict] = {}
    for r in results:
        stats = json.loads(r["stats"])
        e = per_source.setdefault(r["source"], {"lines": 0, "written": 0, "skipped": Counter(), "quarantined": [],
                                                "quarantined_count": 0, "ranges": 0, "truncated": None,
                                                "damaged": []})
        e["truncated"] = e["truncated"] or stats.get("truncated")
        e["damaged"].extend(stats.get("damaged", []))
        e["ranges"] += 1
        e["lines"] += stats["lines"]
        e["written"] += stats["written"]
        e["skipped"].update(stats["skipped"])
        e["quarantined"].extend(stats["quarantined"])
        e["quarantined_count"] += stats.get("quarantined_count", len(stats["quarantined"]))
    return [
        {"path": path, "ranges": e["ranges"], "lines": e["lines"], "written": e["written"],
         "skipped": dict(sorted(e["skipped"].items())), "quarantined_first": e["quarantined"][:100],
         "quarantined_count": e["quarantined_count"], "truncated": e["truncated"], "damaged": e["damaged"],
         "accounted": not (e["truncated"] or e["damaged"]) and e["lines"] == e["written"] + sum(e["skipped"].values())}
        for path, e in sorted(per_source.items())
    ]


def run_pass1(units: list[dict], out: str, task_cfg: dict, runner: str = "tasks") -> list[dict]:
    """Run pass 1's units; their result rows, in no particular order.

    ``"tasks"``: one plain Ray task per unit, all submitted at once and
    gathered with ``ray.get``; the raylet starts the next unit the moment a
    worker frees, and the driver only waits. ``"data"``: the read tasks of a
    Ray Data datasource (``ingest/pass1.py``): Ray Data's progress, backpressure
    and scheduling, at a fixed cost per job (its import on the driver and on
    each worker, its stats and autoscaling actors) and a short wait between a
    unit's end and the next unit's start (``docs/performance.md``). Both run a unit
    with 1 CPU and at most 3 retries of a task whose worker died, in the given
    order.
    """
    if runner == "data":
        # imports Ray Data here, not above: a second of the driver's time that --pass1 tasks saves
        from ingest.pass1 import run_units_data

        return run_units_data(units, out, task_cfg)
    run_unit = ray.remote(num_cpus=1, max_retries=3)(process_unit)
    cfg_ref = ray.put(task_cfg)
    return ray.get([run_unit.remote(unit, out, cfg_ref) for unit in units], timeout=24 * 3600)


def _check_distinct(paths: list[str]) -> None:
    """The same file given twice (directly, through a folder, or by another name) would write its pages twice."""
    import os

    seen: dict[str, str] = {}
    for path in paths:
        key = path if is_uri(path) else os.path.realpath(local_path(path))
        if key in seen:
            raise multistream.DumpFormatError(
                f"{path} is given twice (also as {seen[key]}): its pages would be written twice; give each input once")
        seen[key] = path


def run_ingest(cfg: IngestConfig) -> dict:
    """Run the whole job; returns the top-level manifest."""
    started = time.time()
    out = cfg.out.rstrip("/")
    dump_files, shards, wikis, task_cfg = _plan(cfg, out)
    # the sets below are whole only once it is done; pass 2's sets are rewritten whole: an earlier run's parts
    # are removed now, so no manifest of this job lists one (pass 1's files: remove_stale_unit_files)
    job_id = start_job(out, "ingest", "python -m ingest", sets=("intros", "entities", "entity_pairs"))
    # sha256 releases the GIL: driver threads hash the inputs while pass 1 runs, without
    # the worker process a Ray task would start (a second of a core's time on a small machine)
    hashing = ThreadPoolExecutor(max_workers=4, thread_name_prefix="digest")
    digests = [hashing.submit(file_digest, p) for p in dump_files + list(cfg.wikidata)]
    units = _units(cfg, out, shards, dump_files, wikis)
    pass1 = _pass1(cfg, out, units, task_cfg, started)
    digest_by_path = {d["path"]: d for d in (future.result() for future in digests)}
    hashing.shutdown()
    for s in pass1["sources"] + pass1["wikidata_sources"]:
        s.update({k: v for k, v in digest_by_path.get(s["path"], {}).items() if k != "path"})
    common = {"schema_version": schemas.SCHEMA_VERSION, "code_version": code_version(), "config": task_cfg,
              "sources": pass1["sources"], "wikidata": pass1["wikidata_sources"], "pages": pass1["pages"]}
    sets = _write_pass1_manifests(cfg, out, common, pass1)
    manifest = {**common, "sets": sets, "duplicate_pages": pass1["duplicate_pages"], "units": len(units),
                "units_resumed": pass1["resumed"], "stale_unit_files_removed": pass1["stale"], "pass1": cfg.pass1,
                "peak_rss_mb_per_worker": pass1["peak_rss"], "pass1_seconds": pass1["seconds"],
                "extractor_loops": dict(sorted(pass1["loops"].items()))}
    _pass2(cfg, out, task_cfg, pass1["wikipedia"], common, manifest)
    manifest["seconds"] = round(time.time() - started, 2)
    manifest["job_id"] = job_id
    write_json(manifest, f"{out}/manifest.json")
    finish_job(out, job_id)
    log.info(f"[ingest] wrote {sets['sentences']['rows']} sentences, "
             f"{sets.get('entity_pairs', {}).get('rows', 0)} entity pairs, "
             f"{sets.get('entities', {}).get('rows', 0)} entities to {out} in {manifest['seconds']} s; "
             f"pages accounted: {pass1['pages']['accounted']}")
    return manifest


def _plan(cfg: IngestConfig, out: str) -> tuple[list[str], list, list[str], dict]:
    """The inputs checked and the dumps cut into shards, before anything is written: (the dump files, their
    shards, the wikis, the config every task gets); Ray started here when it is not already."""
    from infra.secrets import check_no_secrets
    from infra.storage import check_storage

    check_no_secrets(asdict(cfg), "ingest config")
    dump_files = [f for path in cfg.wikipedia for f in multistream.dump_files_in(path)]
    _check_exists(cfg.wikidata, "Wikidata dump")
    _check_distinct(dump_files + list(cfg.wikidata))
    if cfg.wikidata_set:
        check_set(cfg.wikidata_set, "wikidata")
    check_storage(out, "--out")
    shards = multistream.plan_shards(dump_files, cfg.shard_bytes, default_wiki=cfg.default_wiki)
    wikis = cfg.wikis or list(dict.fromkeys(s.wiki for s in shards))  # the first dump's wiki titles entities
    if cfg.pass1 not in PASS1_RUNNERS:
        raise ValueError(f"pass1 must be one of {PASS1_RUNNERS}, not {cfg.pass1!r}")
    # how pass 1 runs does not shape any output: the top-level manifest records it beside the timings
    task_cfg = {k: v for k, v in asdict(cfg).items() if k != "pass1"} | {"wikis": wikis}
    if not ray.is_initialized():
        from infra.ray_local import local_init_kwargs

        ray.init(**local_init_kwargs({}))
    return dump_files, shards, wikis, task_cfg


def _units(cfg: IngestConfig, out: str, shards: list, dump_files: list[str], wikis: list[str]) -> list[dict]:
    """Pass 1's units: a task per Wikipedia shard and per line-aligned Wikidata range."""
    wikidata_ranges = (
        ray.get(plan_wikidata.remote(list(cfg.wikidata), cfg.wikidata_range_bytes, f"{out}/_work/wikidata_index"),
                timeout=24 * 3600)
        if cfg.wikidata else []
    )
    units = [{"kind": "wikipedia", "unit_id": s.shard_id, "spec": s.to_json(), "size": s.compressed_bytes}
             for s in shards]
    units += [{"kind": "wikidata", "unit_id": i, "spec": spec, "size": 0} for i, spec in enumerate(wikidata_ranges)]
    log.info(f"[ingest] {len(dump_files)} Wikipedia file(s) ({', '.join(wikis)}) in {len(shards)} shard(s); "
             f"{len(cfg.wikidata)} Wikidata file(s) in {len(wikidata_ranges)} range(s)")
    return units


def _pass1(cfg: IngestConfig, out: str, units: list[dict], task_cfg: dict, started: float) -> dict:
    """Pass 1: one task per unit, biggest first (so the last task to start is a small one); pages read twice
    removed; what every page and unit became, for the manifests."""
    stale = remove_stale_unit_files(out, units, ("wikipedia", "wikidata") if cfg.wikidata else ("wikipedia",))
    if stale:
        log.info(f"[ingest] {stale} file(s) of an earlier run into {redact_text(out)} that this run's plan does not "
                 "have (other inputs or shard sizes) removed, so no set holds their rows")
    units.sort(key=lambda u: (-u["size"], u["kind"], u["unit_id"]))
    results = run_pass1(units, out, task_cfg, cfg.pass1)
    seconds = round(time.time() - started, 2)
    results.sort(key=lambda r: (r["kind"], r["unit_id"]))
    unit_results = [json.loads(r["result"]) for r in results]
    wikipedia_results = [u for r, u in zip(results, unit_results) if r["kind"] == "wikipedia"]
    wikidata_results = [u for r, u in zip(results, unit_results) if r["kind"] == "wikidata"]
    resumed = sum(1 for r in results if r["resumed"])
    duplicate_pages = duplicates.drop_duplicate_pages(out, wikipedia_results)
    if duplicate_pages["pages"]:
        log.info(f"[ingest] {duplicate_pages['pages']} page(s) read again in another shard (the same page id in two "
                 f"inputs): written once, their later rows removed {duplicate_pages['rows']}")
    sources, pages = _wikipedia_manifest(wikipedia_results)
    log.info(f"[ingest] pass 1: {pages['in_input']} pages: {pages['written']} written, dropped {pages['dropped']}"
             + (f"; {resumed} unit(s) already done" if resumed else ""))
    loops = Counter(r.get("extractor_loops", "unknown") for r in wikipedia_results)
    if loops["python"]:
        log.warning(f"[ingest] warning: {loops['python']} of {len(wikipedia_results)} shard(s) ran the extractor's "
                    "Python loops (same output; the extractor about 2x slower): _structcse_wikitext was not importable "
                    "on their nodes; `pip install` the project there with a C compiler (cluster.yaml does)")
    return {"wikipedia": wikipedia_results, "wikidata": wikidata_results, "resumed": resumed, "stale": stale,
            "peak_rss": max((r["peak_rss_mb"] for r in results), default=0.0), "seconds": seconds,
            "duplicate_pages": duplicate_pages, "sources": sources, "pages": pages,
            "wikidata_sources": _wikidata_manifest(wikidata_results), "loops": loops}


def _write_pass1_manifests(cfg: IngestConfig, out: str, common: dict, pass1: dict) -> dict:
    """The manifests of pass 1's sets (sentences; wikidata when a dump was read); ``{set: {path, rows}}``."""
    n_sentences = sum(r["sentences"] for r in pass1["wikipedia"])
    write_set_manifest({**common, "set": "sentences", "rows": n_sentences,
                        "files": sorted(r["file"] for r in pass1["wikipedia"])}, f"{out}/sentences")
    sets = {"sentences": {"path": f"{out}/sentences", "rows": n_sentences}}
    if cfg.wikidata:
        n_items = sum(s["written"] for s in pass1["wikidata_sources"])
        write_set_manifest({**common, "set": "wikidata", "rows": n_items,
                            "files": sorted(r["file"] for r in pass1["wikidata"])}, f"{out}/wikidata")
        sets["wikidata"] = {"path": f"{out}/wikidata", "rows": n_items}
    return sets


def _pass2(cfg: IngestConfig, out: str, task_cfg: dict, wikipedia_results: list[dict], common: dict,
           manifest: dict) -> None:
    """Pass 2: the intros, and with Wikidata the entities and entity pairs (shuffles bounded by
    ``cfg.memory_per_cpu``); their manifests written, their figures added to ``manifest``."""
    sets = manifest["sets"]
    wikidata_set = cfg.wikidata_set or (f"{out}/wikidata" if cfg.wikidata else None)
    pass2_started = time.time()
    limit_ray_data(cfg.memory_per_cpu)
    shuffle = Shuffle.in_work(f"{out}/_work", cfg.memory_per_cpu)
    try:
        intro_stats = intros.build_intros(out, wikidata_set, task_cfg, wikipedia_results, common, shuffle)
        pair_stats = entity_pairs.build_entity_pairs(out, wikidata_set, task_cfg, shuffle) \
            if wikidata_set else None
    finally:
        shuffle.remove()
    manifest["shuffles"] = shuffle.steps  # per shuffle: rows, bytes, buckets and the largest bucket
    sets["intros"] = {"path": intro_stats["path"], "rows": intro_stats["rows"]}
    manifest["pass2_seconds"] = round(time.time() - pass2_started, 2)
    if not pair_stats:
        manifest["entity_pairs_skipped"] = "no Wikidata dump given (--wikidata or --wikidata-set)"
        return
    write_set_manifest({**common, "set": "entities", "rows": pair_stats["entities"], "files": ["entities.parquet"],
                        "entity_link_threshold": cfg.entity_link_threshold, "types": pair_stats["types"]},
                       f"{out}/entities")
    write_set_manifest({**common, "set": "entity_pairs", "rows": pair_stats["entity_pairs"],
                        "files": pair_stats["files"], "link_mentions": pair_stats["link_mentions"],
                        "dropped_links": pair_stats["dropped_links"], "links_accounted": pair_stats["accounted"]},
                       f"{out}/entity_pairs")
    sets["entity_pairs"] = {"path": f"{out}/entity_pairs", "rows": pair_stats["entity_pairs"]}
    sets["entities"] = {"path": f"{out}/entities", "rows": pair_stats["entities"]}
    manifest.update({"entity_stats": {k: pair_stats[k] for k in ("entities", "types", "link_mentions")},
                     "dropped_links": pair_stats["dropped_links"], "links_accounted": pair_stats["accounted"]})
