"""``python -m eval``: evaluate one encoder on one task (``python -m eval report …``: many models, every
task that applies, one markdown report: ``eval.scoreboard``).

The last line of stdout is always one JSON object with the result (for STS:
``spearman`` as a fraction, ``pearson``, ``n_pairs``, ``skipped_rows``, ...;
nli: ``accuracy``, ``auprc``, ``auprc_trapezoid``; direction:
``length_baseline_acc``, ``sim_acc``, ``det_acc``; link_prediction: ``MR``,
``MRR``, ``Hits@k`` and ``per_relation``; relational_sts: ``spearman``;
aspect_retrieval: ``P@k``, ``R@k``, ``MRR@k`` and ``per_aspect``; srsd:
``accuracy``, ``accuracy_reversed``, ``per_kind``; mrpc: ``accuracy``, ``f1``).
Task names may be written with ``-`` for ``_`` (``aspect-retrieval``); the
default split is ``dev`` (sts_all: ``test``, the papers' table; mrpc: ``test``, train -> test, the papers'
protocol), or the task's only split when it has no dev split. Without ``--data`` a task reads its public datasets from the Hugging Face Hub by name
(``eval.tasks.DEFAULT_DATA``; docs/data.md).
Task options (``--tune-data``, ``--tune-split``, ``--plots``, ``--limit``,
``--weights``) are accepted only by the tasks that use them. The evaluation itself is ``eval.run.evaluate``,
the function ``structcse.evaluate`` calls too.
User errors (bad arguments, missing data or model) exit with code 2 and a
one-line message on stderr, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from eval.run import evaluate
from eval.tasks import TASKS
from infra.storage import retries_reported

USAGE_ERROR = 2


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    tasks = "; ".join(f"{t.name}: {t.description}" for t in TASKS.values())
    parser = argparse.ArgumentParser(
        prog="python -m eval",
        description=f"Evaluate a sentence encoder. Tasks: {tasks}.",
        epilog="The last stdout line is the result as one JSON object.",
    )
    parser.add_argument("--model", required=True,
                        help="SentenceTransformer folder, plain Hugging Face model folder (mean pooling), "
                             "train checkpoint folder, or hub name")
    parser.add_argument("--task", default="sts", choices=sorted(TASKS), type=lambda name: name.replace("-", "_"),
                        help="evaluation task (default: sts)")
    parser.add_argument("--data", default=None,
                        help="the task's data: a Hugging Face dataset name (read through `datasets`), a folder of a "
                             "hub dataset's own files (save_to_disk output or the repo's parquet/jsonl files), or a "
                             "folder in SentEval's layout (sts, relational_sts: sts-{train,dev,test}.csv; sts_all: "
                             "SentEval's data/downstream tree; nli, direction, link_prediction: s1/s2/labels.<split> "
                             "or SICK_<split>.txt; mrpc: msr_paraphrase_{train,test}.txt; aspect_retrieval, srsd: a "
                             "set folder; stc: the STC files). Default: the task's public datasets "
                             "(sts: mteb/stsbenchmark-sts; sts_all: mteb/sts12-sts ... mteb/sickr-sts; nli, direction, "
                             "link_prediction: stanfordnlp/snli; mrpc: nyu-mll/glue mrpc); see docs/data.md")
    parser.add_argument("--split", default=None,
                        help="split to evaluate: dev, test, train (SICK: trial) (default: dev; sts_all: test; "
                             "aspect_retrieval: test; mrpc: test, i.e. train -> test; mrpc --split train: "
                             "cross-validation on the train file)")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="encoding batch size (default: 64)")
    parser.add_argument("--device", default=None, help="torch device, e.g. cpu or cuda (default: auto)")
    parser.add_argument("--max-seq-length", type=positive_int, default=None,
                        help="read at most this many tokens of a text (default: the model's own limit; a folder "
                             "saved before 0.14 states its training max_len there: pass 512 to read whole texts)")
    parser.add_argument("--output", default=None, help="also write the JSON result to this file")
    _add_task_options(parser.add_argument_group("task options"))
    from infra.logs import add_verbose_flag

    add_verbose_flag(parser)
    return parser


def _add_task_options(task_options) -> None:
    """The options only some tasks take (``TASK_OPTIONS``; ``eval.run.resolve`` refuses the others)."""
    task_options.add_argument("--tune-data", default=None,
                              help="nli: folder whose --tune-split tunes the threshold (default: --data; "
                                   "SICK has no dev split: give a SentEval SNLI folder)")
    task_options.add_argument("--tune-split", default=None, help="nli: split the threshold is tuned on (default: dev)")
    task_options.add_argument("--plots", default=None,
                              help="sts, direction, link_prediction, relational_sts, aspect_retrieval: write PNG "
                                   "plots into this folder (STS predicted-vs-gold scatter, GaussCSE variance "
                                   "scatter, RSE relation heatmap, t-SNE per aspect)")
    task_options.add_argument("--limit", type=positive_int, default=None,
                              help="nli, direction, link_prediction, relational_sts: use the first N pairs only; "
                                   "aspect_retrieval: the first N documents of each aspect")
    task_options.add_argument("--weights", default=None,
                              help="relational_sts: relation weights REL=W,REL=W (default: the model's sts_weights)")
    task_options.add_argument("--actors", type=positive_int, default=None,
                              help="sts_all: encode on a pool of N Ray actors (Ray Data map_batches; large sets, "
                                   "GPU shares on a cluster)")
    task_options.add_argument("--sick-protocol", default=None, choices=("senteval", "mteb"),
                              help="sts_all: SICK-R's pairs: senteval (default) the SemEval-2014 test part, 4,927 "
                                   "pairs, as SentEval and the papers; mteb: all of SICK (9,927 pairs), as MTEB")
    task_options.add_argument("--mrpc-classifier", default=None, choices=("senteval", "sklearn"),
                              help="mrpc: senteval (default) SentEval's classifier (nn.Linear + Adam, early stopping, "
                                   "L2 by 10-fold CV), the papers'; sklearn: scikit-learn's logistic regression")
    task_options.add_argument("--representation", default=None, choices=("offset", "concat_mlp"),
                              help="srsd: the pair representation (default: the model's own; offset for any model "
                                   "without DSBATS heads)")


TASK_OPTIONS = ("tune_data", "tune_split", "plots", "limit", "weights", "representation", "actors", "sick_protocol",
                "mrpc_classifier")


def describe(result: dict) -> str:
    """A readable summary of a result (printed before the JSON line)."""
    lines = [f"{result.get('task', '?')} {result.get('split', '?')} on {result.get('data', '?')}",
             f"  model:    {result.get('model', '?')}"]
    for key, value in result.items():
        if isinstance(value, float) and key not in ("seconds", "total_seconds", "threshold"):
            lines.append(f"  {key + ':':9} {value:.4f}  ({100 * value:.2f} x100)")
    for name, metrics in (result.get("per_relation") or result.get("per_aspect") or {}).items():
        lines.append(f"  {name}: " + ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                                               for k, v in metrics.items()))
    if "n_items" in result:
        lines.append(f"  items:    {result['n_items']}")
    elif "n_pairs" not in result and "n_docs" in result:
        lines.append(f"  docs:     {result['n_docs']}  (seeds: {result.get('n_seeds', '?')})")
    else:
        lines.append(f"  pairs:    {result.get('n_pairs', '?')}  (skipped rows: {result.get('skipped_rows', 0)}"
                     + (f", lines {result['skipped_lines']}" if result.get("skipped_lines") else "") + ")")
    for plot in result.get("plots") or []:
        lines.append(f"  plot:     {plot}")
    return "\n".join(lines)


@retries_reported("eval")  # its line when the command returns (infra.storage)
def main(argv: list[str] | None = None) -> int:
    from infra.logs import setup_logging_from_argv

    setup_logging_from_argv(argv)  # quiet output when stdout is not a terminal (infra/logs.py); --verbose
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["report"]:  # python -m eval report MODEL_OR_RUN ... (eval.scoreboard)
        return report_main(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    options = {name: getattr(args, name) for name in TASK_OPTIONS}
    from infra.preflight import first_line
    from infra.publish import IncompleteError
    from infra.storage import StorageError

    from infra.logs import lines_on_stderr

    try:
        with lines_on_stderr():  # the tasks' own lines: stdout is the result
            result = evaluate(args.model, args.task, args.data, args.split, batch_size=args.batch_size,
                              device=args.device, max_seq_length=args.max_seq_length, cli=True, **options)
    except (ValueError, FileNotFoundError, IncompleteError, StorageError) as error:
        return usage_error(str(error))
    except OSError as error:  # the hub's errors while loading (no such repo, gated, ...), multi-line
        return usage_error(first_line(error))
    except TypeError as error:
        from score.model import MethodMismatchError  # (imports torch: only a loaded model raises it)

        if not isinstance(error, MethodMismatchError):
            raise
        return usage_error(str(error))

    if args.output:
        output = Path(args.output)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(describe(result))
    print(json.dumps(result), flush=True)
    return 0


def report_main(argv: list[str]) -> int:
    """``python -m eval report ...``: the report (markdown path first, then one JSON line), or a usage error."""
    from eval.scoreboard import run_report
    from infra.logs import lines_on_stderr

    try:
        with lines_on_stderr():  # its progress lines: stdout is the report
            md_path, json_path, charts, rows = run_report(argv)
    except (FileNotFoundError, ValueError) as error:
        return usage_error(str(error))
    print(md_path.read_text(encoding="utf-8"))
    print(json.dumps({"report": str(md_path), "json": str(json_path), "charts": [str(c) for c in charts],
                      "rows": rows}, default=str), flush=True)
    return 0


def usage_error(message: str) -> int:
    print(f"python -m eval: error: {message}", file=sys.stderr)
    return USAGE_ERROR
