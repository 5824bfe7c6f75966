"""A Ray head of the bench's own on this machine, as ``ray start --head`` makes one, that never meets
another Ray running here: its own GCS and dashboard ports, its own temp dir, its own auth token (0600, in
the temp dir; every process that talks to it reads ``RAY_AUTH_TOKEN_PATH``), stopped by its processes
(those whose command line names its temp dir), never by ``ray stop``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
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


def processes_naming(*marks: str) -> list:
    """This machine's processes (not this one) whose command line holds one of ``marks``."""
    import psutil

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
    import psutil

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
    ``env_for_clients`` is what ``ray job submit`` and a driver need to reach it."""

    def __init__(self, num_cpus: int, env: dict | None = None):
        self.temp_dir = tempfile.mkdtemp(prefix="rayh-", dir="/tmp")  # short: Ray's socket paths live under it
        self.port, self.dashboard_port = free_port(), free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.dashboard_url = f"http://127.0.0.1:{self.dashboard_port}"
        token_path = Path(self.temp_dir) / "auth_token"
        token_path.touch(mode=0o600)
        token_path.write_text(secrets.token_hex(32))
        self.env_for_clients = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path)}
        env = {**os.environ, **(env or {}), **self.env_for_clients}
        env.pop("RAY_ADDRESS", None)
        cmd = [ray_cli(), "start", "--head", f"--num-cpus={num_cpus}", "--num-gpus=0", f"--port={self.port}",
               "--node-ip-address=127.0.0.1", f"--temp-dir={self.temp_dir}", "--include-dashboard=true",
               "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}",
               f"--dashboard-agent-listen-port={free_port()}", f"--ray-client-server-port={free_port()}",
               f"--runtime-env-agent-port={free_port()}", "--disable-usage-stats"]
        started = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 timeout=180, check=False)
        if started.returncode != 0:
            self.stop()
            raise RuntimeError(f"ray start --head exited {started.returncode}: {started.stdout[-1500:]}")

    def stop(self) -> int:
        stopped = stop_processes(self.temp_dir, f"--gcs-address={self.address}", f"--gcs-address {self.address}")
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return stopped
