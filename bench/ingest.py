"""Benchmark of the Wikipedia ingest: extractor speed, link agreement, Ray scaling.

    python bench/ingest.py [--repeat N] [--out DIR] [--shard-bytes 4M] [--rounds 3] [--skip-ingest]

A script, not a test. On the real samples in ``../shared/data/wikipedia_xml_sample/``:

1. **Extractor speed, one core.** wikiextractor 3.1.0 (``Extractor(...,
   keepLinks=True).clean_text(wikitext, expand_templates=False, html_safe=False)``,
   links read back from its ``<a href>`` output) against this project's
   ``wikitext_to_text`` + ``split_sentences``, on the same 106 decoded article
   wikitexts of the enwiki sample (so only extraction is timed). Each side runs
   `--rounds` times, interleaved, and the fastest round counts (the least
   disturbed by other processes). pages/s, MB/s of wikitext, and the ratio.
2. **Link agreement** with mwparserfromhell (``tests/wikitext_oracle.py``, which
   documents what counts: article text outside templates, refs, tables and
   captions): precision and recall of (target, anchor) pairs on the enwiki
   articles, the bgwiki sample (language "bg") and the enwiki table sample.
3. **Ingest scaling.** A multistream dump + index is built by repeating the
   enwiki sample's 206 pages `--repeat` times with new page ids and suffixed
   titles (100 pages per bz2 stream, stream 0 the siteinfo header, the last
   ``</mediawiki>``), and a second one twice that size. ``python -m ingest
   --num-cpus N`` runs in a subprocess for N=1 and N=2 on the first dump and
   N=2 on the second; pages/s and MB/s come from the job's own clock (the
   manifest's ``seconds``, which starts after Ray is up). Every 0.2 s the
   script reads the RSS of each ``ray::`` process under the job; a worker that
   ever ran ``process_unit`` is a data worker, and its peak is its largest RSS.
   The two dump sizes show whether a worker's peak grows with the dump.

The last line printed is one JSON object with the headline figures.
"""

from __future__ import annotations

import argparse
import bz2
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SAMPLES = REPO.parent / "shared" / "data" / "wikipedia_xml_sample"
ENWIKI = SAMPLES / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
BGWIKI = SAMPLES / "bgwiki-latest-pages-articles-shortened.xml.bz2"
TABLES = SAMPLES / "enwiki-table-markup.xml.bz2"
DUMP_NAME = "enwiki-20260101-pages-articles-multistream.xml.bz2"
INDEX_NAME = "enwiki-20260101-pages-articles-multistream-index.txt.bz2"
PAGES_PER_STREAM = 100
ID_STRIDE = 10_000_000  # copy k of page id i gets id k * ID_STRIDE + i


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_pages(path: Path):
    from ingest.wikipedia import Page, iter_pages_from_file

    return [page for page in iter_pages_from_file(path) if isinstance(page, Page)]


# ---------------------------------------------------------------- 1. extractor speed

_WIKIEXTRACTOR_LINK = re.compile(r'<a href="([^"]*)">(.*?)</a>')


def wikiextractor_pass(articles) -> int:
    import logging

    from wikiextractor.extract import Extractor

    logging.getLogger().setLevel(logging.ERROR)
    links = 0
    for page in articles:
        extractor = Extractor(page.page_id, 0, "https://en.wikipedia.org/wiki/", page.title, [], keepLinks=True)
        paragraphs = extractor.clean_text(page.wikitext, expand_templates=False, html_safe=False)
        links += len(_WIKIEXTRACTOR_LINK.findall("\n".join(paragraphs)))
    return links


def project_pass(articles) -> int:
    from ingest.wikitext import split_sentences, wikitext_to_text

    links = 0
    for page in articles:
        text, page_links = wikitext_to_text(page.wikitext)
        split_sentences(text, page_links)
        links += len(page_links)
    return links


