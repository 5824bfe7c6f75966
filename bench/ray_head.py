"""A Ray head of the bench's own on this machine, as ``ray start --head`` makes one, that never meets
another Ray running here: its own GCS and dashboard ports, its own temp dir, its own auth token (0600, in
the temp dir; every process that talks to it reads ``RAY_AUTH_TOKEN_PATH``), stopped by its processes
(those whose command line names its temp dir or its GCS address), never by ``ray stop``.

``LocalHead(..., worker_nodes=[1, 1])`` makes it a multi-node cluster on this machine: each further node
is ``ray start --address=HEAD`` with its own ports (node manager, object manager, agents, metrics), as
``ray start`` on another machine would join, so tasks, actors and placement groups spread over separate
raylets (each with its own object store and its own copy of a job's working_dir).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def recorded_checkpoints(run_folder: str) -> list[int]:
    """The steps of the checkpoints Ray Train has recorded for a run (its ``checkpoint_manager_snapshot.json``;
    a restart resumes from the latest of these); ``run_folder``: a local path or an fsspec URI."""
    import re

    import fsspec

    try:
        with fsspec.open(f"{run_folder}/checkpoint_manager_snapshot.json", "rt") as f:
            return [int(s) for s in re.findall(r"step-(\d{7})", f.read())]
    except (OSError, FileNotFoundError):
        return []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_cli() -> str:
    beside = Path(sys.executable).with_name("ray")
    return str(beside) if beside.exists() else (shutil.which("ray") or "ray")


def _psutil():
    """psutil: installed, or the copy Ray ships (``import ray`` puts ray/thirdparty_files on sys.path)."""
    import importlib

    try:
        return importlib.import_module("psutil")
    except ImportError:
        importlib.import_module("ray")
        return importlib.import_module("psutil")


def processes_naming(*marks: str) -> list:
    """This machine's processes (not this one) whose command line holds one of ``marks``."""
    psutil = _psutil()

    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmdline = " ".join(p.info["cmdline"] or ())
        except (psutil.Error, TypeError):
            continue
        if p.pid != os.getpid() and any(m in cmdline for m in marks):
            found.append(p)
    return found


def stop_processes(*marks: str, grace_s: float = 10.0) -> int:
    """SIGTERM the processes naming ``marks`` (and their children), SIGKILL what is left after ``grace_s``;
    how many there were."""
    psutil = _psutil()

    found = {}
    for _ in range(3):  # raylets start workers while dying: look again
        for p in processes_naming(*marks):
            found[p.pid] = p
            try:
                for c in p.children(recursive=True):
                    found[c.pid] = c
            except psutil.Error:
                pass
        for p in list(found.values()):
            try:
                p.terminate()
            except psutil.Error:
                pass
        time.sleep(1)
    _, alive = psutil.wait_procs(list(found.values()), timeout=grace_s)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=5)
    return len(found)


