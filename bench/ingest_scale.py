"""Ingest at scale: does pass 2's time grow linearly, its memory stay flat, nothing spill?

    python bench/ingest_scale.py [--scales 1,10,30] [--out DIR] [--baseline-commit REV]

A script, not a test; about 45 minutes on a 2-core machine with the defaults (the dumps
are built once per --out folder, ~10 minutes, and reused).

**Inputs.** Scale 1 is the largest dump of ``bench/ingest.py`` (the enwiki sample's 206 pages
repeated 40 times, 8,240 pages, 65 MB of bz2) with its Wikidata dump (one item per distinct link
target, an enwiki sitelink and one of 40 shared P31 types). Scale k repeats that *world* k times:
world g >= 1 has its own copies of the pages (new ids and titles) whose links point at world g's
own entities (``[[Target]]`` becomes ``[[Target (wg)]]``), and its own Wikidata items for them,
so that link mentions, entities, Wikidata lines and the sets all grow k-fold — Wikidata in
proportion — while the P31 types stay shared across worlds. Scale 1 is byte for byte the dump
``bench/ingest.py --repeat 40`` builds.

**Runs.** ``python -m ingest --num-cpus 2`` in a subprocess with its own fresh local Ray
(``RAY_ADDRESS=local``), on each scale in turn. Every 0.25 s the script reads the RSS of every
process in the job's tree (the driver, Ray's own processes, every worker): ``peak_rss_gb`` is the
largest RSS any one process reached (a worker's heap and the object-store pages it touched), and
``tree_rss_gb`` the largest sum over the tree (shared pages counted once per process that maps
them, so an upper bound). ``spilled_gb`` is what Ray spilled, read from the raylet's own
``spilled`` log lines and the spill folder's largest size. Pass 1's and pass 2's seconds come from
the job's manifest; pass 2's rate is link mentions / pass-2 seconds / 2 cores.

**Checks** (the ``checks`` object of the last line): the 30x job's time at most 31.5x the 1x job's
(linear, with 5% slack); the largest process's peak RSS at 30x at most 1.1x that at 1x, and at most
2 GB for every Ray worker; nothing spilled; pass 2 at >= 30,000 link mentions/s per core at the
largest scale; every page and link mention accounted; and, with ``--baseline-commit``, every set
written at 1x byte-identical to the sets the code at that commit writes from the same input (run
from a ``git worktree`` of it).

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
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
from bench.dumps import (ENWIKI, copy_bytes, link_targets, load_pages, page_copy, sample_parts,  # noqa: E402
                         wikidata_lines, write_dumps, write_wikidata)
from bench.harness import REPO, emit, log, read_json, table  # noqa: E402
from bench.ray_head import RayWorkerMemory  # noqa: E402

COPIES_PER_WORLD = 40  # scale 1: bench/ingest.py's largest dump
_LINK = re.compile(r"\[\[([^\[\]|#\n]+)(?=[|#\]])")


def _world_page(page: str, copy: int) -> tuple[str, int, str]:
    """Copy ``copy`` of a sample page, its links pointing at the entities of its world."""
    page, page_id, title = page_copy(page, copy)
    world = copy // COPIES_PER_WORLD
    if world:
        page = _LINK.sub(lambda m: f"[[{m.group(1).rstrip()} (w{world})", page)
    return page, page_id, title


def build_dumps(out: Path, scales: list[int]) -> dict[int, dict]:
    """One multistream dump (+ index) per scale (``bench/dumps.py``), each a prefix of the largest; reused
    when built."""
    parts = sample_parts(ENWIKI)
    pages = parts[1]
    folders = {k: out / f"dump-x{k}" for k in scales}
    described = {k: read_json(folders[k] / "dump.json") for k in scales}
    if all(d and d.get("worlds") == k and d.get("sample_pages") == len(pages) for k, d in described.items()):
        log(f"[bench] reusing dumps in {out}")
        return described
    started = time.perf_counter()
    written = write_dumps(folders, {k: k * COPIES_PER_WORLD * len(pages) for k in scales}, parts, _world_page)
    for k in scales:
        described[k] = {"path": written[k]["path"], "worlds": k, "copies": k * COPIES_PER_WORLD,
                        "sample_pages": len(pages), "pages": written[k]["pages"],
                        "compressed_bytes": written[k]["compressed_bytes"],
                        "uncompressed_bytes": k * COPIES_PER_WORLD * copy_bytes(pages)}
        (folders[k] / "dump.json").write_text(json.dumps(described[k], indent=2))
    log(f"[bench] built {len(scales)} dumps ({written[max(scales)]['streams'] - 2} streams) in "
        f"{time.perf_counter() - started:.0f} s")
    return described


def build_wikidata(out: Path, worlds: int) -> dict:
    """World 0's items are ``bench/ingest.py``'s (same QIDs, same bytes per line); world g's are
    the same targets suffixed `` (wg)``, QIDs offset by g million, the same 40 P31 types."""
    path, described_path = out / f"wikidata-x{worlds}.json.gz", out / f"wikidata-x{worlds}.described.json"
    if path.exists() and described_path.exists():
        return json.loads(described_path.read_text())
    articles = [p for p in load_pages(ENWIKI) if p.ns == 0 and p.redirect is None]
    lines = wikidata_lines(link_targets(articles), worlds)
    write_wikidata(path, lines)
    described = {"path": str(path), "items": len(lines), "bytes": path.stat().st_size}
    described_path.write_text(json.dumps(described))
    return described


class TreeMemory(RayWorkerMemory):
    """Every ``interval`` s: the RSS of each process under ``root_pid`` (re-listed every second),
    each one's peak with its title, and the peak of their sum; and the size of Ray's spill folders.
    (``bench/ingest.py``'s poller thread, polling every process of the tree, not only pass-1 workers.)"""

    def __init__(self, root_pid: int, ray_tmp: Path, interval: float = 0.25):
        super().__init__(root_pid, interval)
        self.ray_tmp = ray_tmp
        self.titles: dict[int, str] = {}  # each process's title at its peak
        self.kinds: dict[int, dict] = {}  # at each process's peak: RssAnon, RssFile, RssShmem (GB)
        self.tree_peak = 0
        self.spill_peak = 0

    def _spilled_bytes(self) -> int:
        total = 0
        for folder in self.ray_tmp.glob("session_*/**/*spill*"):
            for f in (folder.rglob("*") if folder.is_dir() else [folder]):
                try:
                    total += f.stat().st_size if f.is_file() else 0
                except OSError:
                    pass
        return total

    def _poll(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.root_pid)
        except psutil.NoSuchProcess:
            return
        processes, listed_at, spill_at = [], float("-inf"), float("-inf")
        while not self._stop.is_set():
            now = time.monotonic()
            if now - listed_at >= 1.0:
                try:
                    processes = [root] + root.children(recursive=True)
                except psutil.NoSuchProcess:
                    return
                listed_at = now
            if now - spill_at >= 5.0:
                self.spill_peak = max(self.spill_peak, self._spilled_bytes())
                spill_at = now
            total = 0
            for process in processes:
                try:
                    rss = process.memory_info().rss
                    if process.pid not in self.titles or rss > self.peaks.get(process.pid, 0):
                        self.titles[process.pid] = (" ".join(process.cmdline()) or process.name())[:80].strip()
                        self.kinds[process.pid] = _rss_kinds(process.pid)
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue
                total += rss
                self.peaks[process.pid] = max(self.peaks.get(process.pid, 0), rss)
            self.tree_peak = max(self.tree_peak, total)
            self._stop.wait(self.interval)

    def largest(self, ray_workers_only: bool = False) -> tuple[float, str, dict]:
        pids = [p for p in self.peaks if not ray_workers_only or self.titles.get(p, "").startswith("ray::")]
        if not pids:
            return 0.0, "", {}
        pid = max(pids, key=lambda p: self.peaks[p])
        return round(self.peaks[pid] / 2**30, 3), self.titles.get(pid, ""), self.kinds.get(pid, {})


def _rss_kinds(pid: int) -> dict:
    """A process's resident memory by kind (/proc/PID/status, GB): its own heap (anon), mapped files
    (file: the memory-mapped shuffle files it reads) and shared memory (shmem: Ray's object store pages
    it touched, which the store owns)."""
    kinds = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("RssAnon:", "RssFile:", "RssShmem:")):
                    name, kb = line.split()[:2]
                    kinds[name[3:-1].lower()] = round(int(kb) / 2**20, 3)
    except OSError:
        pass
    return kinds


