"""The ingest job: Wikipedia + Wikidata dumps -> ``sentences`` and ``entity_pairs`` sets.

Three passes, each a Ray job whose tasks write their own deterministic
``shard-NNNNN.parquet`` (temp file + rename, so a retried task is idempotent)
and return one row of counts:

1. pages: each shard (a run of bz2 streams, or a whole file) is decompressed,
   parsed and cleaned; article pages become sentences with their link
   targets, redirects are kept for the title map, every other page is counted
   with the reason it was dropped. Wikidata is read at the same time.
2. the driver joins the small tables: redirects, title -> QID, link counts,
   P31 type -> entities; the entity vocabulary is written.
3. training rows: each pages shard becomes a ``sentences`` shard and an
   ``entity_pairs`` shard (sentence, linked entity, hard negative of the same
   P31 type not linked on the same page).

Every input page ends in the manifest as written or dropped-with-reason, and
the counts must add up to the pages in the input (``accounted``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import ray

from ingest import multistream, schemas, wikidata
from ingest.wikipedia import Page, PageError, decode_xml_bytes, iter_pages_from_file, parse_pages
from ingest.wikitext import normalize_title, split_sentences, wikitext_to_text

PAGE_ROWS = pa.schema(
    [
        pa.field("page_id", pa.int64()),
        pa.field("title", pa.string()),
        pa.field("redirect", pa.string()),
        pa.field("sentences", pa.list_(pa.string())),
        pa.field("sentence_links", pa.list_(pa.list_(pa.string()))),
    ]
)


@dataclass
class IngestConfig:
    wikipedia: list[str]
    out: str
    wikidata: list[str] = field(default_factory=list)
    streams_per_shard: int = 4
    entity_link_threshold: int = 2  # keep entities linked more than this many times (EASE: 10)
    max_pairs_per_entity_per_shard: int = 1000
    min_sentence_chars: int = 20
    max_sentence_chars: int = 1000
    seed: int = 42


def _code_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("structcse")
    except PackageNotFoundError:
        return "unknown"


def _write_table(table: pa.Table, path: str) -> None:
    """Write atomically: a retried task overwrites the same name."""
    fs, local = fsspec.core.url_to_fs(path)
    fs.makedirs(os.path.dirname(local), exist_ok=True)
    tmp = f"{local}.tmp-{os.getpid()}"
    with fs.open(tmp, "wb") as f:
        pq.write_table(table, f)
    fs.mv(tmp, local)


def _file_digest(path: str) -> dict:
    fs, local = fsspec.core.url_to_fs(path)
    digest = hashlib.sha256()
    with fs.open(local, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return {"path": path, "bytes": fs.size(local), "sha256": digest.hexdigest()}


# ---- pass 1: pages -------------------------------------------------------------


class _ShardPages:
    """Collects one shard's page rows and the fate of every page."""

    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.rows: list[dict] = []
        self.status: Counter = Counter()
        self.errors: list[str] = []
        self.link_counts: Counter = Counter()

    def add(self, item: Page | PageError) -> int | None:
        if isinstance(item, PageError):
            self.status["parse_error"] += 1
            self.errors.append(f"page {item.page_id} {item.title!r}: {item.reason}")
            return item.page_id
        if item.ns != 0:
            self.status["non_article_namespace"] += 1
        elif item.redirect:
            self.status["redirect"] += 1
            self.rows.append(
                {"page_id": item.page_id, "title": normalize_title(item.title),
                 "redirect": item.redirect, "sentences": [], "sentence_links": []}
            )
        else:
            self._add_article(item)
        return item.page_id

    def _add_article(self, page: Page) -> None:
        try:
            text, links = wikitext_to_text(page.wikitext)
            sentences = split_sentences(
                text, links, min_chars=self.cfg["min_sentence_chars"], max_chars=self.cfg["max_sentence_chars"]
            )
        except Exception as e:  # one bad page must not lose its shard
            self.status["parse_error"] += 1
            self.errors.append(f"page {page.page_id} {page.title!r}: {type(e).__name__}: {e}")
            return
        if not sentences:
            self.status["no_sentences"] += 1
            return
        self.status["written"] += 1
        sentence_links = [sorted({link.target for link in sentence_links}) for _, sentence_links in sentences]
        for targets in sentence_links:
            self.link_counts.update(targets)
        self.rows.append(
            {"page_id": page.page_id, "title": normalize_title(page.title), "redirect": None,
             "sentences": [s for s, _ in sentences], "sentence_links": sentence_links}
        )


