"""Command line: load a YAML config, apply overrides, train (or resume), print the outcome."""

from __future__ import annotations

import argparse
import json
import sys

from infra.storage import retries_reported


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m train",
        description="Train a contrastive sentence encoder on Ray Train. Re-running with the same "
        "--storage and --name resumes from the latest checkpoint, if that run trained the same config, sets "
        "and base model (else an error says what differs).",
        epilog=_methods_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", required=True, help="YAML config (configs/simcse_unsup.yaml, configs/ease.yaml, ...)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key; method options as SECTION.KEY=VALUE (e.g. ease.hard_negative_weight=0)",
    )
    p.add_argument("--data", help="ingest output folder (holds sentences/, entity_pairs/, entities/) or a set folder")
    p.add_argument("--model", help="Hugging Face model path or name")
    p.add_argument("--num-workers", type=_workers, metavar="N|MIN-MAX",
                   help="Ray Train workers (0 = local mode in this process); MIN-MAX (e.g. 2-8): elastic")
    p.add_argument("--storage", help="storage_path for checkpoints and the final model (local path or URI)")
    p.add_argument("--name", help="run name (same storage + name = resume)")
    p.add_argument("--max-steps", type=int, help="stop after this many optimizer steps (max_steps)")
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="resume the run of this --storage and --name; an error if there is none, or if it "
                       "trained another config, other sets or another base model")
    again.add_argument("--overwrite", action="store_true",
                       help="remove the run of this --storage and --name first and start fresh")
    from infra.logs import add_verbose_flag

    add_verbose_flag(p)
    return p


def _methods_epilog() -> str:
    """The methods and the configs that run them, for --help."""
    from pathlib import Path

    import yaml

    configs = Path(__file__).resolve().parents[1] / "configs"
    by_method: dict[str, list[str]] = {}
    for path in sorted(configs.glob("*.yaml")):
        method = (yaml.safe_load(path.read_text()) or {}).get("method")
        if method:
            by_method.setdefault(str(method), []).append(f"configs/{path.name}")
    lines = ["methods (--config):"] + [f"  {m:<13} {', '.join(c)}" for m, c in sorted(by_method.items())]
    return "\n".join(lines)


def _workers(text: str) -> str:
    """``--num-workers``: ``N``, or ``MIN-MAX`` for an elastic run (the override ``num_workers=[MIN,MAX]``)."""
    import argparse

    low, dash, high = text.partition("-")
    if not (low.isdigit() and (not dash or high.isdigit())):
        raise argparse.ArgumentTypeError(f"{text!r} is not N or MIN-MAX (e.g. 4, or 2-8 for an elastic run)")
    return f"[{low},{high}]" if dash else low


@retries_reported("train")  # its line when the command returns (infra.storage)
def main(argv: list[str] | None = None) -> int:
    from infra.logs import setup_logging_from_argv

    setup_logging_from_argv(argv)  # quiet output when stdout is not a terminal (infra/logs.py); --verbose
    args = build_parser().parse_args(argv)
    from setformat.schemas import SchemaError
    from train.config import ConfigError, load_config

    overrides = list(args.overrides)
    for flag, key in (
        ("data", "data"),
        ("model", "model"),
        ("num_workers", "num_workers"),
        ("storage", "storage_path"),
        ("name", "run_name"),
        ("max_steps", "max_steps"),
    ):
        value = getattr(args, flag)
        if value is not None:
            overrides.append(f"{key}={value}")
    from infra.publish import IncompleteError
    from infra.storage import StorageError

    try:
        cfg = load_config(args.config, overrides)
        from train.run import run

        outcome = run(cfg, resume=args.resume, overwrite=args.overwrite)
    except (ConfigError, SchemaError, IncompleteError, StorageError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        from ray.train import TrainingFailedError

        if not isinstance(e, TrainingFailedError):
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        run_dir = f"{cfg.storage_path.rstrip('/')}/{cfg.name}"
        print(f"error: run {cfg.name!r} failed after {cfg.max_failures} restart(s) (max_failures): {first}\n"
              f"Rerunning the same command resumes from the last checkpoint in {run_dir} (if one was written); "
              "--set max_failures=N lets the run restart itself after a lost worker or node.", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {"model_path": outcome.model_path, "checkpoint_path": outcome.checkpoint_path, "metrics": outcome.metrics},
            indent=2,
            default=str,
        )
    )
    return 0
