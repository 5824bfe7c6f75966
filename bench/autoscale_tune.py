"""An autoscaled Ray Tune search on Ray's own autoscaler, on one machine.

    python bench/autoscale_tune.py [--work DIR] [--data SETS --model MODEL --dev-data STS_DIR]
                                   [--workers-max 2] [--worker-cpus 2] [--idle-timeout-s 20]
                                   [--num-samples 2] [--max-steps 30]
    python bench/autoscale_tune.py --workload trivial    # the autoscaler alone: @ray.remote(num_cpus=1) tasks

A script, not a test (it starts its own multi-node Ray cluster); about 3 minutes on an
idle 2-core machine (plus half a minute to build the inputs once). Nothing else may run Ray on the machine meanwhile (two Ray instances
on 2 cores stall each other).

The cluster is Ray's fake multi-node provider (``provider.type: fake_multinode``, the
provider behind ``ray.cluster_utils.AutoscalingCluster``): a head with **0 CPUs** and
one worker node type (``--worker-cpus`` CPUs each, ``min_workers`` 0, ``max_workers``
``--workers-max``, ``idle_timeout_minutes`` = ``--idle-timeout-s`` / 60). The autoscaler
(Ray's monitor process on the head, autoscaler v1) launches a worker node as a new
raylet on this machine when resource demand (tasks, actors, placement groups) does
not fit, and removes it after it has been idle for the timeout. On 0 head CPUs every
Ray Train worker (1 CPU) and Ray Data read task lands on launched workers; Tune's trial
drivers (0 CPU; pinned by the head's TRAIN_DRIVER resource, as in cluster.yaml) and the
evaluation pool (0 CPU on a cluster this small) stay on the head.

``AutoscalingCluster`` itself is not used as is, for two reasons found in Ray 2.60:
its ``start()`` and ``shutdown()`` run ``ray stop --force``, which kills every Ray
process on the machine (anyone else's included), and it reads
``fake_multi_node/example.yaml``, which the 2.60 wheel does not ship. This script
subclasses it: the same generated config (``example.yaml``'s keys inline), started on
its own GCS port and temp dir, and shut down by killing only the processes of this
cluster (found by their session dir / GCS address, killed by pid).

Steps:
  1. the demo world, ingested, and a tiny BERT trained on its sentences (the project's
     own functions: ``structcse.demo.generate_demo_world``, ``ingest.pipeline.run_ingest``,
     ``train.tiny_bert.build_tiny_bert``), on a plain local Ray in a child process before
     the cluster starts; or ``--data/--model/--dev-data`` (kept in ``--work`` for reruns);
  2. the autoscaling cluster; then ``python -m tune --config configs/simcse_unsup.yaml
     ... --num-samples 2 --max-concurrent-trials 2`` as a subprocess with
     ``RAY_ADDRESS`` set to the cluster's GCS address (``train.ray_env.ensure_ray`` connects);
  3. meanwhile the alive nodes and the CPUs in use, every ``--sample-s`` s; after the
     search, a bounded wait for the autoscaler to remove the idle workers;
  4. a timeline, and a last line of JSON, e.g.
     ``{"nodes_max": 3, "workers_launched": 2, "workers_after_idle": 0, "search_exit": 0, ...}``.

Exit status 1 when the search fails, no worker node was launched, or the workers were
not all removed within ``--scale-down-timeout-s``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO  # noqa: E402
from bench.ray_head import free_port, ray_cli, stop_processes  # noqa: E402

SEARCH_NAME = "autoscale"
WORKER_TYPE = "cpu_worker"

# The tiny training each trial runs: the demo's settings (structcse.demo_pipeline.DEMO_TRAINING), shorter.
TRIAL_TRAINING = [
    "pooling=mean", "epochs=1", "max_steps=30", "lr=5e-4", "warmup_steps=0", "max_len=32",
    "num_workers=1", "cpus_per_worker=1", "checkpoint_every_steps=15", "log_every_steps=15",
    "keep_checkpoints=1",
]


def log(message: str = "") -> None:
    print(message, flush=True)


# ---------------------------------------------------------------- the cluster

# fake_multi_node/example.yaml of the Ray source, minus its node types (what AutoscalingCluster._generate_config
# reads; the 2.60 wheel lacks the file)
FAKE_MULTINODE_BASE: dict = {
    "cluster_name": "fake_multinode", "max_workers": 8,
    "provider": {"type": "fake_multinode", "use_node_id_as_ip": True, "disable_node_updaters": True,
                 "disable_launch_config_check": True},
    "head_node_type": "ray.head.default", "auth": {}, "upscaling_speed": 1.0, "idle_timeout_minutes": 0.1,
    "docker": {}, "initialization_commands": [], "setup_commands": [], "head_setup_commands": [],
    "worker_setup_commands": [], "head_start_ray_commands": [], "worker_start_ray_commands": [],
    "file_mounts": {}, "cluster_synced_files": [], "file_mounts_sync_continuously": False,
    "rsync_exclude": [], "rsync_filter": [],
}


def _cluster_class():
    from ray.cluster_utils import AutoscalingCluster

    class OwnAutoscalingCluster(AutoscalingCluster):
        """``AutoscalingCluster`` on its own GCS port and temp dir, stopped by pid (see the module doc)."""

        def __init__(self, head_resources: dict, worker_node_types: dict, **config_kwargs):
            import ray._private.services

            self.ip = ray._private.services.get_node_ip_address()
            self.port = free_port()
            self.address = f"{self.ip}:{self.port}"
            self.temp_dir = tempfile.mkdtemp(prefix="rayas-", dir="/tmp")  # short: Ray's socket paths live under it
            self.dashboard_port = free_port()
            super().__init__(head_resources, worker_node_types, **config_kwargs)

        def _generate_config(self, head_resources, worker_node_types, autoscaler_v2=False, **config_kwargs):
            import copy

            if autoscaler_v2:
                raise ValueError("autoscaler v2 reads the defaults file the 2.60 wheel lacks")
            config = copy.deepcopy(FAKE_MULTINODE_BASE)
            config["available_node_types"] = dict(worker_node_types)
            config["available_node_types"]["ray.head.default"] = {
                "resources": head_resources, "node_config": {}, "max_workers": 0}
            config["provider"]["gcs_address"] = self.address  # launched nodes join this GCS, not :6379
            config.update(config_kwargs)
            return config

        def start(self, _system_config=None, override_env=None):
            _use_own_token(self.temp_dir)
            cmd = _head_command(self, _system_config)
            env = {**os.environ, "AUTOSCALER_UPDATE_INTERVAL_S": "1", "RAY_FAKE_CLUSTER": "1", **(override_env or {})}
            env.pop("RAY_ADDRESS", None)
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)

        def shutdown(self, grace_s: float = 10.0, keep_logs: Path | None = None) -> int:
            """SIGTERM this cluster's processes (and their children), SIGKILL what is left after ``grace_s``."""
            found = stop_processes(self.temp_dir, self.address, f"--gcs-address={self.address}", grace_s=grace_s)
            import ray._private.services

            ray._private.services.find_gcs_addresses.cache_clear()
            if keep_logs is not None:
                _keep_logs(Path(self.temp_dir) / "session_latest" / "logs", keep_logs)
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            return found

    return OwnAutoscalingCluster