def extractor_speed(articles, rounds: int) -> dict:
    megabytes = sum(len(page.wikitext.encode()) for page in articles) / 1e6
    best = {"wikiextractor": float("inf"), "project": float("inf")}
    links = {}
    for _ in range(rounds):
        for name, run in (("wikiextractor", wikiextractor_pass), ("project", project_pass)):
            started = time.perf_counter()
            links[name] = run(articles)
            best[name] = min(best[name], time.perf_counter() - started)
    result = {"pages": len(articles), "megabytes": round(megabytes, 2), "rounds": rounds}
    for name, seconds in best.items():
        result[name] = {
            "seconds": round(seconds, 3),
            "pages_per_s": round(len(articles) / seconds, 1),
            "mb_per_s": round(megabytes / seconds, 2),
            "links": links[name],
        }
    result["ratio"] = round(best["wikiextractor"] / best["project"], 2)
    return result


# ---------------------------------------------------------------- 2. link agreement


def link_agreement(samples) -> dict:
    from tests.wikitext_oracle import Agreement
    from tests.wikitext_oracle import link_agreement as agreement_of

    result, total = {}, Agreement()
    for name, pages, language in samples:
        agreement = agreement_of([page.wikitext for page in pages if page.redirect is None], language)
        total = total.add(agreement)
        result[name] = _agreement_row(agreement, language)
        result[name]["top_missed"] = [list(k) + [v] for k, v in agreement.missed.most_common(3)]
        result[name]["top_extra"] = [list(k) + [v] for k, v in agreement.extra.most_common(3)]
    result["overall"] = _agreement_row(total, "*")
    return result


def _agreement_row(agreement, language: str) -> dict:
    return {
        "language": language, "pages": agreement.pages, "extractor_links": agreement.extractor,
        "oracle_links": agreement.oracle, "matched": agreement.matched,
        "precision": round(agreement.precision, 4), "recall": round(agreement.recall, 4),
    }


# ---------------------------------------------------------------- 3a. the multistream dump

_PAGE = re.compile(r"<page>.*?</page>", re.DOTALL)
_TITLE = re.compile(r"<title>(.*?)</title>")
_PAGE_ID = re.compile(r"(</ns>\s*<id>)(\d+)(</id>)")
_REDIRECT_TITLE = re.compile(r'(<redirect title=")([^"]*)(")')


def _sample_parts(path: Path) -> tuple[str, list[str], str]:
    with bz2.open(path, "rt", encoding="utf-8") as f:
        xml = f.read()
    pages = _PAGE.findall(xml)
    header = xml[: xml.index("<page>")]
    return header, pages, "</mediawiki>\n"


def _page_copy(page: str, copy: int) -> tuple[str, int, str]:
    """(page XML, page id, escaped title) of copy `copy` of a sample page."""
    if copy:
        page = _TITLE.sub(lambda m: f"<title>{m.group(1)} ({copy})</title>", page, count=1)
        page = _PAGE_ID.sub(lambda m: f"{m.group(1)}{copy * ID_STRIDE + int(m.group(2))}{m.group(3)}", page, count=1)
        page = _REDIRECT_TITLE.sub(lambda m: f"{m.group(1)}{m.group(2)} ({copy}){m.group(3)}", page, count=1)
    return page, int(_PAGE_ID.search(page).group(2)), _TITLE.search(page).group(1)


def _compress_stream(args: tuple[int, int]) -> tuple[bytes, list[tuple[int, str]]]:
    """One bz2 stream of `count` pages from position `first` of the repeated sample."""
    count, first = args
    sample_pages = _SAMPLE_PAGES
    xml, rows = [], []
    for position in range(first, first + count):
        copy, index = divmod(position, len(sample_pages))
        page, page_id, title = _page_copy(sample_pages[index], copy)
        xml.append("  " + page + "\n")
        rows.append((page_id, title))
    return bz2.compress("".join(xml).encode("utf-8"), 9), rows


_SAMPLE_PAGES: list[str] = []


def _init_worker(pages: list[str]) -> None:
    global _SAMPLE_PAGES
    _SAMPLE_PAGES = pages


