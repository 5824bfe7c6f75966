"""Elastic training on a lost node: a run on ``num_workers: [1, 2]`` loses a node at step k, goes on with 1
worker, grows back to 2 when the node returns, and trains on the same rows at every global step as the
same config run on 1 worker throughout.

    python bench/elastic.py [--out DIR] [--steps N] [--kill-at K]

On this machine, with Ray's own ``ray.cluster_utils.Cluster``: a head of 1 CPU (the driver, its Train
controller and one worker) and a node of 1 CPU (the other worker). The training is ``simcse_unsup`` on
the demo world's sentences with the demo's tiny BERT, global batch 32, dropout 0 (the loop keys
dropout masks by (seed, rank, step), so with dropout on a resized run draws other masks), a
checkpoint every 10 steps.

(a) ``python -m train`` with RAY_ADDRESS at the cluster: once a checkpoint at step >= k is in the run
    folder the node is removed (``Cluster.remove_node``: the worker on it dies, its CPU is gone); once
    the run has resumed on 1 worker the node is added back, and the run grows to 2 again.
(b) the same config (``num_workers: [1, 2]``) with the node gone: the run starts on 1 worker and stays.
(c) the sample ids of every global step (``log_sample_ids``; every attempt that trained the step, the
    steps redone after a resize included) equal in (a) and (b); the final weights' largest difference,
    beside that of the same config run on 2 workers throughout against (b) (float noise alone: Adam makes
    a sum over 2 workers' gradients vs 1 differ by about lr per step in some weights).
(d) the wall time each resize cost: from the checkpoint the new worker group resumed from to its first
    step (the work done since that checkpoint, the detection and the restart), from ``resizes.jsonl``.
(e) a fixed-size run (1 worker, ``max_failures``) whose Ray Train worker process is SIGKILLed once Ray has
    recorded a checkpoint at step >= 20: restarted from it, it ends at the same step, its loss and weights
    beside the uninterrupted run's (``killed_worker``).

Nodes are removed and added from this process's main thread (``Cluster.add_node`` from another thread
fails on a signal handler); the training drivers are subprocesses. Last line: one JSON object with
``finished``, ``resizes``, ``same_samples_per_step``, ``max_abs_weight_diff``, ``resize_seconds``.
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

from bench.ray_head import recorded_checkpoints  # noqa: E402


def log(message: str) -> None:
    print(f"[elastic] {message}", file=sys.stderr, flush=True)


def prepare(out: Path) -> tuple[str, str]:
    """The demo world's sets and a tiny BERT on them (a local Ray, stopped before the cluster starts)."""
    import ray

    from ingest.pipeline import IngestConfig, run_ingest
    from ingest.sets import read_table
    from structcse.demo import ENTITY_LINK_THRESHOLD, generate_demo_world
    from train.tiny_bert import build_tiny_bert

    world = generate_demo_world(out / "world", seed=0)
    ray.init(address="local", num_cpus=2, configure_logging=False, include_dashboard=False)
    run_ingest(IngestConfig(wikipedia=[str(world.wikipedia_dump)], out=str(out / "sets"),
                            entity_link_threshold=ENTITY_LINK_THRESHOLD), log=lambda *_: None)
    ray.shutdown()
    sentences = read_table(out / "sets" / "sentences", ["sentence"])["sentence"].to_pylist()
    return str(out / "sets"), str(build_tiny_bert(sentences, out / "base"))


def config(out: Path, data: str, model: str, steps: int) -> Path:
    import yaml

    path = out / "elastic.yaml"
    path.write_text(yaml.safe_dump({
        "method": "simcse_unsup", "model": model, "data": data, "pooling": "mean", "batch_size": 32, "max_len": 32,
        "dropout": 0.0, "epochs": 100, "max_steps": steps, "lr": 5e-4, "seed": 0, "checkpoint_every_steps": 10,
        "keep_checkpoints": 2, "log_every_steps": 0, "num_workers": [1, 2], "cpus_per_worker": 1,
        "max_failures": 5, "resize_check_s": 2.0, "worker_start_timeout_s": 10.0, "log_sample_ids": True,
        "storage_path": str(out / "runs")}))
    return path


