"""The demo pipeline (``structcse demo``), on the embedded demo world, on a laptop:

demo world (real dump formats) -> ingest (Ray Data) -> tiny BERT with a
vocabulary trained on the ingested sentences -> SimCSE and EASE (Ray Train)
-> AspectCSE on aspect triplets of the world's companies (multi-aspect union)
-> DSBATS-sn on the world's BATS folder and WordNet-format dictionary
-> SimCSE-sup, GaussCSE and RSE on the world's NLI pairs
-> a small ASHA search (Ray Tune + evaluation actor) -> STS evaluation,
aspect retrieval (P@10 on held-out companies) and SRSD of every model -> a table
-> ``python -m eval report`` of every model, each method also on its own tasks.

Each step is a function of its own below ``demo``, which reads as the list above; they share a ``DemoRun``
(the folder, the world, the models trained so far). ``structcse/cli.py`` parses the command line and calls
``demo_to``. The world itself is ``structcse/demo/``.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from infra.publish import publish_folder
from infra.secrets import redact_text
from infra.storage import is_uri, local_path
from structcse.configs import training_config

if TYPE_CHECKING:
    from structcse.demo import DemoWorld

log = logging.getLogger(__name__)

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


@dataclass
class DemoRun:
    """What the demo's steps share: where it writes, the world and the base model, and every model trained so
    far with the metric(s) of the demo's table it is judged on (``own``)."""

    out: Path
    seed: int
    steps: int
    started: float = field(default_factory=time.time)
    world: DemoWorld | None = None  # the generated world, once its step ran
    base_model: Path | None = None
    models: dict[str, str] = field(default_factory=dict)
    own: dict[str, list[str]] = field(default_factory=dict)

    def say(self, step: int | None, text: str) -> None:
        where = f" [{step}/{self.steps}]" if step is not None else ""
        log.info(f"[{time.time() - self.started:4.0f} s]{where} {text}")

    def common(self) -> list[str]:
        """The settings of every demo training run; each method's dev metric (score/dev_metrics.py) picks its
        checkpoint on the world's STS dev."""
        return [f"model={self.base_model}", f"data={self.out / 'sets'}", f"storage_path={self.out / 'runs'}",
                f"seed={self.seed}", f"dev_data={self.world.sts_dir}"]

    def train(self, name: str, method: str, overrides: list[str], own: list[str]) -> None:
        from train.run import run as train_run

        outcome = train_run(training_config(method, [*DEMO_TRAINING, *self.common(), *overrides]))
        self.models[name] = outcome.model_path
        self.own[name] = own


def demo(out: Path, seed: int, skip_tune: bool) -> dict:
    run = DemoRun(out.resolve(), seed, steps=10 if not skip_tune else 9)
    manifest = _world_sets_and_base(run)
    _simcse_and_ease(run)
    _aspectcse(run)
    _dsbats(run)
    _pair_methods(run)
    search = None if skip_tune else _tune(run)
    rows, below, report = _score_every_model(run)
    eval_md, eval_below = _eval_report(run)
    for name, path in run.models.items():
        log.info(f"model {name}: {path}")
    log.info(f"sets: {run.out / 'sets'} ({manifest['sets']['sentences']['rows']} sentences, "
             f"{manifest['sets']['entity_pairs']['rows']} entity pairs); total {time.time() - run.started:.0f} s")
    if search is not None:
        log.info(f"tune: {search.baseline_line}")
    log.info(summary_line(below, eval_below))
    return {"rows": rows, "report": f"{report}.json", "eval_report": str(eval_md),
            "below_base": below + [{**b, "table": "eval_report"} for b in eval_below],
            "seconds": round(time.time() - run.started, 1)}


def _world_sets_and_base(run: DemoRun) -> dict:
    """Steps 1-3: the demo world, its dumps ingested, a tiny BERT with a vocabulary trained on the sentences."""
    from infra.ray_local import ensure_ray
    from ingest.pipeline import IngestConfig, run_ingest
    from setformat.io import read_table
    from structcse.demo import ENTITY_LINK_THRESHOLD, generate_demo_world
    from train.tiny_bert import build_tiny_bert

    run.say(1, f"demo world (seed {run.seed}) -> {run.out / 'world'}")
    run.world = world = generate_demo_world(run.out / "world", seed=run.seed)
    ensure_ray(configure_logging=False)
    run.say(2, f"ingest with Ray Data -> {run.out / 'sets'}")
    manifest = run_ingest(IngestConfig(wikipedia=[str(world.wikipedia_dump)], wikidata=[str(world.wikidata_dump)],
                                       out=str(run.out / "sets"), seed=run.seed, shard_bytes=1,
                                       entity_link_threshold=ENTITY_LINK_THRESHOLD))
    run.say(3, f"tiny BERT with a WordPiece vocabulary trained on the ingested sentences -> {run.out / 'models/base'}")
    sentences = read_table(run.out / "sets" / "sentences", ["sentence"])
    run.base_model = build_tiny_bert(sentences["sentence"].to_pylist(), run.out / "models" / "base", seed=run.seed)
    run.models[BASE_NAME] = str(run.base_model)
    return manifest


