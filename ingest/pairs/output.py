"""Stage 5 of the pair ingest: the rows of each set in one schema with their file
bucket, written as ``part-NNNNN.parquet`` files (rows sorted by a seeded hash:
same input + seed -> byte-identical files), and the sets' manifests, which
account for every pair unit: written (``relation_triples``) or used in at least
one triplet (``nli_triplets``), or dropped under a reason (the read reasons,
``duplicate``, ``other_relation`` and ``missing_premise_partner`` for
triplets, ``relation_not_selected`` and ``over_cap``).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.compute as pc

from setformat import schemas
from ingest.pairs.sources import FIRST_ROWS, PairIngestConfig
from setformat.io import code_version, write_manifest, write_table
from ingest.shuffle import Shuffle, key_groups, map_buckets

_STR, _INT, _I32 = pa.string(), pa.int64(), pa.int32()


@dataclass
class SetWritten:
    """What stage 5 wrote of one set: rows, file names, per-file stats summed."""

    rows: int
    files: list[str]
    stats: dict


FINAL = pa.schema([
    pa.field("source", _I32), pa.field("source2", _I32), pa.field("unit", _I32), pa.field("row", _INT),
    pa.field("side", _STR), pa.field("sentence1", _STR), pa.field("relation", _STR), pa.field("sentence2", _STR),
    pa.field("hard_negative", _STR), pa.field("hn_kind", _STR), pa.field("rank", _INT), pa.field("file", _INT),
])
WRITTEN = pa.schema([pa.field("file", _STR), pa.field("rows", _INT), pa.field("stats", _STR)])


def to_final(batch: pa.Table, files: int, mode: str) -> pa.Table:
    """Rows ready to write, in one schema, with their file bucket. ``mode``: ``relation`` (the rows whose
    hard negative came from their premise), ``pool`` (rows resolved in stage 4) or ``triplet``."""
    if mode == "relation":
        batch = batch.filter(pc.and_(pc.is_null(batch["status"]), pc.is_null(batch["pool"])))
    columns = []
    for f in FINAL:
        if f.name == "file":
            columns.append(pa.array(batch["rank"].to_numpy(zero_copy_only=False) % files, _INT))
        elif f.name in batch.column_names:
            columns.append(batch[f.name].cast(f.type))
        else:
            columns.append(pa.nulls(len(batch), f.type))
    return pa.Table.from_arrays(columns, schema=FINAL)


def _write_files(bucket: pa.Table, set_name: str, out: str, tags: list[str], weights: dict | None) -> pa.Table:
    """Write each file bucket of ``bucket`` (a hash bucket of file numbers) as one parquet file."""
    written = []
    for (file_index,), rows in key_groups(bucket, ["file"]):
        rows.sort(key=lambda r: (r["rank"], r["source"], r["unit"] or 0, r["row"] or 0, r["side"] or ""))
        name = f"part-{file_index:05d}.parquet"
        stats: dict = {"sources": Counter(), "relations": Counter(), "hard_negatives": Counter()}
        if set_name == "nli_triplets":
            data = []
            for r in rows:
                tag = tags[r["source"]] if r["source"] == r["source2"] else \
                    f"{tags[r['source']]}+{tags[r['source2']]}"
                data.append({"premise": r["sentence1"], "entailment": r["sentence2"],
                             "contradiction": r["hard_negative"], "source": tag})
                stats["sources"][str(r["source"])] += 1
            table = pa.Table.from_pylist(data, schema=schemas.NLI_TRIPLETS)
        else:
            data = []
            for r in rows:
                weight = 1.0 if weights is None else float(weights[r["relation"]])
                data.append({"sentence1": r["sentence1"], "relation": r["relation"], "sentence2": r["sentence2"],
                             "hard_negative": r["hard_negative"], "weight": weight, "source": tags[r["source"]]})
                stats["sources"][str(r["source"])] += 1
                stats["relations"][r["relation"]] += 1
                stats["hard_negatives"][r["hn_kind"] or "none"] += 1
            table = pa.Table.from_pylist(data, schema=schemas.RELATION_TRIPLES)
        write_table(table, f"{out}/{set_name}/{name}")
        written.append({"file": name, "rows": len(rows), "stats": json.dumps({k: dict(v) for k, v in stats.items()})})
    return pa.Table.from_pylist(written, schema=WRITTEN)


def files_for(n_rows: int, cfg: PairIngestConfig) -> int:
    """Files of a set of ``n_rows`` rows (about ``cfg.file_bytes`` each)."""
    return max(1, math.ceil(n_rows * 256 / cfg.file_bytes))


def write_set(final, set_name: str, files: int, out: str, tags: list[str], shuffle: Shuffle,
              weights: dict | None) -> SetWritten:
    """Write ``final`` (a Ray Dataset of FINAL rows, or None: no rows) as ``files``
    ``part-NNNNN.parquet`` files of ``out/set_name``."""
    totals: dict = {"sources": Counter(), "relations": Counter(), "hard_negatives": Counter()}
    names, rows = [], 0
    if final is not None:
        written = map_buckets(final, ["file"], _write_files, shuffle, set_name=set_name,
                              out=out, tags=tags, weights=weights).take_all()
        for w in written:
            names.append(w["file"])
            rows += w["rows"]
            for k, v in json.loads(w["stats"]).items():
                totals[k].update(v)
    if not names:  # an empty set is still a readable set
        schema = schemas.NLI_TRIPLETS if set_name == "nli_triplets" else schemas.RELATION_TRIPLES
        write_table(schema.empty_table(), f"{out}/{set_name}/part-00000.parquet")
        names.append("part-00000.parquet")
    return SetWritten(rows, sorted(names), totals)


# ---------------------------------------------------------------- manifests


def _row_id(unit_labels: dict, kind: str, unit: int, row: int) -> str:
    """``dev:17`` / ``file.jsonl:17``: line 17 (csv: the record's first line; a json list: record 17);
    ``train[16]``: row 16 (from 0) of a hub split."""
    label = unit_labels.get(unit, "?")
    return f"{label}[{row}]" if kind == "hf" else f"{label}:{row}"


def _source_report(entry: dict, read: dict, fates: dict, set_name: str, written: int, unit_labels: dict) -> dict:
    dropped = Counter(read["dropped"])
    first = {k: list(v) for k, v in read["first"].items()}
    for (s, src, reason), (count, rows) in fates.items():
        if s != set_name or src != entry["index"] or reason in ("used", "written"):
            continue
        dropped[reason] += count
        first.setdefault(reason, []).extend(rows)
    labels = unit_labels.get(entry["index"], {})
    first_rows = {reason: [_row_id(labels, entry["kind"], u, r) for u, r in sorted(map(tuple, rows))[:FIRST_ROWS]]
                  for reason, rows in sorted(first.items())}
    return {"name": entry["tag"], "kind": entry["kind"], "path": entry["path"], "split": entry["split"],
            "rows_in": read["records"], "pairs_in": read["pairs"], "written": written,
            "dropped": dict(sorted(dropped.items())), "dropped_first_rows": first_rows,
            "not_utf8_replaced": read.get("not_utf8_replaced", 0),
            "not_utf8_replaced_first_rows": [_row_id(labels, entry["kind"], u, r) for u, r in
                                             sorted(map(tuple, read.get("not_utf8_replaced_first", [])))[:FIRST_ROWS]],
            "accounted": read["pairs"] == written + sum(dropped.values())}


def _config(cfg: PairIngestConfig) -> dict:
    config = {k: v for k, v in asdict(cfg).items() if k != "out"}
    for source in config["sources"]:  # never write a hub token into a manifest
        source["hf_kwargs"] = {k: ("<redacted>" if "token" in k.lower() else v)
                               for k, v in source["hf_kwargs"].items()}
    return config


def _reports(sources: list[dict], read: dict, fates: dict, unit_labels: dict, relations: SetWritten) -> dict:
    """Per set: each source's report and the pairs summed over sources."""
    reports = {}
    for set_name in ("nli_triplets", "relation_triples"):
        per_source = []
        for s in sources:
            if set_name == "nli_triplets":
                written = fates.get(("nli_triplets", s["index"], "used"), [0])[0]
            else:
                written = relations.stats["sources"].get(str(s["index"]), 0)
            per_source.append(_source_report(s, read[s["index"]], fates, set_name, written, unit_labels))
        totals_dropped = Counter()
        for p in per_source:
            totals_dropped.update(p["dropped"])
        pairs = {"in": sum(p["pairs_in"] for p in per_source), "written": sum(p["written"] for p in per_source),
                 "dropped": dict(sorted(totals_dropped.items())),
                 "accounted": all(p["accounted"] for p in per_source)}
        reports[set_name] = {"per_source": per_source, "pairs": pairs}
    return reports


def write_manifests(cfg: PairIngestConfig, out: str, sources: list[dict], read: dict, unit_labels: dict,
                    fates: dict, triplets: SetWritten, relations: SetWritten, relation_counts: Counter,
                    caps_applied: dict) -> dict:
    """Write the ``_manifest.json`` of both sets; returns the job's top-level manifest
    (``pairs_manifest.json``, written by the job once its work files are gone)."""
    config = _config(cfg)
    tags = [s["tag"] for s in sources]
    source_inputs = [{"name": s["tag"], "kind": s["kind"], "path": s["path"], "split": s["split"],
                      "hf_config": s["name"], "files": read[s["index"]]["digests"],
                      **({"hf": s["hf"]} if "hf" in s else {}),
                      **({"warning": s["warning"]} if "warning" in s else {})}
                     for s in sources]
    reports = _reports(sources, read, fates, unit_labels, relations)
    write_manifest(
        f"{out}/nli_triplets", "nli_triplets", triplets.rows, config=config, files=triplets.files,
        inputs=source_inputs, sources=reports["nli_triplets"]["per_source"], pairs=reports["nli_triplets"]["pairs"],
        triplets_by_source={tags[int(k)]: v
                            for k, v in sorted(triplets.stats["sources"].items(), key=lambda kv: int(kv[0]))},
        note="pairs.written counts pair units used in at least one triplet; a triplet's source is its "
             "entailment's source (a+b when the contradiction came from another source)",
    )
    relation_rows = {rel: n for rel, n in sorted(relations.stats["relations"].items())}
    hard_negatives = dict(sorted(relations.stats["hard_negatives"].items()))
    write_manifest(
        f"{out}/relation_triples", "relation_triples", relations.rows, config=config, files=relations.files,
        inputs=source_inputs,
        sources=reports["relation_triples"]["per_source"], pairs=reports["relation_triples"]["pairs"],
        relations={rel: {"rows": relation_rows.get(rel, 0),
                         "weight": 1.0 if cfg.relations is None else float(cfg.relations[rel]),
                         "available": relation_counts.get((rel, True), 0),
                         "cap": caps_applied.get(rel, {}).get("cap")}
                   for rel in sorted({r for r, sel in relation_counts if sel} | set(cfg.relations or {}))},
        not_selected={rel: n for (rel, sel), n in sorted(relation_counts.items()) if not sel},
        hard_negatives=hard_negatives,
    )
    return {
        "schema_version": schemas.SCHEMA_VERSION, "code_version": code_version(), "config": config,
        "out": out, "inputs": source_inputs,
        "sets": {"nli_triplets": {"path": f"{out}/nli_triplets", "rows": triplets.rows,
                                  "pairs": reports["nli_triplets"]["pairs"]},
                 "relation_triples": {"path": f"{out}/relation_triples", "rows": relations.rows,
                                      "pairs": reports["relation_triples"]["pairs"],
                                      "relations": relation_rows, "hard_negatives": hard_negatives}},
    }
