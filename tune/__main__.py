"""``python -m tune``: ASHA search over a training config, scored by an evaluation actor."""

from __future__ import annotations

import argparse
import json
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tune",
        description="Ray Tune (ASHA) over learning rate, batch size and temperature of a training config. "
        "An evaluation actor holds the dev STS set and scores every reported checkpoint; "
        "that score drives the scheduler. Prints the best config.",
    )
    p.add_argument("--config", required=True, help="training YAML (configs/simcse_unsup.yaml, configs/ease.yaml)")
    p.add_argument("--tune-config", default=None, help="search YAML (configs/tune.yaml); defaults built in")
    p.add_argument("--dev-sts", required=True, help="folder with sts-dev.csv (SentEval STS-B layout)")
    p.add_argument("--data", help="ingest output folder")
    p.add_argument("--model", help="Hugging Face model path or name")
    p.add_argument("--storage", help="where trials and their checkpoints go (local path or URI)")
    p.add_argument("--name", help="experiment name")
    p.add_argument("--num-samples", type=int)
    p.add_argument("--max-concurrent-trials", type=int)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a training config key (as in python -m train)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from ingest.schemas import SchemaError
    from train.config import ConfigError, load_config
    from tune.search import load_tune_settings, run_search

    overrides = list(args.overrides)
    if args.data:
        overrides.append(f"data={args.data}")
    if args.model:
        overrides.append(f"model={args.model}")
    settings_overrides = {
        key: value for key, value in (("storage_path", args.storage), ("name", args.name),
                                      ("num_samples", args.num_samples),
                                      ("max_concurrent_trials", args.max_concurrent_trials))
        if value is not None
    }
    try:
        base = load_config(args.config, overrides)
        base.validate()
        from train.run import preflight

        preflight(base)
        settings = load_tune_settings(args.tune_config, settings_overrides)
        best_config, best_metrics, _ = run_search(base, settings, args.dev_sts)
    except (ConfigError, SchemaError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"best_config": best_config, settings.metric: best_metrics.get(settings.metric),
                      "checkpoint_path": best_metrics.get("checkpoint_path")}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
