"""A busy node's model cache: ``processes`` worker processes (a node's Ray Train workers) ask
``infra.cache.local_copy`` for the same ``--model s3://...`` at the same moment (a barrier releases them
together), ``repeats`` times, each repeat a model with new content, so each must be downloaded once.

    python bench/cache_race.py [--processes 8] [--repeats 20]

``errors`` counts a worker's exception, workers handed different folders (or the same folder replaced
under one of them: another inode) and a copy whose bytes differ from the bucket's; ``downloads_per_repeat``
is the copies the workers made (``infra.cache.downloads()``, counted where the files are fetched) per
repeat. ``__main__`` runs it against moto's S3 server on 127.0.0.1 (``tests/s3_server.py``); the last line
printed is one JSON object.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import emit  # noqa: E402

SIZES = {"weights.bin": 2_000_000, "tokenizer.json": 400_000, "config.json": 1_000}


def _racer(tasks, results, barrier) -> None:
    """One worker: for each (uri, cache folder), connect, wait for the others, then ask for the copy."""
    from infra.cache import downloads, local_copy
    from infra.storage import filesystem

    for uri, cache in iter(tasks.get, None):
        os.environ["STRUCTCSE_CACHE"] = cache
        fs, path = filesystem(uri)
        fs.exists(path)  # the connection made before the race, as a worker that has started
        before = downloads()[0]
        barrier.wait(timeout=300)
        try:
            copy = local_copy(uri)
            results.put({"path": str(copy), "downloads": downloads()[0] - before,
                         "inode": (copy / "weights.bin").stat().st_ino})
        except Exception as e:  # counted, never raised: the bench reports how many
            results.put({"error": f"{type(e).__name__}: {e}".splitlines()[0], "downloads": 0})


def _upload_model(fs, folder: str) -> dict[str, bytes]:
    files = {name: os.urandom(size) for name, size in SIZES.items()}
    for name, data in files.items():
        fs.pipe_file(f"{folder}/{name}", data)
    return files


def _errors(answers: list[dict], files: dict[str, bytes]) -> int:
    """Workers that failed, plus one for handing out different copies, plus one for a copy that is wrong."""
    failed = sum(1 for a in answers if "error" in a)
    good = [a for a in answers if "error" not in a]
    if not good:
        return failed
    split = len({(a["path"], a["inode"]) for a in good}) > 1
    copy = Path(good[0]["path"])
    wrong = any(not (copy / name).is_file() or (copy / name).read_bytes() != data for name, data in files.items())
    return failed + int(split) + int(wrong)


def cache_race(bucket_uri: str, processes: int = 8, repeats: int = 20) -> dict:
    """Race ``processes`` workers for a new model in ``bucket_uri`` ``repeats`` times; see the module."""
    from infra.storage import filesystem

    fs, bucket = filesystem(bucket_uri)
    run = f"cache_race/{uuid.uuid4().hex[:8]}"
    prefix = f"{bucket.rstrip('/')}/{run}"
    cache = tempfile.mkdtemp(prefix="cache_race-")
    ctx = multiprocessing.get_context("spawn")  # as Ray's workers: separate interpreters, no inherited state
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    queues = [ctx.Queue() for _ in range(processes)]
    workers = [ctx.Process(target=_racer, args=(q, results, barrier), daemon=True) for q in queues]
    for worker in workers:
        worker.start()
    errors = downloads = 0
    try:
        for repeat in range(repeats):
            files = _upload_model(fs, f"{prefix}/r{repeat:03d}")
            uri = f"{bucket_uri.rstrip('/')}/{run}/r{repeat:03d}"
            for q in queues:
                q.put((uri, cache))
            answers = [results.get(timeout=600) for _ in range(processes)]
            errors += _errors(answers, files)
            downloads += sum(a["downloads"] for a in answers)
    finally:
        for q in queues:
            q.put(None)
        for worker in workers:
            worker.join(timeout=30)
        shutil.rmtree(cache, ignore_errors=True)
        fs.rm(prefix, recursive=True)
    return {"processes": processes, "repeats": repeats, "errors": errors, "downloads_per_repeat": downloads / repeats}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    from bench.servers import s3_bucket

    with s3_bucket("cache-race", "cache-race-key", "cache-race-secret-4b2e") as endpoint:
        start = time.monotonic()
        result = cache_race("s3://cache-race", args.processes, args.repeats)
        print(f"{args.processes} processes x {args.repeats} repeats against {endpoint}: "
              f"{time.monotonic() - start:.1f} s")
    emit(result)
    return 0 if result["errors"] == 0 and result["downloads_per_repeat"] == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
