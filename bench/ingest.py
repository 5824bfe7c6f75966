"""Benchmark of the Wikipedia ingest: extractor speed, link agreement, Ray scaling.

    python bench/ingest.py [--repeat 40] [--out DIR] [--shard-bytes 2M] [--attempts 3] [--rounds 5]
                           [--skip-ingest] [--pass1 both|data|tasks] [--skip-pairs]
    python bench/ingest.py --check-pass1 [--out DIR]

About 10-15 minutes on a 2-core machine with the defaults, which time both
ways of running pass 1 (``--pass1 tasks`` or ``data`` alone halves the ingest
runs); the dumps are built once per --out folder and reused.

A script, not a test. On the real samples in ``../shared/data/wikipedia_xml_sample/``:

1. **Extractor speed, one core.** wikiextractor 3.1.0 (``Extractor(...,
   keepLinks=True).clean_text(wikitext, expand_templates=False, html_safe=False)``,
   links read back from its ``<a href>`` output) against this project's
   ``wikitext_to_text`` + ``split_sentences``, on the same 106 decoded article
   wikitexts of the enwiki sample (so only extraction is timed). The extractors
   take turns page by page for `--rounds` rounds; each page counts with its
   fastest time (so load from elsewhere, which comes in bursts, falls on all
   sides alike and drops out). pages/s, MB/s of wikitext, and the ratio. A
   fourth row runs the project's extractor with the Python versions of its C
   loops (`_structcse_wikitext`), as on a machine without a C compiler.
2. **Link agreement** with mwparserfromhell (``tests/wikitext_oracle.py``, which
   documents what counts: article text outside templates, refs, tables and
   captions): precision and recall of (target, anchor) pairs on the enwiki
   articles, the bgwiki sample (language "bg") and the enwiki table sample.
3. **Ingest scaling.** A multistream dump + index is built by repeating the
   enwiki sample's 206 pages `--repeat` times with new page ids and suffixed
   titles (100 pages per bz2 stream, stream 0 the siteinfo header, the last
   ``</mediawiki>``), and a second one half that size. ``python -m ingest
   --num-cpus N`` runs in a subprocess (with ``RAY_ADDRESS=local``: its own
   fresh Ray) for N=1 and N=2 on both dumps, `--attempts` times each,
   interleaved, the fastest counting; pages/s and MB/s come from the job's own
   clock (the manifest's ``seconds``, which starts after ``ray.init``). The
   job figures hold each job's fixed cost (Ray's task start-up, planning, the
   tail of the last tasks); the steady state (extra pages of the big dump over
   its extra seconds) leaves it out, and the fixed cost is printed beside it.
   On a 2-core machine the driver and Ray's own processes share the two cores
   with the workers, so 2 workers cannot quite reach 2x; other load on the
   machine shows in the attempts. Every 0.2 s the script reads the RSS of each
   ``ray::`` process under the job; a worker that ever ran ``process_unit`` is
   a data worker, and its peak is its largest RSS. The two dump sizes show
   whether a worker's peak grows with the dump.
   **Pass 1 side by side** (``--pass1 both``, the default): every ingest
   above runs twice back to back, as a Ray Data read (``--pass1 data``, the
   units are the read tasks of a datasource) and as plain Ray tasks
   (``--pass1 tasks``), the order alternating between attempts (ABBA), so that
   load from elsewhere falls on both alike. Printed: pages/s of each (fastest
   attempts) and their ratio, the median ratio of the pairs run back to back,
   the 2-worker scaling and the steady state of each. The other ingest figures
   are those of the default (``ingest.pipeline.IngestConfig.pass1``).
4. **Wikidata and entity pairs.** A Wikidata ``.json.gz`` (gzip members of
   2,000 lines, as Wikimedia writes it) with one item per distinct link target
   of the sample (enwiki sitelink, one of 40 P31 types); ingest of both dumps
   with it on 2 workers; pass 1 and pass 2 seconds from the manifest, pass 2's
   link mentions per second per core, and its steady state between the two
   dumps with its fixed cost (the figures docs/performance.md plans with).

The last line printed is one JSON object with the headline figures.

``--check-pass1`` runs only the end-to-end check that left the test suite (it was
``tests/test_ingest.py::test_pass1_ray_data_read_and_plain_tasks_write_the_same_bytes_and_resume``; the
suite keeps its first half): the demo world ingested with ``--pass1 tasks`` and ``--pass1 data`` writes
the same bytes (sets and pass 1's work files), and a rerun of the Ray Data read after one unit's
done-marker, one shard and a whole set were deleted skips the other units inside their read tasks and
writes the same bytes again. Last line: ``{"pass1_check": {"ok": ..., "failed": [...], ...}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.dumps import (BGWIKI, ENWIKI, PAGES_PER_STREAM, TABLES, copy_bytes, link_targets,  # noqa: E402
                         load_pages, sample_parts, wikidata_lines, write_dumps, write_wikidata)
from bench.harness import REPO, emit, log, read_json, table  # noqa: E402
from bench.ray_head import RayWorkerMemory  # noqa: E402

PASS1_RUNNERS = ("tasks", "data")  # python -m ingest --pass1: plain Ray tasks, or a Ray Data read


# ---------------------------------------------------------------- 1. extractor speed

_WIKIEXTRACTOR_LINK = re.compile(r'<a href="([^"]*)">(.*?)</a>')


def wikiextractor_page(page) -> int:
    from wikiextractor.extract import Extractor

    extractor = Extractor(page.page_id, 0, "https://en.wikipedia.org/wiki/", page.title, [], keepLinks=True)
    paragraphs = extractor.clean_text(page.wikitext, expand_templates=False, html_safe=False)
    return len(_WIKIEXTRACTOR_LINK.findall("\n".join(paragraphs)))


def project_page(page) -> int:
    from ingest.wikitext import split_sentences, wikitext_to_text

    text, links = wikitext_to_text(page.wikitext)
    split_sentences(text, links)
    return len(links)


def project_extract_only_page(page) -> int:
    """The same output as wikiextractor's (text and links, no sentence split)."""
    from ingest.wikitext import wikitext_to_text

    return len(wikitext_to_text(page.wikitext)[1])


