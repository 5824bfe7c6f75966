"""AspectCSE's ``aspect_triplets`` (per variant) and ``aspect_docs`` sets.

Inputs: the aspect label table (``schemas.ASPECT_LABELS``, one row per entity
and property, from ``sparql.py`` or ``offline.py``) and the ``intros`` set.

1. Texts (Ray Data, ``map_keys`` on QID): the label table's QIDs joined to the
   intros of ``cfg.wiki``; an intro whose QID has no label row, or no QID, is a
   random-negative candidate; the ``random_negatives`` candidates with the
   smallest seeded draw (a hash of seed, wiki, page id) are kept as the random
   pool (the paper's 10,000 random articles without aspect information).
2. Entities (driver, QID-level: the label table is already on the driver):
   every QID of the label table ends as ``train``, ``test`` or dropped under
   ``no_article`` (no label row in ``cfg.wiki``), ``no_intro`` (no lead text
   in the intros set), ``no_label`` (no value on any chosen aspect) or
   ``label_filtered`` (every value dropped: held by fewer than
   ``min_label_count`` entities, by more than ``max_label_share`` of them or
   more than ``max_label_count``). Label counts are over entities with an
   intro. The split is a hash of (seed, QID): the same for every variant.
3. Triplets per variant, from train entities: a key per shared-label unit
   (single: ``P=value``; union: every ``P=value``; intersection: one value of
   each aspect, so sharing a key is sharing a value on every aspect); the
   positive of an anchor is a seeded draw among the other members of one of
   its keys (``triplets_per_anchor`` distinct positives, default 1); the hard
   negative is the first of ``negative_candidates`` seeded draws from the
   train entities with values on every aspect of the variant that shares NO
   value (unfiltered) with the anchor on any of them. A seeded share
   (``random_negative_share``) of the triplets, and those without a hard
   negative, get a random article from the pool instead (``negative_kind``
   ``random``, ``negative_qid`` null).
4. Texts back in (Ray Data, ``map_buckets`` on QID, then on output file):
   every file sorted, so the same seed gives the same bytes.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from infra.storage import Location
from setformat import schemas
from setformat.io import align, read_dataset, row_hashes, stable_hash, write_json, write_manifest, \
    write_table
from ingest.shuffle import Shuffle, key_groups, map_buckets, map_keys

log = logging.getLogger(__name__)
_STR, _INT = pa.string(), pa.int64()
_SEP = "\x1f"  # list columns cannot ride through an Arrow join: labels travel joined
RANDOM_PREFIX = "random:"


@dataclass
class AspectSetConfig:
    aspects: list[str] = field(default_factory=lambda: ["P17", "P452"])
    variants: list[str] | None = None  # default: single-<P> per aspect, plus intersection and union when >1 aspect
    min_label_count: int = 2  # a positive needs a partner
    max_label_share: float = 0.5  # drop values held by more than this share of the entities
    max_label_count: int | None = None  # an absolute cap too (Ostendorff et al. drop values of >= 100 papers)
    test_share: float = 0.2
    seed: int = 42
    random_negatives: int = 10000  # random intros without aspect labels (the pool)
    random_negative_share: float = 0.1  # seeded share of triplets whose negative is a random article
    triplets_per_anchor: int = 1
    negative_candidates: int = 32  # seeded draws per anchor before falling back to a random negative
    wiki: str = "enwiki"
    memory_per_cpu: int = 2 << 30  # memory one CPU's task may use: a shuffle bucket holds 1/32 of it
    file_rows: int = 200_000  # rows per output file

    def variant_specs(self) -> list[tuple[str, str, list[str]]]:
        """``[(name, kind, aspects)]``: ``single-P17`` (single, [P17]), ``intersection``, ``union``."""
        names = self.variants or [f"single-{p}" for p in self.aspects] + (
            ["intersection", "union"] if len(self.aspects) > 1 else [])
        specs = []
        for name in names:
            if name.startswith("single-") and name[len("single-"):] in self.aspects:
                specs.append((name, "single", [name[len("single-"):]]))
            elif name in ("intersection", "union"):
                specs.append((name, name, list(self.aspects)))
            else:
                raise ValueError(f"--variants: unknown variant {name!r} (single-<one of {self.aspects}>, "
                                 "intersection, union)")
        return specs

    def validate(self) -> None:
        from dataclasses import asdict

        from ingest.aspects.validate import check_pid, check_wiki
        from infra.secrets import check_no_secrets

        check_no_secrets(asdict(self), "aspect config")
        if not self.aspects:
            raise ValueError("--aspects: give at least one property")
        for p in self.aspects:
            check_pid(p, "--aspects")
        check_wiki(self.wiki, "--wiki")
        if len(set(self.aspects)) != len(self.aspects):
            raise ValueError(f"--aspects: repeated property in {self.aspects}")
        for name, ok, rule in (("test_share", 0 < self.test_share < 1, "in (0, 1)"),
                               ("max_label_share", 0 < self.max_label_share <= 1, "in (0, 1]"),
                               ("random_negative_share", 0 <= self.random_negative_share <= 1, "in [0, 1]")):
            if not ok:
                raise ValueError(f"--{name.replace('_', '-')}: must be {rule}, got {getattr(self, name)}")
        for name in ("min_label_count", "triplets_per_anchor", "memory_per_cpu", "file_rows"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')}: must be >= 1, got {getattr(self, name)}")
        for name in ("random_negatives", "negative_candidates"):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')}: must be >= 0, got {getattr(self, name)}")
        if self.max_label_count is not None and self.max_label_count < self.min_label_count:
            raise ValueError(f"--max-label-count: {self.max_label_count} is below --min-label-count")
        self.variant_specs()


# ---------------------------------------------------------------- 1. texts

TEXT_SIDES = pa.schema([pa.field("qid", _STR), pa.field("page_id", _INT), pa.field("title", _STR),
                        pa.field("text", _STR), pa.field("labelled", pa.bool_()), pa.field("draw", pa.uint64())])
TEXTS = pa.schema([pa.field("qid", _STR), pa.field("title", _STR), pa.field("text", _STR),
                   pa.field("random", pa.bool_()), pa.field("draw", pa.uint64())])


def _intro_side(batch: pa.Table, wiki: str, seed: int) -> pa.Table:
    batch = batch.filter(pc.equal(batch["wiki"], wiki))
    draws = pa.array(row_hashes(batch, ["wiki", "page_id"], seed), pa.uint64())
    keys = pc.binary_join_element_wise(pa.scalar(RANDOM_PREFIX), pc.cast(batch["page_id"], _STR), "")
    return pa.table({"qid": pc.coalesce(batch["qid"], keys), "page_id": batch["page_id"], "title": batch["title"],
                     "text": batch["text"], "labelled": pa.nulls(len(batch), pa.bool_()), "draw": draws},
                    schema=TEXT_SIDES)


def _texts_of_qid(rows: list[dict]) -> list[dict]:
    """One QID's label marker and intros: its entity text, or a random candidate."""
    labelled = any(r["labelled"] for r in rows)
    intros = sorted((r for r in rows if r["page_id"] is not None), key=lambda r: r["page_id"])
    if not intros:
        return []
    first = intros[0]
    if labelled:
        return [{"qid": first["qid"], "title": first["title"], "text": first["text"], "random": False, "draw": 0}]
    # a page whose item has no label row, or without an item: a random candidate under its page's key
    return [{"qid": f"{RANDOM_PREFIX}{r['page_id']}", "title": r["title"], "text": r["text"], "random": True, "draw": r["draw"]}
            for r in intros]