def build_dumps(out: Path, repeat: int) -> list[dict]:
    """Dumps of `repeat` and `2 * repeat` copies of the sample; reused when already built."""
    header, pages, footer = _sample_parts(ENWIKI)
    sizes = [repeat, 2 * repeat]
    wanted = [out / f"dump-x{copies}" for copies in sizes]
    described = [_read_json(folder / "dump.json") for folder in wanted]
    if all(d and d.get("copies") == c and d.get("sample_pages") == len(pages) for d, c in zip(described, sizes)):
        log(f"[bench] reusing dumps in {out}")
        return described

    total_pages = 2 * repeat * len(pages)
    small_pages = repeat * len(pages)
    # streams of the big dump; the small one shares all full streams before its end
    chunks = [(min(PAGES_PER_STREAM, total_pages - first), first)
              for first in range(0, total_pages, PAGES_PER_STREAM)]
    small_full = small_pages // PAGES_PER_STREAM
    small_tail = small_pages - small_full * PAGES_PER_STREAM
    if small_tail:
        chunks.append((small_tail, small_full * PAGES_PER_STREAM))
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1, _init_worker, (pages,)) as pool:
        streams = pool.map(_compress_stream, chunks, chunksize=4)
    big_streams = streams[: len(range(0, total_pages, PAGES_PER_STREAM))]
    small_streams = streams[:small_full] + (streams[-1:] if small_tail else [])
    log(f"[bench] compressed {len(chunks)} streams in {time.perf_counter() - started:.1f} s")

    copy_bytes = sum(len(("  " + page + "\n").encode()) for page in pages)
    return [
        _write_dump(folder, copies, len(pages), copy_bytes, header, page_streams, footer)
        for folder, copies, page_streams in zip(wanted, sizes, (small_streams, big_streams))
    ]


def _write_dump(folder: Path, copies: int, sample_pages: int, copy_bytes: int, header: str, streams,
                footer: str) -> dict:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    index_lines = []
    with open(folder / DUMP_NAME, "wb") as dump:
        dump.write(bz2.compress(header.encode("utf-8"), 9))
        for compressed, rows in streams:
            offset = dump.tell()
            dump.write(compressed)
            index_lines.extend(f"{offset}:{page_id}:{title}\n" for page_id, title in rows)
        dump.write(bz2.compress(footer.encode("utf-8"), 9))
        compressed_bytes = dump.tell()
    with bz2.open(folder / INDEX_NAME, "wt", encoding="utf-8") as index:
        index.writelines(index_lines)
    described = {
        "path": str(folder / DUMP_NAME), "copies": copies, "sample_pages": sample_pages,
        "pages": len(index_lines), "streams": len(streams) + 2, "compressed_bytes": compressed_bytes,
        # XML bytes of the pages (later copies' titles are a few bytes longer)
        "uncompressed_bytes": copies * copy_bytes,
    }
    (folder / "dump.json").write_text(json.dumps(described, indent=2))
    return described


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- 3b. ingest runs