def _use_own_token(temp_dir: str) -> None:
    """Token auth, as every structcse cluster runs it (docs/security.md), with a token of this cluster's own
    (0600, in its temp dir): the head, the nodes the autoscaler starts (children of the head's monitor), this
    process and the search all read it from RAY_AUTH_TOKEN_PATH."""
    import secrets

    token_path = Path(temp_dir) / "auth_token"
    token_path.touch(mode=0o600)
    token_path.write_text(secrets.token_hex(32))
    os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path)})
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")  # this process read RAY_AUTH_MODE when it imported ray (as Ray's own
    AuthenticationTokenLoader.instance().reset_cache()  # _enable_token_auth refreshes it)


def _head_command(cluster, system_config) -> list[str]:
    """``ray start --head`` of ``cluster`` with its autoscaling config (written to its temp dir)."""
    fd, config_path = tempfile.mkstemp(prefix="autoscaling-", suffix=".json", dir=cluster.temp_dir)
    with os.fdopen(fd, "w") as f:
        json.dump(cluster._config, f)
    head = dict(cluster._head_resources)
    cmd = [ray_cli(), "start", "--head", f"--autoscaling-config={config_path}",
           f"--port={cluster.port}", f"--temp-dir={cluster.temp_dir}", f"--dashboard-port={cluster.dashboard_port}",
           "--dashboard-host=127.0.0.1", f"--ray-client-server-port={free_port()}",
           f"--dashboard-agent-listen-port={free_port()}", f"--num-cpus={head.pop('CPU', 0)}",
           f"--num-gpus={head.pop('GPU', 0)}", "--disable-usage-stats"]
    if "object_store_memory" in head:
        cmd.append(f"--object-store-memory={head.pop('object_store_memory')}")
    if head:
        cmd.append(f"--resources={json.dumps(head)}")
    if system_config is not None:
        cmd.append(f"--system-config={json.dumps(system_config, separators=(',', ':'))}")
    return cmd