def _simcse_and_ease(run: DemoRun) -> None:
    """Steps 4-5: SimCSE-unsup and EASE on the ingested sets."""
    for i, method in enumerate(("simcse_unsup", "ease")):
        run.say(4 + i, f"train {method} with Ray Train (local mode) -> {run.out / 'runs' / method}")
        run.train(method, method, [f"run_name={method}"], ["sts_dev"])


def _aspectcse(run: DemoRun) -> None:
    """Step 6: one multi-aspect AspectCSE model here (``structcse aspects`` trains the whole of its Table 5)."""
    from ingest.aspects.__main__ import main as build_aspect_sets

    run.say(6, "AspectCSE: aspect labels (P17 country, P452 industry) from the wikidata set, aspect triplets "
               f"from the intros -> {run.out / 'aspects'}; train on the multi-aspect union with Ray Train")
    if build_aspect_sets(["--intros", str(run.out / "sets" / "intros"), "--wikidata-set",
                          str(run.out / "sets" / "wikidata"), "--out", str(run.out / "aspects"),
                          "--seed", str(run.seed), "--triplets-per-anchor", "3"]) != 0:
        raise SystemExit(2)
    run.train("aspectcse (multi-aspect union)", "aspectcse",
              [f"data={run.out / 'aspects' / 'union'}", "max_len=128", "dev_data=null", "run_name=aspectcse"],
              ["country_p10", "industry_p10"])


def _dsbats(run: DemoRun) -> None:
    """Step 7: DSBATS-sn, the world's BATS folder lifted to definition pairs by its WordNet-format dictionary."""
    from ingest.dsbats.bats import category_files
    from ingest.dsbats.job import DsbatsConfig, build_dsbats

    run.say(7, "DSBATS-sn: the world's BATS analogies -> definition pairs from its WordNet dictionary "
               f"(Ray Data) -> DSBATS4CL and SRSD -> {run.out / 'dsbats'}; train with the p⁻-only loss")
    world = run.world
    build_dsbats(str(world.bats_dir), {"kind": "wordnet", "folder": str(world.wordnet_dir)}, str(run.out / "dsbats"),
                 DsbatsConfig(categories=sorted(category_files(world.bats_dir)[1]), seed=run.seed,
                              positives_per_pair=8))
    run.train("dsbats (DSBATS4CL)", "dsbats",
              [f"data={run.out / 'dsbats'}", "max_len=48", "epochs=1", "dev_data=null", "run_name=dsbats"], ["srsd"])


def _pair_methods(run: DemoRun) -> None:
    """Step 8: the sentence-pair methods on the world's NLI pairs (pair ingest: nli_triplets, relation_triples)."""
    from ingest.pairs import PairIngestConfig, PairSource, run_pair_ingest
    from score.dev_metrics import DEV_METRICS
    from train.methods import get_method

    run.say(8, "SimCSE-sup, GaussCSE and RSE: the world's NLI pairs -> nli_triplets and relation_triples "
               f"(Ray Data) -> {run.out / 'pairs'}; train each with Ray Train")
    run_pair_ingest(PairIngestConfig(sources=[PairSource("senteval", str(run.world.nli_dir), split="train")],
                                     out=str(run.out / "pairs")))
    dev_data = {"sts": run.world.sts_dir, "nli": run.world.nli_dir}  # each method's dev metric reads one of these
    for method, extra in DEMO_PAIR_METHODS.items():
        metric = DEV_METRICS[get_method(method).dev_metric]
        # (GaussCSE's own metric, NLI AUPRC, is in eval_report.md's gausscse table)
        run.train(method, method, [f"data={run.out / 'pairs'}", *extra, f"dev_data={dev_data[metric.data_format]}",
                                   f"run_name={method}"], ["sts_dev"])


