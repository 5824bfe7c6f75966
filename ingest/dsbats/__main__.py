"""``python -m ingest.dsbats``: BATS 3.0 + a semantic network -> DSBATS-sn, DSBATS4CL and SRSD sets.

    python -m ingest.dsbats --bats BATS_3.0 --wordnet /usr/share/wordnet --out sets/dsbats
    python -m ingest.dsbats --bats BATS_3.0 --babelnet https://babelnet.io/v9 --cache bn_cache --out sets/dsbats
    python -m ingest.dsbats --bats BATS_3.0 --wordnet /usr/share/wordnet --senses all --categories E07 L09 --out x

Writes ``OUT/bats_definitions/``, ``OUT/dsbats4cl/`` and ``OUT/srsd/``. Every
option is checked before Ray starts; an error is one line naming the option.
"""

from __future__ import annotations

import argparse
import sys

from ingest.dsbats.bats import DEFAULT_CATEGORIES
from ingest.dsbats.job import DsbatsConfig
from ingest.dsbats.senses import SenseConfig

DEFAULT_WORDNET = "/usr/share/wordnet"  # Debian/Ubuntu: apt-get install wordnet-base


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bats", required=True, help="the BATS_3.0 folder (or its parent)")
    network = p.add_mutually_exclusive_group()
    network.add_argument("--wordnet", default=DEFAULT_WORDNET,
                         help=f"a WordNet 3.0 dict/ folder (default {DEFAULT_WORDNET}, Debian's wordnet-base)")
    network.add_argument("--babelnet", metavar="URL", help="BabelNet's HTTP API (key in $BABELNET_KEY)")
    p.add_argument("--babelnet-key-env", default="BABELNET_KEY", help="environment variable holding the key")
    p.add_argument("--cache", help="disk cache folder for --babelnet responses")
    p.add_argument("--categories", nargs="+", default=list(DEFAULT_CATEGORIES))
    p.add_argument("--senses", choices=("one", "all"), default="one",
                   help="one definition pair per BATS pair (default) or every surviving sense pair "
                        "(not the slides' sizes: docs/methods.md §6d)")
    p.add_argument("--min-degree", type=int, default=SenseConfig.min_degree)
    p.add_argument("--keep-named-entities", action="store_true", help="do not drop named-entity senses")
    p.add_argument("--keep-capitalised", action="store_true", help="do not drop capitalised (proper noun) senses")
    p.add_argument("--strict-names", action="store_true",
                   help="drop names even for words with no other sense (drops most of E01–E05)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--test-share", type=float, default=DsbatsConfig.test_share)
    p.add_argument("--holdout", choices=("lines", "words"), default="lines",
                   help="lines: test BATS lines never trained on, their words may be (default, nearer the slides); "
                        "words: no test word trained on either")
    p.add_argument("--positives-per-pair", type=int, default=DsbatsConfig.positives_per_pair)
    p.add_argument("--distractors", type=int, default=DsbatsConfig.distractors)
    p.add_argument("--workers", type=int, default=1, help="Ray Data actors, one CPU each")


def config_of(args: argparse.Namespace) -> tuple[DsbatsConfig, dict]:
    senses = SenseConfig(senses=args.senses, min_degree=args.min_degree,
                         drop_named_entities=not args.keep_named_entities, drop_capitalised=not args.keep_capitalised,
                         names_when_only_sense=not args.strict_names)
    cfg = DsbatsConfig(categories=args.categories, senses=senses, seed=args.seed, test_share=args.test_share,
                       holdout=args.holdout, positives_per_pair=args.positives_per_pair,
                       distractors=args.distractors, workers=args.workers)
    if args.babelnet:  # the URL is checked where BabelNet is opened (check_network)
        network = {"kind": "babelnet", "url": args.babelnet, "key_env": args.babelnet_key_env, "cache": args.cache}
    else:
        network = {"kind": "wordnet", "folder": args.wordnet}
    return cfg.validate(), network


def check_network(network: dict) -> None:
    """Open the network once on the driver: a wrong folder or a missing key fails here, not in a worker."""
    from ingest.semnet import open_network

    open_network(network)


def main(argv=None) -> int:
    from infra.logs import setup_logging_from_argv

    setup_logging_from_argv(argv)  # quiet output when stdout is not a terminal (infra/logs.py); --verbose
    p = argparse.ArgumentParser(prog="python -m ingest.dsbats", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    p.add_argument("--out", required=True)
    from infra.logs import add_verbose_flag

    add_verbose_flag(p)
    args = p.parse_args(argv)
    from infra.storage import StorageError
    from ingest.dsbats.job import build_dsbats

    try:
        cfg, network = config_of(args)
        check_network(network)
        build_dsbats(args.bats, network, args.out, cfg)  # reads the BATS folder before Ray starts
    except (ValueError, FileNotFoundError, OSError, StorageError) as e:  # OSError: infra.owned.NotOurs too
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