def _keep_logs(logs: Path, keep: Path) -> None:
    """The autoscaler's own account (monitor.log) and the raylets', copied to ``keep``."""
    shutil.rmtree(keep, ignore_errors=True)
    keep.mkdir(parents=True)
    for f in list(logs.glob("monitor*")) + list(logs.glob("raylet*.out")) + list(logs.glob("gcs_server.out")):
        shutil.copy2(f, keep / f.name)


# ---------------------------------------------------------------- sampling the nodes

class NodeSampler(threading.Thread):
    """Every ``every_s``: the alive nodes (``ray.nodes()``, from the GCS) and the CPUs in use."""

    def __init__(self, started: float, every_s: float):
        super().__init__(daemon=True)
        self.started, self.every_s = started, every_s
        self.samples: list[dict] = []
        self.worker_ids: set[str] = set()
        self.stop_event = threading.Event()

    def sample(self) -> dict:
        import ray

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        workers = sorted(n["NodeID"] for n in nodes if "node:__internal_head__" not in n.get("Resources", {}))
        self.worker_ids.update(workers)
        total, available = ray.cluster_resources(), ray.available_resources()
        s = {"t": round(time.time() - self.started, 1), "nodes": len(nodes), "workers": len(workers),
             "worker_ids": [w[-6:] for w in workers], "cpus": total.get("CPU", 0.0),
             "cpus_used": round(total.get("CPU", 0.0) - available.get("CPU", 0.0), 2),
             "requested": standing_request()}
        self.samples.append(s)
        return s

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.sample()
            except Exception as e:  # noqa: BLE001 - a GCS hiccup must not end the sampling
                self.samples.append({"t": round(time.time() - self.started, 1), "error": repr(e)[:200]})
            self.stop_event.wait(self.every_s)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=30)


def standing_request() -> str:
    """What ``ray.autoscaler.sdk.request_resources`` asks for now (autoscaler v1 keeps it in the GCS's KV
    store until the next call replaces it): Ray Data's AutoscalingCoordinator sends its requesters'
    bundles there, and the autoscaler keeps nodes up for them whether or not anything runs."""
    from ray._private.ray_constants import AUTOSCALER_RESOURCE_REQUEST_CHANNEL
    from ray.experimental.internal_kv import _internal_kv_get

    raw = _internal_kv_get(AUTOSCALER_RESOURCE_REQUEST_CHANNEL)
    bundles = json.loads(raw) if raw else []
    counts: dict[str, int] = {}
    for b in bundles:
        key = json.dumps(b, sort_keys=True)
        counts[key] = counts.get(key, 0) + 1
    return " + ".join(f"{n}x{k}" for k, n in sorted(counts.items())) or "-"


