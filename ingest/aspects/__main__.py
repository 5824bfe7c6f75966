"""``python -m ingest.aspects``: aspect labels (SPARQL or the ``wikidata`` set) ->
``OUT/aspect_labels/``, then ``OUT/<variant>/aspect_triplets/`` and ``OUT/aspect_docs/``.

    python -m ingest.aspects --intros SETS/intros --wikidata-set SETS/wikidata --out OUT
    python -m ingest.aspects --intros SETS/intros --sparql https://query.wikidata.org/sparql \\
        --user-agent "mybot/1.0 (me@example.org)" --out OUT --cache CACHE
    python -m ingest.aspects --pwc PWC_FOLDER [--fold 1] --out OUT   # Ostendorff et al. 2022 folds (pwc.py)

Every option is checked before Ray starts; an error is one line naming the option.
"""

from __future__ import annotations

import argparse
import sys

from ingest.aspects.triplets import AspectSetConfig


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ingest.aspects", description=__doc__.split("\n\n")[0])
    p.add_argument("--intros", help="the intros set (written by `python -m ingest`); required unless --pwc")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--wikidata-set", help="the wikidata set of a dump ingest (offline route)")
    source.add_argument("--sparql", metavar="URL", help="a SPARQL endpoint (e.g. the Wikidata Query Service)")
    source.add_argument("--pwc", metavar="FOLDER", help="a PwC aspect folder (docs.jsonl + folds/; ingest/aspects/pwc.py)")
    p.add_argument("--fold", default="1", help="with --pwc: the fold folder (1..4)")
    p.add_argument("--user-agent", help="User-Agent for --sparql (WDQS asks for a contact)")
    p.add_argument("--out", required=True)
    p.add_argument("--aspects", nargs="+", help="aspect properties (default P17 P452; with --pwc: every aspect)")
    p.add_argument("--variants", nargs="+", help="default: single-<P> per aspect, intersection, union")
    p.add_argument("--class", dest="cls", default="Q4830453", help="the entities' class (P31 value)")
    p.add_argument("--subclasses", action="store_true", help="also instances of subclasses (P31/P279*)")
    p.add_argument("--wiki", default="enwiki")
    p.add_argument("--language", default="en", help="language of the label text")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--random-negatives", type=int, default=10000)
    p.add_argument("--random-negative-share", type=float, default=0.1)
    p.add_argument("--min-label-count", type=int, default=2)
    p.add_argument("--max-label-share", type=float, default=0.5)
    p.add_argument("--max-label-count", type=int)
    p.add_argument("--test-share", type=float, default=0.2)
    p.add_argument("--triplets-per-anchor", type=int, default=1)
    p.add_argument("--page-size", type=int, default=10000, help="SPARQL page size")
    p.add_argument("--cache", help="cache folder for SPARQL results")
    from infra.logs import add_verbose_flag

    add_verbose_flag(p)
    return p.parse_args(argv)


def config_of(args: argparse.Namespace) -> AspectSetConfig:
    return AspectSetConfig(aspects=list(args.aspects), variants=args.variants, min_label_count=args.min_label_count,
                           max_label_share=args.max_label_share, max_label_count=args.max_label_count,
                           test_share=args.test_share, seed=args.seed, random_negatives=args.random_negatives,
                           random_negative_share=args.random_negative_share,
                           triplets_per_anchor=args.triplets_per_anchor, wiki=args.wiki)


def check(args: argparse.Namespace, cfg: AspectSetConfig) -> None:
    """Every option, before Ray starts: ValueError / SchemaError naming the option."""
    from ingest.aspects.validate import check_language, check_qid
    from setformat.io import check_set

    cfg.validate()
    check_qid(args.cls, "--class")
    check_language(args.language, "--language")
    if args.page_size < 1:
        raise ValueError(f"--page-size: must be >= 1, got {args.page_size}")
    if args.sparql and not args.sparql.startswith(("http://", "https://")):
        raise ValueError(f"--sparql: {args.sparql!r} is not an http(s) URL")
    check_set(args.intros, "intros")
    if args.wikidata_set:
        check_set(args.wikidata_set, "wikidata")


