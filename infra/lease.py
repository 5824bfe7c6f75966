"""One writer per target: a lease object taken with the store's conditional writes (``infra.conditional``).

A writer of a publication, a job's output folder or a run folder first creates the lease object (an exclusive
create: S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``, a local hard link), which names its owner
(host, process, command, when), and renews it every ``ttl/4`` seconds with a write conditioned on the
version it wrote last. A second writer finds the lease held and refuses in one line naming the first —
or, with ``STRUCTCSE_LEASE_WAIT_S``, waits that long for it. A lease not renewed for ``ttl`` seconds
(``STRUCTCSE_LEASE_TTL_S``, default 60) has expired: its writer died. A lease whose owner ran on this host, in
this boot and pid namespace, and whose process is gone has expired at once (a rerun after a kill need not
wait). An expired lease is taken over with a write conditioned on the version found, so of two writers
taking it over one wins and the other refuses. A writer that finds its lease taken (it was paused past the
ttl) stops before it publishes: :meth:`Lease.check`.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid

from infra import conditional
from infra.storage import StorageError

TTL_ENV = "STRUCTCSE_LEASE_TTL_S"
WAIT_ENV = "STRUCTCSE_LEASE_WAIT_S"


class LeaseHeld(StorageError):
    """Another writer holds the target."""


class LeaseLost(StorageError):
    """This writer's lease was taken over (it was not renewed in time): it must not publish."""


def _ttl() -> float:
    return float(os.environ.get(TTL_ENV) or 60)


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def this_process() -> dict:
    """Who writes: enough to tell whether that process is still alive, from this host."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "boot_id": _boot_id(), "pid_ns": _pid_namespace()}


def process_gone(owner: dict) -> bool:
    """True only when ``owner`` ran on this host, boot and pid namespace and its process has ended."""
    me = this_process()
    if any(owner.get(k) != me[k] for k in ("host", "boot_id", "pid_ns")) or not me["boot_id"]:
        return False
    try:
        os.kill(int(owner.get("pid", 0)), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, ValueError, OverflowError):
        return False
    return False


def describe(record: dict) -> str:
    owner = record.get("owner", {})
    age = time.time() - float(record.get("renewed", 0) or 0)
    return (f"{record.get('command') or 'another writer'} (host {owner.get('host', '?')}, pid {owner.get('pid', '?')}, "
            f"since {record.get('acquired', '?')}, renewed {max(0, age):.0f} s ago; its lease expires "
            f"{float(record.get('ttl_s', 0) or 0):.0f} s after its last renewal)")


class Lease:
    """``with Lease(uri, what, command):`` — hold the lease object ``uri`` for the block."""

    def __init__(self, uri: str, what: str, command: str | None = None, ttl_s: float | None = None,
                 target: str | None = None):
        self.uri, self.what, self.command = uri, what, command
        self.target = target or uri.rsplit("/", 1)[0]  # what the lease guards, as messages name it
        self.ttl = float(ttl_s if ttl_s is not None else _ttl())
        self.id = uuid.uuid4().hex
        self.token: str | None = None
        self.lost: str | None = None
        self._acquired = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _record(self) -> bytes:
        return json.dumps({"lease": self.id, "what": self.what, "command": self.command, "owner": this_process(),
                           "acquired": self._acquired, "renewed": time.time(), "ttl_s": self.ttl},
                          indent=1, sort_keys=True).encode()

    def acquire(self) -> "Lease":
        from infra.secrets import redact_text

        deadline = time.monotonic() + float(os.environ.get(WAIT_ENV) or 0)
        while True:
            try:
                self._take()
                break
            except LeaseHeld as held:
                if time.monotonic() >= deadline:
                    raise LeaseHeld(f"{self.what} {redact_text(self.target)} is being written by "
                                    f"{held}; wait for it to end (or set {WAIT_ENV}), or stop it") from None
                time.sleep(min(2.0, max(0.1, deadline - time.monotonic())))
        self._thread = threading.Thread(target=self._renew, name=f"lease:{self.what}", daemon=True)
        self._thread.start()
        return self

    def _take(self) -> None:
        for _ in range(5):
            try:
                self.token = conditional.create(self.uri, self._record())
                return
            except conditional.ConditionFailed:
                pass
            try:
                data, token = conditional.read(self.uri)
            except FileNotFoundError:
                continue  # released between the two calls: try the create again
            try:
                record = json.loads(data)
            except ValueError:
                record = {}
            expired = time.time() - float(record.get("renewed", 0) or 0) > float(record.get("ttl_s", self.ttl)) \
                or process_gone(record.get("owner", {}))
            if not expired:
                raise LeaseHeld(describe(record))
            try:
                self.token = conditional.replace(self.uri, self._record(), token)
                return
            except conditional.ConditionFailed:
                continue  # another writer took it over first: look again
        raise LeaseHeld("writers that keep taking it over")

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 4):
            with self._lock:
                if self._stop.is_set() or self.lost:
                    return
                try:
                    self.token = conditional.replace(self.uri, self._record(), self.token)
                except conditional.ConditionFailed:
                    self.lost = "another writer took the lease over"
                    return
                except Exception:  # noqa: BLE001 - a store that failed this once: the next renewal tries again
                    continue

    def check(self) -> None:
        """Raise :class:`LeaseLost` when the lease is no longer this writer's (before a publishing step)."""
        if self.lost:
            raise LeaseLost(f"{self.what} {self.target}: {self.lost} (this writer was not heard "
                            f"from for {self.ttl:.0f} s); nothing was published")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        with self._lock:
            if self.token is not None and not self.lost:
                try:
                    conditional.delete(self.uri, self.token)
                except (conditional.ConditionFailed, OSError):
                    pass
            self.token = None

    def __enter__(self) -> "Lease":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