def process_wikipedia_shard(row: dict, work_dir: str, cfg: dict) -> dict:
    shard = multistream.WikipediaShard.from_json(row["shard"])
    pages = _ShardPages(cfg)
    truncated = False
    if shard.streams:
        with fsspec.open(shard.path, "rb") as f:
            for stream in shard.streams:
                try:
                    data = multistream.read_stream(f, stream)
                except (EOFError, OSError) as e:
                    pages.status["truncated_stream"] += len(stream.page_ids)
                    pages.errors.append(f"stream at byte {stream.start}: {e}")
                    continue
                seen, anonymous = set(), 0
                for item in parse_pages(decode_xml_bytes(data)):
                    page_id = pages.add(item)
                    if page_id is None:
                        anonymous += 1
                    seen.add(page_id)
                missing = len(set(stream.page_ids) - seen) - anonymous
                if missing > 0:
                    pages.status["missing_from_stream"] += missing
        pages_in_input = sum(len(s.page_ids) for s in shard.streams)
    else:
        try:
            for item in iter_pages_from_file(shard.path):
                pages.add(item)
        except (EOFError, OSError) as e:
            truncated = True
            pages.errors.append(
                f"{shard.path}: truncated or corrupt after {sum(pages.status.values())} pages; "
                f"the pages after that point could not be read ({type(e).__name__}: {e})"
            )
        pages_in_input = sum(pages.status.values())
    out = f"{work_dir}/pages/shard-{shard.shard_id:05d}.parquet"
    _write_table(pa.Table.from_pylist(pages.rows, schema=PAGE_ROWS), out)
    return {
        "shard_id": shard.shard_id,
        "source": shard.path,
        "pages_file": out,
        "pages_in_input": pages_in_input,
        "truncated": truncated,
        "status": json.dumps(dict(pages.status)),
        "errors": json.dumps(pages.errors[:50]),
        "link_counts": json.dumps(pages.link_counts),
    }


@ray.remote(num_cpus=1)
def read_wikidata_file(path: str, out: str) -> dict:
    stats = wikidata.WikidataStats()
    rows = wikidata.read_entities(path, stats)
    _write_table(pa.Table.from_pylist(rows, schema=wikidata.ENTITY_ROWS), out)
    return {"path": path, "file": out, **stats.as_dict()}


@ray.remote(num_cpus=0)
def digest_file(path: str) -> dict:
    return _file_digest(path)


# ---- pass 2: the joins on the driver ---------------------------------------------


@dataclass
class EntityLookups:
    redirects: dict[str, str]
    qid_by_title: dict[str, str]
    title_by_qid: dict[str, str]
    index_by_qid: dict[str, int]
    types_by_qid: dict[str, list[str]]
    members_by_type: dict[str, list[str]]

    def resolve(self, title: str) -> str:
        for _ in range(3):  # double redirects exist; cycles do too
            target = self.redirects.get(title)
            if target is None or target == title:
                break
            title = target
        return title


def build_lookups(page_files: list[str], entity_files: list[str], link_counts: Counter, threshold: int):
    redirects: dict[str, str] = {}
    for path in page_files:
        table = pq.read_table(path, columns=["title", "redirect"])
        for title, target in zip(table["title"].to_pylist(), table["redirect"].to_pylist()):
            if target:
                redirects[title] = normalize_title(target)
    lookups = EntityLookups(redirects, {}, {}, {}, {}, {})
    resolved_counts: Counter = Counter()
    for target, count in link_counts.items():
        resolved_counts[lookups.resolve(target)] += count

    entity_rows = []
    for path in entity_files:
        entity_rows.extend(pq.read_table(path).to_pylist())
    for row in entity_rows:
        title = normalize_title(row["title"])
        lookups.qid_by_title[title] = row["qid"]
        lookups.title_by_qid[row["qid"]] = title
    eligible = sorted(
        (row for row in entity_rows
         if resolved_counts[normalize_title(row["title"])] > threshold and row["P31"]),
        key=lambda r: r["qid"],
    )
    entities = []
    for index, row in enumerate(eligible, start=1):
        qid, title = row["qid"], normalize_title(row["title"])
        lookups.index_by_qid[qid] = index
        lookups.types_by_qid[qid] = list(row["P31"])
        for type_qid in row["P31"]:
            lookups.members_by_type.setdefault(type_qid, []).append(qid)
        entities.append({"entity_index": index, "qid": qid, "title": title,
                         "link_count": resolved_counts[title], "types": list(row["P31"])})
    stats = {
        "redirects": len(redirects),
        "items_with_enwiki": len(entity_rows),
        "linked_titles": len(resolved_counts),
        "entities_eligible": len(entities),
        "entity_link_threshold": threshold,
    }
    return lookups, entities, stats


# ---- pass 3: training rows ---------------------------------------------------------

_LOOKUPS_CACHE: dict[str, EntityLookups] = {}


def _lookups(ref_holder: list) -> EntityLookups:
    ref = ref_holder[0]
    key = ref.hex()
    if key not in _LOOKUPS_CACHE:
        _LOOKUPS_CACHE.clear()
        _LOOKUPS_CACHE[key] = ray.get(ref)
    return _LOOKUPS_CACHE[key]


