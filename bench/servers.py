"""The stand-in servers the benches run against, started and stopped in one place: moto's S3 server
(``tests/s3_server.py``), fake-gcs-server (``tests/gcs_server.py``), the fault proxy in front of S3
(``tests/fault_proxy.py``) with a proxy counting the bytes on the wire, and an endpoint that never answers
(``tests/silent_endpoint.py``). Each ``start_*`` points this process's environment at its server, as the
tests' helpers do; the context managers stop it on the way out."""

from __future__ import annotations

import contextlib
import os
import socket
import threading

from bench.harness import BUCKET

INTEGRITY_KEYS = ("structcse-integrity-key", "structcse-integrity-secret")


@contextlib.contextmanager
def s3_bucket(bucket: str = BUCKET, key_id: str = INTEGRITY_KEYS[0], secret: str = INTEGRITY_KEYS[1]):
    """moto's S3 server on 127.0.0.1 with ``bucket`` in it, the environment pointed at it; yields the endpoint."""
    from tests.s3_server import start_s3_server

    server, endpoint = start_s3_server(bucket, key_id, secret)
    try:
        yield endpoint
    finally:
        server.stop()


GCS_EMULATOR_VARS = ("STORAGE_EMULATOR_HOST", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT")


@contextlib.contextmanager
def gcs_bucket(bucket: str):
    """fake-gcs-server on 127.0.0.1 with ``bucket`` in it; on the way out it is stopped and this process's
    environment put back."""
    from tests.gcs_server import start_gcs_server

    saved = {name: os.environ.get(name) for name in GCS_EMULATOR_VARS}
    server = start_gcs_server(bucket)
    try:
        yield server
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class CountingProxy(threading.Thread):
    """A TCP proxy on 127.0.0.1 in front of the S3 server that counts the bytes each way (``sent``: to the
    server, ``received``: from it), so a stage's traffic is measured on the wire, not estimated."""

    def __init__(self, upstream_port: int):
        super().__init__(daemon=True)
        self.upstream_port, self.sent, self.received, self.lock = upstream_port, 0, 0, threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def run(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            threading.Thread(target=self._pump, args=(client, upstream, "sent"), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, "received"), daemon=True).start()

    def _pump(self, src, dst, counter):
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
                with self.lock:
                    setattr(self, counter, getattr(self, counter) + len(data))
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def counts(self) -> dict:
        with self.lock:
            return {"sent": self.sent, "received": self.received}


def start_counted_faulty_s3(bucket: str, key_id: str, secret: str, seed: int = 0):
    """moto's server behind the fault proxy (rate 0 until set; of the faults, a fifth each: reset before the
    store saw it, reset after it applied it, a GET's body cut in half; the rest 503 SlowDown) behind a byte
    counter, every client (and Ray's workers, started after this) pointed at the counter.
    Returns ``(server, server_endpoint, faults, counter)``."""
    from tests.fault_proxy import FaultProxy
    from tests.s3_server import start_s3_server

    server, server_endpoint = start_s3_server(bucket, key_id, secret)
    faults = FaultProxy(server_endpoint, rate=0.0, seed=seed, reset_share=0.2, reset_after_share=0.2,
                        truncate_share=0.2)
    counter = CountingProxy(int(faults.endpoint.rsplit(":", 1)[1]))
    counter.start()
    os.environ["AWS_ENDPOINT_URL_S3"] = counter.endpoint
    return server, server_endpoint, faults, counter


def silent_env(endpoint: str, attempts: int, cache: str, read_timeout_s: float) -> dict:
    """The environment of a command pointed, for ``s3://`` and ``gs://`` alike, at an endpoint that never answers
    (``tests.silent_endpoint.SilentEndpoint``)."""
    return {"STRUCTCSE_STORAGE_ATTEMPTS": str(attempts), "AWS_ENDPOINT_URL_S3": endpoint,
            "AWS_ACCESS_KEY_ID": "structcse-silent-key", "AWS_SECRET_ACCESS_KEY": "structcse-silent-secret",
            "AWS_DEFAULT_REGION": "us-east-1", "STORAGE_EMULATOR_HOST": endpoint,
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false", "STRUCTCSE_CACHE": cache,
            "STRUCTCSE_STORAGE_READ_TIMEOUT": str(read_timeout_s)}
