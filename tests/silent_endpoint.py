"""An endpoint that accepts every connection, reads each request and never answers, on 127.0.0.1: what a
store behind a stalled load balancer looks like, for the retry bound's tests and ``bench/integrity_retries.py``.

    silent = SilentEndpoint(); os.environ["AWS_ENDPOINT_URL_S3"] = silent.endpoint
    ...; silent.requests (all of them), silent.seen ({"GET /bucket/key": n}); silent.stop()
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter


class SilentEndpoint:
    """On 127.0.0.1: accepts every connection, reads each request, never answers. ``seen`` counts the requests
    by their request line's method and path (the query left out)."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.seen: Counter = Counter()
        self.first: float | None = None  # time.monotonic() of the first request
        self._lock, self._connections = threading.Lock(), []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self._connections.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn):
        pending = b""
        while True:
            try:
                data = conn.recv(1 << 16)
            except OSError:
                return
            if not data:
                return
            pending += data
            if b"\r\n\r\n" in pending:  # a request head; what follows (a body) is not read as one
                method, target = (pending.split(b"\r\n", 1)[0].decode("latin-1").split(" ") + ["", ""])[:2]
                with self._lock:
                    self.first = self.first or time.monotonic()
                    self.seen[f"{method} {target.split('?', 1)[0]}"] += 1
                pending = b""

    def stop(self):
        self.listener.close()
        for conn in self._connections:
            try:
                conn.close()
            except OSError:
                pass

    @property
    def requests(self) -> int:
        with self._lock:
            return sum(self.seen.values())
