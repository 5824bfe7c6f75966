"""The cloud path end to end: the demo world through ingest, train, a killed-and-resumed run, Tune, eval
and ``ray job submit``, once on local folders and once in a bucket of a real S3 API (moto's server on
127.0.0.1, behind a loopback proxy that counts the bytes each way), side by side.

    python bench/cloud.py [--out DIR] [--keep] [--stages ...]

Stages (each timed local vs s3; ``stages`` says ok or what failed; ``bytes`` the bytes the s3 run sent
to the server and got back, HTTP headers included):

* ``ingest``: ``python -m ingest``'s pipeline on the demo world's dumps, read from the bucket, sets
  written to the bucket; every parquet file byte-identical to the local run's.
* ``train``: ``simcse_unsup`` on the sets in the bucket, 1 worker, the base model read from the bucket
  (``--model s3://...``), checkpoints and the final model written there; the final weights equal the
  local run's (same seed; 1 worker reads its blocks in file order).
* ``resume``: ``python -m train`` on 2 workers (0.5 CPU each), killed (SIGKILL to the driver's process
  group and its own Ray) once Ray Train has recorded a checkpoint in storage (its
  ``checkpoint_manager_snapshot.json``), then the same command again: it resumes from the latest recorded
  checkpoint (``start_step`` > 0) and finishes; local and s3 final weights compared.
* ``tune``: ``python -m tune``, 2 trials (random searcher), its storage in the bucket.
* ``eval``: ``python -m eval --task sts`` of the model in the bucket with the STS data in the bucket (local
  copies made once) and of the local model on the local data: the same JSON figures.
* ``job_submit``: README.md's bucket block (the one with ``ray job submit`` and ``s3://BUCKET``), each
  command as written but for the stand-ins listed in ``job_stand_ins``, against a head of this bench's
  own (``ray start --head``: its own ports, temp dir and auth token, the bucket's endpoint and keys in its
  environment as an instance profile would give them; stopped by pid): the job succeeds, its model lands
  in the bucket and ``eval`` reads it from there; ``working_dir``: the files and bytes of the package
  unpacked on the head, none of the git-ignored output folders among them.
* ``no_local_uri_folder``: nothing was written under a local ``s3:`` folder (what a URI taken for a
  path becomes).

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO, emit, since, work_folder  # noqa: E402
from bench.ray_head import LocalHead, recorded_checkpoints, stop_processes  # noqa: E402

BUCKET = "structcse-bench"
STSB = REPO.parent / "shared" / "data" / "stsb" / "senteval_processed"


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    return fn(*args, **kwargs), since(t0)


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
    """The weights of the model published at ``model_path`` (a bucket's pointer followed)."""
    import fsspec
    from safetensors.torch import load

    from infra.publish import resolve

    fs, path = fsspec.core.url_to_fs(f"{resolve(model_path)}/model.safetensors")
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


def evaluate(model: str, data: str = str(STSB)) -> dict:
    cmd = [sys.executable, "-m", "eval", "--task", "sts", "--data", data, "--split", "dev", "--model", model]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ})
    if out.returncode != 0:
        raise RuntimeError(f"python -m eval ({model}) exited {out.returncode}: {_error_lines(out.stderr)}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def train_command(data: str, model: str, storage: str, name: str) -> list[str]:
    return [sys.executable, "-m", "train", "--config", "configs/simcse_unsup.yaml", "--data", data, "--model", model,
            "--storage", storage, "--name", name, "--num-workers", "2", "--set", "cpus_per_worker=0.5",
            "--set", "pooling=mean", "--set", "batch_size=16", "--set", "max_len=32", "--set", "max_steps=8",
            "--set", "checkpoint_every_steps=2", "--set", "log_every_steps=0", "--set", "shuffle_buffer=0"]


def killed_and_resumed(command: list[str], run_folder: str, workdir: Path) -> dict:
    """Run ``command``, SIGKILL it (its process group and its own Ray) once a checkpoint is in ``run_folder``,
    run it again; what the second run's summary says."""
    import fsspec

    fs, folder = fsspec.core.url_to_fs(run_folder)
    ray_tmp = tempfile.mkdtemp(prefix="rayk-", dir="/tmp")  # this run's own Ray, found by its temp dir
    env = {**os.environ, "RAY_TMPDIR": ray_tmp}
    env.pop("RAY_ADDRESS", None)
    with open(workdir / "killed.log", "w") as log:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        deadline = time.time() + 600
        while time.time() < deadline and proc.poll() is None and not recorded_checkpoints(run_folder):
            time.sleep(0.2)
        if proc.poll() is not None:
            raise RuntimeError(f"the run ended (exit {proc.returncode}) before it could be killed: {workdir}/killed.log")
        killed_at = max(recorded_checkpoints(run_folder))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    stop_processes(ray_tmp, grace_s=5)
    shutil.rmtree(ray_tmp, ignore_errors=True)
    again = subprocess.run(command, cwd=REPO, env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
                           capture_output=True, text=True, timeout=900)
    if again.returncode != 0:
        raise RuntimeError(f"the resumed run exited {again.returncode}: {_error_lines(again.stderr)}")
    summary = json.loads(fs.cat_file(f"{folder}/train_summary.json"))
    # where the rerun began, as it says: the newest whole checkpoint, which may be newer than the last one Ray
    # recorded (one whose upload finished just before the kill), even the last step (nothing left to train)
    said = re.search(r"resumed at step (\d+)", again.stdout + again.stderr)
    return {"killed_after_checkpoint": killed_at, "resumed_at": int(said.group(1)) if said else 0,
            "ended_at": summary["last_metrics"].get("step"), "model_path": summary["model_path"]}


def readme_bucket_block() -> list[str]:
    """The ```bash block of README.md or docs/cloud.md that runs ``ray job submit`` against ``s3://BUCKET`` on a
    local head."""
    text = "\n".join((REPO / name).read_text() for name in ("README.md", "docs/cloud.md"))
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        if "ray start" in block and "ray job submit" in block and "s3://BUCKET" in block:
            lines = [re.split(r"\s+# ", line)[0].rstrip() for line in block.replace("\\\n", " ").splitlines()]
            return [re.sub(r"\s+", " ", line).strip() for line in lines if line.strip() and not line.startswith("#")]
    raise LookupError("README.md and docs/cloud.md have no ```bash block with ray start, ray job submit and s3://BUCKET")


def job_working_dir(temp_dir: str) -> dict:
    """What ``--working-dir .`` put on the head: the unpacked package's files and bytes, and which of the
    repository's git-ignored output folders it holds (none should be there)."""
    unpacked = [p for p in Path(temp_dir).glob("session_*/runtime_resources/working_dir_files/*") if p.is_dir()]
    if not unpacked:
        raise FileNotFoundError(f"no unpacked working dir under {temp_dir}")
    files = [f for f in unpacked[0].rglob("*") if f.is_file()]
    ignored = ("runs", "sets", "demo_out", "out", "plots", "reports", "cache", ".git")
    return {"files": len(files), "bytes": sum(f.stat().st_size for f in files),
            "git_ignored_present": sorted(d for d in ignored if (unpacked[0] / d).exists())}


def job_submit_stage(out: Path, proxy_endpoint: str, notes: dict) -> None:
    """README.md's bucket block against a head of this bench's own (see the module docstring)."""
    import fsspec

    commands = readme_bucket_block()
    head = LocalHead(num_cpus=2, env={k: v for k, v in os.environ.items() if k.startswith("AWS_")})
    stand_ins = [("s3://BUCKET", f"s3://{BUCKET}", "the bench's bucket"),
                 ("http://127.0.0.1:9000", proxy_endpoint, "the loopback S3 server's endpoint"),
                 ("http://127.0.0.1:8265", head.dashboard_url, "the bench head's dashboard port"),
                 ('"$PWD/demo_out/', f'"{out}/', "the bench's folder for the demo's"),
                 ("demo_out/", f"{out}/", "the bench's folder for the demo's")]
    notes["job_stand_ins"] = sorted({why for old, _, why in stand_ins if any(old in c for c in commands)}
                                    | {"the bench's own ray start (ports, temp dir, token) and stop by pid"})
    env = {**os.environ, **head.env_for_clients, "RAY_ADDRESS": head.address}
    ran = []
    probes = [REPO / d for d in ("runs", "sets", "demo_out") if not (REPO / d).exists()]
    for folder in probes:  # a git-ignored output folder the upload must leave out, where none exists yet
        folder.mkdir()
        (folder / "probe.bin").write_bytes(os.urandom(1 << 20))
    try:
        for written in commands:
            if written.startswith(("ray start", "ray stop")):
                continue
            command = written
            for old, new, _ in stand_ins:
                command = command.replace(old, new)
            if command.startswith("export "):
                for name, _, value in (w.partition("=") for w in shlex.split(command[len("export "):])):
                    env[name] = value
                continue
            t0 = time.perf_counter()
            done = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=900)
            ran.append({"command": written, "exit": done.returncode, "seconds": round(time.perf_counter() - t0, 1)})
            with open(out / "job_submit.log", "a") as log:
                log.write(f"$ {command}\n{done.stdout}{done.stderr}\n")
            if done.returncode != 0:
                raise RuntimeError(f"{written!r} exited {done.returncode}: {_error_lines(done.stdout + done.stderr)}")
            if "ray job submit" in written and "succeeded" not in done.stdout:
                raise RuntimeError(f"{written!r}: the job did not report success ({out / 'job_submit.log'})")
            if command.startswith("python -m eval"):
                notes["job_model_eval_spearman"] = json.loads(done.stdout.strip().splitlines()[-1]).get("spearman")
        notes["working_dir"] = job_working_dir(head.temp_dir)
        if notes["working_dir"]["git_ignored_present"]:
            raise AssertionError(f"the job's working dir holds git-ignored folders: {notes['working_dir']}")
    finally:
        notes["job_commands"] = ran
        head.stop()
        for folder in probes:
            shutil.rmtree(folder, ignore_errors=True)
    submitted = next(c for c in commands if "ray job submit" in c)
    name = shlex.split(submitted)[shlex.split(submitted).index("--name") + 1]
    storage = shlex.split(submitted)[shlex.split(submitted).index("--storage") + 1].replace("s3://BUCKET", BUCKET)
    fs = fsspec.filesystem("s3")
    if not fs.isfile(f"{storage}/{name}/model/model.safetensors"):
        raise AssertionError(f"no model at s3://{storage}/{name}/model after the job")
    notes["job_model_in_bucket"] = f"s3://{storage}/{name}/model"