def labels_of(args: argparse.Namespace):
    """The ``schemas.ASPECT_LABELS`` table, by the route the options name."""
    if args.wikidata_set:
        from ingest.aspects.offline import aspect_labels_from_wikidata_set

        return aspect_labels_from_wikidata_set(args.wikidata_set, cls=args.cls, properties=list(args.aspects),
                                               wiki=args.wiki, language=args.language, subclasses=args.subclasses)
    from ingest.aspects.sparql import fetch_aspect_labels

    kwargs = {"user_agent": args.user_agent} if args.user_agent else {}
    return fetch_aspect_labels(args.sparql, cls=args.cls, properties=list(args.aspects), wiki=args.wiki,
                               language=args.language, subclasses=args.subclasses, page_size=args.page_size,
                               cache_dir=args.cache, **kwargs)


def write_labels(labels, out: str, args: argparse.Namespace) -> dict:
    from setformat.io import write_manifest, write_table

    path = f"{out.rstrip('/')}/aspect_labels"
    write_table(labels.sort_by([("qid", "ascending"), ("property", "ascending")]), f"{path}/part-00000.parquet")
    source = {"wikidata_set": str(args.wikidata_set)} if args.wikidata_set else {"sparql": args.sparql}
    return write_manifest(path, "aspect_labels", labels.num_rows, files=["part-00000.parquet"], source=source,
                          cls=args.cls, subclasses=args.subclasses, properties=list(args.aspects), wiki=args.wiki,
                          language=args.language, entities=len(set(labels["qid"].to_pylist())))


def start_aspects_job(out: str, command: str, variants: list[str], labels: bool) -> str:
    """The aspects job's marker, lease and claim on ``out`` (``setformat.integrity.start_job``): its nested
    variant folders carry the marker too, the sets it rewrites are emptied of an earlier run's parts, and the
    variant folders an earlier aspects run wrote and this one does not are removed."""
    from setformat.integrity import remove_stale_subsets, start_job

    sets = ["aspect_docs", *(f"{v}/aspect_triplets" for v in variants)] + (["aspect_labels"] if labels else [])
    job_id = start_job(out, "aspects", command, nested=variants, sets=sets)
    remove_stale_subsets(out, "aspects", keep=variants)
    return job_id


def locate_inputs(args: argparse.Namespace) -> None:
    """The input sets resolved here, once: what travels down is their ``Location``, not a string each step
    resolves again."""
    from infra.storage import locate

    args.intros = locate(args.intros) if args.intros else None
    args.wikidata_set = locate(args.wikidata_set) if args.wikidata_set else None


def main(argv=None) -> int:
    from infra.logs import setup_logging_from_argv

    setup_logging_from_argv(argv)  # quiet output when stdout is not a terminal (infra/logs.py); --verbose
    from infra.owned import NotOurs
    from infra.storage import StorageError
    from setformat.schemas import SchemaError

    errors = (ValueError, SchemaError, FileNotFoundError, StorageError, NotOurs)  # one line, exit 2
    args = parse_args(argv)
    from infra.owned import check_destination

    locate_inputs(args)

    try:
        check_destination(args.out, "--out")  # a bucket root, a user's folder: refused before any work
    except StorageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.pwc:
        from ingest.aspects.pwc import aspects_in, build_pwc_sets
        from setformat.integrity import finish_job

        try:
            aspects = list(args.aspects) if args.aspects else aspects_in(args.pwc)
            job_id = start_aspects_job(args.out, "python -m ingest.aspects --pwc", aspects, labels=False)
            build_pwc_sets(args.pwc, args.out, aspects=args.aspects, fold=args.fold, seed=args.seed,
                           triplets_per_anchor=args.triplets_per_anchor)
            finish_job(args.out, job_id)
        except errors as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    if not args.intros:
        print("error: --intros is required with --wikidata-set or --sparql", file=sys.stderr)
        return 2
    args.aspects = args.aspects or ["P17", "P452"]
    cfg = config_of(args)
    try:
        check(args, cfg)
        labels = labels_of(args)
    except errors as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from ingest.aspects.triplets import build_aspect_sets
    from setformat.integrity import finish_job

    try:
        # its sets are whole once it is done
        job_id = start_aspects_job(args.out, "python -m ingest.aspects", [n for n, _, _ in cfg.variant_specs()],
                                   labels=True)
        write_labels(labels, args.out, args)
        build_aspect_sets(labels, args.intros, args.out, cfg)
        finish_job(args.out, job_id)
    except (StorageError, NotOurs) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