def project_python_loops_page(page) -> int:
    """`project_page` with the Python versions of the C loops (a machine without a compiler)."""
    from ingest import wikitext

    loops, wikitext._wikitext_c = wikitext._wikitext_c, None
    try:
        return project_page(page)
    finally:
        wikitext._wikitext_c = loops


EXTRACTORS = {"wikiextractor": wikiextractor_page, "project": project_page,
              "project_extract_only": project_extract_only_page, "project_python_loops": project_python_loops_page}


def extractor_speed(articles, rounds: int) -> dict:
    """Seconds per extractor: the sum over pages of each page's fastest of `rounds` timings.

    The extractors take turns page by page, so a burst of load from elsewhere on a
    shared machine falls on all of them alike, and the per-page minimum drops it."""
    import logging

    logging.getLogger().setLevel(logging.ERROR)  # wikiextractor logs every unknown template
    megabytes = sum(len(page.wikitext.encode()) for page in articles) / 1e6
    fastest = {name: [float("inf")] * len(articles) for name in EXTRACTORS}
    links = dict.fromkeys(EXTRACTORS, 0)
    clock = time.perf_counter
    for round_ in range(rounds):
        for i, page in enumerate(articles):
            for name, extract in EXTRACTORS.items():
                started = clock()
                found = extract(page)
                fastest[name][i] = min(fastest[name][i], clock() - started)
                if round_ == 0:
                    links[name] += found
    result = {"pages": len(articles), "megabytes": round(megabytes, 2), "rounds": rounds}
    seconds = {name: sum(times) for name, times in fastest.items()}
    for name, total in seconds.items():
        result[name] = {
            "seconds": round(total, 3),
            "pages_per_s": round(len(articles) / total, 1),
            "mb_per_s": round(megabytes / total, 2),
            "links": links[name],
        }
    result["ratio"] = round(seconds["wikiextractor"] / seconds["project"], 2)
    result["ratio_extract_only"] = round(seconds["wikiextractor"] / seconds["project_extract_only"], 2)
    result["ratio_python_loops"] = round(seconds["wikiextractor"] / seconds["project_python_loops"], 2)
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


