"""``python -m ingest``: raw dumps -> parquet training sets (see ``ingest/pipeline.py``)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from infra.storage import retries_reported
from ingest import wikidata
from ingest.lost_input import lost_input
from ingest.multistream import DumpFormatError
from setformat.schemas import SchemaError

if TYPE_CHECKING:  # ingest.pipeline imports Ray: loaded in main(), after the log settings (infra/logs.py)
    from ingest.pipeline import IngestConfig


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower().rstrip("b").rstrip("i")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ingest",
        description="Read Wikipedia dumps (multistream .xml.bz2 with its index, or plain .xml/.xml.bz2, any "
        "number of files or folders, any wikis) and Wikidata JSON dumps with Ray, and write the parquet sets "
        "`sentences` (SimCSE), `wikidata` (labels, sitelinks, claims) and `entity_pairs` + `entities` (EASE), "
        "each with a _manifest.json that accounts for every page and every Wikidata line.",
    )
    parser.add_argument("--wikipedia", nargs="+", required=True, metavar="PATH",
                        help="dump file(s) or folder(s); a -multistream-index.txt.bz2 beside a dump is used")
    parser.add_argument("--wikidata", nargs="*", default=[], metavar="PATH",
                        help="Wikidata JSON dump(s) (.json, .json.bz2, .json.gz)")
    parser.add_argument("--wikidata-set", metavar="DIR",
                        help="a `wikidata` set written by an earlier run, joined instead of re-reading a dump")
    parser.add_argument("--out", required=True, help="output folder (local path or fsspec URI)")
    parser.add_argument("--wikis", nargs="+", metavar="WIKI",
                        help="sitelinks to keep (default: the wikis of the given dumps); multilingual EASE: "
                        "--wikis " + " ".join(wikidata.MULTILINGUAL_EASE_WIKIS))
    parser.add_argument("--languages", nargs="+", default=list(wikidata.DEFAULT_LANGUAGES), metavar="LANG",
                        help="Wikidata label languages to keep")
    parser.add_argument("--properties", nargs="+", default=list(wikidata.DEFAULT_PROPERTIES), metavar="PID",
                        help="Wikidata properties to keep")
    parser.add_argument("--shard-bytes", type=_size, default="32M",
                        help="compressed Wikipedia bytes per task (default 32M)")
    parser.add_argument("--wikidata-range-bytes", type=_size, default="256M",
                        help="Wikidata bytes per task (default 256M)")
    parser.add_argument("--wikidata-prefilter", action="store_true",
                        help="count item lines that name none of the --wikis as no_sitelink without parsing them "
                        "(several times faster on the full dump; broken JSON in such a line goes unnoticed)")
    parser.add_argument("--memory-per-cpu", type=_size, default="2G",
                        help="memory one CPU's task may use (default 2G): pass 2's shuffle buckets hold 1/32 of it "
                        "each (and 1/96 of it in rows) and Ray Data's blocks in flight a quarter of it per CPU, "
                        "at any dump size")
    parser.add_argument("--entity-link-threshold", type=int, default=10,
                        help="keep entities linked more than N times (default 10, EASE's 'more than ten times')")
    parser.add_argument("--max-pairs-per-entity", type=int, default=1000)
    parser.add_argument("--negative-candidates", type=int, default=8)
    parser.add_argument("--min-sentence-chars", type=int, default=20)
    parser.add_argument("--max-sentence-chars", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=42, help="seed of the cap sample and the hard negatives")
    parser.add_argument("--no-resume", action="store_true", help="redo units a previous run finished")
    parser.add_argument("--pass1", choices=("tasks", "data"), default="tasks",
                        help="how pass 1's units (Wikipedia shards, Wikidata ranges) run: 'tasks', one plain Ray "
                        "task each, or 'data', the read tasks of a Ray Data datasource (its progress report, "
                        "backpressure and scheduling, at a few seconds' start-up per job); the same output "
                        "(default: tasks, measured faster on small machines: docs/performance.md)")
    parser.add_argument("--allow-loss", action="store_true",
                        help="exit 0 even when the manifest does not account for every page and Wikidata line, "
                        "or a set came out empty from input that was not (default: exit 1 saying what was lost)")
    parser.add_argument("--num-cpus", type=int,
                        help="start a local Ray with this many CPUs (default: connect to RAY_ADDRESS or start one "
                        "with all CPUs)")
    parser.add_argument("--no-dashboard", action="store_true",
                        help="with --num-cpus: start that local Ray without its dashboard, which takes CPU the "
                        "workers need on a small machine")
    from infra.logs import add_verbose_flag

    add_verbose_flag(parser)
    return parser


def parse_args(argv=None) -> tuple[IngestConfig, argparse.Namespace]:
    from ingest.pipeline import IngestConfig

    args = build_parser().parse_args(argv)
    cfg = IngestConfig(
        wikipedia=args.wikipedia, wikidata=args.wikidata, wikidata_set=args.wikidata_set, out=args.out,
        wikis=args.wikis, languages=args.languages, properties=args.properties, shard_bytes=args.shard_bytes,
        wikidata_range_bytes=args.wikidata_range_bytes, entity_link_threshold=args.entity_link_threshold,
        max_pairs_per_entity=args.max_pairs_per_entity, negative_candidates=args.negative_candidates,
        min_sentence_chars=args.min_sentence_chars, max_sentence_chars=args.max_sentence_chars, seed=args.seed,
        resume=not args.no_resume, wikidata_prefilter=args.wikidata_prefilter, pass1=args.pass1,
        memory_per_cpu=args.memory_per_cpu,
    )
    return cfg, args


def _missing_inputs(cfg: IngestConfig) -> list[str]:
    """Local inputs that do not exist (URIs are checked by the job, which can reach them)."""
    import os

    paths = [*cfg.wikipedia, *cfg.wikidata, *([cfg.wikidata_set] if cfg.wikidata_set else [])]
    from infra.storage import is_uri, local_path

    return [p for p in paths if not is_uri(p) and not os.path.exists(local_path(p))]


@retries_reported("ingest")  # its line when the command returns (infra.storage)
def main(argv=None) -> int:
    from infra.logs import setup_logging_from_argv

    setup_logging_from_argv(argv)  # quiet output when stdout is not a terminal (infra/logs.py); --verbose
    cfg, args = parse_args(argv)
    missing = _missing_inputs(cfg)
    if missing:  # before Ray starts
        print(f"ingest: error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    from infra.owned import NotOurs, check_destination
    from infra.publish import IncompleteError
    from infra.storage import StorageError, check_storage

    try:  # a bucket that does not exist, an endpoint that does not answer: one line, before Ray starts
        for path, what in [(cfg.out, "--out"), *((p, "--wikipedia") for p in cfg.wikipedia),
                           *((p, "--wikidata") for p in cfg.wikidata)]:
            check_storage(path, what)
        check_destination(cfg.out, "--out")  # a bucket root, a user's folder: refused, nothing deleted
    except StorageError as e:
        print(f"ingest: error: {e}", file=sys.stderr)
        return 2
    if args.num_cpus:
        import ray

        from infra.ray_local import local_init_kwargs

        ray.init(**local_init_kwargs({"num_cpus": args.num_cpus, "include_dashboard": not args.no_dashboard}))
    from ingest.pipeline import run_ingest

    try:
        manifest = run_ingest(cfg)
    except (FileNotFoundError, DumpFormatError, SchemaError, StorageError, IncompleteError, NotOurs) as e:
        print(f"ingest: error: {e}", file=sys.stderr)
        return 2
    lost = lost_input(manifest)
    if lost:
        where = f"{cfg.out.rstrip('/')}/manifest.json"
        print(f"ingest: {'warning' if args.allow_loss else 'error'}: data lost ({len(lost)}): " + "; ".join(lost)
              + f". Manifest: {where}" + ("" if args.allow_loss else "; --allow-loss accepts it"), file=sys.stderr)
        return 0 if args.allow_loss else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
