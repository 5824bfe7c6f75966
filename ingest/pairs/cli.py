"""The command line of the pair ingest: ``python -m ingest.pairs --source KIND:PATH[:OPTIONS] ... --out DIR``."""

from __future__ import annotations

import argparse
import re
import sys

from infra.storage import open_file
from setformat import schemas
from ingest.pairs.sources import KINDS, PRESETS, PairIngestConfig, PairSource, PairSourceError

SOURCE_HELP = """\
--source KIND:PATH[:KEY=VALUE,KEY=VALUE,...]   (repeatable; one per corpus)

KIND is senteval, simcse_csv, table or hf. PATH is a folder (senteval), a
file (simcse_csv, table; fsspec URIs and .gz/.bz2 work) or a hub dataset name
or local folder (hf). Options follow the first ':' that is followed by KEY=:

  sentence1=COL,sentence2=COL,label=COL   column mapping (table, hf; dotted
                                          paths reach nested fields: questions.text.0)
  captions=COL                            a list column; its members are paired
  relation=REL                            every pair gets REL (no label column)
  label.RAW=REL                           label map entry; label.RAW= drops RAW
                                          (counted as excluded_label)
  preset=NAME                             known columns + labels: """ + ", ".join(sorted(PRESETS)) + """
  split=SPLIT                             senteval: dev, dev+test (default: all
                                          present); hf: train, validation, train[:10%]
  name=CONFIG                             hf config, e.g. glue's qqp
  format=jsonl|json|csv|tsv               table format (default: from the name)
  tag=NAME                                the `source` value in the sets

Examples:
  --source senteval:SNLI_DIR:split=dev+test
  --source hf:sentence-transformers/all-nli        (config triplet: SimCSE-sup's rows)
  --source hf:stanfordnlp/snli:split=train
  --source simcse_csv:nli_for_simcse.csv
  --source table:snli_1.0_dev.jsonl:sentence1=sentence1,sentence2=sentence2,label=gold_label
  --source table:SICK_train.txt:preset=sick
  --source hf:glue:name=qqp,split=train
  --source hf:google-research-datasets/paws:name=labeled_final
"""

_OPTIONS_START = re.compile(r":(?=[A-Za-z_][\w.\-]*=)")


def parse_source(text: str) -> PairSource:
    kind, sep, rest = text.partition(":")
    if not sep or kind not in KINDS or not rest:
        raise PairSourceError(f"--source {text!r}: expected KIND:PATH[:OPTIONS] with KIND in {list(KINDS)}")
    match = _OPTIONS_START.search(rest)
    path, options = (rest[: match.start()], rest[match.end():]) if match else (rest, "")
    source = PairSource(kind=kind, path=path)
    columns, label_map = {}, {}
    for item in filter(None, options.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise PairSourceError(f"--source {text!r}: option {item!r} is not KEY=VALUE")
        if key in ("sentence1", "sentence2", "label", "captions"):
            columns[key] = value
        elif key.startswith("label."):
            label_map[key[len("label."):]] = value or None
        elif key in ("relation", "split", "name", "preset", "format", "tag"):
            setattr(source, key, value)
        else:
            raise PairSourceError(f"--source {text!r}: unknown option {key!r}")
    source.columns = columns or None
    source.label_map = label_map or None
    return source


def _key_values(items: list[str], cast, what: str) -> dict:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise PairSourceError(f"{what} {item!r}: expected RELATION=VALUE")
        out[key] = cast(value)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ingest.pairs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Read sentence-pair corpora with Ray and write the parquet sets `nli_triplets` (premise, "
        "entailment, contradiction: SimCSE sup, GaussCSE) and `relation_triples` (sentence1, relation, sentence2, "
        "in-relation hard negative, weight: RSE), each with a _manifest.json that accounts for every pair.",
        epilog=SOURCE_HELP,
    )
    parser.add_argument("--source", action="append", default=[], metavar="KIND:PATH[:OPTIONS]",
                        help="a pair corpus (see below); repeat for several")
    parser.add_argument("--config", help="a YAML/JSON file with PairIngestConfig fields (sources as a list of "
                        "PairSource fields); --source entries are added to its sources")
    parser.add_argument("--out", help="output folder (local path or fsspec URI)")
    parser.add_argument("--relation", action="append", default=[], metavar="REL=WEIGHT",
                        help="keep REL in relation_triples with this weight (repeat; default: every relation, 1.0)")
    parser.add_argument("--max-per-relation", action="append", default=[], metavar="REL=N",
                        help="cap relation_triples rows of REL (a seeded sample; RSE: 330000)")
    parser.add_argument("--max-triplets-per-premise", type=int,
                        help="nli_triplets per premise, a seeded sample of its (entailment, contradiction) "
                        "pairs (default 4; 0: no cap)")
    parser.add_argument("--seed", type=int, help="seed of every sample and random choice (default 42)")
    parser.add_argument("--min-chars", type=int, help="shorter texts are dropped as too_short (default 1)")
    parser.add_argument("--max-chars", type=int, help="longer texts are dropped as too_long (default 1000)")
    parser.add_argument("--not-utf8", choices=("drop", "replace"),
                        help="a row with bytes that are not UTF-8: drop it, counted not_utf8 with its line (default), "
                             "or keep it with U+FFFD in their place, counted per source as not_utf8_replaced")
    parser.add_argument("--num-cpus", type=int, help="start a local Ray with this many CPUs")
    from infra.logs import add_verbose_flag

    add_verbose_flag(parser)
    return parser


def parse_args(argv=None) -> tuple[PairIngestConfig, argparse.Namespace]:
    parser = build_parser()
    args = parser.parse_args(argv)
    data: dict = {}
    if args.config:
        import yaml

        with open_file(args.config, "rt", encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    cfg = PairIngestConfig.from_dict({"out": args.out or data.get("out"), **{k: v for k, v in data.items()
                                                                           if k != "out"}})
    cfg.sources += [parse_source(s) for s in args.source]
    if args.relation:
        cfg.relations = _key_values(args.relation, float, "--relation")
    if args.max_per_relation:
        cfg.max_per_relation = _key_values(args.max_per_relation, int, "--max-per-relation")
    if args.max_triplets_per_premise is not None:
        cfg.max_triplets_per_premise = args.max_triplets_per_premise or None
    for name in ("seed", "min_chars", "max_chars", "not_utf8"):
        if getattr(args, name) is not None:
            setattr(cfg, name, getattr(args, name))
    if not cfg.out:
        parser.error("--out is required (or `out` in --config)")
    if not cfg.sources:
        parser.error("give at least one --source (or `sources` in --config)")
    return cfg, args


def main(argv=None) -> int:
    from infra.logs import setup_logging_from_argv

    setup_logging_from_argv(argv)  # quiet output when stdout is not a terminal (infra/logs.py); --verbose
    try:
        cfg, args = parse_args(argv)
    except PairSourceError as e:
        print(f"ingest.pairs: error: {e}", file=sys.stderr)
        return 2
    from ingest.pairs.job import run_pair_ingest  # Ray: not needed for --help or a bad --source

    if args.num_cpus:
        import ray

        from infra.ray_local import local_init_kwargs

        ray.init(**local_init_kwargs({"num_cpus": args.num_cpus}))
    from infra.owned import NotOurs
    from infra.storage import StorageError

    try:
        run_pair_ingest(cfg)
    except (FileNotFoundError, PairSourceError, schemas.SchemaError, StorageError, NotOurs) as e:
        print(f"ingest.pairs: error: {e}", file=sys.stderr)
        return 2
    return 0