def timeline(samples: list[dict], marks: dict[str, float]) -> list[str]:
    """One line per change of the nodes, the CPUs in use or the standing resource request, with the
    bench's own marks between."""
    lines, last = [], None
    pending = sorted(marks.items(), key=lambda kv: kv[1])
    for s in samples:
        while pending and pending[0][1] <= s["t"]:
            name, t = pending.pop(0)
            lines.append(f"  +{t:6.1f} s  -- {name}")
        if "error" in s:
            lines.append(f"  +{s['t']:6.1f} s  sample failed: {s['error']}")
            continue
        key = (s["nodes"], tuple(s["worker_ids"]), s["cpus_used"], s["requested"])
        if key != last:
            lines.append(f"  +{s['t']:6.1f} s  nodes {s['nodes']} (head + {s['workers']} worker"
                         f"{'' if s['workers'] == 1 else 's'}{' ' if s['workers'] else ''}{' '.join(s['worker_ids'])}), "
                         f"CPUs used {s['cpus_used']:g}/{s['cpus']:g}; request_resources {s['requested']}")
            last = key
    lines += [f"  +{t:6.1f} s  -- {name}" for name, t in pending]
    return lines


def placement(head_id: str) -> dict[str, dict[str, int]]:
    """Where the workload's actors ran (alive or dead): actor class -> {"head": n, "workers": m}."""
    from ray.util.state import list_actors

    where: dict[str, dict[str, int]] = {}
    try:
        actors = list_actors(detail=True, limit=10000, timeout=30, raise_on_missing_output=False)
    except Exception as e:  # noqa: BLE001 - diagnostics only
        return {"(state API)": {"error": repr(e)[:200]}}
    for a in actors:
        side = "head" if a.node_id == head_id else "workers"
        counts = where.setdefault(a.class_name, {"head": 0, "workers": 0})
        counts[side] += 1
    return dict(sorted(where.items()))


def holders() -> list[str]:
    """What is left on the cluster: alive actors, placement groups, per-node resource use (State API)."""
    import ray
    from ray.util.state import list_actors, list_placement_groups

    lines = []
    try:
        for n in ray.nodes():
            if n.get("Alive"):
                lines.append(f"node {n['NodeID'][-6:]} resources {n.get('Resources')}")
        for a in list_actors(filters=[("state", "=", "ALIVE")], detail=True, timeout=20, raise_on_missing_output=False):
            lines.append(f"actor {a.class_name} name={a.name!r} node {str(a.node_id)[-6:]} "
                         f"lifetime={getattr(a, 'is_detached', None) and 'detached'} resources={a.required_resources}")
        for pg in list_placement_groups(detail=True, timeout=20, raise_on_missing_output=False):
            if pg.state != "REMOVED":
                lines.append(f"placement group {pg.placement_group_id[-6:]} {pg.state} bundles={pg.bundles}")
    except Exception as e:  # noqa: BLE001 - diagnostics only
        lines.append(f"(state API: {e!r:.200})")
    return lines


# ---------------------------------------------------------------- inputs

def prepare_inputs(work: Path, seed: int) -> dict:
    """The demo world, ingested on a local Ray, and a tiny BERT (run in a child process: its Ray is gone
    before the cluster starts)."""
    from ingest.pipeline import IngestConfig, run_ingest
    from setformat.io import read_table
    from structcse.demo import ENTITY_LINK_THRESHOLD, generate_demo_world
    from infra.logs import lines_muted
    from infra.ray_local import ensure_ray
    from train.tiny_bert import build_tiny_bert

    world = generate_demo_world(work / "world", seed=seed)
    ensure_ray(num_cpus=2, configure_logging=False)
    with lines_muted("ingest"):
        run_ingest(IngestConfig(wikipedia=[str(world.wikipedia_dump)], wikidata=[str(world.wikidata_dump)],
                                out=str(work / "sets"), seed=seed, shard_bytes=1,
                                entity_link_threshold=ENTITY_LINK_THRESHOLD))
    sentences = read_table(work / "sets" / "sentences", ["sentence"])
    model = build_tiny_bert(sentences["sentence"].to_pylist(), work / "models" / "base", seed=seed)
    inputs = {"data": str(work / "sets"), "model": str(model), "dev_data": str(world.sts_dir)}
    (work / "inputs.json").write_text(json.dumps(inputs, indent=1))
    return inputs


