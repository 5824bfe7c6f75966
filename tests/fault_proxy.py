"""An object store as it behaves: an HTTP proxy on 127.0.0.1 in front of a real S3 API (moto's server) that
answers a seeded share of requests with a fault, for the tests and ``bench/integrity.py``. Of the faults:

* ``reset_share``: the connection reset before the store saw the request (the request read, no answer);
* ``reset_after_share``: the connection reset after the store applied it (forwarded upstream, its answer
  dropped: the client must retry a request that already took effect, a PUT that is there already);
* ``truncate_share``: a ``GET``'s body cut in half (the status and the full ``Content-Length`` sent, half
  the body, then the connection closed; another method's draw, or a body under 2 bytes, is answered whole);
* the rest: ``503 SlowDown``.

    proxy = FaultProxy(upstream="http://127.0.0.1:5000", rate=0.1, reset_share=0.2, seed=0)
    os.environ["AWS_ENDPOINT_URL_S3"] = proxy.endpoint
    ... ; proxy.counts -> {"requests", "slowdown", "reset", "reset_after_apply", "truncated", "forwarded",
                           "faults_by_method": {...}}; proxy.stop()

``rate`` may be changed while it runs (``proxy.rate = 0``); ``put_delay_s`` slows every PUT (a slow store,
to land a kill inside an upload). Requests are forwarded byte for byte (bodies re-framed with a
Content-Length), one upstream connection per proxy thread.
"""

from __future__ import annotations

import http.client
import random
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your '
            b'request rate.</Message><RequestId>fault-proxy</RequestId></Error>')
_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
        "transfer-encoding", "upgrade", "content-length"}


class FaultProxy:
    def __init__(self, upstream: str, rate: float = 0.0, reset_share: float = 0.2, seed: int = 0,
                 put_delay_s: float = 0.0, reset_after_share: float = 0.0, truncate_share: float = 0.0):
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.rate, self.reset_share, self.put_delay_s = rate, reset_share, put_delay_s
        self.reset_after_share, self.truncate_share = reset_after_share, truncate_share
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._counts: Counter = Counter()
        self._faults_by_method: Counter = Counter()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # no line per request
                pass

            def _body(self) -> bytes:
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    out = bytearray()
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return bytes(out)
                        out += self.rfile.read(size)
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _handle(self):
                body = self._body()
                fault = proxy._draw(self.command)
                if fault == "reset":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if fault == "slowdown":
                    self.send_response(503, "Slow Down")
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(SLOWDOWN)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(SLOWDOWN)
                    return
                if self.command == "PUT" and proxy.put_delay_s:
                    time.sleep(proxy.put_delay_s)
                status, reason, headers, data = proxy._forward(self.command, self.path, self.headers, body)
                if fault == "reset_after_apply":  # the store applied it; the answer is lost
                    proxy._record(fault, self.command)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                truncate = fault == "truncate" and len(data) >= 2
                proxy._record("truncated" if truncate else "forwarded", self.command)
                self.send_response(status, reason)
                for key, value in headers:
                    if key.lower() not in _HOP:
                        self.send_header(key, value)
                length = dict((k.lower(), v) for k, v in headers).get("content-length") \
                    if self.command == "HEAD" else str(len(data))
                self.send_header("Content-Length", length or "0")
                self.end_headers()
                if truncate:  # the full length announced, half of it sent, the connection closed
                    self.wfile.write(data[:len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                elif self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._local = threading.local()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="fault-proxy")
        self._thread.start()

    def _draw(self, method: str) -> str | None:
        """The fault for this request: ``reset`` and ``slowdown`` are counted here, ``reset_after_apply`` and
        ``truncate`` (and a request answered whole) by :meth:`_record` once the store answered."""
        with self._lock:
            self._counts["requests"] += 1
            if self.rate > 0 and self._rng.random() < self.rate:
                share = self._rng.random()
                if share < self.reset_share:
                    kind = "reset"
                elif share < self.reset_share + self.reset_after_share:
                    return "reset_after_apply"
                elif share < self.reset_share + self.reset_after_share + self.truncate_share and method == "GET":
                    return "truncate"
                else:
                    kind = "slowdown"
                self._counts[kind] += 1
                self._faults_by_method[method] += 1
                return kind
            return None

    def _record(self, kind: str, method: str) -> None:
        with self._lock:
            self._counts[kind] += 1
            if kind != "forwarded":
                self._faults_by_method[method] += 1

    def _forward(self, method, path, headers, body):
        for attempt in (0, 1):  # a kept-alive upstream connection the server closed: reconnect once
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = http.client.HTTPConnection(*self.upstream, timeout=120)
            try:
                conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
                for key, value in headers.items():
                    if key.lower() not in _HOP:
                        conn.putheader(key, value)
                conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body)
                response = conn.getresponse()
                data = response.read()
                return response.status, response.reason, response.getheaders(), data
            except (http.client.HTTPException, ConnectionError, OSError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    @property
    def counts(self) -> dict:
        with self._lock:
            return {**{k: self._counts.get(k, 0) for k in ("requests", "slowdown", "reset", "reset_after_apply",
                                                           "truncated", "forwarded")},
                    "faults_by_method": dict(self._faults_by_method)}

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
