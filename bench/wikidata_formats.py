"""Which Wikidata dump to download: ``latest-all.json.gz`` or ``latest-all.json.bz2``, measured with the
project's own reader (ingest.wikidata_ranges + ingest.wikidata.read_range, as ``python -m ingest`` reads).

    python bench/wikidata_formats.py [--mb 200] [--range-mb 32] [--workers 2] [--out DIR] [--keep]

1. A Wikidata dump of about ``--mb`` MB (uncompressed) is built from the real entity lines of
   ../shared/data/wikidata_json_sample/wikidata-dump-first50lines.json, repeated with new QIDs, in the real
   dump's shape: ``[`` + one entity per line ending in ``,`` + ``]``.
2. It is compressed both ways Wikimedia does: the ``.json.gz`` as many gzip members ``cat``-ed together
   (``dumpwikibasejson.sh``: a ``[`` member, batch members of entities, ``,`` members between batches, a ``]``
   member; here a batch of ``--batch-lines``), the ``.json.bz2`` as one bz2 stream of the whole (what
   ``gzip -dc | lbzip2`` makes: no stream index).
3. For each: planning (``plan_ranges``: the gz member scan, or the bz2 block index that decodes the whole file
   once, with ``indexed_bzip2`` on all cores), then every range read once on one core (``read_range``: decompress,
   parse, select), then all ranges on ``--workers`` processes at once (wall time).

Rates are MB of *uncompressed* JSON per second (and compressed MB/s, entity lines/s), so the two formats
compare per byte of Wikidata read; the full dump's time is its uncompressed size over the rate. The last line is
one JSON object.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO, emit  # noqa: E402
SAMPLE = REPO.parent / "shared" / "data" / "wikidata_json_sample" / "wikidata-dump-first50lines.json"


def entity_lines(sample: Path) -> list[str]:
    lines = [ln.rstrip("\n").rstrip(",") for ln in sample.read_text().splitlines()]
    return [ln for ln in lines if ln.startswith("{")]


def build(out: Path, mb: int, batch_lines: int) -> dict:
    """The dump as ``.json``, ``.json.gz`` (members) and ``.json.bz2`` (one stream); their sizes and times."""
    base = entity_lines(SAMPLE)
    target = mb * 1_000_000
    lines, size, i = [], 0, 0
    while size < target:
        src = base[i % len(base)]
        qid = json.loads(src)["id"]
        line = src.replace(f'"id":"{qid}"', f'"id":"Q{900000000 + i}"', 1)
        lines.append(line)
        size += len(line) + 2
        i += 1
    plain = out / "wikidata-bench-all.json"
    with open(plain, "w") as f:
        f.write("[\n" + ",\n".join(lines) + "\n]\n")
    t0 = time.perf_counter()
    gz = out / "wikidata-bench-all.json.gz"
    with open(gz, "wb") as f:
        f.write(gzip.compress(b"[\n", 6))
        for b in range(0, len(lines), batch_lines):
            if b:
                f.write(gzip.compress(b",\n", 6))
            f.write(gzip.compress(",\n".join(lines[b:b + batch_lines]).encode(), 6))
        f.write(gzip.compress(b"\n]\n", 6))
    gz_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    bz = out / "wikidata-bench-all.json.bz2"
    if shutil.which("lbzip2"):  # one bz2 stream, compressed on every core (Debian's lbzip2)
        with open(plain, "rb") as src, open(bz, "wb") as dst:
            subprocess.run(["lbzip2", "-9", "-c"], stdin=src, stdout=dst, check=True)
    else:
        with open(plain, "rb") as src, bz2.open(bz, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    bz_s = time.perf_counter() - t0
    return {"entity_lines": len(lines), "json_mb": round(plain.stat().st_size / 1e6, 1),
            "gz_mb": round(gz.stat().st_size / 1e6, 1), "bz2_mb": round(bz.stat().st_size / 1e6, 1),
            "gz_members": 2 * ((len(lines) + batch_lines - 1) // batch_lines) + 1,
            "compress_seconds": {"gz": round(gz_s, 1), "bz2": round(bz_s, 1)},
            "paths": {"json": str(plain), "gz": str(gz), "bz2": str(bz)}}


def _read(rng) -> tuple[int, int, float]:
    from ingest.wikidata import EntitySelection, WikidataStats, read_range

    stats = WikidataStats()
    t0 = time.perf_counter()
    rows = read_range(rng, EntitySelection(), stats)
    return stats.lines, len(rows), time.perf_counter() - t0


def measure(path: str, json_mb: float, compressed_mb: float, range_mb: int, workers: int, index_dir: str,
            parallel_only: bool = False) -> dict:
    from ingest.wikidata_ranges import plan_ranges

    t0 = time.perf_counter()
    ranges = plan_ranges([path], range_mb << 20, index_dir)
    plan_s = time.perf_counter() - t0
    lines = rows = 0
    read_s = 0.0
    if not parallel_only:
        for rng in ranges:  # one core, one range after another: the reader's own rate
            n, r, s = _read(rng)
            lines, rows, read_s = lines + n, rows + r, read_s + s
    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        done = list(pool.map(_read, ranges))
    wall_s = time.perf_counter() - t0
    if parallel_only:  # the reader's per-core rate from the workers' own clocks
        lines, rows, read_s = sum(d[0] for d in done), sum(d[1] for d in done), sum(d[2] for d in done)
    return {"ranges": len(ranges), "plan_seconds": round(plan_s, 2), "read_seconds_1_core": round(read_s, 2),
            "mb_per_s_1_core": round(json_mb / read_s, 1), "compressed_mb_per_s_1_core": round(compressed_mb / read_s, 2),
            "lines_per_s_1_core": round(lines / read_s), f"wall_seconds_{workers}_workers": round(wall_s, 2),
            f"mb_per_s_{workers}_workers": round(json_mb / wall_s, 1),
            "plan_plus_read_mb_per_s_1_core": round(json_mb / (plan_s + read_s), 1),
            "lines": lines, "rows": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=200, help="uncompressed MB of the built dump (default 200)")
    p.add_argument("--batch-lines", type=int, default=50, help="entity lines per gzip batch member (default 50)")
    p.add_argument("--range-mb", type=int, default=32, help="--wikidata-range-bytes in MiB (default 32)")
    p.add_argument("--workers", type=int, default=2, help="processes reading ranges at once (default 2)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--parallel-only", action="store_true",
                   help="read every range once, on --workers processes (the 1-core rate from their own clocks); "
                   "halves the time at 1 GB and more")
    a = p.parse_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="wd-formats-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"# python bench/wikidata_formats.py {' '.join(sys.argv[1:])}  ({os.cpu_count()} CPU cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", flush=True)
    try:
        built = build(out, a.mb, a.batch_lines)
        print(f"built: {json.dumps({k: v for k, v in built.items() if k != 'paths'})}", flush=True)
        result = {"built": {k: v for k, v in built.items() if k != "paths"}, "range_mb": a.range_mb}
        for kind in ("gz", "bz2"):
            m = measure(built["paths"][kind], built["json_mb"], built[f"{kind}_mb"], a.range_mb, a.workers,
                        str(out / "index"), a.parallel_only)
            result[kind] = m
            print(f"{kind}: {json.dumps(m)}", flush=True)
        gz, bz = result["gz"], result["bz2"]
        result["gz_over_bz2_1_core"] = round(gz["mb_per_s_1_core"] / bz["mb_per_s_1_core"], 2)
        result["bz2_plan_seconds_per_gb"] = round(bz["plan_seconds"] / (built["json_mb"] / 1000), 1)
        result["gz_plan_seconds_per_gb"] = round(gz["plan_seconds"] / (built["json_mb"] / 1000), 1)
        result["download_gz_over_bz2"] = round(built["gz_mb"] / built["bz2_mb"], 2)
    finally:
        if not a.keep:
            shutil.rmtree(out, ignore_errors=True)
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
