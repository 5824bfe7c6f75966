"""The ``structcse`` command: a parser, and the call of what each subcommand runs.

``structcse demo`` (``structcse/demo_pipeline.py``): the whole pipeline on the embedded demo world.
``structcse aspects`` (``structcse/aspects.py``): AspectCSE end to end.
``structcse dsbats`` (``structcse/dsbats.py``): DSBATS-sn end to end.
``structcse --version``: the version, and the git commit when run from a checkout (``infra/version.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


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
            ensure_ray(configure_logging=False)
            run = dsbats.run_dsbats if args.command == "dsbats" else aspects.run_aspects
            result = run(args)
        except (ValueError, FileNotFoundError) as e:  # ConfigError is a ValueError
            print(f"structcse {args.command}: error: {e}", file=sys.stderr)
            return 2
    else:
        from infra.storage import StorageError

        from structcse.demo_pipeline import demo_to

        try:
            result = demo_to(args.out, args.seed, args.skip_tune)
        except StorageError as e:  # a bucket root, a user's folder, another demo writing it, storage not there
            print(f"structcse demo: error: {e}", file=sys.stderr)
            return 2
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