def _texts(labels: pa.Table, intros_path: str | Location, cfg: AspectSetConfig, shuffle: Shuffle):
    import ray.data

    qids = pa.table({"qid": pc.unique(labels["qid"])})
    marker = pa.table({"qid": qids["qid"], "page_id": pa.nulls(len(qids), _INT), "title": pa.nulls(len(qids), _STR),
                       "text": pa.nulls(len(qids), _STR), "labelled": pa.array([True] * len(qids)),
                       "draw": pa.nulls(len(qids), pa.uint64())}, schema=TEXT_SIDES)
    intros = read_dataset(intros_path, columns=["wiki", "page_id", "title", "qid", "text"]).map_batches(
        _intro_side, batch_format="pyarrow", fn_kwargs={"wiki": cfg.wiki, "seed": cfg.seed})
    return map_keys(ray.data.from_arrow(marker).union(intros), "qid", _texts_of_qid, TEXTS, shuffle)


def _keep(batch: pa.Table, random: bool) -> pa.Table:
    return batch.filter(pc.equal(batch["random"], random))


# ---------------------------------------------------------------- 2. entities (QID-level)


def _entities(labels: pa.Table, with_intro: set[str], cfg: AspectSetConfig) -> tuple[dict, dict, dict, dict]:
    """(status per QID, raw labels {qid: {P: set}}, kept labels, label counts)."""
    raw: dict[str, dict[str, set]] = defaultdict(lambda: {p: set() for p in cfg.aspects})
    in_wiki: set[str] = set()
    for row in labels.select(["qid", "wiki", "property", "label_qids"]).to_pylist():
        raw[row["qid"]]  # every QID of the table is accounted
        if row["wiki"] == cfg.wiki:
            in_wiki.add(row["qid"])
        if row["property"] in cfg.aspects:
            raw[row["qid"]][row["property"]].update(row["label_qids"] or ())
    status: dict[str, str] = {}
    for qid, by_prop in raw.items():
        status[qid] = ("no_article" if qid not in in_wiki else "no_intro" if qid not in with_intro
                       else "no_label" if not any(by_prop.values()) else "")
    counts = Counter((p, v) for q, by in raw.items() if not status[q] for p, vs in by.items() for v in vs)
    n = sum(1 for s in status.values() if not s)
    cap = min(cfg.max_label_count or n, math.floor(cfg.max_label_share * n))
    kept = {}
    for qid, by_prop in raw.items():
        if status[qid]:
            continue
        kept[qid] = {p: {v for v in vs if cfg.min_label_count <= counts[(p, v)] <= cap} for p, vs in by_prop.items()}
        if not any(kept[qid].values()):
            status[qid] = "label_filtered"
            del kept[qid]
            continue
        test = stable_hash(f"{cfg.seed}:split:{qid}") / 2.0**64 < cfg.test_share
        status[qid] = "test" if test else "train"
    return status, dict(raw), kept, counts


