"""``python -m eval``: evaluate one encoder on one task.

The last line of stdout is always one JSON object with the result (for STS:
``spearman`` as a fraction, ``pearson``, ``n_pairs``, ``skipped_rows``, ...).
User errors (bad arguments, missing data or model) exit with code 2 and a
one-line message on stderr, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from eval.tasks import TASKS, get_task

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
    parser.add_argument("--task", default="sts", choices=sorted(TASKS), help="evaluation task (default: sts)")
    parser.add_argument("--data", required=True, help="task data folder (sts: sts-{train,dev,test}.csv)")
    parser.add_argument("--split", default="dev", help="split to evaluate: dev, test or train (default: dev)")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="encoding batch size (default: 64)")
    parser.add_argument("--device", default=None, help="torch device, e.g. cpu or cuda (default: auto)")
    parser.add_argument("--output", default=None, help="also write the JSON result to this file")
    return parser


def describe(result: dict) -> str:
    """A readable summary of a result (printed before the JSON line)."""
    lines = [f"{result.get('task', '?')} {result.get('split', '?')} on {result.get('data', '?')}",
             f"  model:    {result.get('model', '?')}"]
    for key in ("spearman", "pearson"):
        if isinstance(result.get(key), float):
            lines.append(f"  {key + ':':9} {result[key]:.4f}  ({100 * result[key]:.2f} x100)")
    lines.append(f"  pairs:    {result.get('n_pairs', '?')}  (skipped rows: {result.get('skipped_rows', 0)}"
                 + (f", lines {result['skipped_lines']}" if result.get("skipped_lines") else "") + ")")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    task = get_task(args.task)
    if args.split not in task.splits:
        return usage_error(f"task {task.name} has no split {args.split!r}; choose from {', '.join(task.splits)}")
    try:
        task.check_data(args.data, args.split)
    except (FileNotFoundError, ValueError) as error:
        return usage_error(str(error))

    from eval.models import load_encoder

    started = time.perf_counter()
    try:
        model = load_encoder(args.model, device=args.device)
    except FileNotFoundError as error:
        return usage_error(str(error))
    result = {"model": args.model,
              **task.run(model, args.data, args.split, batch_size=args.batch_size),
              "total_seconds": round(time.perf_counter() - started, 2)}

    if args.output:
        output = Path(args.output)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(describe(result))
    print(json.dumps(result), flush=True)
    return 0


def usage_error(message: str) -> int:
    print(f"python -m eval: error: {message}", file=sys.stderr)
    return USAGE_ERROR