class LocalHead:
    """``ray start --head`` with ``num_cpus`` and the extra environment ``env`` (what its processes, and so
    every job's driver and workers, inherit: a bucket's endpoint and keys, as an instance profile gives them).
    ``env_for_clients`` is what ``ray job submit`` and a driver need to reach it.

    ``own_token=False``: no token of its own; the head authenticates as ``ray start --head`` does in ``env``
    (Ray 2.60: with token auth when ``RAY_AUTH_MODE=token`` or a token file such as ``$HOME/.ray/auth_token``
    exists, without it otherwise), so a docs block's own token step is what is checked.
    ``worker_nodes``: the CPUs of each further node on this machine (a multi-node cluster);
    ``resources``: the head's custom resources (``{"TRAIN_DRIVER": 1}``, as cluster.yaml's head)."""

    def __init__(self, num_cpus: int, env: dict | None = None, worker_nodes: list[int] | tuple = (),
                 resources: dict | None = None, own_token: bool = True, temp_dir: str | None = None,
                 port: int | None = None, dashboard_port: int | None = None):
        if temp_dir:
            Path(temp_dir).mkdir(parents=True, exist_ok=True)
        self.temp_dir = temp_dir or tempfile.mkdtemp(prefix="rayh-", dir="/tmp")  # short: Ray's socket paths live under it
        self.port, self.dashboard_port = port or free_port(), dashboard_port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.dashboard_url = f"http://127.0.0.1:{self.dashboard_port}"
        self.env_for_clients = {}
        if own_token:
            token_path = Path(self.temp_dir) / "auth_token"
            token_path.touch(mode=0o600)
            token_path.write_text(secrets.token_hex(32))
            self.env_for_clients = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path)}
        env = {**os.environ, **(env or {}), **self.env_for_clients}
        env.pop("RAY_ADDRESS", None)
        self.nodes, self.cpus = 1, [num_cpus]
        extra = [f"--resources={json.dumps(resources)}"] if resources else []
        cmd = [ray_cli(), "start", "--head", f"--num-cpus={num_cpus}", "--num-gpus=0", f"--port={self.port}", *extra,
               "--node-ip-address=127.0.0.1", f"--temp-dir={self.temp_dir}", "--include-dashboard=true",
               "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}",
               f"--dashboard-agent-listen-port={free_port()}", f"--ray-client-server-port={free_port()}",
               f"--runtime-env-agent-port={free_port()}", "--disable-usage-stats"]
        started = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 timeout=180, check=False)
        self.auth = "token" if "Token authentication is enabled" in started.stdout or env.get("RAY_AUTH_MODE") == "token" \
            else "none"
        if started.returncode != 0:
            self.stop()
            raise RuntimeError(f"ray start --head exited {started.returncode}: {started.stdout[-1500:]}")
        for cpus in worker_nodes:
            self.add_node(cpus, env)

    def add_node(self, num_cpus: int, env: dict) -> None:
        """One more node: ``ray start --address=HEAD`` on this machine, with ports of its own."""
        cmd = [ray_cli(), "start", f"--address={self.address}", f"--num-cpus={num_cpus}", "--num-gpus=0",
               "--node-ip-address=127.0.0.1", f"--temp-dir={self.temp_dir}", f"--node-manager-port={free_port()}",
               f"--object-manager-port={free_port()}", f"--metrics-export-port={free_port()}",
               f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
               f"--runtime-env-agent-port={free_port()}", "--disable-usage-stats"]
        started = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 timeout=180, check=False)
        if started.returncode != 0:
            self.stop()
            raise RuntimeError(f"ray start --address (node {self.nodes + 1}) exited {started.returncode}: "
                               f"{started.stdout[-1500:]}")
        self.nodes += 1
        self.cpus.append(num_cpus)

    def stop(self) -> int:
        stopped = stop_processes(self.temp_dir, f"--gcs-address={self.address}", f"--gcs-address {self.address}")
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return stopped


def cluster_usage(dashboard_url: str, temp_dir: str) -> dict:
    """What ran where on a running cluster (Ray's state API, through its dashboard, with the caller's token
    settings): its nodes, the nodes its tasks and actors ran on, its jobs and their status; and what each
    job's working_dir upload held (the unpacked packages under ``temp_dir``): files, bytes, and which of the
    folders a job must never receive (dumps/, data/, hub/, sets/, runs/, demo_out/) it held."""
    from ray.util.state import list_actors, list_jobs, list_nodes, list_tasks

    kw = {"address": dashboard_url, "limit": 10000, "raise_on_missing_output": False}
    nodes = list_nodes(**kw)
    ran: dict[str, int] = {}
    for item in [*list_tasks(**kw), *list_actors(**kw)]:
        node = getattr(item, "node_id", None)
        if node:
            ran[node] = ran.get(node, 0) + 1
    head = next((n.node_id for n in nodes if n.is_head_node), None)
    uploads = []
    for unpacked in sorted(Path(temp_dir).glob("session_*/runtime_resources/working_dir_files/*")):
        if unpacked.is_dir():
            files = [f for f in unpacked.rglob("*") if f.is_file()]
            uploads.append({"files": len(files), "bytes": sum(f.stat().st_size for f in files),
                            "kept_out_present": sorted(d for d in KEPT_OUT if (unpacked / d).exists())})
    return {"nodes": len(nodes), "nodes_used": len(ran), "head_used": bool(head and head in ran),
            "tasks_and_actors_per_node": sorted(ran.values(), reverse=True),
            "jobs": [f"{j.submission_id or j.job_id}: {j.status}" for j in list_jobs(address=dashboard_url)
                     if j.submission_id],
            "uploads": uploads}


# the process titles of a worker running a pass-1 unit: a plain task, or Ray Data's read operator
DATA_WORKER_TITLES = ("process_unit", "ReadPass1Units")