STAGES = ["ingest", "train", "resume", "tune", "eval", "job_submit"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="local folders (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the local folders")
    ap.add_argument("--stages", nargs="+", default=STAGES,
                    help="the stages to run (ingest always runs: the others read its sets)")
    ap.add_argument("--fault-rate", type=float, default=0.0,
                    help="the share of the bucket's requests answered 503 SlowDown, reset (before or after "
                         "the store applied them) or cut short (tests/fault_proxy.py)")
    args = ap.parse_args(argv)
    out = work_folder(args.out, "structcse-cloud-")
    result = run_cloud(out, args.stages, args.fault_rate)
    if not args.keep and args.out is None:
        shutil.rmtree(out, ignore_errors=True)
    emit(result)
    return 0 if all(v == "ok" for v in result["stages"].values()) else 1


def run_cloud(out: Path, stages_to_run: list[str], fault_rate: float = 0.0, seed: int = 0) -> dict:
    """Every stage local vs s3 (see the module docstring); with ``fault_rate`` the bucket's side goes through
    ``tests/fault_proxy.FaultProxy`` (that share of requests answered 503 SlowDown, reset before or after the
    store applied them, or a GET's body cut in half)."""
    out.mkdir(parents=True, exist_ok=True)
    run = CloudRun(out, seed)
    import ray

    os.chdir(out)  # a URI taken for a local path would appear here as s3:/...
    ray.init(address="local", num_cpus=2, configure_logging=False, include_dashboard=False)
    run.upload_world(fault_rate)
    run.stage("ingest", run.ingest_stage)
    run.upload_base_model()
    if "train" in stages_to_run or "eval" in stages_to_run:
        run.stage("train", run.train_stage)
    for name in ("resume", "tune", "eval"):
        if name in stages_to_run:
            run.stage(name, getattr(run, f"{name}_stage"))
    ray.shutdown()
    if "job_submit" in stages_to_run:
        run.stage("job_submit", run.job_stage)
    return run.finish(fault_rate)