class RayWorkerMemory:
    """Polls the RSS of the `ray::` processes under one process tree."""

    def __init__(self, root_pid: int, interval: float = 0.2):
        self.root_pid = root_pid
        self.interval = interval
        self.peaks: dict[int, int] = {}
        self.titles: dict[int, set[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.root_pid)
        except psutil.NoSuchProcess:
            return
        while not self._stop.is_set():
            try:
                children = root.children(recursive=True)
            except psutil.NoSuchProcess:
                return
            for process in children:
                try:
                    title = " ".join(process.cmdline()).strip() or process.name()
                    rss = process.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue
                if not title.startswith("ray::"):
                    continue
                self.peaks[process.pid] = max(self.peaks.get(process.pid, 0), rss)
                self.titles.setdefault(process.pid, set()).add(title.split()[0])
            self._stop.wait(self.interval)

    def data_worker_peaks_mb(self) -> list[float]:
        """Peak RSS of each worker that ran `process_unit` (any ray:: worker but
        Ray's own agents when no title was caught mid-task)."""
        workers = [pid for pid, titles in self.titles.items() if any("process_unit" in t for t in titles)]
        if not workers:
            workers = [pid for pid, titles in self.titles.items()
                       if not any(word in t for t in titles for word in ("Agent", "_StatsActor", "Coordinator"))]
        return sorted((round(self.peaks[pid] / 2**20, 1) for pid in workers), reverse=True)


def run_ingest(dump: dict, out: Path, num_cpus: int, shard_bytes: str) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "ingest", "--wikipedia", dump["path"], "--out", str(out),
               "--num-cpus", str(num_cpus), "--shard-bytes", shard_bytes, "--no-resume"]
    env = {**os.environ, "RAY_ADDRESS": "local", "PYTHONPATH": str(REPO)}  # a fresh local Ray, never another's
    log(f"[bench] {' '.join(command[1:])}")
    started = time.perf_counter()
    with open(out.parent / f"{out.name}.log", "w") as output:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT)
        with RayWorkerMemory(process.pid) as memory:
            returncode = process.wait()
    wall = time.perf_counter() - started
    if returncode != 0:
        tail = (out.parent / f"{out.name}.log").read_text()[-3000:]
        raise RuntimeError(f"ingest with --num-cpus {num_cpus} failed ({returncode}):\n{tail}")
    manifest = json.loads((out / "manifest.json").read_text())
    seconds = float(manifest["seconds"])
    pages = int(manifest["pages"]["in_input"])
    worker_peaks = memory.data_worker_peaks_mb()
    return {
        "num_cpus": num_cpus, "copies": dump["copies"], "pages": pages, "seconds": seconds,
        "wall_seconds": round(wall, 2), "pages_per_s": round(pages / seconds, 1),
        "compressed_mb_per_s": round(dump["compressed_bytes"] / 1e6 / seconds, 2),
        "uncompressed_mb_per_s": round(dump["uncompressed_bytes"] / 1e6 / seconds, 2),
        "sentences": manifest["sets"]["sentences"]["rows"], "accounted": manifest["pages"]["accounted"],
        "units": manifest.get("units"),
        "peak_rss_mb_per_worker": max(worker_peaks, default=None),
        "worker_peaks_mb": worker_peaks,
        "manifest_peak_rss_mb_per_worker": manifest.get("peak_rss_mb_per_worker"),
    }


# ---------------------------------------------------------------- report