def build_dumps(out: Path, repeat: int) -> list[dict]:
    """Dumps of `repeat // 2` and `repeat` copies of the sample (``bench/dumps.py``; the small one is a prefix
    of the big one, so its full streams are compressed once); reused when already built in `out`."""
    parts = sample_parts(ENWIKI)
    pages = parts[1]
    sizes = [max(1, repeat // 2), repeat]
    wanted = [out / f"dump-x{copies}" for copies in sizes]
    described = [read_json(folder / "dump.json") for folder in wanted]
    if all(d and d.get("copies") == c and d.get("sample_pages") == len(pages) for d, c in zip(described, sizes)):
        log(f"[bench] reusing dumps in {out}")
        return described
    started = time.perf_counter()
    written = write_dumps(dict(enumerate(wanted)), {i: c * len(pages) for i, c in enumerate(sizes)}, parts)
    small_tail = (sizes[0] * len(pages)) % PAGES_PER_STREAM and sizes[0] != sizes[1]
    log(f"[bench] compressed {written[1]['streams'] - 2 + bool(small_tail)} streams in "
        f"{time.perf_counter() - started:.1f} s")
    described = []
    for i, (folder, copies) in enumerate(zip(wanted, sizes)):
        w = written[i]
        described.append({"path": w["path"], "copies": copies, "sample_pages": len(pages), "pages": w["pages"],
                          "streams": w["streams"], "compressed_bytes": w["compressed_bytes"],
                          "uncompressed_bytes": copies * copy_bytes(pages)})
        (folder / "dump.json").write_text(json.dumps(described[-1], indent=2))
    return described


# ---------------------------------------------------------------- 3b. ingest runs


def run_ingest(dump: dict, out: Path, num_cpus: int, shard_bytes: str, pass1: str = "data") -> dict:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "ingest", "--wikipedia", dump["path"], "--out", str(out),
               "--num-cpus", str(num_cpus), "--no-dashboard", "--shard-bytes", shard_bytes, "--no-resume",
               "--pass1", pass1]
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
    (out.parent / f"{out.name}.manifest.json").write_text(json.dumps(manifest, indent=2))
    shutil.rmtree(out, ignore_errors=True)  # the parquet output is not needed, and a run writes ~100 MB
    seconds = float(manifest["seconds"])
    pages = int(manifest["pages"]["in_input"])
    worker_peaks = memory.data_worker_peaks_mb()
    return {
        "pass1": pass1, "num_cpus": num_cpus, "copies": dump["copies"], "pages": pages, "seconds": seconds,
        "pass1_seconds": manifest.get("pass1_seconds"),
        "wall_seconds": round(wall, 2), "pages_per_s": round(pages / seconds, 1),
        "compressed_mb_per_s": round(dump["compressed_bytes"] / 1e6 / seconds, 2),
        "uncompressed_mb_per_s": round(dump["uncompressed_bytes"] / 1e6 / seconds, 2),
        "sentences": manifest["sets"]["sentences"]["rows"], "accounted": manifest["pages"]["accounted"],
        "units": manifest.get("units"),
        "peak_rss_mb_per_worker": max(worker_peaks, default=None),
        "worker_peaks_mb": worker_peaks,
        "manifest_peak_rss_mb_per_worker": manifest.get("peak_rss_mb_per_worker"),
        "poller_cpu_seconds": round(memory.cpu_seconds, 2),
    }


# ---------------------------------------------------------------- 4. Wikidata + entity pairs (pass 2)


def build_wikidata(out: Path, articles) -> dict:
    """A Wikidata JSON dump (``bench/dumps.py``) with an item per distinct link target of the sample articles:
    an enwiki sitelink, an English label and a P31 drawn from 40 types by a hash of the title, so pass 2 has
    real link counts and type groups."""
    path = out / "wikidata-bench-all.json.gz"
    targets = link_targets(articles)
    if not path.exists():
        write_wikidata(path, wikidata_lines(targets))
    return {"path": str(path), "items": len(targets), "bytes": path.stat().st_size}


def run_pairs(dump: dict, wikidata: dict, out: Path, num_cpus: int, shard_bytes: str) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "ingest", "--wikipedia", dump["path"], "--wikidata", wikidata["path"],
               "--out", str(out), "--num-cpus", str(num_cpus), "--no-dashboard", "--shard-bytes", shard_bytes,
               "--wikidata-range-bytes", "1M", "--entity-link-threshold", "10", "--no-resume"]
    env = {**os.environ, "RAY_ADDRESS": "local", "PYTHONPATH": str(REPO)}
    log(f"[bench] {' '.join(command[1:])}")
    with open(out.parent / f"{out.name}.log", "w") as output:
        returncode = subprocess.run(command, cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT).returncode
    if returncode != 0:
        tail = (out.parent / f"{out.name}.log").read_text()[-3000:]
        raise RuntimeError(f"ingest with Wikidata failed ({returncode}):\n{tail}")
    manifest = json.loads((out / "manifest.json").read_text())
    (out.parent / f"{out.name}.manifest.json").write_text(json.dumps(manifest, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    mentions = manifest["entity_stats"]["link_mentions"]
    return {
        "num_cpus": num_cpus, "pages": manifest["pages"]["in_input"], "wikidata_lines": manifest["wikidata"][0]["lines"],
        "wikidata_ranges": manifest["wikidata"][0]["ranges"],
        "pass1_seconds": manifest["pass1_seconds"], "pass2_seconds": manifest["pass2_seconds"],
        "link_mentions": mentions, "entities": manifest["entity_stats"]["entities"],
        "entity_pairs": manifest["sets"]["entity_pairs"]["rows"],
        "pass2_mentions_per_s_per_core": round(mentions / manifest["pass2_seconds"] / num_cpus, 1),
        "links_accounted": manifest["links_accounted"], "pages_accounted": manifest["pages"]["accounted"],
    }


# ---------------------------------------------------------------- report


def _steady_state(small_count: int, small_seconds: float, big_count: int, big_seconds: float) -> tuple[float, float]:
    """(items/s, fixed seconds per job) from two job sizes: the extra items of the bigger
    job over its extra seconds leave out each job's fixed cost (Ray's task start-up,
    planning, the tail of the last tasks), which is what the smaller job spent beyond them."""
    rate = (big_count - small_count) / (big_seconds - small_seconds)
    return rate, round(small_seconds - small_count / rate, 2)


def _default_pass1() -> str:
    from ingest.pipeline import IngestConfig

    return IngestConfig.__dataclass_fields__["pass1"].default


def _side_by_side(attempts: dict, best: dict, small: dict, big: dict) -> dict:
    """Pass 1 as a Ray Data read against plain Ray tasks, from the same interleaved attempts:
    the ratio of the fastest attempts, the median of the ratios of the runs made back to back
    (the same load on both), the 2-worker scaling and the steady state of each."""
    import statistics

    figures, paired = {}, {}
    for pass1 in PASS1_RUNNERS:
        one, two = best[(pass1, 1, big["copies"])], best[(pass1, 2, big["copies"])]
        steady = {n: _steady_state(best[(pass1, n, small["copies"])]["pages"],
                                   best[(pass1, n, small["copies"])]["seconds"],
                                   best[(pass1, n, big["copies"])]["pages"], best[(pass1, n, big["copies"])]["seconds"])
                  for n in (1, 2)}
        figures[pass1] = {
            "pages_per_s": {"1_worker": one["pages_per_s"], "2_workers": two["pages_per_s"]},
            "attempts_pages_per_s": {"1_worker": one["attempts_pages_per_s"], "2_workers": two["attempts_pages_per_s"]},
            "scaling_2_workers": round(two["pages_per_s"] / one["pages_per_s"], 2),
            "steady_state_pages_per_s": {f"{n}_worker{'s' if n > 1 else ''}": round(steady[n][0], 1) for n in (1, 2)},
            "fixed_seconds_per_job": {f"{n}_worker{'s' if n > 1 else ''}": steady[n][1] for n in (1, 2)},
            "peak_rss_mb_per_worker": two["peak_rss_mb_per_worker"],
        }
    for n in (1, 2):
        key = f"{n}_worker{'s' if n > 1 else ''}"
        ratios = [d["pages_per_s"] / t["pages_per_s"] for copies in (small["copies"], big["copies"])
                  for d, t in zip(attempts[("data", n, copies)], attempts[("tasks", n, copies)])]
        paired[key] = {"median": round(statistics.median(ratios), 3), "each": [round(r, 3) for r in ratios]}
    data, tasks = figures["data"], figures["tasks"]
    side = {
        "pass1_data_vs_tasks_pages_per_s": {
            k: round(data["pages_per_s"][k] / tasks["pages_per_s"][k], 3) for k in ("1_worker", "2_workers")},
        "pass1_data_vs_tasks_paired": paired,
        "pass1_data_vs_tasks_steady_state": {
            k: round(data["steady_state_pages_per_s"][k] / tasks["steady_state_pages_per_s"][k], 3)
            for k in ("1_worker", "2_workers")},
        "scaling_2_workers_data": data["scaling_2_workers"],
        "scaling_2_workers_tasks": tasks["scaling_2_workers"],
        "pass1_runners": figures,
    }
    print(f"\n== Pass 1 side by side, {big['copies']} copies ({big['pages']} pages): Ray Data read vs plain Ray "
          f"tasks, fastest attempts; paired = runs back to back ==")
    print(table(
        [[f"{n} worker{'s' if n > 1 else ''}", tasks["pages_per_s"][k], data["pages_per_s"][k],
          side["pass1_data_vs_tasks_pages_per_s"][k], paired[k]["median"],
          tasks["steady_state_pages_per_s"][k], data["steady_state_pages_per_s"][k],
          side["pass1_data_vs_tasks_steady_state"][k], tasks["fixed_seconds_per_job"][k],
          data["fixed_seconds_per_job"][k]]
         for n, k in ((1, "1_worker"), (2, "2_workers"))],
        ["", "tasks pages/s", "data pages/s", "data/tasks", "paired median", "tasks steady", "data steady",
         "steady data/tasks", "tasks fixed s", "data fixed s"]))
    print(f"scaling 2 vs 1 worker: tasks {tasks['scaling_2_workers']}x, data {data['scaling_2_workers']}x")
    return side


def check_pass1(out: Path) -> dict:
    """``--check-pass1``: pass 1 as a Ray Data read against plain tasks on the demo world, and its resume."""
    import ray

    from ingest.pipeline import IngestConfig, run_ingest
    from structcse.demo import ENTITY_LINK_THRESHOLD, generate_demo_world

    ray.init(num_cpus=2, configure_logging=False)
    world = generate_demo_world(out / "world", seed=0)

    def ingest(folder: Path, pass1: str) -> dict:
        from infra.logs import lines_muted

        with lines_muted("ingest"):
            return run_ingest(IngestConfig(wikipedia=[str(world.wikipedia_dump)], wikidata=[str(world.wikidata_dump)],
                                           out=str(folder), shard_bytes=1, pass1=pass1,
                                           entity_link_threshold=ENTITY_LINK_THRESHOLD))

    def every_parquet(root: Path) -> dict:  # the sets and pass 1's work files (mentions, redirects)
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}

    started = time.perf_counter()
    by_tasks_manifest, data = ingest(out / "tasks", "tasks"), out / "data"
    manifest = ingest(data, "data")
    by_tasks, by_data = every_parquet(out / "tasks"), every_parquet(data)
    checks = {"data_read_recorded": manifest["pass1"] == "data" and manifest["units_resumed"] == 0,
              "same_pages_and_units": (manifest["pages"], manifest["units"]) == (by_tasks_manifest["pages"],
                                                                                 by_tasks_manifest["units"]),
              "same_files": sorted(by_data) == sorted(by_tasks)
              and any(name.startswith("_work/mentions/") for name in by_data),
              "same_bytes": [name for name in by_data if by_data[name] != by_tasks.get(name)] == []}
    (data / "_work" / "done" / "wikipedia-00001.json").unlink()
    (data / "sentences" / "shard-00001.parquet").unlink()
    shutil.rmtree(data / "entity_pairs")
    again = ingest(data, "data")
    checks["rerun_redoes_only_the_unit_without_its_marker"] = again["units_resumed"] == again["units"] - 1
    checks["rerun_same_pages"] = again["pages"] == manifest["pages"]
    checks["rerun_same_bytes"] = every_parquet(data) == by_data
    try:
        ingest(out / "nowhere", "threads")
        checks["unknown_pass1_refused"] = False
    except ValueError as e:
        checks["unknown_pass1_refused"] = "pass1" in str(e)
    ray.shutdown()
    return {"ok": all(checks.values()), "failed": [k for k, v in checks.items() if not v],
            "units": manifest["units"], "pages": manifest["pages"], "files": len(by_data),
            "seconds": round(time.perf_counter() - started, 1)}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=40,
                        help="copies of the enwiki sample (206 pages) in the dump timed with 1 and 2 workers; "
                        "a second dump of half as many copies shows whether worker memory depends on size")
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "structcse-bench"),
                        help="work folder for the dumps and the ingest outputs")
    parser.add_argument("--shard-bytes", default="2M",
                        help="passed to python -m ingest: small shards keep both workers busy to the end")
    parser.add_argument("--attempts", type=int, default=3,
                        help="ingest runs per worker count on the --repeat dump (the fastest counts)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the extractor timing (each page's fastest counts)")
    parser.add_argument("--skip-ingest", action="store_true", help="only the extractor speed and link agreement")
    parser.add_argument("--pass1", choices=("both", *PASS1_RUNNERS), default="both",
                        help="how the timed ingest runs pass 1 (python -m ingest --pass1): 'both' times the "
                        "plain Ray tasks and the Ray Data read side by side, each attempt running both "
                        "back to back in alternating order (default: both)")
    parser.add_argument("--skip-pairs", action="store_true",
                        help="leave out the Wikidata + entity pairs runs (pass 2)")
    parser.add_argument("--check-pass1", action="store_true",
                        help="only the check that --pass1 data and tasks write the same bytes and resume (demo world)")
    return parser


