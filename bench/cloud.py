"""The cloud path end to end: the demo world through ingest, train, a killed-and-resumed run, Tune and eval,
once on local folders and once in a bucket of a real S3 API (moto's server on 127.0.0.1), side by side.

    python bench/cloud.py [--out DIR] [--keep]

Stages (each timed local vs s3; ``stages`` says ok or what failed):

* ``ingest``: ``python -m ingest``'s pipeline on the demo world's dumps, read from the bucket, sets
  written to the bucket; every parquet file byte-identical to the local run's.
* ``train``: ``simcse_unsup`` on the sets in the bucket, 1 worker, checkpoints and the final model in the
  bucket; the final weights equal the local run's (same seed; 1 worker reads its blocks in file order).
* ``resume``: a run on 2 workers (0.5 CPU each) stopped after 2 steps, then the same command again
  (same storage and name) resumes from the checkpoint in the bucket to step 4.
* ``tune``: ``python -m tune``, 2 trials (random searcher), its storage in the bucket.
* ``eval``: ``python -m eval --task sts`` of the model in the bucket (a local copy, made once) and of
  the local model: the same JSON figures.
* ``no_local_uri_folder``: nothing was written under a local ``s3:`` folder (what a URI taken for a
  path becomes).

Not measured here: ``ray job submit`` against a head with remote storage (issue 36 item 3), and the bytes
read and written. ``--stages`` runs some stages only. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BUCKET = "structcse-bench"
STSB = REPO.parent / "shared" / "data" / "stsb" / "senteval_processed"


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, round(time.perf_counter() - t0, 1)


def files_of(root: str) -> dict[str, bytes]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(root)
    return {name[len(path.rstrip("/")) + 1:]: fs.cat_file(name) for name in fs.find(path)}


def ingest(world, out: str) -> None:
    from ingest.pipeline import IngestConfig, run_ingest
    from structcse.demo import ENTITY_LINK_THRESHOLD

    run_ingest(IngestConfig(wikipedia=[world["wikipedia"]], wikidata=[world["wikidata"]], out=out, shard_bytes=1,
                            entity_link_threshold=ENTITY_LINK_THRESHOLD))


def train(model: str, data: str, storage: str, name: str, **overrides):
    from train.config import TrainConfig
    from train.run import run

    cfg = TrainConfig.from_dict({"method": "simcse_unsup", "model": model, "data": data, "storage_path": storage,
                                 "run_name": name, "batch_size": 16, "max_len": 32, "max_steps": 4,
                                 "checkpoint_every_steps": 2, "log_every_steps": 0, "num_workers": 1,
                                 "shuffle_buffer": 0, **overrides}, "bench")
    return run(cfg)


def weights(model_path: str) -> dict:
    import fsspec
    from safetensors.torch import load

    fs, path = fsspec.core.url_to_fs(f"{model_path}/model.safetensors")
    return load(fs.cat_file(path))


def tune(model: str, data: str, storage: str, dev: str, cwd: Path) -> dict:
    cmd = [sys.executable, "-m", "tune", "--config", "configs/simcse_unsup.yaml", "--tune-config",
           "configs/tune/simcse_unsup.yaml", "--data", data, "--model", model, "--dev-data", dev,
           "--storage", storage, "--name", "cloud-search", "--searcher", "random", "--num-samples", "2",
           "--max-concurrent-trials", "1", "--set", "pooling=mean", "--set", "batch_size=16", "--set", "max_steps=4",
           "--set", "checkpoint_every_steps=2", "--set", "cpus_per_worker=0.5"]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ})
    if out.returncode != 0:
        raise RuntimeError(f"python -m tune ({storage}) exited {out.returncode}: {_error_lines(out.stderr)}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _error_lines(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error") or "Error" in line]
    return " | ".join(lines[-3:]) or stderr[-800:]


def evaluate(model: str) -> dict:
    cmd = [sys.executable, "-m", "eval", "--task", "sts", "--data", str(STSB), "--split", "dev", "--model", model]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ})
    if out.returncode != 0:
        raise RuntimeError(f"python -m eval ({model}) exited {out.returncode}: {_error_lines(out.stderr)}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="local folders (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the local folders")
    ap.add_argument("--stages", nargs="+", default=["ingest", "train", "resume", "tune", "eval"],
                    help="the stages to run (ingest always runs: the others read its sets)")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="structcse-cloud-"))
    out.mkdir(parents=True, exist_ok=True)
    from tests.s3_server import start_s3_server

    server, endpoint = start_s3_server(BUCKET, "structcse-bench-key", "structcse-bench-secret")
    import ray

    os.chdir(out)  # a URI taken for a local path would appear here as s3:/...
    ray.init(num_cpus=2, configure_logging=False, include_dashboard=False)
    stages, seconds, notes = {}, {}, {}
    bucket = f"s3://{BUCKET}"

    def stage(name, fn):
        try:
            fn()
            stages[name] = "ok"
        except Exception as e:  # noqa: BLE001 - a failed stage is reported, the others still run
            stages[name] = f"failed: {type(e).__name__}: {str(e)[:400]}"
        print(f"[cloud] {name}: {stages[name]} {seconds.get(name, '')}", file=sys.stderr, flush=True)

    from structcse.demo import generate_demo_world

    demo = generate_demo_world(out / "world", seed=0)
    import fsspec

    s3 = fsspec.filesystem("s3")
    s3.put(str(demo.wikipedia_dump), f"{BUCKET}/dumps/{demo.wikipedia_dump.name}")
    s3.put(str(demo.wikipedia_index), f"{BUCKET}/dumps/{demo.wikipedia_index.name}")
    s3.put(str(demo.wikidata_dump), f"{BUCKET}/dumps/{demo.wikidata_dump.name}")
    worlds = {"local": {"wikipedia": str(demo.wikipedia_dump), "wikidata": str(demo.wikidata_dump)},
              "s3": {"wikipedia": f"{bucket}/dumps/{demo.wikipedia_dump.name}",
                     "wikidata": f"{bucket}/dumps/{demo.wikidata_dump.name}"}}
    roots = {"local": str(out), "s3": bucket}

    def ingest_stage():
        times = {}
        for where in ("local", "s3"):
            _, times[where] = timed(ingest, worlds[where], f"{roots[where]}/sets")
        seconds["ingest"] = times
        local = {k: v for k, v in files_of(f"{out}/sets").items() if k.endswith(".parquet")}
        remote = {k: v for k, v in files_of(f"{bucket}/sets").items() if k.endswith(".parquet")}
        notes["ingest_parquet_files"] = len(local)
        if not local or local != remote:
            raise AssertionError(f"{len(set(local) ^ set(remote))} files differ in name, "
                                 f"{sum(local[k] != remote.get(k) for k in local)} in bytes")

    stage("ingest", ingest_stage)

    from ingest.sets import read_table
    from train.tiny_bert import build_tiny_bert

    model = str(build_tiny_bert(read_table(f"{out}/sets/sentences", ["sentence"])["sentence"].to_pylist(),
                                out / "tiny_bert"))
    results = {}

    def train_stage():
        import torch

        times = {}
        for where in ("local", "s3"):
            results[where], times[where] = timed(train, model, f"{roots[where]}/sets", f"{roots[where]}/runs", "cloud")
        seconds["train"] = times
        notes["model_in_bucket"] = results["s3"].model_path
        a, b = weights(results["local"].model_path), weights(results["s3"].model_path)
        worst = max(float((a[k] - b[k]).abs().max()) for k in a)
        notes["train_max_weight_diff"] = worst
        if set(a) != set(b) or not all(torch.allclose(a[k], b[k], atol=1e-6) for k in a):
            raise AssertionError(f"final weights differ (largest difference {worst})")

    if "train" in args.stages or "eval" in args.stages:
        stage("train", train_stage)

    def resume_stage():
        times = {}
        for where in ("local", "s3"):
            t0 = time.perf_counter()
            train(model, f"{roots[where]}/sets", f"{roots[where]}/runs", "resumed", num_workers=2, cpus_per_worker=0.5,
                  max_steps=2)
            train(model, f"{roots[where]}/sets", f"{roots[where]}/runs", "resumed", num_workers=2,
                           cpus_per_worker=0.5, max_steps=4)
            times[where] = round(time.perf_counter() - t0, 1)
            fs, path = fsspec.core.url_to_fs(f"{roots[where]}/runs/resumed/train_summary.json")
            last = json.loads(fs.cat_file(path))["last_metrics"]
            if (last["start_step"], last["step"]) != (2, 4):
                raise AssertionError(f"{where}: resumed at {last['start_step']}, ended at {last['step']}")
        seconds["resume"] = times

    if "resume" in args.stages:
        stage("resume", resume_stage)

    def tune_stage():
        times, outcomes = {}, {}
        dev = str(demo.sts_dir)
        for where in ("local", "s3"):
            outcomes[where], times[where] = timed(tune, model, f"{roots[where]}/sets", f"{roots[where]}/tune", dev, out)
        seconds["tune"] = times
        notes["tune_best"] = {w: {k: v for k, v in o.items() if k != "best_config"} for w, o in outcomes.items()}

    if "tune" in args.stages:
        stage("tune", tune_stage)

    def eval_stage():
        if not STSB.is_dir():
            raise FileNotFoundError(f"{STSB} is absent")
        times, figures = {}, {}
        for where in ("local", "s3"):
            figures[where], times[where] = timed(evaluate, results[where].model_path)
        seconds["eval"] = times
        keys = [k for k in figures["local"] if k not in ("model", "total_seconds", "seconds") and "second" not in k]
        differ = [k for k in keys if figures["local"][k] != figures["s3"].get(k)]
        notes["eval_spearman"] = figures["s3"].get("spearman")
        if differ:
            raise AssertionError(f"eval figures differ: {differ}")

    if "eval" in args.stages:
        stage("eval", eval_stage)
    stages["no_local_uri_folder"] = "ok" if not (out / "s3:").exists() else f"failed: {out / 's3:'} exists"
    ray.shutdown()
    server.stop()
    identical = all(stages.get(k) == "ok" for k in ("ingest", "train", "eval") if k in stages)
    result = {"stages": stages, "identical_to_local": identical, "seconds": seconds, **notes,
              "endpoint": endpoint, "ray_job_submit": "not run (issue 36 item 3 is open)"}
    if not args.keep and args.out is None:
        shutil.rmtree(out, ignore_errors=True)
    print(json.dumps(result, default=str))
    return 0 if all(v == "ok" for v in stages.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