class RayWorkerMemory:
    """Polls the RSS of the `ray::` processes under one process tree every `interval`
    seconds. The tree is re-listed every `relist` seconds only: listing children
    walks all of /proc, too costly to do five times a second on a busy 2-core machine."""

    def __init__(self, root_pid: int, interval: float = 0.2, relist: float = 1.0):
        self.root_pid = root_pid
        self.interval = interval
        self.relist = relist
        self.peaks: dict[int, int] = {}
        self.titles: dict[int, set[str]] = {}
        self.cpu_seconds = 0.0  # this poller's own CPU time
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            self._poll()
        finally:
            self.cpu_seconds = time.thread_time()

    def _poll(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.root_pid)
        except psutil.NoSuchProcess:
            return
        processes: list = []
        listed_at = float("-inf")
        known_workers: set[int] = set()  # seen running a unit: only their RSS is read now
        while not self._stop.is_set():
            if time.monotonic() - listed_at >= self.relist:
                try:
                    processes = root.children(recursive=True)
                except psutil.NoSuchProcess:
                    return
                listed_at = time.monotonic()
            for process in processes:
                try:
                    if process.pid not in known_workers:
                        title = " ".join(process.cmdline()).strip() or process.name()
                        if not title.startswith("ray::"):
                            continue
                        self.titles.setdefault(process.pid, set()).add(title.split()[0])
                        if any(name in title for name in DATA_WORKER_TITLES):
                            known_workers.add(process.pid)
                    rss = process.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue
                self.peaks[process.pid] = max(self.peaks.get(process.pid, 0), rss)
            self._stop.wait(self.interval)

    def data_worker_peaks_mb(self) -> list[float]:
        """Peak RSS of each worker that ran `process_unit` (any ray:: worker but
        Ray's own agents when no title was caught mid-task)."""
        workers = [pid for pid, titles in self.titles.items()
                   if any(name in t for t in titles for name in DATA_WORKER_TITLES)]
        if not workers:
            workers = [pid for pid, titles in self.titles.items()
                       if not any(word in t for t in titles for word in ("Agent", "_StatsActor", "Coordinator"))]
        return sorted((round(self.peaks[pid] / 2**20, 1) for pid in workers), reverse=True)


KEPT_OUT = ("dumps", "data", "hub", "sets", "runs", "demo_out")


def main(argv=None) -> int:
    """``start``: a head (and ``--worker-nodes``) on this machine, as ``ray start --head`` would in this
    environment, with no token of its own (the caller's ``RAY_AUTH_MODE`` / ``~/.ray/auth_token`` decide);
    ``stop``: one line ``[cluster] {...}`` (``cluster_usage``), then its processes stopped by pid."""
    import argparse

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("action", choices=["start", "stop"])
    p.add_argument("--temp-dir", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--dashboard-port", type=int, required=True)
    p.add_argument("--num-cpus", type=int, default=2)
    p.add_argument("--worker-nodes", type=int, nargs="*", default=[])
    p.add_argument("--resources", default=None, help="the head's custom resources, JSON")
    a = p.parse_args(argv)
    if a.action == "start":
        for attempt in (1, 2):  # a loaded machine: Ray's GCS may time out once
            try:
                head = LocalHead(a.num_cpus, worker_nodes=a.worker_nodes, own_token=False, temp_dir=a.temp_dir,
                                 resources=json.loads(a.resources) if a.resources else None, port=a.port,
                                 dashboard_port=a.dashboard_port)
                break
            except RuntimeError as e:
                if attempt == 2:
                    print(f"[cluster] did not start: {e}", file=sys.stderr)
                    return 1
                time.sleep(10)
        print(f"[cluster] started: a head ({a.num_cpus} CPUs) and {len(a.worker_nodes)} more node(s) "
              f"({', '.join(f'{c} CPU' for c in a.worker_nodes) or 'none'}) on this machine, "
              f"GCS {head.address}, dashboard {head.dashboard_url}, token auth: {head.auth}", flush=True)
        return 0
    address = f"127.0.0.1:{a.port}"
    try:
        usage = cluster_usage(f"http://127.0.0.1:{a.dashboard_port}", a.temp_dir)
    except Exception as e:  # noqa: BLE001 - a cluster that is gone already: nothing to count, still stopped
        usage = {"error": repr(e)[:300]}
    print(f"[cluster] {json.dumps(usage)}", flush=True)
    stopped = stop_processes(a.temp_dir, f"--gcs-address={address}", f"--gcs-address {address}")
    shutil.rmtree(a.temp_dir, ignore_errors=True)
    print(f"[cluster] stopped: {stopped} processes", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