# ---------------------------------------------------------------- 3. triplets (QID-level)


def _keys(labels: dict[str, set], kind: str, aspects: list[str]) -> list[str]:
    if kind == "intersection":
        if not all(labels[p] for p in aspects):
            return []
        combos = itertools.product(*[sorted(labels[p]) for p in aspects])
        return ["&".join(f"{p}={v}" for p, v in zip(aspects, combo)) for combo in itertools.islice(combos, 256)]
    return [f"{p}={v}" for p in aspects for v in sorted(labels[p])]


def _draw(cfg: AspectSetConfig, *parts) -> int:
    return stable_hash(":".join(map(str, (cfg.seed, *parts))))


def _positives(cfg, name: str, anchor: str, key, members: list[str]) -> list[str]:
    """Up to ``triplets_per_anchor`` distinct members of the anchor's label group ``members`` (not the anchor),
    drawn by seed (the first draw is the one a single positive always took), then in set order if the
    draws repeat themselves."""
    want = min(cfg.triplets_per_anchor, len(members) - 1)
    picked: dict[str, None] = {}
    for j in range(4 * want):
        pick = members[_draw(cfg, name, "pos", anchor, key, *((j,) if j else ())) % len(members)]
        if pick == anchor:
            pick = members[(members.index(anchor) + 1) % len(members)]
        picked[pick] = None
        if len(picked) == want:
            return list(picked)
    for member in members:
        if len(picked) == want:
            break
        if member != anchor:
            picked[member] = None
    return list(picked)