def start_run(cfg: Path, name: str, address: str, logs: Path, *overrides: str) -> subprocess.Popen:
    env = {**os.environ, "RAY_ADDRESS": address}
    sets = [a for o in overrides for a in ("--set", o)]
    return subprocess.Popen([sys.executable, "-m", "train", "--config", str(cfg), "--name", name, *sets], cwd=REPO,
                            env=env, stdout=open(logs / f"{name}.log", "w"), stderr=subprocess.STDOUT)


def kill_train_workers(cluster) -> list[int]:
    """SIGKILL the Ray Train workers of this cluster (the head raylet's children, not another Ray's)."""
    import psutil

    raylet = psutil.Process(cluster.head_node.all_processes["raylet"][0].process.pid)
    killed = []
    for child in raylet.children(recursive=True):
        try:
            if "RayTrainWorker" in " ".join(child.cmdline()):
                child.kill()
                killed.append(child.pid)
        except psutil.Error:
            pass
    return killed


def checkpoints(run: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in run.glob("step-*") if (p / "metrics.json").is_file())


def resizes(run: Path) -> list[dict]:
    path = run / "resizes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def wait_for(what: str, check, proc: subprocess.Popen, timeout_s: float):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        found = check()
        if found:
            return found
        if proc.poll() is not None:
            raise RuntimeError(f"the run ended (exit {proc.returncode}) while waiting for {what}")
        time.sleep(0.2)
    raise TimeoutError(f"no {what} in {timeout_s:.0f} s")


