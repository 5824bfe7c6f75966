"""Elastic training on a lost node, exactly: a run on ``num_workers: [1, 2]`` loses a node at step k, goes on
with 1 worker, grows back to 2 when the node returns, and trains on the same rows at every global step, with
the same dropout masks, to the same weights as the same config on 1 worker throughout (float64: <= 1e-9).

    python bench/elastic.py [--out DIR] [--steps N] [--kill-at K] [--scenarios f64-d0.1 f64-d0 f32-d0.1]

On this machine, with Ray's own ``ray.cluster_utils.Cluster``: a head of 1 CPU (the driver, its Train
controller and one worker) and a node of 1 CPU (the other worker). The training is ``simcse_unsup`` on
the demo world's sentences with the demo's tiny BERT, global batch 32, a checkpoint every 10 steps. Dropout
masks are keyed by (seed, step, column, global row) (``train.dropout_keys``), so a row gets the same masks
whichever worker encodes it. Each scenario (dtype, dropout) runs:

(a) ``python -m train`` with RAY_ADDRESS at the cluster: once a checkpoint at step >= k is in the run
    folder the node is lost (its Train worker killed, then ``Cluster.remove_node``: its CPU is gone); once
    the run has resumed on 1 worker and written a checkpoint at that size, the node is added back, the
    1-worker run held (its worker suspended) until Ray Train has restarted the training at 2 workers, and
    the run grows to 2 again. Every wait is on the event itself (a file the run writes, the cluster's view, a
    process), never on a duration: a slow machine makes the bench slower, not red.
(c) the same config with both nodes: 2 workers throughout.
(b) the same config with the node gone: 1 worker throughout.
Then: the sample ids of every global step (``log_sample_ids``; every attempt that trained the step, the
steps redone after a resize included) equal in (a) and (b); the final weights' largest difference (a vs b,
and c vs b). In float64 the resized run equals the 1-worker run to rounding; float32 shows the practical
tolerance (Adam turns float32 rounding of a 2-worker sum into differences of the order of lr).

Each resize's seconds, by phase, from the bench's clock and the loop's ``resizes.jsonl``: ``since_checkpoint``
(checkpoint resumed from -> node removed or added: training done since it, redone after), ``to_worker_start``
(the event -> the new worker group's loop starting: Ray noticing, the start timeout for lost workers, the
restart), ``setup`` (-> model, state and data in hand), ``first_step``.

(e) a fixed-size run (1 worker, ``max_failures``) whose Ray Train worker process is SIGKILLed once Ray has
    recorded a checkpoint at step >= 20: restarted from it, it ends at the same step, its loss and weights
    beside the uninterrupted run's (``killed_worker``).

Nodes are removed and added from this process's main thread (``Cluster.add_node`` from another thread
fails on a signal handler); the training drivers are subprocesses. Last line: one JSON object with
``finished``, ``same_samples_per_step``, ``max_abs_weight_diff_float64`` (per dropout),
``max_abs_weight_diff_float32``, ``resizes``, ``resize_seconds`` (by phase), ``scenarios``, ``killed_worker``,
``checks``, ``ok``, and ``failed`` (the scenario that failed and why) when one did.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO  # noqa: E402

from bench.ray_head import recorded_checkpoints  # noqa: E402


def log(message: str) -> None:
    print(f"[elastic] {message}", file=sys.stderr, flush=True)


def prepare(out: Path) -> tuple[str, str]:
    """The demo world's sets and a tiny BERT on them (a local Ray, stopped before the cluster starts)."""
    import ray

    from ingest.pipeline import IngestConfig, run_ingest
    from setformat.io import read_table
    from structcse.demo import ENTITY_LINK_THRESHOLD, generate_demo_world
    from train.tiny_bert import build_tiny_bert

    world = generate_demo_world(out / "world", seed=0)
    ray.init(address="local", num_cpus=2, configure_logging=False, include_dashboard=False)
    from infra.logs import lines_muted

    with lines_muted("ingest"):
        run_ingest(IngestConfig(wikipedia=[str(world.wikipedia_dump)], out=str(out / "sets"),
                                entity_link_threshold=ENTITY_LINK_THRESHOLD))
    ray.shutdown()
    sentences = read_table(out / "sets" / "sentences", ["sentence"])["sentence"].to_pylist()
    return str(out / "sets"), str(build_tiny_bert(sentences, out / "base"))


