"""A re-ingest into the folder a training reads: the training finishes on the set it checked, or stops in one
line naming the set and the job to rerun; it never reads rows of two jobs.

    python bench/integrity_sets.py [--out DIR] [--steps 400]

``reingest_during_train``: ``python -m train`` in local mode (``--num-workers 0``) on a copy of the demo world's
sets, and while it runs ``python -m ingest`` into the same ``--out`` with another input (the world's German dump:
its sentences are rows the checked set does not have), ``--no-resume``, so it rewrites the sentence files: once SIGKILLed after it rewrote its first sentence file, once
left to finish. For each, the training's exit and its last stderr line, whether it finished on the set it checked
or stopped in one line, and ``mixed_rows``: rows the training's readers returned that are not rows of the set it
checked (0 required). What the readers returned is recorded by a ``sitecustomize`` this bench puts on the
training's ``PYTHONPATH`` (it wraps ``setformat.io.read_pinned_file`` in the driver and in every Ray worker and
appends the keys of the rows each read returned to a log); ``mixed_rows_if_globbed``: what a reader listing the
folder's parquet files (the behaviour before sets were pinned) would have returned there after the re-ingest.

The last line of stdout is one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO, emit, kill_when, prepare, say, timed_cli, train_args  # noqa: E402


READ_LOG_ENV = "STRUCTCSE_BENCH_READ_LOG"
HOOK = '''import os
if os.environ.get("%s"):
    import hashlib, json
    import setformat.io as _sets

    _read = _sets.read_pinned_file

    def read_pinned_file(pinned, f, columns=None):
        table = _read(pinned, f, columns)
        keys = [hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
                for text in table.column("sentence").to_pylist()]
        with open(os.environ["%s"], "a") as log:
            log.write(json.dumps({"file": f.name, "pid": os.getpid(), "keys": keys}) + "\\n")
        return table

    _sets.read_pinned_file = read_pinned_file
''' % (READ_LOG_ENV, READ_LOG_ENV)


def _keys(rows: list[dict]) -> list[str]:
    return [hashlib.blake2b(r["sentence"].encode(), digest_size=8).hexdigest() for r in rows]


def _stamps(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob("*.parquet")}


def _globbed_keys(folder: Path) -> list[str]:
    """The rows a reader listing the folder's parquet files would return (sets before they were pinned)."""
    import pyarrow.parquet as pq

    rows = []
    for path in sorted(folder.glob("*.parquet")):
        try:
            rows += pq.read_table(path, columns=["sentence", "page_id"]).to_pylist()
        except Exception:  # noqa: BLE001 - a file being written: what it holds is not counted
            continue
    return _keys(rows)


def _one(setting: dict, out: Path, steps: int, kill: bool) -> dict:
    from setformat.io import read_table

    sets = out / "sets"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    shutil.copytree(setting["sets"], sets, ignore=shutil.ignore_patterns("_lease-*"))
    checked = set(_keys(read_table(sets / "sentences", ["sentence", "page_id"]).to_pylist()))
    read_log, ray_tmp = out / "reads.jsonl", tempfile.mkdtemp(prefix="rays-", dir="/tmp")
    runs = out / "runs"
    started = time.perf_counter()
    train = _start_training(setting, sets, runs, steps, _hooked_env(out, read_log, ray_tmp))
    before = _stamps(sets / "sentences")
    reingest_started = time.perf_counter() - started
    reingest = _reingest(setting["world"], sets, out, before, kill)
    rewritten = sorted(name for name, stamp in _stamps(sets / "sentences").items() if before.get(name) != stamp)
    globbed = _globbed_keys(sets / "sentences")
    try:
        _, err = train.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        os.killpg(train.pid, signal.SIGKILL)
        _, err = train.communicate()
    from bench.ray_head import stop_processes

    stop_processes(ray_tmp, grace_s=5)
    seconds = round(time.perf_counter() - started, 1)
    lines = [line for line in err.strip().splitlines() if line.strip()]
    reads = [json.loads(line) for line in read_log.read_text().splitlines()] if read_log.is_file() else []
    read_keys = [k for r in reads for k in r["keys"]]
    finished = train.returncode == 0 and (runs / "reingest" / "train_summary.json").is_file()
    stopped_in_one_line = train.returncode == 2 and len([ln for ln in lines if ln.startswith("error:")]) == 1
    return {
        "reingest": "killed part-way" if kill else "finished",
        "reingest_started_at_s": round(reingest_started, 1),
        "reingest_result": reingest,
        "sentence_files_rewritten": len(rewritten),
        "train_exit": train.returncode,
        "train_seconds": seconds,
        "outcome": ("finished on the set it checked" if finished else
                    "stopped in one line" if stopped_in_one_line else "other"),
        "train_last_line": next((ln for ln in reversed(lines) if ln.startswith("error:")), lines[-1] if lines else "")[:400],
        "files_read": len(reads),
        "rows_read": len(read_keys),
        "mixed_rows": sum(1 for k in read_keys if k not in checked),
        "mixed_rows_if_globbed": sum(1 for k in globbed if k not in checked),
    }