def final_weights(run: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(run / "model" / "model.safetensors"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--kill-at", type=int, default=40, help="remove the node after the first checkpoint at or past this step")
    ap.add_argument("--fixed-steps", type=int, default=60, help="(e): the fixed-size run whose worker is killed")
    args = ap.parse_args(argv)
    out = (args.out or Path(tempfile.mkdtemp(prefix="structcse-elastic-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    data, model = prepare(out)
    cfg = config(out, data, model, args.steps)

    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, connect=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    node = cluster.add_node(num_cpus=1)
    result = {"finished": False, "resizes": [], "same_samples_per_step": False, "max_abs_weight_diff": None,
              "resize_seconds": None}
    try:
        # (a) a node lost at step k, then back
        run_a = out / "runs" / "a"
        started = time.time()
        proc = start_run(cfg, "a", cluster.address, out)
        killed_after = wait_for(f"a checkpoint at step >= {args.kill_at}",
                                lambda: [s for s in checkpoints(run_a) if s >= args.kill_at], proc, 600)[0]
        cluster.remove_node(node, allow_graceful=False)
        log(f"node removed after the checkpoint at step {killed_after} ({time.time() - started:.1f} s)")
        wait_for("a resize to 1 worker", lambda: [r for r in resizes(run_a) if r["to"] == 1], proc, 300)
        node = cluster.add_node(num_cpus=1)
        log(f"node added back ({time.time() - started:.1f} s)")
        wait_for("a resize back to 2 workers", lambda: [r for r in resizes(run_a) if r["to"] == 2], proc, 300)
        proc.wait(timeout=900)
        wall_a = round(time.time() - started, 1)
        summary_a = json.loads((run_a / "train_summary.json").read_text()) if proc.returncode == 0 else {}
        result["resizes"] = [{k: r[k] for k in ("step", "from", "to", "why")} for r in resizes(run_a)]
        result["resize_seconds"] = [round(r["seconds_lost"], 1) for r in resizes(run_a)]

        # (c) the same config with both nodes: 2 workers throughout (what float noise alone makes of 2 vs 1)
        started = time.time()
        proc_c = start_run(cfg, "c", cluster.address, out)
        proc_c.wait(timeout=900)
        wall_c = round(time.time() - started, 1)

        # (b) the same config with only the head: 1 worker throughout
        cluster.remove_node(node, allow_graceful=False)
        started = time.time()
        proc_b = start_run(cfg, "b", cluster.address, out)
        proc_b.wait(timeout=900)
        wall_b = round(time.time() - started, 1)
        run_b = out / "runs" / "b"
        result["finished"] = (proc.returncode == 0 and proc_b.returncode == 0 and proc_c.returncode == 0
                              and summary_a.get("last_metrics", {}).get("step") == args.steps)

        # (c) the same rows at every global step; the final weights
        from train.global_order import read_sample_logs

        steps_a, steps_b = read_sample_logs(str(run_a)), read_sample_logs(str(run_b))
        missing = [s for s in range(args.steps) if s not in steps_a or s not in steps_b]
        differing = [s for s in range(args.steps) if s in steps_a and s in steps_b
                     and any(ids != steps_b[s][0] for ids in steps_a[s])]
        result["same_samples_per_step"] = not missing and not differing
        result["steps_trained_again_in_a"] = sum(len(seen) > 1 for seen in steps_a.values())  # redone after a resize
        if missing or differing:
            result["sample_problems"] = {"missing": missing[:10], "differing": differing[:10]}
        a, b, c = final_weights(run_a), final_weights(run_b), final_weights(out / "runs" / "c")
        result["max_abs_weight_diff"] = max(float((a[k] - b[k]).abs().max()) for k in a)
        result["max_abs_weight_diff_2_workers_vs_1"] = max(float((c[k] - b[k]).abs().max()) for k in c)
        result["wall_seconds"] = {"a": wall_a, "b": wall_b, "c": wall_c}
        result["world_sizes_in_summary"] = summary_a.get("elastic")

        # (e) a fixed-size run (1 worker, max_failures) whose worker process is killed: Ray Train restarts it
        # from the last recorded checkpoint, and it ends where the uninterrupted run ends
        node = cluster.add_node(num_cpus=1)  # 2 CPUs: the worker's, and one for Ray Data's read tasks
        fixed = ("num_workers=1", f"max_steps={args.fixed_steps}", "log_sample_ids=false")
        clean = start_run(cfg, "fixed-clean", cluster.address, out, *fixed)
        clean.wait(timeout=900)
        faulty = start_run(cfg, "fixed-killed", cluster.address, out, *fixed)
        run_k = out / "runs" / "fixed-killed"
        killed_after = wait_for("a recorded checkpoint at step >= 20",
                                lambda: [s for s in recorded_checkpoints(str(run_k)) if s >= 20], faulty, 600)[-1]
        pids = kill_train_workers(cluster)
        faulty.wait(timeout=900)
        last_k = json.loads((run_k / "train_summary.json").read_text())["last_metrics"] if faulty.returncode == 0 else {}
        last_c = json.loads((out / "runs" / "fixed-clean" / "train_summary.json").read_text())["last_metrics"]
        k, c = final_weights(run_k), final_weights(out / "runs" / "fixed-clean")
        result["killed_worker"] = {
            "killed_pids": len(pids), "killed_after_checkpoint": killed_after, "resumed_at": last_k.get("start_step"),
            "ended_at": last_k.get("step"), "loss": last_k.get("loss"), "uninterrupted_loss": last_c.get("loss"),
            "max_abs_weight_diff": max(float((k[n] - c[n]).abs().max()) for n in c)}
    finally:
        import ray

        ray.shutdown()  # this process is the head's client: Cluster.shutdown refuses to remove its node first
        cluster.shutdown()
    if args.out is None:
        shutil.rmtree(out, ignore_errors=True)
    print(json.dumps(result))
    # Adam turns float noise (a sum over 2 workers' gradients vs 1) into differences of the order of lr per step:
    # the resized run must stay within what 2 workers vs 1 make without any resize
    noise = result.get("max_abs_weight_diff_2_workers_vs_1") or 0
    killed = result.get("killed_worker") or {}
    ok = result["finished"] and result["same_samples_per_step"] and killed.get("ended_at") == args.fixed_steps \
        and (killed.get("resumed_at") or 0) >= killed.get("killed_after_checkpoint", 1) > 0 \
        and (result["max_abs_weight_diff"] or 0) <= max(3 * noise, 1e-5) \
        and [(r["from"], r["to"]) for r in result["resizes"]] == [(2, 1), (1, 2)]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