def _table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=40,
                        help="copies of the enwiki sample (206 pages) in the smaller dump; the larger has twice as many")
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "structcse-bench"),
                        help="work folder for the dumps and the ingest outputs")
    parser.add_argument("--shard-bytes", default="4M", help="passed to python -m ingest")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the extractor timing (fastest counts)")
    parser.add_argument("--skip-ingest", action="store_true", help="only the extractor speed and link agreement")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bench_started = time.perf_counter()

    enwiki, bgwiki, tables = load_pages(ENWIKI), load_pages(BGWIKI), load_pages(TABLES)
    articles = [page for page in enwiki if page.ns == 0 and page.redirect is None]

    log("[bench] extractor speed")
    speed = extractor_speed(articles, args.rounds)
    log("[bench] link agreement with mwparserfromhell")
    agreement = link_agreement([
        ("enwiki", articles, "en"),
        ("bgwiki", bgwiki, "bg"),
        ("enwiki-tables", [page for page in tables if page.ns == 0], "en"),
    ])

    runs = []
    if not args.skip_ingest:
        log(f"[bench] building dumps of {args.repeat} and {2 * args.repeat} copies in {out}")
        small, big = build_dumps(out, args.repeat)
        runs.append(run_ingest(small, out / "ingest-1cpu", 1, args.shard_bytes))
        runs.append(run_ingest(small, out / "ingest-2cpu", 2, args.shard_bytes))
        runs.append(run_ingest(big, out / "ingest-2cpu-x2", 2, args.shard_bytes))

    print(f"\n== Extractor, one core, {speed['pages']} enwiki articles ({speed['megabytes']:.2f} MB wikitext), "
          f"fastest of {speed['rounds']} rounds ==")
    print(_table(
        [[name, speed[key]["pages_per_s"], speed[key]["mb_per_s"], speed[key]["seconds"], speed[key]["links"]]
         for name, key in (("wikiextractor 3.1.0 (clean_text, keepLinks)", "wikiextractor"),
                           ("structcse wikitext_to_text + split_sentences", "project"))],
        ["extractor", "pages/s", "MB/s", "seconds", "links"]))
    print(f"ratio (pages/s per core): {speed['ratio']}x")

    print("\n== Links vs mwparserfromhell (article text outside templates, refs, tables, captions) ==")
    print(_table(
        [[name, row["language"], row["pages"], row["extractor_links"], row["oracle_links"], row["matched"],
          row["precision"], row["recall"]] for name, row in agreement.items()],
        ["sample", "lang", "pages", "extractor", "oracle", "matched", "precision", "recall"]))

    summary = {
        "extractor_vs_wikiextractor": speed["ratio"],
        "link_precision": agreement["overall"]["precision"],
        "link_recall": agreement["overall"]["recall"],
        "link_precision_enwiki": agreement["enwiki"]["precision"],
        "link_recall_enwiki": agreement["enwiki"]["recall"],
        "link_precision_bgwiki": agreement["bgwiki"]["precision"],
        "link_recall_bgwiki": agreement["bgwiki"]["recall"],
        "pages_per_s_per_core": {"project": speed["project"]["pages_per_s"],
                                 "wikiextractor": speed["wikiextractor"]["pages_per_s"]},
        "mb_per_s_per_core": {"project": speed["project"]["mb_per_s"],
                              "wikiextractor": speed["wikiextractor"]["mb_per_s"]},
    }
    if runs:
        one, two, two_big = runs
        print("\n== Ingest (python -m ingest --num-cpus N; job clock from the manifest, Ray start excluded) ==")
        print(_table(
            [[r["num_cpus"], r["copies"], r["pages"], r["units"], r["seconds"], r["wall_seconds"], r["pages_per_s"],
              r["compressed_mb_per_s"], r["uncompressed_mb_per_s"], r["peak_rss_mb_per_worker"],
              r["manifest_peak_rss_mb_per_worker"], r["accounted"]] for r in runs],
            ["workers", "copies", "pages", "units", "job s", "wall s", "pages/s", "MB/s bz2", "MB/s xml",
             "peak RSS MB/worker", "manifest maxrss MB", "accounted"]))
        scaling = round(two["pages_per_s"] / one["pages_per_s"], 2)
        growth = (round(two_big["peak_rss_mb_per_worker"] / two["peak_rss_mb_per_worker"], 2)
                  if two["peak_rss_mb_per_worker"] and two_big["peak_rss_mb_per_worker"] else None)
        print(f"scaling 2 vs 1 worker: {scaling}x; worker peak RSS at {two_big['copies']} vs {two['copies']} copies: "
              f"{two_big['peak_rss_mb_per_worker']} vs {two['peak_rss_mb_per_worker']} MB ({growth}x)")
        summary.update({
            "scaling_2_workers": scaling,
            "peak_rss_mb_per_worker": max(r["peak_rss_mb_per_worker"] or 0 for r in runs),
            "ingest_pages_per_s": {"1_worker": one["pages_per_s"], "2_workers": two["pages_per_s"],
                                   "2_workers_2x_dump": two_big["pages_per_s"]},
            "ingest_mb_per_s_bz2": {"1_worker": one["compressed_mb_per_s"], "2_workers": two["compressed_mb_per_s"]},
            "peak_rss_mb": {f"{two['copies']}_copies": two["peak_rss_mb_per_worker"],
                            f"{two_big['copies']}_copies": two_big["peak_rss_mb_per_worker"]},
            "peak_rss_growth_2x_dump": growth,
            "dump_pages": {f"{two['copies']}_copies": two["pages"], f"{two_big['copies']}_copies": two_big["pages"]},
        })
    else:
        summary.update({"scaling_2_workers": None, "peak_rss_mb_per_worker": None})
    summary["bench_seconds"] = round(time.perf_counter() - bench_started, 1)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