def _spilled_in_logs(ray_tmp: Path) -> float:
    """MiB that the raylets say they spilled (their ``Spilled N MiB`` lines; the last is the total)."""
    spilled = 0.0
    for log_file in ray_tmp.glob("session_*/logs/raylet*.out"):
        found = re.findall(r"Spilled (\d+) MiB", log_file.read_text(errors="replace"))
        spilled += float(found[-1]) if found else 0.0
    return spilled


def run_ingest(dump: dict, wikidata: dict, out: Path, repo: Path = REPO, shard_bytes: str = "8M",
               memory_per_cpu: str | None = "2G", cluster=None) -> dict:
    """``python -m ingest`` on 2 CPUs in a fresh local Ray whose temp folder is the bench's own, or
    submitted from a driver joining ``cluster`` (a ``bench/ray_head.LocalHead``)."""
    shutil.rmtree(out, ignore_errors=True)
    ray_tmp = Path(tempfile.mkdtemp(prefix="ray-", dir=out.parent))
    command = [sys.executable, "-m", "ingest", "--wikipedia", dump["path"], "--wikidata", wikidata["path"],
               "--out", str(out), "--shard-bytes", shard_bytes,
               "--wikidata-range-bytes", "32M", "--entity-link-threshold", "10", "--no-resume"]
    if cluster is None:
        command += ["--num-cpus", "2", "--no-dashboard"]
    if memory_per_cpu:
        command += ["--memory-per-cpu", memory_per_cpu]
    env = {**os.environ, "RAY_ADDRESS": "local", "PYTHONPATH": str(repo), "RAY_TMPDIR": str(ray_tmp)}
    if cluster is not None:
        env = {**os.environ, "PYTHONPATH": str(repo), "RAY_ADDRESS": cluster.address, **cluster.env_for_clients}
    log(f"[bench] {' '.join(command[1:])}  (code: {repo})")
    started = time.perf_counter()
    log_path = out.parent / f"{out.name}.log"
    with open(log_path, "w") as output:
        process = subprocess.Popen(command, cwd=repo, env=env, stdout=output, stderr=subprocess.STDOUT)
        with TreeMemory(process.pid, ray_tmp) as memory:
            returncode = process.wait()
    wall = time.perf_counter() - started
    if returncode != 0:
        raise RuntimeError(f"ingest failed ({returncode}):\n{log_path.read_text()[-3000:]}")
    manifest = json.loads((out / "manifest.json").read_text())
    (out.parent / f"{out.name}.manifest.json").write_text(json.dumps(manifest, indent=2))
    mentions = manifest["entity_stats"]["link_mentions"]
    largest_gb, largest_title, largest_kinds = memory.largest()
    worker_gb, worker_title, worker_kinds = memory.largest(ray_workers_only=True)
    spilled_gb = max(memory.spill_peak / 2**30, _spilled_in_logs(ray_tmp) / 1024)
    shutil.rmtree(ray_tmp, ignore_errors=True)
    return {
        "worlds": dump["worlds"], "pages": manifest["pages"]["in_input"], "compressed_mb": round(dump["compressed_bytes"] / 1e6, 1),
        "wikidata_lines": sum(w["lines"] for w in manifest["wikidata"]),
        "pass1_s": manifest["pass1_seconds"], "pass2_s": manifest["pass2_seconds"], "job_s": manifest["seconds"],
        "wall_s": round(wall, 1), "link_mentions": mentions,
        "mentions_per_s_per_core": round(mentions / manifest["pass2_seconds"] / 2, 1),
        "entities": manifest["entity_stats"]["entities"], "entity_pairs": manifest["sets"]["entity_pairs"]["rows"],
        "peak_rss_gb": largest_gb, "peak_rss_process": largest_title, "peak_rss_kinds_gb": largest_kinds,
        "peak_rss_gb_ray_worker": worker_gb, "peak_rss_ray_worker": worker_title,
        "tree_rss_gb": round(memory.tree_peak / 2**30, 3), "spilled_gb": round(spilled_gb, 3),
        "shuffles": manifest.get("shuffles"),
        "accounted": bool(manifest["pages"]["accounted"] and manifest["links_accounted"]),
    }