def _variant_triplets(name: str, kind: str, aspects: list[str], train: list[str], raw: dict, kept: dict,
                      pool: list[str], cfg: AspectSetConfig) -> tuple[list[dict], Counter]:
    groups: dict[str, list[str]] = defaultdict(list)
    anchor_keys = {}
    for qid in train:
        keys = _keys(kept[qid], kind, aspects)
        if keys:
            anchor_keys[qid] = keys
            for key in keys:
                groups[key].append(qid)
    negatives = [q for q in train if all(raw[q][p] for p in aspects)]
    stats: Counter = Counter(anchors=len(anchor_keys))
    rows = []
    for anchor in sorted(anchor_keys):
        candidates = {}
        for key in anchor_keys[anchor]:
            members = groups[key]
            if len(members) < 2:
                continue
            for pick in _positives(cfg, name, anchor, key, members):
                draw = _draw(cfg, name, "rank", anchor, pick)
                candidates[pick] = min(draw, candidates.get(pick, draw))
        if not candidates:
            stats["anchors_without_positive"] += 1
            continue
        positives = sorted(candidates, key=lambda q: (candidates[q], q))[: cfg.triplets_per_anchor]
        for i, positive in enumerate(positives):
            negative, neg_kind = None, "labelled"
            use_random = _draw(cfg, name, "random", anchor, i) / 2.0**64 < cfg.random_negative_share
            if not use_random:
                for j in range(cfg.negative_candidates if negatives else 0):
                    cand = negatives[_draw(cfg, name, "neg", anchor, i, j) % len(negatives)]
                    if cand not in (anchor, positive) and all(not (raw[cand][p] & raw[anchor][p]) for p in aspects):
                        negative = cand
                        break
            if negative is None:
                if not pool:
                    stats["anchors_without_negative"] += 1
                    continue
                negative, neg_kind = pool[_draw(cfg, name, "pool", anchor, i) % len(pool)], "random"
                stats["random_fallback" if not use_random else "random_drawn"] += 1
            stats[f"negative_{neg_kind}"] += 1
            rows.append({"anchor_qid": anchor, "positive_qid": positive, "negative_qid": negative,
                         "negative_kind": neg_kind})
    stats["triplets"] = len(rows)
    return rows, stats


# ---------------------------------------------------------------- 4. texts back in, files out

NEEDS = pa.schema([pa.field("qid", _STR), pa.field("tid", _INT), pa.field("role", _STR), pa.field("group", _STR),
                   pa.field("file", _INT), pa.field("aspect", _STR), pa.field("labels", _STR),
                   pa.field("title", _STR), pa.field("text", _STR)])


def _attach(bucket: pa.Table) -> pa.Table:
    texts = bucket.filter(pc.is_null(bucket["tid"])).select(["qid", "title", "text"])
    needs = bucket.filter(pc.is_valid(bucket["tid"])).drop_columns(["title", "text"])
    joined = needs.join(texts, keys="qid", join_type="inner")
    return align(joined, NEEDS)