def timed_ingests(args, out: Path, small: dict, big: dict) -> dict:
    """Every configuration's attempts, interleaved (a burst of outside load hits every configuration), the
    runners back to back in turns first (ABBA, so drift falls on both alike); the fastest of each marked."""
    runners = PASS1_RUNNERS if args.pass1 == "both" else (args.pass1,)
    attempts: dict[tuple[str, int, int], list] = {}
    for attempt in range(args.attempts):
        for dump in (small, big):
            for num_cpus in (1, 2):
                for pass1 in runners if attempt % 2 == 0 else runners[::-1]:
                    name = f"ingest-{pass1}-{num_cpus}cpu-x{dump['copies']}-{attempt}"
                    attempts.setdefault((pass1, num_cpus, dump["copies"]), []).append(
                        run_ingest(dump, out / name, num_cpus, args.shard_bytes, pass1))
    best = {}
    for key, tries in attempts.items():
        best[key] = max(tries, key=lambda r: r["pages_per_s"])
        best[key]["attempts_pages_per_s"] = [r["pages_per_s"] for r in tries]
        best[key]["best"] = True
    headline = runners[0] if len(runners) == 1 else _default_pass1()
    return {"runners": runners, "headline": headline, "attempts": attempts, "best": best,
            "runs": [best[(headline, 1, big["copies"])], best[(headline, 2, big["copies"])],
                     best[(headline, 2, small["copies"])], best[(headline, 1, small["copies"])]],
            "all_runs": [r for tries in attempts.values() for r in tries]}