def _tune(run: DemoRun):
    """Step 9: a small ASHA search; the best trial's own model joins the table (its short schedule: the demo's
    time goes to the methods, not to a retrain)."""
    from tune.search import TuneSettings, run_search

    run.say(9, f"Ray Tune: ASHA over lr and temperature (SimCSE), the base config and {DEMO_TUNE['num_samples']} "
               "sampled trial(s) scored by an evaluation pool")
    base = training_config("simcse_unsup", [*DEMO_TRAINING, *run.common(), *DEMO_TUNE_TRAINING])
    search = run_search(base, TuneSettings(**DEMO_TUNE, name="tune", storage_path=str(run.out / "runs"),
                                           seed=run.seed))
    if "best_model" not in search.files:
        raise SystemExit(f"demo: the Tune search kept no best model; its report says why: {search.files['report']}")
    steps = search.best_metrics.get("step")
    log.info(f"the best trial's model ({steps} steps): {search.files.get('best_model')}; "
             f"its config: {search.files.get('best_config')}")
    name = (f"simcse_unsup best trial ({', '.join(f'{k}={v:.3g}' for k, v in sorted(search.best_config.items()))}; "
            f"{steps} steps)")
    run.models[name] = search.files["best_model"]
    run.own[name] = ["sts_dev"]
    return search


def _score_every_model(run: DemoRun) -> tuple[list[dict], list[dict], Path]:
    """The demo's table: every model on the world's STS dev and test, aspect retrieval and SRSD."""
    from eval.aspect_retrieval import evaluate_aspect_retrieval
    from eval.models import load_trained
    from eval.report import format_table
    from eval.srsd import evaluate_srsd
    from eval.sts import evaluate_sts

    run.say(None, "evaluating every model on the demo world's STS pairs, aspect retrieval (held-out companies) "
                  "and SRSD (held-out BATS lines)")
    rows = []
    for name, path in run.models.items():
        trained = load_trained(path)
        encoder = trained.encoder
        row = {"model": name, "path": path, "srsd": evaluate_srsd(trained, run.out / "dsbats" / "srsd")["accuracy"]}
        for split in ("dev", "test"):
            row[f"sts_{split}"] = evaluate_sts(encoder, run.world.sts_dir, split)["spearman"]
        aspects = evaluate_aspect_retrieval(encoder, run.out / "aspects" / "aspect_docs")["per_aspect"]
        row["country_p10"], row["industry_p10"] = aspects["P17"]["P@10"], aspects["P452"]["P@10"]
        rows.append(row)
    report = run.out / "report"
    shown, columns, below = write_demo_report(report, rows, run.own)
    for line in ("", DEMO_NOTE, format_table(shown, columns), "", f"report: {report}.md and {report}.json", ""):
        log.info(line)
    return rows, below, report


def _eval_report(run: DemoRun) -> tuple[Path, list[dict]]:
    """The last step: ``python -m eval report`` of every model on every task that applies."""
    from eval.scoreboard import run_report
    from infra.logs import lines_muted

    run.say(run.steps, "one report of every model on every task that applies (python -m eval report): the "
                       "world's STS test, each method's own tasks (GaussCSE NLI AUPRC and direction, RSE link "
                       "prediction, AspectCSE retrieval, DSBATS SRSD)")
    runs = [str(Path(p).parent) if (Path(p).parent / "train_summary.json").is_file() else f"{name}={p}"
            for name, p in run.models.items() if name != BASE_NAME]
    world = run.world
    with lines_muted("eval", "score"):  # the report's progress lines: the demo prints the report itself
        eval_md, eval_json, _, _ = run_report(
            [*runs, "--base", f"{BASE_NAME}={run.base_model}", "--sts", str(world.sts_dir), "--split", "test",
             "--nli", str(world.nli_dir), "--aspects", str(run.out / "aspects" / "aspect_docs"), "--srsd",
             str(run.out / "dsbats" / "srsd"), "--no-published", "--out", str(run.out / "eval_report")])
    log.info(eval_md.read_text(encoding="utf-8").split("## Runs scored")[0].rstrip())
    log.info(f"eval report: {eval_md} (+ .json, a PNG per column)")
    return eval_md, json.loads(Path(eval_json).read_text(encoding="utf-8")).get("below_base", [])


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
            log.info(f"uploading {staging} to {redact_text(out)}")
            publish_folder(staging, out)
        finally:
            remove_owned(str(staging), "demo staging folder")
    from infra.publish import resolve

    published = resolve(out)  # the version just published: its paths stay valid while newer demos replace it
    return json.loads(json.dumps(result, default=str).replace(str(staging), published))