def set_bytes(out: Path) -> dict[str, str]:
    """sha256 of every parquet file of the sets (not the manifests, which name the code and config)."""
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.glob("*/*.parquet")) if not p.parts[len(out.parts)].startswith("_")}


def baseline_worktree(out: Path, commit: str) -> Path:
    """The code at ``commit``, checked out beside the bench, with this checkout's built C loops
    (``_structcse_wikitext``, the same source at both commits) beside it."""
    tree = out / f"baseline-{commit[:12]}"
    if not (tree / "ingest").exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), commit], check=True,
                       capture_output=True)
    for built in REPO.glob("_structcse_wikitext*.so"):
        shutil.copy2(built, tree / built.name)
    return tree


def run_multi_node(dump: dict, wikidata: dict, out: Path, shard_bytes: str, one_node_sets: dict) -> dict:
    """The same ingest from a driver on a 3-node cluster on this machine (1 CPU each, token auth), with small
    buckets; its sets compared with the one-node run's, and where its tasks ran."""
    from bench.ray_head import LocalHead, cluster_usage

    head = LocalHead(1, worker_nodes=[1, 1])
    try:
        run = run_ingest(dump, wikidata, out / "multi-node", shard_bytes=shard_bytes, memory_per_cpu="256M",
                         cluster=head)
        os.environ.update(head.env_for_clients)  # the state API reads the cluster's token from the environment
        usage = cluster_usage(head.dashboard_url, head.temp_dir)
    finally:
        head.stop()
    mine = set_bytes(out / "multi-node")
    shutil.rmtree(out / "multi-node", ignore_errors=True)
    differ = sorted(f for f in set(mine) | set(one_node_sets) if mine.get(f) != one_node_sets.get(f))
    return {"nodes": usage.get("nodes"), "nodes_used": usage.get("nodes_used"),
            "tasks_and_actors_per_node": usage.get("tasks_and_actors_per_node"), "files": len(mine), "differ": differ,
            "buckets": {s["fn"]: s["buckets"] for s in run["shuffles"] or []}, "job_s": run["job_s"]}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="1,10,30", help="worlds per dump (1 = bench/ingest.py's 40 copies)")
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "structcse-scale"))
    parser.add_argument("--build-only", action="store_true", help="only build the dumps")
    parser.add_argument("--baseline-commit", help="also run the code at this commit at scale 1 and compare the sets")
    parser.add_argument("--shard-bytes", default="8M", help="python -m ingest --shard-bytes (default 8M)")
    parser.add_argument("--multi-node", action="store_true",
                        help="also run the smallest scale on a 3-node Ray cluster on this machine (bench/ray_head.py; "
                        "--memory-per-cpu 256M: many small buckets) and compare its sets with the one-node run's")
    return parser