def _write_files(bucket: pa.Table, out: str, specs: dict) -> pa.Table:
    written = []
    for (group, file), rows in key_groups(bucket, ["group", "file"]):
        rows.sort(key=lambda r: (r["tid"], r["role"]))
        if group == "aspect_docs":
            table = pa.Table.from_pylist([{"qid": r["qid"], "title": r["title"], "text": r["text"],
                                           "aspect": r["aspect"], "labels": r["labels"].split(_SEP)} for r in rows],
                                         schema=schemas.ASPECT_DOCS)
        else:
            kind, aspects = specs[group]
            by_tid: dict[int, dict] = defaultdict(dict)
            for r in rows:
                by_tid[r["tid"]][r["role"]] = r
            out_rows = []
            for tid in sorted(by_tid):
                t = by_tid[tid]
                random = t["negative"]["qid"].startswith(RANDOM_PREFIX)
                out_rows.append({"anchor": t["anchor"]["text"], "positive": t["positive"]["text"],
                                 "negative": t["negative"]["text"], "anchor_qid": t["anchor"]["qid"],
                                 "positive_qid": t["positive"]["qid"],
                                 "negative_qid": None if random else t["negative"]["qid"],
                                 "negative_kind": "random" if random else "labelled", "variant": kind,
                                 "aspects": aspects})
            table = pa.Table.from_pylist(out_rows, schema=schemas.ASPECT_TRIPLETS)
        folder = "aspect_docs" if group == "aspect_docs" else f"{group}/aspect_triplets"
        write_table(table, f"{out}/{folder}/part-{file:05d}.parquet")
        written.append({"group": group, "file": file, "rows": len(table)})
    return pa.Table.from_pylist(written, schema=pa.schema([("group", _STR), ("file", _INT), ("rows", _INT)]))


# ---------------------------------------------------------------- the driver


def build_aspect_sets(labels: pa.Table, intros_path: str | Location, out: str,
                      cfg: AspectSetConfig) -> dict:
    """Write ``OUT/<variant>/aspect_triplets/`` and ``OUT/aspect_docs/`` (with manifests) from the
    label table and the ``intros`` set; returns the overall manifest (also ``OUT/manifest.json``)."""
    cfg.validate()
    out = out.rstrip("/")
    shuffle = Shuffle.in_work(f"{out}/_work", cfg.memory_per_cpu)
    try:
        return _write_sets(labels, intros_path, out, cfg, shuffle)
    finally:
        shuffle.remove()


