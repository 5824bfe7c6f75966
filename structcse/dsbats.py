"""``structcse dsbats``: DSBATS-sn end to end (Zhang, Waseda 2023; the slides' "Evaluation results").

BATS folder + a semantic network (WordNet's dict/ folder, or BabelNet) ->
``bats_definitions``, ``dsbats4cl`` and ``srsd`` sets (``python -m ingest.dsbats``)
-> the base encoder fine-tuned on DSBATS4CL with the p⁻-only loss on Ray Train
(``configs/dsbats.yaml``) -> both models scored on SRSD (the held-out split),
STS (mean Spearman over the ``--sts`` folders) and MRPC (``--mrpc``) ->
``OUT/dsbats.md``, a table shaped like the slides' (rows: base, base +
DSBATS4CL; columns SRSD, STS avg, MRPC), and ``OUT/dsbats.json``.

    structcse dsbats --bats BATS_3.0 --out dsbats_out --sts stsbenchmark --mrpc MRPC
    structcse dsbats --bats BATS_3.0 --wordnet /usr/share/wordnet --model sentence-transformers/all-MiniLM-L6-v2 \\
        --set use_gpu=true --out dsbats_out
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from structcse.configs import training_config
from structcse.results import write_results

log = logging.getLogger(__name__)


def build_sets(args, out: Path) -> tuple[Path, dict]:
    from ingest.dsbats.__main__ import check_network, config_of
    from ingest.dsbats.job import build_dsbats

    cfg, network = config_of(args)
    check_network(network)
    sets = out / "sets"
    log.info(f"[dsbats] DSBATS-sn from {args.bats} with {network['kind']} -> {sets}")
    from infra.owned import NotOurs
    from infra.storage import StorageError

    try:
        return sets, build_dsbats(args.bats, network, str(sets), cfg)
    except (StorageError, NotOurs) as e:  # a user's folder, a second job into it: one line, exit 2
        print(f"structcse dsbats: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def score(name: str, path: str, sets: Path, args) -> dict:
    """SRSD accuracy (and reversed), STS avg and MRPC of one model, as fractions."""
    from eval.models import load_trained
    from eval.tasks import get_task

    model = load_trained(path)
    srsd = get_task("srsd").run(model, str(sets / "srsd"), "test", batch_size=args.batch_size)
    row = {"model": name, "path": str(path), "srsd": srsd["accuracy"],
           "srsd_reversed": srsd.get("accuracy_reversed"),
           "srsd_per_cluster": srsd["per_kind"].get("other_cluster", {}).get("per_cluster", {})}
    sts = {}
    for folder in args.sts or []:
        sts[folder] = get_task("sts").run(model.encoder, folder, args.sts_split, batch_size=args.batch_size)["spearman"]
    row["sts"] = sts
    row["sts_avg"] = sum(sts.values()) / len(sts) if sts else None
    if args.mrpc:
        split = "test" if (Path(args.mrpc) / "msr_paraphrase_test.txt").is_file() else "train"
        mrpc = get_task("mrpc").run(model, args.mrpc, split, batch_size=args.batch_size, limit=args.mrpc_limit,
                                    kfold=args.mrpc_kfold)
        row["mrpc"], row["mrpc_f1"] = mrpc["accuracy"], mrpc.get("f1")
    else:
        row["mrpc"] = row["mrpc_f1"] = None
    log.info(f"[dsbats] {name}: SRSD {row['srsd']:.4f}" + (f", STS avg {row['sts_avg']:.4f}" if sts else "")
             + (f", MRPC {row['mrpc']:.4f}" if args.mrpc else ""))
    return row


def table_markdown(rows: list[dict]) -> str:
    """The slides' table: a row per model, SRSD / STS avg. / MRPC in percent."""
    def pct(v):
        return f"{100 * v:.2f}" if v is not None else "–"

    base = next((r for r in rows if not r["trained"]), None)  # the untrained base: what Δ is measured from
    lines = ["| model | DSBATS4CL | SRSD | SRSD (reversed) | STS avg. | MRPC | Δ SRSD vs base | vs base |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        delta = (row["srsd"] - base["srsd"] if base is not None and row is not base
                 and row["srsd"] is not None and base["srsd"] is not None else None)
        versus = "base" if row is base else "–" if delta is None else "≤ base" if delta <= 0 else "above base"
        lines.append(f"| {row['model']} | {'w/' if row['trained'] else 'w/o'} | {pct(row['srsd'])} | "
                     f"{pct(row['srsd_reversed'])} | {pct(row['sts_avg'])} | {pct(row['mrpc'])} | "
                     f"{f'{100 * delta:+.2f}' if delta is not None else '–'} | {versus} |")
    return "\n".join(lines)


TABLE_NOTE = ("Split: SRSD on the held-out split (test), STS avg. on the --sts folders' --sts-split, MRPC SentEval's "
              "(train → test, or cross-validation on train); similarity: cosine (SRSD: of pair representations, "
              "the trained model's pair head, the offset for the base). Δ: percentage points over the untrained "
              "base (w/o).")


def train_model(sets: Path, args, out: Path) -> str:
    from train.run import run as train_run

    log.info(f"[dsbats] train {args.model} on DSBATS4CL ({sets / 'dsbats4cl'}) with Ray Train")
    cfg = training_config("dsbats", [f"model={args.model}", f"data={sets}", f"seed={args.seed}",
                                     f"storage_path={out / 'runs'}", "run_name=dsbats", *args.overrides])
    return train_run(cfg).model_path


def check_eval_data(args) -> None:
    """The STS and MRPC folders, before anything is built or trained: an error names the folder."""
    from eval.tasks import get_task

    for folder in args.sts or []:
        get_task("sts").check_data(folder, args.sts_split)
    if args.mrpc:
        get_task("mrpc").check_data(args.mrpc, "train")


def run_dsbats(args) -> dict:
    started = time.time()
    check_eval_data(args)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    sets, built = build_sets(args, out)
    trained = train_model(sets, args, out)
    rows = [{**score(args.model, args.model, sets, args), "trained": False},
            {**score(f"{args.model} + DSBATS4CL", trained, sets, args), "trained": True}]
    table = table_markdown(rows)
    markdown = ("# DSBATS-sn: SRSD on the held-out split, STS avg. and MRPC (%)\n\n"
                f"{TABLE_NOTE}\n\n{table}\n\nDSBATS-sn sizes per category: {json.dumps(built['sizes'])}\n")
    return write_results(out, "dsbats", markdown, {
        "rows": rows, "sizes": built["sizes"], "set_rows": built["rows"], "model": trained,
        "seconds": round(time.time() - started, 1)}, table)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ingest.dsbats.__main__ import add_arguments as add_set_arguments

    add_set_arguments(p)
    p.add_argument("--out", default="dsbats_out")
    p.add_argument("--model", default="bert-base-uncased", help="base encoder (the slides: BERT, RoBERTa, SBERT)")
    p.add_argument("--sts", nargs="*", default=[], help="STS folders (STS-B layout) whose mean Spearman is STS avg.")
    p.add_argument("--sts-split", default="test")
    p.add_argument("--mrpc", help="MRPC folder (msr_paraphrase_train.txt [+ _test.txt]): SentEval's protocol")
    p.add_argument("--mrpc-kfold", type=int, default=10, help="MRPC folds (SentEval: 10; the C search is nested)")
    p.add_argument("--mrpc-limit", type=int, help="MRPC: only the first N pairs of each file")
    p.add_argument("--batch-size", type=int, default=64, help="encoding batch size for evaluation")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="training override (e.g. use_gpu=true, max_steps=500)")