def config(out: Path, data: str, model: str, steps: int) -> Path:
    import yaml

    path = out / "elastic.yaml"
    path.write_text(yaml.safe_dump({
        "method": "simcse_unsup", "model": model, "data": data, "pooling": "mean", "batch_size": 32, "max_len": 32,
        "dropout": 0.1, "epochs": 100, "max_steps": steps, "lr": 5e-4, "seed": 0, "checkpoint_every_steps": 10,
        "keep_checkpoints": 2, "log_every_steps": 0, "num_workers": [1, 2], "cpus_per_worker": 1,
        "max_failures": 5, "resize_check_s": 2.0, "worker_start_timeout_s": 10.0, "log_sample_ids": True,
        "storage_path": str(out / "runs")}))
    return path


def start_run(cfg: Path, name: str, address: str, logs: Path, *overrides: str) -> subprocess.Popen:
    env = {**os.environ, "RAY_ADDRESS": address}
    sets = [a for o in overrides for a in ("--set", o)]
    return subprocess.Popen([sys.executable, "-m", "train", "--config", str(cfg), "--name", name, *sets], cwd=REPO,
                            env=env, stdout=open(logs / f"{name}.log", "w"), stderr=subprocess.STDOUT)


def train_workers(*nodes) -> list:
    """The Ray Train worker processes on ``nodes`` (their raylets' children: this cluster's, not another Ray's)."""
    import psutil

    found = []
    for node in nodes:
        raylet = psutil.Process(node.all_processes["raylet"][0].process.pid)
        for child in raylet.children(recursive=True):
            try:
                if "RayTrainWorker" in " ".join(child.cmdline()):
                    found.append(child)
            except psutil.Error:
                pass
    return found


def signal_workers(workers: list, how: str) -> list[int]:
    """``kill``, ``suspend`` or ``resume`` each of ``workers``; the pids it reached."""
    import psutil

    reached = []
    for worker in workers:
        try:
            getattr(worker, how)()
            reached.append(worker.pid)
        except psutil.Error:
            pass
    return reached


def kill_train_workers(cluster) -> list[int]:
    """SIGKILL the Ray Train workers of this cluster, on any of its nodes."""
    return signal_workers(train_workers(*cluster.list_all_nodes()), "kill")


def lose_node(cluster, node) -> int:
    """Take ``node`` out as a crash would, and make its loss certain at once: its Train worker is killed first
    (the survivor's next collective fails now, so the run cannot train on past the loss while Ray's health
    checks take ~30 s to declare the node dead), then the node's processes. The killed workers' count."""
    killed = signal_workers(train_workers(node), "kill")
    cluster.remove_node(node, allow_graceful=False)
    return len(killed)


def return_node(cluster, proc: subprocess.Popen, timeout_s: float = 300):
    """Add the node back while the 1-worker run is held (its worker suspended) until Ray Train has started the
    2-worker group (the held worker killed by the restart, or a Train worker on the new node): the run cannot
    finish on 1 worker before its capacity check sees the node, however slowly the node and the new group
    start. The new node."""
    import ray

    held = train_workers(cluster.head_node)
    signal_workers(held, "suspend")
    try:
        node = cluster.add_node(num_cpus=1)
        wait_for("the added node's CPU in the cluster's view", lambda: ray.cluster_resources().get("CPU", 0) >= 2,
                 proc, timeout_s)
        wait_for("a restart of the training at 2 workers",
                 lambda: train_workers(node) or not any(_alive(p) for p in held), proc, timeout_s)
    finally:
        signal_workers([p for p in held if _alive(p)], "resume")
    return node


def _alive(process) -> bool:
    import psutil

    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def checkpoints(run: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in run.glob("step-*") if (p / "metrics.json").is_file())


def written_at(run: Path, world: int, after: int) -> list[int]:
    """The checkpoints after step ``after`` that a group of ``world`` workers wrote."""
    found = []
    for step in checkpoints(run):
        try:
            metrics = json.loads((run / f"step-{step:07d}" / "metrics.json").read_text())
        except (OSError, ValueError):  # pruned (keep_checkpoints) or replaced as it was read
            continue
        if step > after and metrics.get("world_size") == world:
            found.append(step)
    return found