def _needs(specs, train: list[str], test: list[str], raw, kept, pool: list[str], cfg: AspectSetConfig):
    """What each output row needs of the texts: a row per (triplet, role) of every variant and per held-out
    document, numbered and placed in its output file. Returns (the rows, each variant's stats, the documents)."""
    needs, variant_stats = [], {}
    tid = 0
    for name, kind, aspects in specs:
        rows, stats = _variant_triplets(name, kind, aspects, train, raw, kept, pool, cfg)
        variant_stats[name] = dict(sorted(stats.items()))
        files = max(1, math.ceil(len(rows) / cfg.file_rows))
        for i, row in enumerate(rows):
            for role in ("anchor", "positive", "negative"):
                needs.append({"qid": row[f"{role}_qid"], "tid": tid, "role": role, "group": name,
                              "file": i * files // max(1, len(rows))})
            tid += 1
    docs = [(q, p) for q in test for p in cfg.aspects if kept[q][p]]
    doc_files = max(1, math.ceil(len(docs) / cfg.file_rows))
    for i, (qid, p) in enumerate(docs):
        needs.append({"qid": qid, "tid": tid, "role": "doc", "group": "aspect_docs", "file": i * doc_files // len(docs),
                      "aspect": p, "labels": _SEP.join(sorted(kept[qid][p]))})
        tid += 1
    return needs, variant_stats, docs


def _write_triplet_manifests(specs, out: str, rows_by_group: Counter, files_by_group: dict, variant_stats: dict,
                             config: dict, intros_path: str | Location, accounting: dict) -> None:
    """Each variant's aspect_triplets manifest (an empty file for a variant with no rows)."""
    for name, kind, aspects in specs:
        path = f"{out}/{name}/aspect_triplets"
        if not files_by_group[name]:
            write_table(schemas.ASPECT_TRIPLETS.empty_table(), f"{path}/part-00000.parquet")
            files_by_group[name].append("part-00000.parquet")
        # the manifest lists the files this job wrote (never a listing: an earlier run's parts are not its)
        write_manifest(path, "aspect_triplets", rows_by_group[name], variant=name, kind=kind, aspects=aspects,
                       config=config, intros=str(intros_path), entity_accounting=accounting,
                       files=sorted(files_by_group[name]), **variant_stats[name])


def _write_sets(labels: pa.Table, intros_path: str | Location, out: str, cfg: AspectSetConfig,
                shuffle: Shuffle) -> dict:
    import ray.data

    texts = _texts(labels, intros_path, cfg, shuffle)
    with_intro = {r["qid"] for r in texts.map_batches(_keep, batch_format="pyarrow", fn_kwargs={"random": False})
                  .select_columns(["qid"]).take_all()}
    randoms = texts.map_batches(_keep, batch_format="pyarrow", fn_kwargs={"random": True})
    pool = sorted(r["qid"] for r in randoms.select_columns(["qid", "draw"]).sort(["draw", "qid"])
                  .limit(cfg.random_negatives).take_all()) if cfg.random_negatives else []
    status, raw, kept, counts = _entities(labels, with_intro, cfg)
    entities = dict(sorted(Counter(status.values()).items()))
    train = sorted(q for q, s in status.items() if s == "train")
    test = sorted(q for q, s in status.items() if s == "test")
    log.info(f"[aspects] {len(status)} entities: {entities}; random pool {len(pool)}")

    specs = cfg.variant_specs()
    needs, variant_stats, docs = _needs(specs, train, test, raw, kept, pool, cfg)
    sides = ray.data.from_arrow(pa.Table.from_pylist(needs, schema=NEEDS)).union(
        texts.map_batches(align, batch_format="pyarrow", fn_kwargs={"schema": NEEDS}))
    attached = map_buckets(sides, "qid", _attach, shuffle)
    written = map_buckets(attached, ["group", "file"], _write_files, shuffle, out=out,
                          specs={n: (k, a) for n, k, a in specs}).take_all()
    rows_by_group, files_by_group = Counter(), defaultdict(list)
    for w in written:
        rows_by_group[w["group"]] += w["rows"]
        files_by_group[w["group"]].append(f"part-{w['file']:05d}.parquet")

    accounting = {"entities": len(status), "status": entities,
                  "accounted": sum(entities.values()) == len(status) == pc.count_distinct(labels["qid"]).as_py()}
    config = asdict(cfg)
    labels_kept = {p: len({v for q in kept for v in kept[q][p]}) for p in cfg.aspects}
    _write_triplet_manifests(specs, out, rows_by_group, files_by_group, variant_stats, config, intros_path, accounting)
    if not files_by_group["aspect_docs"]:
        write_table(schemas.ASPECT_DOCS.empty_table(), f"{out}/aspect_docs/part-00000.parquet")
        files_by_group["aspect_docs"].append("part-00000.parquet")
    docs_per_aspect = dict(Counter(p for _, p in docs))
    write_manifest(f"{out}/aspect_docs", "aspect_docs", rows_by_group["aspect_docs"], config=config,
                   intros=str(intros_path), entity_accounting=accounting, documents=len(test),
                   docs_per_aspect=docs_per_aspect, files=sorted(files_by_group["aspect_docs"]))
    manifest = {"config": config, "entity_accounting": accounting, "train_entities": len(train),
                "test_entities": len(test), "random_pool": len(pool), "distinct_labels": labels_kept,
                "variants": {n: {"rows": rows_by_group[n], **variant_stats[n]} for n, _, _ in specs},
                "aspect_docs": {"rows": rows_by_group["aspect_docs"], "per_aspect": docs_per_aspect}}
    write_json(manifest, f"{out}/manifest.json")
    log.info(f"[aspects] triplets {({n: v['rows'] for n, v in manifest['variants'].items()})}; "
        f"docs {docs_per_aspect}")
    return manifest
