"""Seeded corruptions of the real Wikipedia and Wikidata samples through ``python -m ingest``'s job.

    python bench/faults.py [--corruptions 12] [--seed 0] [--out /tmp/bench_faults]

For each corruption of ``../shared/data``'s enwiki sample (a single-stream ``.xml.bz2``, 206 pages in
about seven 900 kB bzip2 blocks) — byte flips, a truncation, garbage bytes — and of the Wikidata
sample (49 entity lines: garbage lines and a truncation of the plain ``.json``; bit flips in a
``.json.bz2`` of it in 100 kB blocks), one ingest run (``run_ingest``, Ray of 2 CPUs):

* **recovered share**: pages (Wikidata lines) the job accounts for (written, or dropped with a
  reason of their own such as ``redirect``, not ``corrupt_block``) over those a reference decoder
  still reads: the pages decoded before the fault (``bz2.BZ2Decompressor``, fed until it fails) plus
  the whole pages inside the intact bzip2 blocks after it, as ``bzip2recover`` finds them
  (``recovered_share``, and per input ``recovered_share_pages`` / ``recovered_share_lines``;
  ``recovered_share_prefix`` counts the pages before the fault only);
* **silent loss**: a run whose output holds fewer pages or lines than the input and whose manifest
  does not say so (``ingest.lost_input`` finds nothing: the command would exit 0);
* **stale result**: the same output folder rerun after the input at the same path was replaced
  by another corruption, compared with a fresh run of that input: any difference in the pages,
  rows or input sha256 the manifest reports.

Last line: one JSON object with ``recovered_share``, ``recovered_share_prefix``, ``silent_losses``,
``stale_results``, ``corruptions``, ``crashes`` and per-corruption rows.
"""

from __future__ import annotations

import argparse
import bz2
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO, emit  # noqa: E402
SHARED = REPO.parent / "shared" / "data"
ENWIKI = SHARED / "wikipedia_xml_sample" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
WIKIDATA = SHARED / "wikidata_json_sample" / "wikidata-dump-first50lines.json"
PAGE = re.compile(rb"<page>.*?</page>", re.S)


def count_pages(text: bytes, after_gap: bool = False) -> int:
    return len(PAGE.findall(text))


def count_entity_lines(text: bytes, after_gap: bool = False) -> int:
    """Whole entity lines: after a gap the text up to the first newline is the rest of a cut line."""
    if after_gap:
        text = text[text.find(b"\n") + 1:] if b"\n" in text else b""
    whole = text[: text.rfind(b"\n") + 1]
    return sum(1 for line in whole.split(b"\n") if line.strip().startswith(b"{"))


def decoded_prefix(data: bytes) -> bytes:
    """What a streaming decoder reads before the first fault."""
    decoder, out = bz2.BZ2Decompressor(), []
    try:
        for start in range(0, len(data), 1 << 16):
            out.append(decoder.decompress(data[start:start + (1 << 16)]))
            if decoder.eof:
                break
    except OSError:
        pass
    return b"".join(out)


def prefix_pages(data: bytes) -> int:
    """Whole pages a streaming decoder reads before the first fault."""
    return count_pages(decoded_prefix(data))


def recoverable(data: bytes, work: Path, count=count_pages) -> int:
    """The whole pages (lines) of each run of intact blocks, as ``bzip2recover`` finds them (a page cut
    by a damaged block is lost); for the first run, what a streaming decoder reads before the fault
    when that is more (the start of the damaged block it decoded before failing)."""
    before = count(decoded_prefix(data))
    if not shutil.which("bzip2recover"):
        return before
    work.mkdir(parents=True, exist_ok=True)
    damaged = work / "damaged.bz2"
    damaged.write_bytes(data)
    subprocess.run(["bzip2recover", str(damaged)], cwd=work, capture_output=True, check=False)
    runs: list[list[bytes]] = [[]]
    for block in sorted(work.glob("rec*damaged.bz2")):
        try:
            runs[-1].append(bz2.decompress(block.read_bytes()))
        except (OSError, EOFError):
            runs.append([])  # a damaged block ends a run
    shutil.rmtree(work)
    first, *later = [b"".join(run) for run in runs]
    return max(before, count(first)) + sum(count(text, True) for text in later)


def recoverable_pages(data: bytes, work: Path) -> int:
    return recoverable(data, work, count_pages)