def _hooked_env(out: Path, read_log: Path, ray_tmp: str) -> dict:
    """The training's environment: its own Ray, and the ``sitecustomize`` logging its reads to ``read_log``."""
    hook = out / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    env = {**os.environ, READ_LOG_ENV: str(read_log), "RAY_TMPDIR": ray_tmp,
           "PYTHONPATH": os.pathsep.join([str(hook), str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    env.pop("RAY_ADDRESS", None)
    return env


def _start_training(setting: dict, sets: Path, runs: Path, steps: int, env: dict) -> subprocess.Popen:
    """``python -m train`` in local mode on ``sets``, returned once it checked its sets (wrote its run plan)."""
    args = train_args({**setting, "sets": str(sets)}, str(runs), "reingest", steps,
                      "--set", "checkpoint_every_steps=1000")  # one checkpoint, at the end: the steps are what lasts
    train = subprocess.Popen([sys.executable, "-m", *args], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    plan = runs / "reingest" / "run_plan.json"
    while not plan.is_file() and train.poll() is None:  # the training checked its sets
        time.sleep(0.1)
    return train


def _reingest(world, sets: Path, out: Path, before: dict, kill: bool) -> dict:
    """``python -m ingest`` into ``sets`` from another input (the world's German dump: every sentence it writes
    is a row the checked set does not have): SIGKILLed once it rewrote a sentence file, or left to finish."""
    ingest = ["ingest", "--wikipedia", str(world.dewiki_dump), "--wikidata", str(world.wikidata_dump),
              "--out", str(sets), "--shard-bytes", "1", "--no-resume", "--num-cpus", "1", "--no-dashboard"]
    if not kill:
        return timed_cli(ingest, timeout=900)

    def rewrote_one() -> bool:
        now = _stamps(sets / "sentences")
        return any(now.get(name) not in (None, stamp) for name, stamp in before.items())

    started = time.perf_counter()
    kill_when(ingest, rewrote_one, out / "reingest.log", timeout=600)
    return {"killed_after_s": round(time.perf_counter() - started, 1)}


def reingest_during_train(setting: dict, out: Path, steps: int = 250) -> dict:
    """Both re-ingests (killed part-way, finished) against a training each; see the module docstring."""
    results = {}
    for name, kill in (("killed", True), ("finished", False)):
        say(f"reingest_during_train: {name}")
        results[name] = _one(setting, out / name, steps, kill)
        say(f"  {json.dumps(results[name])}")
    results["ok"] = all(r["mixed_rows"] == 0 and r["outcome"] != "other" for r in results.values()
                        if isinstance(r, dict))
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=250,
                    help="the training's steps: ~2 epochs of the demo sentences, 30-60 s of training on 2 cores")
    args = ap.parse_args(argv)
    out = (args.out or Path(tempfile.mkdtemp(prefix="structcse-integrity-sets-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    setting = prepare(out)
    result = reingest_during_train(setting, out / "reingest", args.steps)
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["cpus"] = os.cpu_count()
    emit(result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