def hard_negative(lookups: EntityLookups, qid: str, excluded: set[str], rng: random.Random) -> str | None:
    """An entity sharing one of ``qid``'s P31 types that is not in ``excluded``."""
    types = list(lookups.types_by_qid.get(qid, ()))
    rng.shuffle(types)
    for type_qid in types:
        members = lookups.members_by_type.get(type_qid, ())
        for _ in range(min(20, len(members))):
            candidate = members[rng.randrange(len(members))]
            if candidate != qid and candidate not in excluded:
                return candidate
        candidates = [m for m in members if m != qid and m not in excluded]
        if candidates:
            return candidates[rng.randrange(len(candidates))]
    return None


def build_training_rows(row: dict, out_dir: str, lookups_ref: list, cfg: dict) -> dict:
    lookups = _lookups(lookups_ref)
    table = pq.read_table(row["pages_file"])
    shard_name = Path(row["pages_file"]).name
    sentence_rows, pair_rows = [], []
    dropped: Counter = Counter()
    pairs_per_entity: Counter = Counter()
    for page in table.to_pylist():
        if page["redirect"]:
            continue
        page_qids = {
            lookups.qid_by_title.get(lookups.resolve(t))
            for targets in page["sentence_links"] for t in targets
        } - {None}
        for i, (sentence, targets) in enumerate(zip(page["sentences"], page["sentence_links"])):
            sentence_rows.append(
                {"sentence": sentence, "page_id": page["page_id"], "title": page["title"], "sentence_index": i}
            )
            for target in targets:
                qid = lookups.qid_by_title.get(lookups.resolve(target))
                if qid is None:
                    dropped["link_target_without_wikidata_item"] += 1
                    continue
                if qid not in lookups.index_by_qid:
                    dropped["entity_below_link_threshold_or_untyped"] += 1
                    continue
                if pairs_per_entity[qid] >= cfg["max_pairs_per_entity_per_shard"]:
                    dropped["entity_pair_cap"] += 1
                    continue
                rng = random.Random(f"{cfg['seed']}:{page['page_id']}:{i}:{qid}")
                negative = hard_negative(lookups, qid, page_qids, rng)
                if negative is None:
                    dropped["no_hard_negative"] += 1
                    continue
                pairs_per_entity[qid] += 1
                pair_rows.append(
                    {
                        "sentence": sentence, "page_id": page["page_id"],
                        "positive_qid": qid, "positive_title": lookups.title_by_qid[qid],
                        "positive_entity": lookups.index_by_qid[qid],
                        "negative_qid": negative, "negative_title": lookups.title_by_qid[negative],
                        "negative_entity": lookups.index_by_qid[negative],
                    }
                )
    _write_table(pa.Table.from_pylist(sentence_rows, schema=schemas.SENTENCES), f"{out_dir}/sentences/{shard_name}")
    if cfg["build_entity_pairs"]:
        _write_table(pa.Table.from_pylist(pair_rows, schema=schemas.ENTITY_PAIRS), f"{out_dir}/entity_pairs/{shard_name}")
    return {"shard": shard_name, "sentences": len(sentence_rows), "entity_pairs": len(pair_rows),
            "dropped_links": json.dumps(dict(dropped))}


# ---- the job ---------------------------------------------------------------------


def _write_manifest(set_dir: str, manifest: dict) -> None:
    fs, local = fsspec.core.url_to_fs(f"{set_dir}/manifest.json")
    fs.makedirs(os.path.dirname(local), exist_ok=True)
    with fs.open(local, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)


def _sum_json_counters(rows: list[dict], key: str) -> Counter:
    total: Counter = Counter()
    for row in rows:
        total.update(json.loads(row[key]))
    return total


