"""``structcse demo``: the whole pipeline on the embedded demo world, on a laptop.

demo world (real dump formats) -> ingest (Ray Data) -> tiny BERT with a
vocabulary trained on the ingested sentences -> SimCSE and EASE (Ray Train)
-> AspectCSE on aspect triplets of the world's companies (multi-aspect union)
-> DSBATS-sn on the world's BATS folder and WordNet-format dictionary
-> SimCSE-sup, GaussCSE and RSE on the world's NLI pairs
-> a small ASHA search (Ray Tune + evaluation actor) -> STS evaluation,
aspect retrieval (P@10 on held-out companies) and SRSD of every model -> a table
-> ``python -m eval report`` of every model, each method also on its own tasks.

``structcse aspects`` (``structcse/aspects.py``): AspectCSE end to end.
``structcse dsbats`` (``structcse/dsbats.py``): DSBATS-sn end to end.
``structcse --version``: the version, and the git commit when run from a checkout (``infra/version.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from infra.publish import publish_folder
from infra.secrets import redact_text
from infra.uris import is_uri, local_path
from structcse.configs import training_config

# The papers' configs, shrunk to a tiny randomly initialised BERT and a few
# minutes on 2 CPU cores: a higher learning rate, a few epochs, frequent reports,
# and mean pooling (the CLS vector of an untrained model carries nothing yet).
# Ray Train's local mode (num_workers=0: the loop in this process): a worker group's start (~25 s on 2 cores)
# would cost more than each of these runs' training (10-15 s); the demo took 372-390 s with one worker per run.
DEMO_TRAINING = [
    "pooling=mean", "epochs=3", "batch_size=32", "lr=5e-4", "warmup_steps=0", "num_workers=0",
    "checkpoint_every_steps=40", "log_every_steps=20", "keep_checkpoints=1",
]
# The base config (trial 0, the methods' lr) and 1 sampled trial at the higher learning rates a tiny randomly initialised
# BERT needs to pass its untrained encoder within a short trial (measured on the demo world's STS dev: lr 5e-4 passes it
# after ~75 steps, 2e-3 after ~45). ASHA's rungs at 640 and 1,280 examples of 2,560. The two trials run at once (0.5 CPU
# each; the sets are held by the workers, so no Ray Data task needs a CPU): 76 s instead of 92 s, the same scores.
DEMO_TUNE = {
    "search_space": {"lr": {"loguniform": [1.5e-3, 4e-3]}, "temperature": {"loguniform": [0.03, 0.1]}},
    "searcher": "random", "num_samples": 1, "max_concurrent_trials": 2, "reduction_factor": 2, "eval_actors": 1,
}
# a Tune trial runs a worker group of its own (Ray Train's local mode is not available inside Tune's trials)
DEMO_TUNE_TRAINING = ["max_steps=80", "checkpoint_every_steps=20", "epochs=2", "num_workers=1", "cpus_per_worker=0.5"]
# the pair methods' own settings, with the demo's mean pooling (the paper poolings need a trained CLS)
DEMO_PAIR_METHODS = {
    "simcse_sup": ["max_len=32", "chunk_size=null", "epochs=2"],
    "gausscse": ["max_len=32", "weight_decay=0.0", "epochs=2"],
    "rse": ["max_len=32", "chunk_size=null", "epochs=2"],
}


def log(message: str) -> None:
    print(message, flush=True)


BASE_NAME = "base encoder (mean pooling)"  # the untrained tiny BERT: the base row of every table
DEMO_COLUMNS = [("model", "model"), ("sts_dev", "STS dev Spearman"), ("sts_test", "STS test Spearman"),
                ("country_p10", "country P@10"), ("industry_p10", "industry P@10"), ("srsd", "SRSD acc")]
DEMO_NOTE = ("Split: the demo world's STS-B dev and test (Spearman); aspect retrieval on the held-out companies "
             "(the aspect_docs set: the test side); SRSD on the held-out BATS lines (test). Similarity: cosine for "
             "every model (SRSD: cosine of pair representations, the dsbats model's pair head, the offset for the "
             "others); eval_report.md scores STS with each method's own similarity (GaussCSE's and RSE's differ "
             "from cosine). Δ: the model minus the untrained base (first row), `≤ base`: not above it on the "
             "model's own metric(s).")


def write_demo_report(stem: Path, rows: list[dict], own: dict[str, list[str]], base_name: str = BASE_NAME):
    """``stem.md`` / ``stem.json``: the demo's table, its base row first, a Δ column per metric and ``vs base``
    judged on each model's own metric(s) (``own``: model -> metric keys), and the best model per column under
    it. Returns (the rows shown, their columns, the models not above the base)."""
    from eval.report import compare_with_base, write_report

    metrics = DEMO_COLUMNS[1:]
    shown, delta_columns, below = compare_with_base(rows, base_name, metrics, own=own, base_label=base_name)
    columns = [*DEMO_COLUMNS, *delta_columns]
    best = []
    for key, header in metrics:
        scored = [r for r in rows if isinstance(r.get(key), float)]
        if scored:
            top = max(scored, key=lambda r: r[key])
            ties = [r["model"] for r in scored if r[key] == top[key]]
            best.append(f"{header}: {', '.join(ties)} ({top[key]:.4f})")
    write_report(stem, shown, columns=columns,
                 title="structcse demo: STS Spearman, aspect retrieval P@10 and SRSD accuracy on the demo world",
                 note=DEMO_NOTE, after="Best per column: " + "; ".join(best) + "." if best else None)
    return shown, columns, below


def demo(out: Path, seed: int, skip_tune: bool) -> dict:
    from eval.aspect_retrieval import evaluate_aspect_retrieval
    from eval.models import load_trained
    from eval.report import format_table
    from eval.srsd import evaluate_srsd
    from eval.sts import evaluate_sts
    from ingest.pipeline import IngestConfig, run_ingest
    from ingest.sets import read_table
    from score.dev_metrics import DEV_METRICS
    from structcse.demo import ENTITY_LINK_THRESHOLD, generate_demo_world
    from train.methods import get_method
    from infra.ray_local import ensure_ray
    from train.run import run as train_run
    from train.tiny_bert import build_tiny_bert

    started = time.time()
    out = out.resolve()
    steps = 10 if not skip_tune else 9

    log(f"[{time.time() - started:4.0f} s] [1/{steps}] demo world (seed {seed}) -> {out / 'world'}")
    world = generate_demo_world(out / "world", seed=seed)

    ensure_ray(log, configure_logging=False)
    log(f"[{time.time() - started:4.0f} s] [2/{steps}] ingest with Ray Data -> {out / 'sets'}")
    manifest = run_ingest(IngestConfig(wikipedia=[str(world.wikipedia_dump)], wikidata=[str(world.wikidata_dump)],
                                       out=str(out / "sets"), seed=seed, shard_bytes=1,
                                       entity_link_threshold=ENTITY_LINK_THRESHOLD), log=log)

    log(f"[{time.time() - started:4.0f} s] [3/{steps}] tiny BERT with a WordPiece vocabulary trained on the ingested sentences -> {out / 'models/base'}")
    sentences = read_table(out / "sets" / "sentences", ["sentence"])
    base_model = build_tiny_bert(sentences["sentence"].to_pylist(), out / "models" / "base", seed=seed)

    common = [f"model={base_model}", f"data={out / 'sets'}", f"storage_path={out / 'runs'}", f"seed={seed}",
              f"dev_data={world.sts_dir}"]  # each method's dev metric (score/dev_metrics.py) picks its checkpoint
    models = {BASE_NAME: str(base_model)}
    own = {}  # each trained model's own metric(s) in the demo's table: what "not above the base" is judged on
    for i, method in enumerate(("simcse_unsup", "ease")):
        log(f"[{time.time() - started:4.0f} s] [{4 + i}/{steps}] train {method} with Ray Train (local mode) -> {out / 'runs' / method}")
        outcome = train_run(training_config(method, [*DEMO_TRAINING, *common, f"run_name={method}"]))
        models[method] = outcome.model_path
        own[method] = ["sts_dev"]

    # AspectCSE: one multi-aspect model here; `structcse aspects` trains the whole of its Table 5
    from ingest.aspects.__main__ import main as build_aspect_sets

    log(f"[{time.time() - started:4.0f} s] [6/{steps}] AspectCSE: aspect labels (P17 country, P452 industry) from the wikidata set, aspect triplets "
        f"from the intros -> {out / 'aspects'}; train on the multi-aspect union with Ray Train")
    if build_aspect_sets(["--intros", str(out / "sets" / "intros"), "--wikidata-set", str(out / "sets" / "wikidata"),
                          "--out", str(out / "aspects"), "--seed", str(seed), "--triplets-per-anchor", "3"]) != 0:
        raise SystemExit(2)
    outcome = train_run(training_config("aspectcse", [*DEMO_TRAINING, *common, f"data={out / 'aspects' / 'union'}",
                                                      "max_len=128", "dev_data=null", "run_name=aspectcse"]))
    models["aspectcse (multi-aspect union)"] = outcome.model_path
    own["aspectcse (multi-aspect union)"] = ["country_p10", "industry_p10"]

    # DSBATS-sn: the world's BATS folder lifted to definition pairs by its WordNet-format dictionary
    from ingest.dsbats.bats import category_files
    from ingest.dsbats.job import DsbatsConfig, build_dsbats

    log(f"[{time.time() - started:4.0f} s] [7/{steps}] DSBATS-sn: the world's BATS analogies -> definition pairs from its WordNet dictionary "
        f"(Ray Data) -> DSBATS4CL and SRSD -> {out / 'dsbats'}; train with the p⁻-only loss")
    build_dsbats(str(world.bats_dir), {"kind": "wordnet", "folder": str(world.wordnet_dir)}, str(out / "dsbats"),
                 DsbatsConfig(categories=sorted(category_files(world.bats_dir)[1]), seed=seed, positives_per_pair=8),
                 log=log)
    outcome = train_run(training_config("dsbats", [*DEMO_TRAINING, *common, f"data={out / 'dsbats'}", "max_len=48",
                                                   "epochs=1", "dev_data=null", "run_name=dsbats"]))
    models["dsbats (DSBATS4CL)"] = outcome.model_path
    own["dsbats (DSBATS4CL)"] = ["srsd"]

    # sentence-pair methods on the world's NLI pairs (pair ingest: nli_triplets, relation_triples)
    from ingest.pairs import PairIngestConfig, PairSource, run_pair_ingest

    log(f"[{time.time() - started:4.0f} s] [8/{steps}] SimCSE-sup, GaussCSE and RSE: the world's NLI pairs -> nli_triplets and relation_triples "
        f"(Ray Data) -> {out / 'pairs'}; train each with Ray Train")
    run_pair_ingest(PairIngestConfig(sources=[PairSource("senteval", str(world.nli_dir), split="train")],
                                     out=str(out / "pairs")), log=log)
    dev_data = {"sts": world.sts_dir, "nli": world.nli_dir}  # each method's dev metric reads one of these
    for method, extra in DEMO_PAIR_METHODS.items():
        metric = DEV_METRICS[get_method(method).dev_metric]
        outcome = train_run(training_config(method, [*DEMO_TRAINING, *common, f"data={out / 'pairs'}", *extra,
                                                     f"dev_data={dev_data[metric.data_format]}", f"run_name={method}"]))
        models[method] = outcome.model_path
        own[method] = ["sts_dev"]  # GaussCSE's own (NLI AUPRC) is in eval_report.md's gausscse table

    search = None
    if not skip_tune:
        from tune.search import TuneSettings, run_search

        log(f"[{time.time() - started:4.0f} s] [9/{steps}] Ray Tune: ASHA over lr and temperature (SimCSE), "
            f"the base config and {DEMO_TUNE['num_samples']} sampled trial(s) scored by an evaluation pool")
        base = training_config("simcse_unsup", [*DEMO_TRAINING, *common, *DEMO_TUNE_TRAINING])
        settings = TuneSettings(**DEMO_TUNE, name="tune", storage_path=str(out / "runs"), seed=seed)
        search = run_search(base, settings, log=log)
        # the best trial's own model (its short schedule: the demo's time goes to the methods, not a retrain)
        if "best_model" not in search.files:
            raise SystemExit(f"demo: the Tune search kept no best model; its report says why: {search.files['report']}")
        best_metrics = search.best_metrics
        log(f"the best trial's model ({best_metrics.get('step')} steps): {search.files.get('best_model')}; "
            f"its config: {search.files.get('best_config')}")
        best_name = (f"simcse_unsup best trial ({', '.join(f'{k}={v:.3g}' for k, v in sorted(search.best_config.items()))}; "
                     f"{best_metrics.get('step')} steps)")
        models[best_name] = search.files["best_model"]
        own[best_name] = ["sts_dev"]

    log(f"[{time.time() - started:4.0f} s] evaluating every model on the demo world's STS pairs, aspect retrieval (held-out companies) and SRSD "
        "(held-out BATS lines)")
    rows = []
    for name, path in models.items():
        trained = load_trained(path)
        encoder = trained.encoder
        row = {"model": name, "path": path, "srsd": evaluate_srsd(trained, out / "dsbats" / "srsd")["accuracy"]}
        for split in ("dev", "test"):
            row[f"sts_{split}"] = evaluate_sts(encoder, world.sts_dir, split)["spearman"]
        aspects = evaluate_aspect_retrieval(encoder, out / "aspects" / "aspect_docs")["per_aspect"]
        row["country_p10"], row["industry_p10"] = aspects["P17"]["P@10"], aspects["P452"]["P@10"]
        rows.append(row)
    report = out / "report"
    shown, columns, below = write_demo_report(report, rows, own)
    log("")
    log(DEMO_NOTE)
    log(format_table(shown, columns))
    log("")
    log(f"report: {report}.md and {report}.json")

    from eval.scoreboard import run_report

    log("")
    log(f"[{time.time() - started:4.0f} s] [{steps}/{steps}] one report of every model on every task that applies (python -m eval report): the "
        "world's STS test, each method's own tasks (GaussCSE NLI AUPRC and direction, RSE link prediction, "
        "AspectCSE retrieval, DSBATS SRSD)")
    runs = [str(Path(p).parent) if (Path(p).parent / "train_summary.json").is_file() else f"{name}={p}"
            for name, p in models.items() if name != BASE_NAME]
    eval_md, eval_json, _, _ = run_report(
        [*runs, "--base", f"{BASE_NAME}={base_model}", "--sts", str(world.sts_dir), "--split", "test",
         "--nli", str(world.nli_dir), "--aspects", str(out / "aspects" / "aspect_docs"), "--srsd",
         str(out / "dsbats" / "srsd"), "--no-published", "--out", str(out / "eval_report")], log=lambda m: None)
    log(eval_md.read_text(encoding="utf-8").split("## Runs scored")[0].rstrip())
    log(f"eval report: {eval_md} (+ .json, a PNG per column)")
    for name, path in models.items():
        log(f"model {name}: {path}")
    log(f"sets: {out / 'sets'} ({manifest['sets']['sentences']['rows']} sentences, "
        f"{manifest['sets']['entity_pairs']['rows']} entity pairs); total {time.time() - started:.0f} s")
    eval_below = json.loads(Path(eval_json).read_text(encoding="utf-8")).get("below_base", [])
    if search is not None:
        log(f"tune: {search.baseline_line}")
    log(summary_line(below, eval_below))
    return {"rows": rows, "report": f"{report}.json", "eval_report": str(eval_md),
            "below_base": below + [{**b, "table": "eval_report"} for b in eval_below],
            "seconds": round(time.time() - started, 1)}


def summary_line(below: list[dict], eval_below: list[dict], base_name: str = BASE_NAME) -> str:
    """The demo's last line: the models not above the untrained base, in report.md (on their own metric) and in
    eval_report.md (its main table's STS avg, each method's own tasks), or that there are none."""
    from eval.report import below_base_line

    line = below_base_line(below, base_name, "demo models")
    if eval_below:
        line += "; in eval_report.md: " + "; ".join(
            f"{b['model']} ({b['metric']} {b['value']:.4f} vs {b['base']:.4f})" for b in eval_below)
    return line


def demo_to(out: str, seed: int, skip_tune: bool, run=None) -> dict:
    """The demo in ``out``; for a URI (``s3://BUCKET/demo``), run in a local staging folder and published
    there when it finishes (``infra.publish``: a version under ``out``; its paths in the result name it).
    ``out`` must be new, empty or structcse's, and not a bucket root; one demo at a time writes it."""
    from infra.lease import Lease
    from infra.owned import check_destination, claim, remove_owned
    from infra.storage import check_storage

    run = run or demo
    out = os.fspath(out)
    command = f"structcse demo --out {redact_text(out)}"
    check_storage(out, "--out")
    check_destination(out, "--out")  # a bucket root, or a folder of the user's: refused before any work
    with Lease(f"{out.rstrip('/')}/_lease-demo.json", "the demo's --out", command):  # one demo per --out
        claim(out, command)
        if not is_uri(out):
            return run(Path(local_path(out)), seed, skip_tune)
        staging = Path(tempfile.mkdtemp(prefix="structcse-demo-"))
        claim(str(staging), command)
        try:
            result = run(staging, seed, skip_tune)
            log(f"uploading {staging} to {redact_text(out)}")
            publish_folder(staging, out)
        finally:
            remove_owned(str(staging), "demo staging folder")
    from infra.publish import resolve

    published = resolve(out)  # the version just published: its paths stay valid while newer demos replace it
    return json.loads(json.dumps(result, default=str).replace(str(staging), published))


class VersionAction(argparse.Action):
    """``--version``: ``structcse 0.13.0 (git 1a2b3c4)``; git is asked only when the flag is given."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from infra.version import version_line

        print(version_line(), flush=True)
        parser.exit()


def main(argv=None) -> int:
    from infra.logs import add_verbose_flag, setup_logging_from_argv

    setup_logging_from_argv(argv)  # quiet output when stdout is not a terminal (infra/logs.py); --verbose
    parser = argparse.ArgumentParser(prog="structcse", description="structcse: knowledge-structured sentence embeddings on Ray")
    parser.add_argument("--version", action=VersionAction,
                        help="print the version (and the git commit in a checkout) and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    demo_parser = commands.add_parser("demo", help="run the whole pipeline on the embedded demo world")
    demo_parser.add_argument("--out", default="demo_out",
                             help="output folder, or a URI (s3://BUCKET/demo: uploaded when done; default: demo_out)")
    demo_parser.add_argument("--seed", type=int, default=0)
    demo_parser.add_argument("--skip-tune", action="store_true", help="leave out the Ray Tune step")
    from structcse import aspects

    aspects_parser = commands.add_parser("aspects", help="AspectCSE end to end: sets, the models of its Table 5, "
                                         "aspect retrieval", description=aspects.__doc__.split("\n\n")[0])
    aspects.add_arguments(aspects_parser)
    from structcse import dsbats

    dsbats_parser = commands.add_parser("dsbats", help="DSBATS-sn end to end: BATS + WordNet -> sets, the p⁻-only "
                                        "loss, SRSD / STS / MRPC", description=dsbats.__doc__.split("\n\n")[0])
    dsbats.add_arguments(dsbats_parser)
    for sub in (demo_parser, aspects_parser, dsbats_parser):
        add_verbose_flag(sub)
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.command in ("aspects", "dsbats"):
        from train.plan import check_hub_reachable
        from infra.ray_local import ensure_ray

        try:
            check_hub_reachable(args.model)  # before any set is built: a base that cannot load fails in a second
            ensure_ray(log, configure_logging=False)
            run = dsbats.run_dsbats if args.command == "dsbats" else aspects.run_aspects
            result = run(args, log=log)
        except (ValueError, FileNotFoundError) as e:  # ConfigError is a ValueError
            print(f"structcse {args.command}: error: {e}", file=sys.stderr)
            return 2
    else:
        from infra.storage import StorageError

        try:
            result = demo_to(args.out, args.seed, args.skip_tune)
        except StorageError as e:  # a bucket root, a user's folder, another demo writing it, storage not there
            print(f"structcse demo: error: {e}", file=sys.stderr)
            return 2
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