def resizes(run: Path) -> list[dict]:
    from infra.appendlog import read_appended

    return [json.loads(line) for line in read_appended(str(run / "resizes.jsonl")).splitlines() if line.strip()]


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


SCENARIOS = {"f64-d0.1": ("float64", 0.1), "f64-d0": ("float64", 0.0), "f32-d0.1": ("float32", 0.1)}


def phases(resize: dict, event_at: float) -> dict:
    """A resize's seconds by phase (see the module's docstring); ``event_at``: the node's removal or return."""
    def gap(a, b):
        return round(b - a, 2) if a is not None and b is not None else None

    return {"since_checkpoint": gap(resize.get("checkpoint_reported_at"), event_at),
            "to_worker_start": gap(event_at, resize.get("worker_started_at")),
            "setup": gap(resize.get("worker_started_at"), resize.get("ready_at")),
            "first_step": gap(resize.get("ready_at"), resize.get("first_step_at")),
            "total": resize.get("seconds_lost")}


def both_nodes(cluster, timeout_s: float = 120) -> None:
    """Wait until both nodes' CPUs (2) are free: in the cluster, and no longer held by the last run's actors
    (a run's process ends before Ray has taken its controller and workers down)."""
    import ray

    cluster.wait_for_nodes()
    deadline = time.time() + timeout_s
    while ray.available_resources().get("CPU", 0) < 2:
        if time.time() > deadline:
            raise TimeoutError(f"{ray.available_resources().get('CPU', 0)} of 2 CPUs free after {timeout_s} s")
        time.sleep(0.5)


def scenario(cluster, node, cfg: Path, out: Path, name: str, dtype: str, dropout: float, args) -> tuple[dict, object]:
    """(a), (c), (b) of one (dtype, dropout): what they trained and how the resized run compares."""
    overrides = (f"dtype={dtype}", f"dropout={dropout}")
    result = {"dtype": dtype, "dropout": dropout}
    run_a, proc, wall_a, node = resized_run(cluster, node, cfg, out, name, overrides, args, result)
    # (c) both nodes: 2 workers throughout; (b) the head alone: 1 worker throughout
    both_nodes(cluster)
    proc_c, wall_c = fixed_run(cfg, f"{name}-c", cluster, out, overrides)
    cluster.remove_node(node, allow_graceful=False)
    proc_b, wall_b = fixed_run(cfg, f"{name}-b", cluster, out, overrides)
    node = cluster.add_node(num_cpus=1)
    summary_a = json.loads((run_a / "train_summary.json").read_text()) if proc.returncode == 0 else {}
    result["finished"] = (proc.returncode == 0 and proc_b.returncode == 0 and proc_c.returncode == 0
                          and summary_a.get("last_metrics", {}).get("step") == args.steps)
    compare(result, run_a, out / "runs" / f"{name}-b", out / "runs" / f"{name}-c", args.steps)
    result["wall_seconds"] = {"a": wall_a, "b": wall_b, "c": wall_c}
    log(f"{name}: {json.dumps({k: v for k, v in result.items() if k != 'resize_seconds'})}")
    return result, node


