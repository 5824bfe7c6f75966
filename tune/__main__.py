"""``python -m tune``: a Ray Tune search over a training config, trials scored by an evaluation pool."""

from __future__ import annotations

import argparse
import json
import sys

from infra.storage import retries_reported


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tune",
        description="Ray Tune over a training config (batch size, learning rate, temperature, any config key). "
        "A pool of evaluation actors holds the dev data and scores every trial's checkpoints with the method's "
        "own dev metric while the trials train; ASHA compares trials at equal examples seen. Writes "
        "search_report.md, plots, best_config.yaml and best_model/ under STORAGE/NAME; rerunning an interrupted "
        "search continues it.",
    )
    p.add_argument("--config", required=True, help="training YAML (configs/simcse_unsup.yaml, configs/gausscse.yaml)")
    p.add_argument("--tune-config", default=None,
                   help="search YAML (configs/tune/<method>.yaml: the paper's grid); defaults built in")
    p.add_argument("--dev-data", help="what the method's dev metric reads (STS: a folder with sts-dev.csv or "
                   "mteb/stsbenchmark-sts; GaussCSE: a SentEval NLI folder or stanfordnlp/snli); default: the "
                   "training config's dev_data")
    p.add_argument("--data", help="ingest output folder")
    p.add_argument("--model", help="Hugging Face model path or name")
    p.add_argument("--storage", help="where the search, its trials and checkpoints go (local path or URI)")
    p.add_argument("--name", help="experiment name")
    p.add_argument("--searcher", choices=["random", "grid", "optuna"])
    p.add_argument("--scheduler", choices=["asha", "fifo"])
    p.add_argument("--num-samples", type=int)
    p.add_argument("--max-concurrent-trials", type=int)
    p.add_argument("--eval-actors", type=int, help="evaluation pool size (default from the cluster's resources)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a training config key (as in python -m train)")
    from infra.logs import add_verbose_flag

    add_verbose_flag(p)
    return p


@retries_reported("tune")  # its line when the command returns (infra.storage)
def main(argv=None) -> int:
    from infra.logs import setup_logging_from_argv

    setup_logging_from_argv(argv)  # quiet output when stdout is not a terminal (infra/logs.py); --verbose
    args = build_parser().parse_args(argv)
    from setformat.schemas import SchemaError
    from train.config import ConfigError, load_config
    from tune.search import load_tune_settings, run_search

    overrides = list(args.overrides)
    for key, value in (("data", args.data), ("model", args.model), ("dev_data", args.dev_data)):
        if value:
            overrides.append(f"{key}={value}")
    settings_overrides = {
        key: value for key, value in (("storage_path", args.storage), ("name", args.name),
                                      ("searcher", args.searcher), ("scheduler", args.scheduler),
                                      ("num_samples", args.num_samples),
                                      ("max_concurrent_trials", args.max_concurrent_trials),
                                      ("eval_actors", args.eval_actors))
        if value is not None
    }
    from infra.publish import IncompleteError
    from infra.storage import StorageError

    try:
        base = load_config(args.config, overrides)
        base.validate()
        settings = load_tune_settings(args.tune_config, settings_overrides)
        outcome = run_search(base, settings)
    except (ConfigError, SchemaError, FileNotFoundError, IncompleteError, StorageError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not outcome.best_metrics:
        print(f"error: no trial was scored (see {outcome.folder})", file=sys.stderr)
        return 1
    print(json.dumps({"best_config": outcome.best_config, outcome.metric: outcome.best_metrics.get(outcome.metric),
                      "base_config": outcome.base_config, **{k: v for k, v in outcome.files.items()}}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