def _baseline(args, out: Path, k: int, dump: dict, wikidata: dict) -> dict:
    """The sets of the code at ``--baseline-commit`` from the same input, against this run's."""
    mine = set_bytes(out / f"ingest-x{k}")
    tree = baseline_worktree(out, args.baseline_commit)
    base = run_ingest(dump, wikidata, out / f"baseline-x{k}", repo=tree, shard_bytes=args.shard_bytes,
                      memory_per_cpu=None)
    theirs = set_bytes(out / f"baseline-x{k}")
    differ = sorted(f for f in set(mine) | set(theirs) if mine.get(f) != theirs.get(f))
    shutil.rmtree(out / f"baseline-x{k}", ignore_errors=True)
    return {"commit": args.baseline_commit, "files": len(mine), "differ": differ,
            "baseline": {key: v for key, v in base.items() if key != "shuffles"}}


def _runs(args, out: Path, scales: list[int], dumps: dict, wikidata: dict):
    """Each scale's ingest; ``(runs, same_as_baseline, the first scale's set bytes)``."""
    runs, same_as_baseline, one_node_sets = {}, None, None
    for k in scales:
        runs[k] = run_ingest(dumps[k], wikidata[k], out / f"ingest-x{k}", shard_bytes=args.shard_bytes)
        if k == scales[0]:
            one_node_sets = set_bytes(out / f"ingest-x{k}")
        log(f"[bench] x{k}: " + json.dumps({key: v for key, v in runs[k].items() if key != "shuffles"}))
        if k == scales[0] and args.baseline_commit:
            same_as_baseline = _baseline(args, out, k, dumps[k], wikidata[k])
        shutil.rmtree(out / f"ingest-x{k}", ignore_errors=True)
    return runs, same_as_baseline, one_node_sets