def inputs_for(args) -> dict:
    if args.data or args.model or args.dev_data:
        if not (args.data and args.model and args.dev_data):
            raise SystemExit("--data, --model and --dev-data go together")
        return {"data": args.data, "model": args.model, "dev_data": args.dev_data}
    saved = args.work / "inputs.json"
    if saved.exists():
        inputs = json.loads(saved.read_text())
        if all(Path(p).exists() for p in inputs.values()):
            log(f"inputs from {saved}")
            return inputs
    log(f"building the demo world, its sets and a tiny BERT in {args.work} (a local Ray in a child process)")
    started = time.time()
    with open(args.work / "prepare.log", "w") as out:
        rc = subprocess.run([sys.executable, __file__, "--prepare-only", "--work", str(args.work), "--seed",
                             str(args.seed)], check=False, cwd=REPO, timeout=900, stdout=out, stderr=subprocess.STDOUT,
                            env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}).returncode
    if rc != 0:
        raise SystemExit(f"building the inputs failed (exit {rc}); see {args.work / 'prepare.log'}")
    log(f"inputs ready in {time.time() - started:.0f} s (log: {args.work / 'prepare.log'})")
    return json.loads(saved.read_text())


def dev_flag() -> str:
    """``--dev-data`` (the tune CLI's flag); ``--dev-sts`` on a checkout from before its rename."""
    out = subprocess.run([sys.executable, "-m", "tune", "--help"], cwd=REPO, capture_output=True, text=True,
                         timeout=120, check=False).stdout
    return "--dev-data" if "--dev-data" in out else "--dev-sts"


# ---------------------------------------------------------------- workloads

def run_trivial(n_tasks: int, task_s: float) -> tuple[int, dict]:
    """``n_tasks`` tasks of 1 CPU, ``task_s`` seconds each, all at once."""
    import ray

    @ray.remote(num_cpus=1)
    def busy(i: int) -> str:
        time.sleep(task_s)
        return ray.get_runtime_context().get_node_id()

    nodes = ray.get([busy.remote(i) for i in range(n_tasks)], timeout=600)
    return 0, {"tasks": n_tasks, "task_nodes": len(set(nodes))}


def run_search(args, inputs: dict, address: str, storage: Path) -> tuple[int, dict]:
    flag = dev_flag()
    cmd = [sys.executable, "-m", "tune", "--config", str(REPO / "configs" / "simcse_unsup.yaml"),
           "--data", inputs["data"], "--model", inputs["model"], flag, inputs["dev_data"],
           "--storage", str(storage), "--name", SEARCH_NAME, "--num-samples", str(args.num_samples),
           "--max-concurrent-trials", str(args.num_samples)]
    for item in [*TRIAL_TRAINING, f"max_steps={args.max_steps}", f"seed={args.seed}"]:
        cmd += ["--set", item]
    log("search: RAY_ADDRESS=" + address + " " + " ".join(
        c if not c.startswith(str(REPO)) else c.replace(str(REPO) + "/", "") for c in cmd[1:]))
    search_log = args.work / "search.log"
    env = {**os.environ, "RAY_ADDRESS": address, "PYTHONUNBUFFERED": "1"}
    with open(search_log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=args.search_timeout_s)
        except subprocess.TimeoutExpired:
            log(f"search still running after {args.search_timeout_s} s: stopping it")
            os.killpg(proc.pid, signal.SIGTERM)  # its own process group (start_new_session)
            try:
                rc = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait(timeout=30)
            rc = rc if rc else 124
    lines = search_log.read_text(errors="replace").splitlines()
    log(f"search exit {rc}; the last lines of its output ({len(lines)} lines in {search_log}):")
    for line in lines[-12:]:
        log("  | " + line[:300])
    trials = sorted(p.parent for p in (storage / SEARCH_NAME).glob("*/params.json"))
    done = sum(1 for t in trials if (t / "result.json").exists() and (t / "result.json").stat().st_size)
    best = None  # the search's last line is JSON; Ray's progress bars may share its line
    for line in reversed(lines):
        at = line.find('{"')
        while at >= 0 and best is None:  # the outermost object that decodes
            try:
                best = json.JSONDecoder().raw_decode(line, at)[0]
            except ValueError:
                at = line.find('{"', at + 1)
        if best is not None:
            break
    if isinstance(best, dict):  # its scores, not its paths
        best = {k: v for k, v in best.items() if isinstance(v, (int, float, dict)) and not isinstance(v, bool)}
    return rc, {"trials": len(trials), "trials_reported": done, "best": best, "dev_flag": flag}


