"""``python -m ingest``: raw dumps -> parquet training sets (see ``ingest/pipeline.py``)."""

import argparse
import sys

from ingest.multistream import DumpFormatError
from ingest.pipeline import IngestConfig, run_ingest


def parse_args(argv=None) -> IngestConfig:
    parser = argparse.ArgumentParser(
        prog="python -m ingest",
        description="Read a Wikipedia dump (multistream .xml.bz2 with its index, or plain .xml/.xml.bz2, "
        "or a folder of them) and a Wikidata JSON dump with Ray Data, and write the parquet sets "
        "`sentences` (SimCSE) and `entity_pairs` + `entities` (EASE), each with a manifest.json.",
    )
    parser.add_argument("--wikipedia", nargs="+", required=True, metavar="PATH",
                        help="dump file(s) or folder(s); a -multistream-index.txt.bz2 beside a dump is used")
    parser.add_argument("--wikidata", nargs="*", default=[], metavar="PATH",
                        help="Wikidata JSON dump(s) (.json, .json.bz2, .json.gz); without one only `sentences` is built")
    parser.add_argument("--out", required=True, help="output folder (local path or fsspec URI)")
    parser.add_argument("--streams-per-shard", type=int, default=4, help="bz2 streams (100 pages each) per task")
    parser.add_argument("--entity-link-threshold", type=int, default=2,
                        help="keep entities linked more than N times (EASE used 10 on full Wikipedia)")
    parser.add_argument("--min-sentence-chars", type=int, default=20)
    parser.add_argument("--max-sentence-chars", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=42, help="seed of the hard-negative sampling")
    args = parser.parse_args(argv)
    return IngestConfig(
        wikipedia=args.wikipedia, wikidata=args.wikidata, out=args.out,
        streams_per_shard=args.streams_per_shard, entity_link_threshold=args.entity_link_threshold,
        min_sentence_chars=args.min_sentence_chars, max_sentence_chars=args.max_sentence_chars, seed=args.seed,
    )


def main(argv=None) -> int:
    cfg = parse_args(argv)
    try:
        run_ingest(cfg)
    except (FileNotFoundError, DumpFormatError) as e:
        print(f"ingest: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