def resized_run(cluster, node, cfg: Path, out: Path, name: str, overrides: tuple, args, result: dict):
    """(a): a node lost at step k, then back; started once both nodes' CPUs are in the cluster's view (a node
    added at the end of the last scenario may not be yet: the run would start on 1 worker and grow). Its
    resizes and their seconds go into ``result``; (its folder, its process, its seconds, the node now)."""
    both_nodes(cluster)
    run_a = out / "runs" / f"{name}-a"
    started = time.time()
    proc = start_run(cfg, run_a.name, cluster.address, out, *overrides)
    killed_after = wait_for(f"a checkpoint at step >= {args.kill_at}",
                            lambda: [s for s in checkpoints(run_a) if s >= args.kill_at], proc, 600)[0]
    killed = lose_node(cluster, node)
    removed_at = time.time()
    log(f"{name}: node removed after the checkpoint at step {killed_after} ({removed_at - started:.1f} s; "
        f"{killed} worker killed on it)")
    wait_for("a resize to 1 worker", lambda: [r for r in resizes(run_a) if r["to"] == 1], proc, 300)
    wait_for("a checkpoint of the 1-worker run", lambda: written_at(run_a, 1, after=killed_after), proc, 600)
    node = return_node(cluster, proc)
    added_at = time.time()
    log(f"{name}: node added back ({added_at - started:.1f} s)")
    wait_for("a resize back to 2 workers", lambda: [r for r in resizes(run_a) if r["to"] == 2], proc, 300)
    proc.wait(timeout=900)
    found = resizes(run_a)
    result["resizes"] = [{k: r[k] for k in ("step", "from", "to", "why")} for r in found]
    result["resize_seconds"] = [phases(r, removed_at if r["to"] < r["from"] else added_at) for r in found]
    return run_a, proc, round(time.time() - started, 1), node


def fixed_run(cfg: Path, name: str, cluster, out: Path, overrides: tuple) -> tuple[subprocess.Popen, float]:
    """A run on the cluster as it is now, to its end: (its process, its seconds)."""
    started = time.time()
    proc = start_run(cfg, name, cluster.address, out, *overrides)
    proc.wait(timeout=900)
    return proc, round(time.time() - started, 1)


def compare(result: dict, run_a: Path, run_b: Path, run_c: Path, steps: int) -> None:
    """The resized run (a) against 1 worker throughout (b): the sample ids of every step (every attempt at it),
    and the final weights (a vs b, c vs b), into ``result``."""
    from train.global_order import read_sample_logs

    steps_a, steps_b = read_sample_logs(str(run_a)), read_sample_logs(str(run_b))
    missing = [s for s in range(steps) if s not in steps_a or s not in steps_b]
    differing = [s for s in range(steps) if s in steps_a and s in steps_b
                 and any(ids != steps_b[s][0] for ids in steps_a[s])]
    result["same_samples_per_step"] = not missing and not differing
    result["steps_trained_again_in_a"] = sum(len(seen) > 1 for seen in steps_a.values())  # redone after a resize
    if missing or differing:
        result["sample_problems"] = {"missing": missing[:10], "differing": differing[:10]}
    if result["finished"]:
        a, b, c = final_weights(run_a), final_weights(run_b), final_weights(run_c)
        result["max_abs_weight_diff"] = max(float((a[k].double() - b[k].double()).abs().max()) for k in a)
        result["max_abs_weight_diff_2_workers_vs_1"] = max(float((c[k].double() - b[k].double()).abs().max())
                                                           for k in c)
        result["weights_dtype"] = str(next(iter(a.values())).dtype)


def killed_worker(cluster, cfg: Path, out: Path, fixed_steps: int) -> dict:
    """(e): a fixed-size run (1 worker, ``max_failures``) whose worker process is killed once Ray Train has
    recorded a checkpoint at step >= 20; restarted from it, it ends where the uninterrupted run ends."""
    fixed = ("num_workers=1", f"max_steps={fixed_steps}", "log_sample_ids=false")
    clean = start_run(cfg, "fixed-clean", cluster.address, out, *fixed)
    clean.wait(timeout=900)
    faulty = start_run(cfg, "fixed-killed", cluster.address, out, *fixed)
    run_k, run_c = out / "runs" / "fixed-killed", out / "runs" / "fixed-clean"
    killed_after = wait_for("a recorded checkpoint at step >= 20",
                            lambda: [s for s in recorded_checkpoints(str(run_k)) if s >= 20], faulty, 600)[-1]
    pids = kill_train_workers(cluster)
    faulty.wait(timeout=900)
    if faulty.returncode != 0 or clean.returncode != 0:
        raise RuntimeError(f"the killed run exited {faulty.returncode}, the uninterrupted one {clean.returncode}")
    last_k = json.loads((run_k / "train_summary.json").read_text())["last_metrics"]
    last_c = json.loads((run_c / "train_summary.json").read_text())["last_metrics"]
    k, c = final_weights(run_k), final_weights(run_c)
    return {"killed_pids": len(pids), "killed_after_checkpoint": killed_after, "resumed_at": last_k.get("start_step"),
            "ended_at": last_k.get("step"), "loss": last_k.get("loss"), "uninterrupted_loss": last_c.get("loss"),
            "max_abs_weight_diff": max(float((k[n] - c[n]).abs().max()) for n in c)}