# ---------------------------------------------------------------- main

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "structcse-autoscale",
                   help="the demo inputs (kept for reruns), the search's storage and log")
    p.add_argument("--data"), p.add_argument("--model"), p.add_argument("--dev-data")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workload", choices=("search", "trivial"), default="search")
    p.add_argument("--workers-max", type=int, default=2)
    p.add_argument("--worker-cpus", type=float, default=2,
                   help="CPUs of a worker node: a trial's Train worker (1 CPU) and its Ray Data reads (1 CPU)")
    p.add_argument("--idle-timeout-s", type=float, default=20, help="the autoscaler's idle_timeout_minutes x 60")
    p.add_argument("--head-train-driver", type=float, default=1,
                   help="the head's TRAIN_DRIVER resource, as cluster.yaml's head (0: none)")
    p.add_argument("--num-samples", type=int, default=2, help="trials, all at once (max_concurrent_trials)")
    p.add_argument("--max-steps", type=int, default=30)
    p.add_argument("--trivial-tasks", type=int, default=4)
    p.add_argument("--trivial-task-s", type=float, default=15)
    p.add_argument("--sample-s", type=float, default=2)
    p.add_argument("--search-timeout-s", type=float, default=600)
    p.add_argument("--scale-down-timeout-s", type=float, default=300,
                   help="Ray Data's standing resource request expires 180 s after its last renewal "
                   "(RAY_DATA_AUTOSCALING_REQUEST_EXPIRE_TIME_S), then the idle timeout runs")
    p.add_argument("--prepare-only", action="store_true", help=argparse.SUPPRESS)
    return p


def _new_cluster(args):
    """The autoscaling cluster (not started): a 0-CPU head, ``--workers-max`` worker nodes at most."""
    worker_resources = {"CPU": args.worker_cpus, "object_store_memory": 300 * 1024**2}
    cluster = _cluster_class()(
        head_resources={"CPU": 0, "object_store_memory": 400 * 1024**2,
                        **({"TRAIN_DRIVER": args.head_train_driver} if args.head_train_driver else {})},
        worker_node_types={WORKER_TYPE: {"resources": worker_resources, "node_config": {},
                                         "min_workers": 0, "max_workers": args.workers_max}},
        max_workers=args.workers_max,
        idle_timeout_minutes=args.idle_timeout_s / 60,
    )
    log(f"cluster: head (0 CPUs, TRAIN_DRIVER {args.head_train_driver:g}) + {WORKER_TYPE} x 0..{args.workers_max} ({args.worker_cpus:g} CPUs each), "
        f"idle_timeout_minutes {args.idle_timeout_s / 60:.3g}; GCS {cluster.address}, temp dir {cluster.temp_dir}")
    return cluster


def _on_cluster(args, cluster, inputs: dict, storage: Path, result: dict) -> int:
    """Start the cluster, run the workload while the nodes are sampled, wait for the scale-down; the figures
    into ``result``; the workload's exit code."""
    import ray

    started = time.time()
    marks: dict[str, float] = {}
    sampler = None
    try:
        cluster.start()
        marks["cluster up"] = round(time.time() - started, 1)
        ray.init(address=cluster.address, configure_logging=False, log_to_driver=False)
        sampler = NodeSampler(started, args.sample_s)
        sampler.start()
        t0 = time.time()
        marks[f"{args.workload} starts"] = round(t0 - started, 1)
        if args.workload == "trivial":
            rc, extra = run_trivial(args.trivial_tasks, args.trivial_task_s)
        else:
            rc, extra = run_search(args, inputs, cluster.address, storage)
        t1 = time.time()
        marks[f"{args.workload} ends (exit {rc})"] = round(t1 - started, 1)
        result.update({f"{args.workload}_exit": rc, f"{args.workload}_s": round(t1 - t0, 1), **extra})
        _log_placement()
        scaled_down = _scale_down(args, sampler, t1)
        result.update(_figures(args, sampler, t0 - started, t1 - started, scaled_down))
        log(f"timeline (every {args.sample_s:g} s; t from the cluster's start):")
        for line in timeline(sampler.samples, marks):
            log(line)
        return rc
    finally:
        if sampler is not None and sampler.is_alive():
            sampler.stop()