def run_ingest(cfg: IngestConfig, log=print) -> dict:
    """Run the whole job; returns the top-level manifest."""
    started = time.time()
    out = cfg.out.rstrip("/")
    work = f"{out}/_work"
    dump_files = [f for path in cfg.wikipedia for f in multistream.dump_files_in(path)]
    for path in cfg.wikidata:
        fs, local = fsspec.core.url_to_fs(path)
        if not fs.exists(local):
            raise FileNotFoundError(f"Wikidata dump not found: {path}")
    shards = multistream.plan_shards(dump_files, cfg.streams_per_shard)
    if not ray.is_initialized():
        ray.init()
    log(f"[ingest] {len(dump_files)} Wikipedia file(s), {len(shards)} shard(s); {len(cfg.wikidata)} Wikidata file(s)")

    digests = [digest_file.remote(p) for p in dump_files + list(cfg.wikidata)]
    wikidata_results = [
        read_wikidata_file.remote(path, f"{work}/wikidata/file-{i:05d}.parquet")
        for i, path in enumerate(cfg.wikidata)
    ]
    task_cfg = asdict(cfg)
    page_results = (
        ray.data.from_items([{"shard": s.to_json()} for s in shards], override_num_blocks=max(1, len(shards)))
        .map(process_wikipedia_shard, fn_kwargs={"work_dir": work, "cfg": task_cfg}, num_cpus=1)
        .take_all()
    )
    page_results.sort(key=lambda r: r["shard_id"])
    wikidata_stats = ray.get(wikidata_results, timeout=24 * 3600)
    pages_status = _sum_json_counters(page_results, "status")
    pages_in_input = sum(r["pages_in_input"] for r in page_results)
    log(f"[ingest] pass 1: {pages_in_input} pages read: {dict(pages_status)}")

    link_counts = _sum_json_counters(page_results, "link_counts")
    build_pairs = bool(cfg.wikidata)
    lookups, entities, entity_stats = build_lookups(
        [r["pages_file"] for r in page_results], [w["file"] for w in wikidata_stats],
        link_counts, cfg.entity_link_threshold,
    )
    log(f"[ingest] pass 2: {entity_stats}")

    task_cfg["build_entity_pairs"] = build_pairs
    lookups_ref = ray.put(lookups)
    row_results = (
        ray.data.from_items([{"pages_file": r["pages_file"]} for r in page_results],
                            override_num_blocks=max(1, len(page_results)))
        .map(build_training_rows, fn_kwargs={"out_dir": out, "lookups_ref": [lookups_ref], "cfg": task_cfg}, num_cpus=1)
        .take_all()
    )
    dropped_links = _sum_json_counters(row_results, "dropped_links")

    per_source: dict[str, dict] = {}
    for r in page_results:
        entry = per_source.setdefault(
            r["source"], {"pages_in_input": 0, "status": Counter(), "errors": [], "truncated": False}
        )
        entry["pages_in_input"] += r["pages_in_input"]
        entry["truncated"] |= bool(r["truncated"])
        entry["status"].update(json.loads(r["status"]))
        entry["errors"].extend(json.loads(r["errors"]))
    digest_by_path = {d["path"]: d for d in ray.get(digests, timeout=24 * 3600)}
    sources = [
        {**digest_by_path[path], "pages_in_input": e["pages_in_input"],
         "pages": dict(e["status"]), "errors_first": e["errors"][:20], "truncated": e["truncated"],
         "accounted": not e["truncated"] and sum(e["status"].values()) == e["pages_in_input"]}
        for path, e in per_source.items()
    ]
    pages_summary = {
        "in_input": pages_in_input,
        "written": pages_status.get("written", 0),
        "dropped": {k: v for k, v in sorted(pages_status.items()) if k != "written"},
        "accounted": all(s["accounted"] for s in sources),
    }
    common = {
        "schema_version": schemas.SCHEMA_VERSION,
        "code_version": _code_version(),
        "config": asdict(cfg),
        "sources": sources,
        "wikidata": [{**w, **digest_by_path.get(w["path"], {})} for w in wikidata_stats],
        "pages": pages_summary,
    }
    n_sentences = sum(r["sentences"] for r in row_results)
    n_pairs = sum(r["entity_pairs"] for r in row_results)
    _write_manifest(f"{out}/sentences", {**common, "set": "sentences", "rows": n_sentences,
                                          "files": sorted(r["shard"] for r in row_results)})
    sets = {"sentences": {"path": f"{out}/sentences", "rows": n_sentences}}
    if build_pairs:
        _write_table(pa.Table.from_pylist(entities, schema=schemas.ENTITIES), f"{out}/entities/entities.parquet")
        _write_manifest(f"{out}/entities", {**common, "set": "entities", "rows": len(entities),
                                             "entity_stats": entity_stats})
        _write_manifest(f"{out}/entity_pairs", {**common, "set": "entity_pairs", "rows": n_pairs,
                                                 "files": sorted(r["shard"] for r in row_results),
                                                 "entity_stats": entity_stats,
                                                 "dropped_links": dict(sorted(dropped_links.items()))})
        sets["entity_pairs"] = {"path": f"{out}/entity_pairs", "rows": n_pairs}
        sets["entities"] = {"path": f"{out}/entities", "rows": len(entities)}
    manifest = {**common, "sets": sets, "entity_stats": entity_stats,
                "dropped_links": dict(sorted(dropped_links.items())),
                "seconds": round(time.time() - started, 2)}
    if not build_pairs:
        manifest["entity_pairs_skipped"] = "no Wikidata dump given (--wikidata)"
    _write_manifest(out, manifest)
    log(f"[ingest] wrote {n_sentences} sentences, {n_pairs} entity pairs, {len(entities)} entities to {out} "
        f"in {manifest['seconds']} s; pages accounted: {pages_summary['accounted']}")
    return manifest