class CloudRun:
    """One run's servers, the inputs of both sides (``local``, ``s3``) and its figures so far."""

    def __init__(self, out: Path, seed: int):
        from bench.servers import start_counted_faulty_s3

        self.out, self.bucket = out, f"s3://{BUCKET}"
        # every client (and Ray's workers) through the byte counter, then the faults (the setup's uploads unthrottled)
        self.server, self.server_endpoint, self.faults, self.proxy = start_counted_faulty_s3(
            BUCKET, "structcse-bench-key", "structcse-bench-secret", seed)
        self.stages, self.seconds, self.traffic, self.notes, self.results = {}, {}, {}, {}, {}
        self.roots = {"local": str(out), "s3": self.bucket}

    def stage(self, name, fn):
        try:
            fn()
            self.stages[name] = "ok"
        except Exception as e:  # noqa: BLE001 - a failed stage is reported, the others still run
            self.stages[name] = f"failed: {type(e).__name__}: {str(e)[:400]}"
        print(f"[cloud] {name}: {self.stages[name]} {self.seconds.get(name, '')}", file=sys.stderr, flush=True)

    def s3_part(self, name, fn, *a, **kw):
        """``fn`` timed, and its bytes on the wire counted as stage ``name``'s."""
        before = self.proxy.counts()
        result, took = timed(fn, *a, **kw)
        after = self.proxy.counts()
        self.traffic[name] = {k: self.traffic.get(name, {}).get(k, 0) + after[k] - before[k] for k in after}
        return result, took

    def unthrottled(self, fn, *a):
        """The bench's own setup uploads and reads (not the stage under test) go past the faults."""
        rate, self.faults.rate = self.faults.rate, 0.0
        try:
            return fn(*a)
        finally:
            self.faults.rate = rate

    def both(self, name, fn, args_of):
        """``fn`` on local folders, then in the bucket; seconds per side; the s3 side's bytes counted."""
        results, times = {}, {}
        results["local"], times["local"] = timed(fn, *args_of("local"))
        results["s3"], times["s3"] = self.s3_part(name, fn, *args_of("s3"))
        self.seconds[name] = times
        return results

    def same_weights(self, a_path, b_path, what):
        import torch

        a, b = self.unthrottled(weights, a_path), self.unthrottled(weights, b_path)
        worst = max(float((a[k] - b[k]).abs().max()) for k in a)
        if set(a) != set(b) or not all(torch.allclose(a[k], b[k], atol=1e-6) for k in a):
            raise AssertionError(f"{what}: final weights differ (largest difference {worst})")
        return worst

    def upload_world(self, fault_rate: float) -> None:
        """The demo world, its dumps in the bucket; then the faults begin."""
        import fsspec

        from structcse.demo import generate_demo_world

        self.demo = demo = generate_demo_world(self.out / "world", seed=0)
        self.s3 = fsspec.filesystem("s3")
        for path in (demo.wikipedia_dump, demo.wikipedia_index, demo.wikidata_dump):
            self.s3.put(str(path), f"{BUCKET}/dumps/{path.name}")
        self.faults.rate = fault_rate
        self.worlds = {"local": {"wikipedia": str(demo.wikipedia_dump), "wikidata": str(demo.wikidata_dump)},
                       "s3": {"wikipedia": f"{self.bucket}/dumps/{demo.wikipedia_dump.name}",
                              "wikidata": f"{self.bucket}/dumps/{demo.wikidata_dump.name}"}}

    def ingest_stage(self):
        self.both("ingest", ingest, lambda where: (self.worlds[where], f"{self.roots[where]}/sets"))
        local = {k: v for k, v in files_of(f"{self.out}/sets").items() if k.endswith(".parquet")}
        remote = {k: v for k, v in self.unthrottled(files_of, f"{self.bucket}/sets").items() if k.endswith(".parquet")}
        self.notes["ingest_parquet_files"] = len(local)
        if not local or local != remote:
            raise AssertionError(f"{len(set(local) ^ set(remote))} files differ in name, "
                                 f"{sum(local[k] != remote.get(k) for k in local)} in bytes")

    def upload_base_model(self) -> None:
        """A tiny BERT on the local sets' sentences, a copy in the bucket."""
        from setformat.io import read_table
        from train.tiny_bert import build_tiny_bert

        model = str(build_tiny_bert(read_table(f"{self.out}/sets/sentences", ["sentence"])["sentence"].to_pylist(),
                                    self.out / "models" / "base"))
        self.unthrottled(lambda: self.s3.put(model, f"{BUCKET}/models/base", recursive=True))
        self.models = {"local": model, "s3": f"{self.bucket}/models/base"}

    def train_stage(self):
        roots, models = self.roots, self.models
        self.results.update(self.both("train", train, lambda where: (models[where], f"{roots[where]}/sets",
                                                                       f"{roots[where]}/runs", "cloud")))
        self.notes["model_in_bucket"] = self.results["s3"].model_path
        self.notes["train_max_weight_diff"] = self.same_weights(self.results["local"].model_path,
                                                                self.results["s3"].model_path, "train")

    def resume_stage(self):
        roots, models = self.roots, self.models
        runs = self.both("resume", lambda where: killed_and_resumed(
            train_command(f"{roots[where]}/sets", models[where], f"{roots[where]}/runs", "killed"),
            f"{roots[where]}/runs/killed", self.out), lambda where: (where,))
        self.notes["resume"] = runs
        for where, run in runs.items():
            if not (run["resumed_at"] or 0) >= run["killed_after_checkpoint"] > 0 or run["ended_at"] != 8:
                raise AssertionError(f"{where}: killed after step {run['killed_after_checkpoint']}, resumed at "
                                     f"{run['resumed_at']}, ended at {run['ended_at']}")
        self.notes["resume_max_weight_diff"] = self.same_weights(runs["local"]["model_path"],
                                                                 runs["s3"]["model_path"], "resume")

    def tune_stage(self):
        roots, models = self.roots, self.models
        dev = {"local": str(self.demo.sts_dir), "s3": f"{self.bucket}/dev/sts"}
        self.unthrottled(lambda: self.s3.put(str(self.demo.sts_dir), f"{BUCKET}/dev/sts", recursive=True))
        outcomes = self.both("tune", tune, lambda where: (models[where], f"{roots[where]}/sets",
                                                          f"{roots[where]}/tune", dev[where], self.out))
        self.notes["tune_best"] = {w: {k: v for k, v in o.items() if k != "best_config"} for w, o in outcomes.items()}

    def eval_stage(self):
        if not STSB.is_dir():
            raise FileNotFoundError(f"{STSB} is absent")
        self.unthrottled(lambda: self.s3.put(str(STSB), f"{BUCKET}/data/stsb", recursive=True))
        data = {"local": str(STSB), "s3": f"{self.bucket}/data/stsb"}
        figures = self.both("eval", evaluate, lambda where: (self.results[where].model_path, data[where]))
        keys = [k for k in figures["local"] if k not in ("model", "data") and "second" not in k]
        differ = [k for k in keys if figures["local"][k] != figures["s3"].get(k)]
        self.notes["eval_spearman"] = figures["s3"].get("spearman")
        if differ:
            raise AssertionError(f"eval figures differ: {differ}")

    def job_stage(self):
        _, took = self.s3_part("job_submit", job_submit_stage, self.out, self.proxy.endpoint, self.notes)
        self.seconds["job_submit"] = {"s3": took}

    def finish(self, fault_rate: float) -> dict:
        """The last check (no ``s3:`` folder), the servers stopped, the figures."""
        out, stages = self.out, self.stages
        stages["no_local_uri_folder"] = "ok" if not (out / "s3:").exists() and not (REPO / "s3:").exists() \
            else f"failed: {out / 's3:'} or {REPO / 's3:'} exists"
        self.faults.stop()
        self.server.stop()
        identical = all(stages.get(k) == "ok" for k in ("ingest", "train", "resume", "eval") if k in stages)
        return {"stages": stages, "identical_to_local": identical, "seconds": self.seconds, "bytes": self.traffic,
                **self.notes, "fault_rate": fault_rate, "faults": self.faults.counts,
                "endpoint": self.server_endpoint}


if __name__ == "__main__":
    sys.exit(main())