def _log_placement() -> None:
    import ray

    head_id = next(n["NodeID"] for n in ray.nodes() if "node:__internal_head__" in n.get("Resources", {}))
    actors = placement(head_id)
    log("where the actors ran (class: on the head / on launched workers):")
    for name, counts in actors.items():
        log(f"  {name}: {counts.get('head', 0)} / {counts.get('workers', 0)}")


def _scale_down(args, sampler, t1: float) -> float | None:
    """Seconds after the workload (ended at ``t1``) until no worker was up (the autoscaler removes one once it
    has been idle for idle_timeout_minutes), or None; the sampler stopped."""
    deadline, ended = t1 + args.scale_down_timeout_s, t1 - sampler.started
    scaled_down = None
    while time.time() < deadline:
        s = sampler.samples[-1] if sampler.samples else {}
        if s.get("workers") == 0 and s.get("t", 0) > ended:
            scaled_down = s["t"] - ended
            break
        time.sleep(args.sample_s / 2)
    sampler.stop()
    if scaled_down is None:
        log(f"workers still up {args.scale_down_timeout_s:g} s after the {args.workload}: what holds them")
        for line in holders():
            log("  " + line)
    return scaled_down


def _figures(args, sampler, began: float, ended: float, scaled_down: float | None) -> dict:
    """The samples summed up (``began``/``ended``: the workload's seconds after the cluster's start)."""
    samples = [s for s in sampler.samples if "error" not in s]
    ups = [s["t"] for s in samples if s["workers"] > 0]
    cleared = [s["t"] for s in samples if s["t"] > ended and s["requested"] == "-"]
    return {
        "nodes_max": max((s["nodes"] for s in samples), default=0),
        "workers_max": max((s["workers"] for s in samples), default=0),
        "workers_launched": len(sampler.worker_ids),
        "workers_after_idle": samples[-1]["workers"] if samples else None,
        "cpus_used_max": max((s["cpus_used"] for s in samples), default=0),
        "scale_up_s": round(ups[0] - began, 1) if ups else None,
        "scale_down_s": round(scaled_down, 1) if scaled_down is not None else None,
        # of which: until the standing request_resources (Ray Data's) was gone; the idle timeout runs after
        "request_cleared_s": round(cleared[0] - ended, 1) if cleared else None,
        "idle_timeout_s": args.idle_timeout_s,
        "samples": len(samples),
    }


def _shutdown(cluster, work: Path) -> None:
    import ray

    try:
        ray.shutdown()
    finally:
        killed = cluster.shutdown(keep_logs=work / "cluster-logs")
        log(f"cluster stopped ({killed} processes of its own ended by pid; its monitor and raylet logs: "
            f"{work / 'cluster-logs'})")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")  # the rest: bench.harness
    if args.prepare_only:
        prepare_inputs(args.work, args.seed)
        return 0

    wall = time.time()
    inputs = inputs_for(args) if args.workload == "search" else {}
    storage = args.work / "runs"
    if args.workload == "search":
        shutil.rmtree(storage / SEARCH_NAME, ignore_errors=True)
    cluster = _new_cluster(args)
    result: dict = {"workload": args.workload}
    try:
        rc = _on_cluster(args, cluster, inputs, storage, result)
    finally:
        _shutdown(cluster, args.work)
    result["wall_s"] = round(time.time() - wall, 1)
    ok = (rc == 0 and result.get("workers_launched", 0) > 0 and result.get("workers_after_idle") == 0)
    result["ok"] = ok
    log(json.dumps(result, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