def corrupt_wikipedia(data: bytes, kind: str, rng: random.Random) -> bytes:
    b = bytearray(data)
    if kind == "flip":
        for _ in range(8):
            i = rng.randrange(len(b) // 10, len(b))
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == "truncate":
        return bytes(b[: int(len(b) * rng.uniform(0.2, 0.9))])
    i = rng.randrange(len(b) // 10, len(b))  # garbage: 64 random bytes written over the stream
    b[i:i + 64] = bytes(rng.randrange(256) for _ in range(64))
    return bytes(b)


def corrupt_wikidata(lines: list[bytes], kind: str, rng: random.Random, work: Path) -> tuple[bytes, int]:
    """(the corrupted file, the entity lines a reader can still parse)."""
    lines = list(lines)
    entities = sum(1 for line in lines if line.strip().startswith(b"{"))
    if kind == "garbage":
        for _ in range(3):
            lines.insert(rng.randrange(1, len(lines)), b'{"type": "item", "id": "Q1", not json}\n')
        return b"".join(lines), entities
    if kind == "flip":  # a .json.bz2 (100 kB blocks) with two flipped bits: whole blocks lost
        packed = bytearray(bz2.compress(b"".join(lines), compresslevel=1))
        for _ in range(2):
            i = rng.randrange(len(packed) // 10, len(packed))
            packed[i] ^= 1 << rng.randrange(8)
        return bytes(packed), recoverable(bytes(packed), work, count_entity_lines)
    cut = rng.randrange(2, len(lines) - 1)  # truncation in the middle of an entity line
    kept = lines[:cut] + [lines[cut][: len(lines[cut]) // 2]]
    return b"".join(kept), sum(1 for line in lines[:cut] if line.strip().startswith(b"{"))


def ingest(cfg_kwargs: dict, out: Path) -> tuple[dict | None, str | None]:
    from infra.logs import lines_muted
    from ingest.pipeline import IngestConfig, run_ingest

    try:
        with lines_muted("ingest"):
            return run_ingest(IngestConfig(out=str(out), **cfg_kwargs)), None
    except Exception as e:  # noqa: BLE001 — a crash is a figure here, not the end of the benchmark
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]


def accounted_pages(manifest: dict) -> int:
    """Pages written or dropped for a reason of their own (a redirect, ...): not the pages counted lost."""
    dropped = manifest["pages"]["dropped"]
    return manifest["pages"]["written"] + sum(n for reason, n in dropped.items()
                                              if reason not in ("corrupt_stream", "corrupt_block"))


def wikipedia_runs(clean: bytes, corruptions: int, rng: random.Random, out: Path) -> tuple[list[dict], int]:
    """One ingest of each corruption of the enwiki sample: its rows, and how many lost pages silently."""
    from ingest.lost_input import lost_input

    total_pages = len(PAGE.findall(bz2.decompress(clean)))
    rows, silent = [], 0
    for n in range(corruptions):
        kind = ("flip", "truncate", "garbage")[n % 3]
        data = corrupt_wikipedia(clean, kind, rng)
        dump = out / f"w{n:02d}" / "enwiki-sample-pages-articles.xml.bz2"
        dump.parent.mkdir()
        dump.write_bytes(data)
        reference = recoverable_pages(data, out / f"w{n:02d}" / "recover")
        manifest, crash = ingest({"wikipedia": [str(dump)]}, out / f"w{n:02d}" / "out")
        got = accounted_pages(manifest) if manifest else 0
        reported = bool(lost_input(manifest)) if manifest else True
        silent += int(got < total_pages and not reported)
        rows.append({"input": "wikipedia", "kind": kind, "reference_pages": reference, "prefix_pages": prefix_pages(data),
                     "accounted_pages": got, "of_pages": total_pages, "loss_reported": reported, "crash": crash})
        print(f"[faults] wikipedia {kind:8s} reference {reference:3d} (prefix {rows[-1]['prefix_pages']:3d}) "
              f"accounted {got:3d}/{total_pages} reported {reported} {crash or ''}", flush=True)
    return rows, silent


def wikidata_runs(corruptions: int, rng: random.Random, out: Path) -> tuple[list[dict], int]:
    """One ingest of each corruption of the Wikidata sample (beside the clean enwiki): its rows, and how many
    lost lines silently."""
    from ingest.lost_input import lost_input

    wikidata_lines = WIKIDATA.read_bytes().splitlines(keepends=True)
    rows, silent = [], 0
    for n in range(corruptions):
        kind = ("garbage", "truncate", "flip")[n % 3]
        data, parseable = corrupt_wikidata(wikidata_lines, kind, rng, out / f"d{n:02d}" / "recover")
        dump = out / f"d{n:02d}" / ("wikidata-sample.json.bz2" if kind == "flip" else "wikidata-sample.json")
        dump.parent.mkdir(exist_ok=True)
        dump.write_bytes(data)
        manifest, crash = ingest({"wikipedia": [str(ENWIKI)], "wikidata": [str(dump)]}, out / f"d{n:02d}" / "out")
        source = manifest["wikidata"][0] if manifest else None
        read = (source["written"] + sum(v for k, v in source["skipped"].items() if k not in ("bad_json", "corrupt_block"))
                if source else 0)
        reported = bool(lost_input(manifest)) if manifest else True
        counted_bad = source["skipped"].get("bad_json", 0) if source else 0
        silent += int(read < parseable and not reported and not counted_bad)
        rows.append({"input": "wikidata", "kind": kind, "parseable_lines": parseable, "read_lines": read,
                     "bad_json_counted": counted_bad, "loss_reported": reported, "crash": crash})
        print(f"[faults] wikidata  {kind:8s} parseable {parseable} read {read} bad_json {counted_bad} "
              f"reported {reported} {crash or ''}", flush=True)
    return rows, silent


def stale_reruns(clean: bytes, rng: random.Random, out: Path) -> int:
    """The same folder rerun after the input at the same path changed, against a fresh run: how many differ."""
    stale = 0
    for n in range(3):
        folder = out / f"s{n}"
        dump = folder / "enwiki-sample-pages-articles.xml.bz2"
        dump.parent.mkdir()
        dump.write_bytes(corrupt_wikipedia(clean, "truncate", rng))
        ingest({"wikipedia": [str(dump)]}, folder / "out")
        dump.write_bytes(clean if n == 0 else corrupt_wikipedia(clean, ("flip", "garbage")[n % 2], rng))
        rerun, _ = ingest({"wikipedia": [str(dump)]}, folder / "out")
        fresh, _ = ingest({"wikipedia": [str(dump)]}, folder / "fresh")
        same = rerun and fresh and rerun["pages"] == fresh["pages"] and rerun["sets"]["sentences"]["rows"] == \
            fresh["sets"]["sentences"]["rows"] and rerun["sources"][0]["sha256"] == fresh["sources"][0]["sha256"]
        stale += int(not same)
        print(f"[faults] rerun after the input changed: {'same as a fresh run' if same else 'STALE'}", flush=True)
    return stale


def recovered_shares(rows: list[dict]) -> dict:
    wiki = [r for r in rows if r["input"] == "wikipedia"]
    data = [r for r in rows if r["input"] == "wikidata"]
    recovered = sum(r["accounted_pages"] for r in wiki) + sum(r["read_lines"] for r in data)
    recoverable_units = sum(r["reference_pages"] for r in wiki) + sum(r["parseable_lines"] for r in data)
    return {
        "recovered_share": round(recovered / max(1, recoverable_units), 4),
        "recovered_share_pages": round(sum(r["accounted_pages"] for r in wiki)
                                       / max(1, sum(r["reference_pages"] for r in wiki)), 4),
        "recovered_share_lines": round(sum(r["read_lines"] for r in data) / max(1, sum(r["parseable_lines"] for r in data)), 4),
        "recovered_share_prefix": round(sum(min(r["accounted_pages"], r["prefix_pages"]) for r in wiki)
                                        / max(1, sum(r["prefix_pages"] for r in wiki)), 4),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corruptions", type=int, default=12, help="Wikipedia corruptions (Wikidata: half as many)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="/tmp/bench_faults")
    args = p.parse_args()
    import ray

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    ray.init(num_cpus=2, configure_logging=False, include_dashboard=False)
    rng = random.Random(args.seed)
    clean = ENWIKI.read_bytes()
    started = time.perf_counter()
    wiki, silent_wiki = wikipedia_runs(clean, args.corruptions, rng, out)
    data, silent_data = wikidata_runs(max(1, args.corruptions // 2), rng, out)
    stale = stale_reruns(clean, rng, out)
    rows = wiki + data
    emit({
        "corruptions": len(rows),
        **recovered_shares(rows),
        "silent_losses": silent_wiki + silent_data,
        "stale_results": stale,
        "crashes": sum(r["crash"] is not None for r in rows),
        "seconds": round(time.perf_counter() - started, 1),
        "rows": rows,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