def _report_extraction(speed: dict, agreement: dict) -> dict:
    from ingest.wikitext import extractor_loops

    print(f"\n== Extractor, one core, {speed['pages']} enwiki articles ({speed['megabytes']:.2f} MB wikitext), "
          f"pages taking turns, each page its fastest of {speed['rounds']} rounds ==")
    print(table(
        [[name, speed[key]["pages_per_s"], speed[key]["mb_per_s"], speed[key]["seconds"], speed[key]["links"]]
         for name, key in (("wikiextractor 3.1.0 (clean_text, keepLinks)", "wikiextractor"),
                           ("structcse wikitext_to_text + split_sentences", "project"),
                           ("structcse wikitext_to_text (text + links only)", "project_extract_only"),
                           ("structcse, both, the loops in Python (no compiler)", "project_python_loops"))],
        ["extractor", "pages/s", "MB/s", "seconds", "links"]))
    print(f"ratio (pages/s per core): {speed['ratio']}x with sentence splitting, "
          f"{speed['ratio_extract_only']}x for the same output as wikiextractor (text + links); "
          f"with the loops in Python {speed['ratio_python_loops']}x (the extractor's loops: {extractor_loops()})")
    print("\n== Links vs mwparserfromhell (article text outside templates, refs, tables, captions) ==")
    print(table(
        [[name, row["language"], row["pages"], row["extractor_links"], row["oracle_links"], row["matched"],
          row["precision"], row["recall"]] for name, row in agreement.items()],
        ["sample", "lang", "pages", "extractor", "oracle", "matched", "precision", "recall"]))
    return {
        "extractor_vs_wikiextractor": speed["ratio"],
        "extract_only_vs_wikiextractor": speed["ratio_extract_only"],
        "python_loops_vs_wikiextractor": speed["ratio_python_loops"],
        "extractor_loops": extractor_loops(),
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


def _report_ingest(timed: dict, big: dict) -> dict:
    one, two, two_small, one_small = timed["runs"]
    print("\n== Ingest (python -m ingest --num-cpus N --pass1 P; job clock from the manifest, Ray start "
          "excluded) ==")
    print(table(
        [[r["pass1"], f"{r['num_cpus']}{' *' if r.get('best') else ''}", r["copies"], r["pages"], r["units"],
          r["seconds"], r["pass1_seconds"], r["wall_seconds"], r["pages_per_s"], r["compressed_mb_per_s"],
          r["uncompressed_mb_per_s"], r["peak_rss_mb_per_worker"], r["manifest_peak_rss_mb_per_worker"],
          r["accounted"]] for r in timed["all_runs"]],
        ["pass 1", "workers", "copies", "pages", "units", "job s", "pass-1 s", "wall s", "pages/s", "MB/s bz2",
         "MB/s xml", "peak RSS MB/worker", "manifest maxrss MB", "accounted"]))
    print(f"(the rows below are for --pass1 {timed['headline']}, the default)")
    scaling = round(two["pages_per_s"] / one["pages_per_s"], 2)
    growth = (round(two["peak_rss_mb_per_worker"] / two_small["peak_rss_mb_per_worker"], 2)
              if two["peak_rss_mb_per_worker"] and two_small["peak_rss_mb_per_worker"] else None)
    steady, fixed = {}, {}
    for n, big_run, small_run in ((1, one, one_small), (2, two, two_small)):
        steady[n], fixed[n] = _steady_state(small_run["pages"], small_run["seconds"],
                                            big_run["pages"], big_run["seconds"])
    mb_per_page = big["compressed_bytes"] / 1e6 / two["pages"]
    steady_scaling = round(steady[2] / steady[1], 2)
    print("(* the fastest attempt, which the ratios use)")
    print(f"steady state (extra pages / extra seconds, {two_small['copies']} -> {two['copies']} copies): "
          f"1 worker {steady[1]:.1f} pages/s, 2 workers {steady[2]:.1f} pages/s ({steady_scaling}x); "
          f"fixed cost per job {fixed[1]} s (1 worker), {fixed[2]} s (2 workers)")
    print(f"scaling 2 vs 1 worker: {scaling}x; worker peak RSS at {two['copies']} vs {two_small['copies']} copies: "
          f"{two['peak_rss_mb_per_worker']} vs {two_small['peak_rss_mb_per_worker']} MB ({growth}x)")
    return {
        "pass1": timed["headline"],
        "scaling_2_workers": scaling,
        "peak_rss_mb_per_worker": max(r["peak_rss_mb_per_worker"] or 0 for r in timed["runs"]),
        "ingest_pages_per_s": {"1_worker": one["pages_per_s"], "2_workers": two["pages_per_s"],
                               "2_workers_half_dump": two_small["pages_per_s"]},
        "ingest_attempts_pages_per_s": {"1_worker": one["attempts_pages_per_s"],
                                        "2_workers": two["attempts_pages_per_s"]},
        "ingest_job_seconds": {"1_worker": one["seconds"], "2_workers": two["seconds"],
                               "2_workers_half_dump": two_small["seconds"]},
        "ingest_mb_per_s_bz2": {"1_worker": one["compressed_mb_per_s"], "2_workers": two["compressed_mb_per_s"]},
        "scaling_2_workers_steady_state": steady_scaling,
        "steady_state_pages_per_s": {"1_worker": round(steady[1], 1), "2_workers": round(steady[2], 1)},
        "steady_state_mb_per_s_bz2": {"1_worker": round(steady[1] * mb_per_page, 2),
                                      "2_workers": round(steady[2] * mb_per_page, 2)},
        "fixed_seconds_per_job": {"1_worker": fixed[1], "2_workers": fixed[2]},
        "peak_rss_mb": {f"{two_small['copies']}_copies": two_small["peak_rss_mb_per_worker"],
                        f"{two['copies']}_copies": two["peak_rss_mb_per_worker"]},
        "peak_rss_growth_2x_dump": growth,
        "dump_pages": {f"{two_small['copies']}_copies": two_small["pages"], f"{two['copies']}_copies": two["pages"]},
    }


def _report_pairs(wikidata: dict, pairs: dict, pairs_big: dict) -> dict:
    print(f"\n== Wikidata ({wikidata['items']} items, {pairs['wikidata_ranges']} ranges) + entity pairs, "
          f"2 workers ==")
    print(table([[r["pages"], r["pass1_seconds"], r["pass2_seconds"], r["link_mentions"], r["entities"],
                  r["entity_pairs"], r["pass2_mentions_per_s_per_core"], r["links_accounted"]]
                 for r in (pairs, pairs_big)],
                ["pages", "pass 1 s", "pass 2 s", "link mentions", "entities", "pairs", "pass-2 mentions/s/core",
                 "links accounted"]))
    mentions_per_s, pass2_fixed = _steady_state(pairs["link_mentions"], pairs["pass2_seconds"],
                                                pairs_big["link_mentions"], pairs_big["pass2_seconds"])
    pass2_steady = mentions_per_s / 2
    print(f"pass 2 steady state ({pairs['pages']} -> {pairs_big['pages']} pages): {pass2_steady:.0f} "
          f"mentions/s per core; fixed cost {pass2_fixed} s")
    return {"pairs": pairs, "pairs_big": pairs_big, "pass2_steady_state_mentions_per_s_per_core": round(pass2_steady, 1),
            "pass2_fixed_seconds": pass2_fixed}


def _ingest_parts(args, out: Path, articles) -> dict:
    """The timed ingest runs and (unless --skip-pairs) the Wikidata + entity pairs runs: their summary keys."""
    log(f"[bench] dumps of {max(1, args.repeat // 2)} and {args.repeat} copies in {out}")
    small, big = build_dumps(out, args.repeat)
    timed = timed_ingests(args, out, small, big)
    summary = _report_ingest(timed, big)
    if len(timed["runners"]) > 1:
        summary.update(_side_by_side(timed["attempts"], timed["best"], small, big))
    if not args.skip_pairs:
        log("[bench] Wikidata + entity pairs")
        wikidata = build_wikidata(out, articles)
        summary.update(_report_pairs(wikidata, run_pairs(small, wikidata, out / "pairs-2cpu", 2, args.shard_bytes),
                                     run_pairs(big, wikidata, out / "pairs-2cpu-big", 2, args.shard_bytes)))
    return summary


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.check_pass1:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        result = check_pass1(Path(tempfile.mkdtemp(prefix="pass1-check-", dir=args.out)))
        emit({"pass1_check": result})
        return 0 if result["ok"] else 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bench_started = time.perf_counter()
    enwiki, bgwiki, tables = load_pages(ENWIKI), load_pages(BGWIKI), load_pages(TABLES)
    articles = [page for page in enwiki if page.ns == 0 and page.redirect is None]
    log("[bench] extractor speed")
    speed = extractor_speed(articles, args.rounds)
    log("[bench] link agreement with mwparserfromhell")
    agreement = link_agreement([("enwiki", articles, "en"), ("bgwiki", bgwiki, "bg"),
                                ("enwiki-tables", [page for page in tables if page.ns == 0], "en")])
    summary = _report_extraction(speed, agreement)
    if args.skip_ingest:
        summary.update({"scaling_2_workers": None, "peak_rss_mb_per_worker": None})
    else:
        summary.update(_ingest_parts(args, out, articles))
    summary["bench_seconds"] = round(time.perf_counter() - bench_started, 1)
    emit(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