def _print_runs(runs: dict) -> None:
    print("\n== Ingest at scale: python -m ingest --num-cpus 2, Wikipedia + Wikidata (world = 8,240 pages) ==")
    header = ["worlds", "pages", "MB bz2", "wikidata lines", "pass 1 s", "pass 2 s", "job s", "link mentions",
              "mentions/s/core", "peak RSS GB (process)", "peak RSS GB (Ray worker)", "tree RSS GB", "spilled GB",
              "accounted"]
    print(table([[r["worlds"], r["pages"], r["compressed_mb"], r["wikidata_lines"], r["pass1_s"], r["pass2_s"],
                  r["job_s"], r["link_mentions"], r["mentions_per_s_per_core"], r["peak_rss_gb"],
                  r["peak_rss_gb_ray_worker"], r["tree_rss_gb"], r["spilled_gb"], r["accounted"]]
                 for r in runs.values()], header))
    for k, r in runs.items():
        print(f"x{k}: largest process {r['peak_rss_process']!r}; largest Ray worker {r['peak_rss_ray_worker']!r}")
        for step in r["shuffles"] or []:
            print(f"  shuffle {step['fn']} on {step['key']}: {step['rows']} rows, {step['bytes'] / 2**20:.0f} MiB "
                  f"in {step['buckets']} bucket(s), the largest {step['largest_bucket_bytes'] / 2**20:.1f} MiB; "
                  f"scatter {step.get('scatter_s')} s, reduce {step.get('reduce_s')} s, "
                  f"peak RSS of a reduce call {step.get('largest_call_peak_rss_mb')} MB, "
                  f"of a scatter call {step.get('largest_scatter_peak_rss_mb')} MB")




def _checks(runs: dict, scales: list[int], same_as_baseline, multi_node) -> dict:
    small, big = runs[scales[0]], runs[scales[-1]]
    ratio = big["worlds"] / small["worlds"]
    checks = {
        "time_linear": big["job_s"] <= 1.05 * ratio * small["job_s"],
        "time_ratio": round(big["job_s"] / small["job_s"], 2), "time_ratio_limit": round(1.05 * ratio, 2),
        "peak_rss_flat": big["peak_rss_gb"] <= 1.1 * small["peak_rss_gb"],
        "peak_rss_ratio": round(big["peak_rss_gb"] / small["peak_rss_gb"], 3),
        "worker_rss_le_2gb": all(r["peak_rss_gb_ray_worker"] <= 2.0 for r in runs.values()),
        "nothing_spilled": all(r["spilled_gb"] == 0 for r in runs.values()),
        "pass2_ge_30k_per_core": big["mentions_per_s_per_core"] >= 30_000,
        "accounted": all(r["accounted"] for r in runs.values()),
    }
    if same_as_baseline is not None:
        checks["same_sets_as_baseline"] = not same_as_baseline["differ"]
        print(f"scale {scales[0]}: {same_as_baseline['files']} parquet files of the sets; differing from "
              f"{same_as_baseline['commit']}'s: {same_as_baseline['differ'] or 'none'}")
    if multi_node is not None:
        checks["same_sets_on_3_nodes"] = not multi_node["differ"] and multi_node["nodes_used"] >= 2
        print(f"scale {scales[0]} on 3 nodes: {multi_node['files']} parquet files; differing from one node's: "
              f"{multi_node['differ'] or 'none'}; tasks and actors per node {multi_node['tasks_and_actors_per_node']}")
    checks["ok"] = all(v for k, v in checks.items() if isinstance(v, bool))
    return checks


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scales = sorted(int(s) for s in args.scales.split(","))
    started = time.perf_counter()
    dumps = build_dumps(out, scales)
    wikidata = {k: build_wikidata(out, k) for k in scales}
    if args.build_only:
        emit({"dumps": dumps, "wikidata": wikidata})
        return 0
    runs, same_as_baseline, one_node_sets = _runs(args, out, scales, dumps, wikidata)
    multi_node = None
    if args.multi_node:
        multi_node = run_multi_node(dumps[scales[0]], wikidata[scales[0]], out, args.shard_bytes, one_node_sets)
    _print_runs(runs)
    checks = _checks(runs, scales, same_as_baseline, multi_node)
    emit({"runs": {f"x{k}": {key: v for key, v in r.items() if key != "shuffles"} for k, r in runs.items()},
          "baseline": same_as_baseline, "multi_node": multi_node, "checks": checks,
          "bench_seconds": round(time.perf_counter() - started, 1)})
    return 0 if checks["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