def summarize(result: dict) -> None:
    """The scenarios' figures at the JSON's top level: finished and same samples over all, the float64
    differences per dropout, float32's, and the first scenario's resizes and their seconds."""
    done = result["scenarios"].values()
    result["finished"] = "failed" not in result and all(r["finished"] for r in done)
    result["same_samples_per_step"] = bool(done) and all(r["same_samples_per_step"] for r in done)
    for r in done:
        if r["dtype"] == "float64":
            result["max_abs_weight_diff_float64"][f"dropout_{r['dropout']}"] = r.get("max_abs_weight_diff")
        elif r["dropout"] > 0:
            result["max_abs_weight_diff_float32"] = r.get("max_abs_weight_diff")
    first = next(iter(done), {})
    result["resizes"], result["resize_seconds"] = first.get("resizes", []), first.get("resize_seconds")


def checks(result: dict, fixed_steps: int) -> dict:
    killed = result.get("killed_worker") or {}
    return {"finished": result["finished"], "same_samples_per_step": result["same_samples_per_step"],
            "float64_exact": all(v is not None and v <= 1e-9 for v in result["max_abs_weight_diff_float64"].values()),
            "shrank_then_grew": bool(result["scenarios"]) and all(shrink_then_growth(sc["resizes"])
                                                                  for sc in result["scenarios"].values()),
            "killed_worker_resumed": bool(killed.get("killed_pids")) and killed.get("ended_at") == fixed_steps
            and (killed.get("resumed_at") or 0) >= killed.get("killed_after_checkpoint", 1) > 0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--kill-at", type=int, default=40, help="remove the node after the first checkpoint at or past this step")
    ap.add_argument("--fixed-steps", type=int, default=400, help="(e): the fixed-size run whose worker is killed")
    ap.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=list(SCENARIOS),
                    help="(dtype, dropout) cases of (a)-(c); none: (e) alone")
    args = ap.parse_args(argv)
    out = (args.out or Path(tempfile.mkdtemp(prefix="structcse-elastic-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    data, model = prepare(out)
    cfg = config(out, data, model, args.steps)

    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, connect=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    node = cluster.add_node(num_cpus=1)
    result = {"finished": False, "same_samples_per_step": False, "max_abs_weight_diff_float64": {},
              "max_abs_weight_diff_float32": None, "resizes": [], "resize_seconds": None, "scenarios": {}}
    try:
        for name in args.scenarios:
            dtype, dropout = SCENARIOS[name]
            try:
                result["scenarios"][name], node = scenario(cluster, node, cfg, out, name, dtype, dropout, args)
            except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as e:  # which one, and why, in the JSON
                result["failed"] = {"scenario": name, "why": f"{type(e).__name__}: {e}"}
                break
        summarize(result)
        if "failed" not in result:
            try:
                result["killed_worker"] = killed_worker(cluster, cfg, out, args.fixed_steps)
            except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as e:
                result["failed"] = {"scenario": "killed_worker", "why": f"{type(e).__name__}: {e}"}
    finally:
        import ray

        ray.shutdown()  # this process is the head's client: Cluster.shutdown refuses to remove its node first
        cluster.shutdown()
    if args.out is None:
        shutil.rmtree(out, ignore_errors=True)
    result["checks"] = checks(result, args.fixed_steps)
    result["ok"] = all(result["checks"].values())
    if "failed" in result:
        log(f"failed: {result['failed']}")
    print(json.dumps(result))
    return 0 if result["ok"] else 1


def shrink_then_growth(found: list[dict]) -> bool:
    """A 2 -> 1 resize followed by a 1 -> 2 one (a run that started on 1 worker, before Ray Train saw the second
    node's CPU, grows once more first)."""
    sizes = [(r["from"], r["to"]) for r in found]
    return (2, 1) in sizes and (1, 2) in sizes[sizes.index((2, 1)):]


if __name__ == "__main__":
    sys.exit(main())
