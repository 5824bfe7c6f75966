"""The node's cache of remote folders and files (a model in a bucket, a dev set): every Ray Train worker of a
node calls :func:`local_copy` for the same ``--model s3://...`` at the same moment, so the cache is built for
many processes at once.

* **One download per node per content.** A copy is keyed by the URI and what it holds (relative names, sizes,
  ETags or modification times), so a model rewritten at the same URI is fetched again and an unchanged one
  never is. A lock per key (``filelock``: ``flock``, released by the kernel when its holder dies) is taken
  before copying, and the check for a finished copy is made again under it: the first process downloads,
  the others wait and use its copy.
* **A complete copy is never deleted or replaced**: another process may be loading from it. A copy is made
  in ``<key>.partial.<pid>.<host>``, its files fsynced, the completion marker written last, and the folder
  renamed to ``<key>``: a ``<key>`` folder is whole by construction.
* **Stale partials are swept**: under the key's lock, a partial whose owner pid is dead on this host, or
  that has not changed for :data:`STALE_S` seconds, is removed (a SIGKILLed copy leaves one behind).
* **A single file** (``--dev-data s3://b/data/sts-dev.csv``) is copied alone, keyed by its URI, size and
  ETag: ``<key>/<file name>``.
* **Published folders** (``infra.publish``): a folder whose content was replaced is read where its
  ``_current.json`` points (that version only), and a folder being written, or left half-written by a killed
  writer, is refused in one line before anything is downloaded.

Storage goes through ``infra.storage.filesystem`` (the project's one client, with its retries). Nothing here
writes a credential: the key is a hash and the copy's ``source.json`` holds the URI redacted.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from infra.publish import pid_alive


CACHE_ENV = "STRUCTCSE_CACHE"  # where remote models are cached (default ~/.cache/structcse)
LOCK_TIMEOUT_ENV = "STRUCTCSE_CACHE_LOCK_TIMEOUT_S"  # how long to wait for another process's copy (default: no limit)
COMPLETE = ".structcse_complete"  # written last in a partial; a cache folder is renamed into place with it
SOURCE = "source.json"  # the copy's origin, redacted
OWNER_FILE = ".structcse_owner.json"  # in a partial: the process writing it (infra.lease.this_process)
STALE_S = 3600.0  # a partial unchanged this long is abandoned, whichever host wrote it
ATTEMPTS = 3  # copies tried when the content changes while it is being copied

_counter_lock = threading.Lock()
_downloads = 0
_bytes = 0


class ContentChanged(RuntimeError):
    """The folder at a URI changed while it was being copied (a file listed is gone or has another size)."""


@dataclass(frozen=True)
class Source:
    """What a URI holds: ``folder`` (inside the filesystem) with ``files`` (relative name, size, ETag or
    mtime); ``single`` names the file when the URI is a file (then ``folder`` is its parent)."""

    uri: str
    folder: str
    files: tuple[tuple[str, int, str], ...]
    single: str | None = None


def cache_root() -> Path:
    """The cache folder: ``$STRUCTCSE_CACHE`` or ``~/.cache/structcse``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "structcse").expanduser()


def downloads() -> tuple[int, int]:
    """(copies, bytes) this process downloaded into the cache: what a copy found there did not cost."""
    return _downloads, _bytes


def as_local(path: str | os.PathLike, kind: str = "models") -> str:
    """``path`` itself, or for a URI the local copy of the folder or file there (:func:`local_copy`)."""
    text = os.fspath(path)
    from infra.storage import is_uri, local_path

    return str(local_copy(text, kind)) if is_uri(text) else local_path(text)


def local_copy(uri: str, kind: str = "models") -> Path:
    """A local folder with the content of the folder at ``uri`` (its published version), or for a file at
    ``uri`` the local copy of that file alone; downloaded at most once per content on this node."""
    from infra.secrets import redact_text

    for _ in range(ATTEMPTS):
        fs, source = describe(uri, _what(kind))
        target = cache_root() / kind / cache_key(source)
        try:
            folder = ensure_copy(fs, source, target)
        except ContentChanged:
            continue
        return folder / source.single if source.single else folder
    raise ContentChanged(f"{redact_text(uri)} changed while it was being copied ({ATTEMPTS} tries); "
                         "retry once its writer has finished")


def _what(kind: str) -> str:
    return {"models": "model", "data": "data"}.get(kind, kind)


def describe(uri: str, what: str = "folder") -> tuple[object, Source]:
    """``(fs, Source)`` for ``uri``: a file, or a folder's published content (``infra.publish.check_complete``
    refuses a partial one in one line). FileNotFoundError names a URI with nothing there."""
    from infra.publish import VERSION_PREFIX, POINTER, check_complete
    from infra.secrets import redact_text
    from infra.storage import filesystem

    fs, root = filesystem(uri)
    root = root.rstrip("/")
    if fs.isfile(root):
        info = fs.info(root)
        name = root.rsplit("/", 1)[1]
        return fs, Source(uri, root.rsplit("/", 1)[0], ((name, info.get("size"), _version(info)),), name)
    if not fs.isdir(root):
        raise FileNotFoundError(f"no folder at {redact_text(uri)}")
    resolved = check_complete(uri, what)
    folder = filesystem(resolved)[1].rstrip("/")
    listing = fs.find(folder, detail=True)
    files = tuple(sorted(
        (name[len(folder) + 1:], info.get("size"), _version(info)) for name, info in listing.items()
        if info.get("type") != "directory" and len(name) > len(folder) + 1 and not name.endswith("/")
        # an unversioned folder may hold a replacement still being written (.v-*) beside its content
        and not name[len(folder) + 1:].startswith(VERSION_PREFIX) and name[len(folder) + 1:] != POINTER))
    if not files:
        raise FileNotFoundError(f"the folder at {redact_text(uri)} is empty")
    return fs, Source(uri, folder, files)


def _version(info: dict) -> str:
    return str(info.get("ETag") or info.get("etag") or info.get("mtime") or info.get("created") or "")


def cache_key(source: Source) -> str:
    """The name of ``source``'s copy: its URI and content listing, hashed."""
    return hashlib.sha256(json.dumps([source.uri, [list(f) for f in source.files]]).encode()).hexdigest()[:32]


def ensure_copy(fs, source: Source, target: Path) -> Path:
    """``target``, made once: a finished copy is used as is (checked again under the key's lock)."""
    if (target / COMPLETE).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    _claim_cache(target.parent)
    with _lock(target):
        if (target / COMPLETE).is_file():  # another process finished it while this one waited
            return target
        _set_aside_unmarked(target)
        sweep_partials(target)
        return _download(fs, source, target)


def _claim_cache(folder: Path) -> None:
    """Mark the cache folder as structcse's: what is inside may be removed (``infra.owned.remove_owned``)."""
    from infra.owned import OWNER, claim

    if not (folder / OWNER).is_file():
        claim(str(folder), "structcse's cache of remote folders")


def _remove(path: Path) -> None:
    from infra.owned import remove_owned

    try:
        remove_owned(str(path), "cache folder")
    except OSError:
        pass  # another process's sweep got there first, or a file went while it was removed


def _lock(target: Path):
    from filelock import FileLock

    timeout = float(os.environ.get(LOCK_TIMEOUT_ENV) or -1)
    return FileLock(str(target.with_name(f"{target.name}.lock")), timeout=timeout)


def _set_aside_unmarked(target: Path) -> None:
    """A ``<key>`` folder without the marker cannot come from this module (it renames finished copies only):
    an older version's half-deleted copy. Nobody can be using it whole; it goes."""
    if target.exists():
        aside = target.with_name(f"{target.name}.broken.{os.getpid()}")
        os.rename(target, aside)
        _remove(aside)


def sweep_partials(target: Path) -> list[Path]:
    """Remove ``target``'s partials whose writer is gone: its pid dead on this host, or untouched for
    :data:`STALE_S` seconds. Called under the key's lock; returns what it removed."""
    removed = []
    for partial in target.parent.glob(f"{target.name}.partial.*"):
        if _abandoned(partial):
            _remove(partial)
            removed.append(partial)
    return removed


def _abandoned(partial: Path) -> bool:
    """Its writer ended on this host, boot and pid namespace (``OWNER_FILE``: a pid alone is ambiguous across
    containers that share a hostname and a volume), or it has not changed for :data:`STALE_S` seconds."""
    from infra.lease import process_gone

    try:
        owner = json.loads((partial / OWNER_FILE).read_text())
    except (OSError, ValueError):
        owner = None
    if owner is not None:
        return process_gone(owner) or time.time() - _last_change(partial) > STALE_S
    pid_text, _, host = partial.name.split(".partial.", 1)[1].partition(".")  # a copy of an older version's
    if (not host or host == socket.gethostname()) and pid_text.isdigit() and not pid_alive(int(pid_text)):
        return True
    return time.time() - _last_change(partial) > STALE_S


def _last_change(folder: Path) -> float:
    try:
        return max([folder.stat().st_mtime] + [p.stat().st_mtime for p in folder.rglob("*")])
    except FileNotFoundError:
        return 0.0


def _download(fs, source: Source, target: Path) -> Path:
    """Copy ``source`` into a partial beside ``target`` (fsynced, marker last) and rename it into place."""
    partial = target.with_name(f"{target.name}.partial.{os.getpid()}.{socket.gethostname()}")
    _remove(partial)  # this pid's own leftover, from a failed try
    try:
        from infra.lease import this_process

        partial.mkdir()
        (partial / OWNER_FILE).write_text(json.dumps(this_process()))
        fetched = _fetch_files(fs, source, partial)
        _write_source(source, partial)
        _fsync_tree(partial)
        (partial / OWNER_FILE).unlink()  # whole now: a copy in place has no writer
        marker = partial / COMPLETE
        marker.write_text("")
        _fsync(marker)
        os.rename(partial, target)
        _fsync(target.parent)
    except BaseException:
        _remove(partial)
        raise
    _count(fetched)
    return target


def _fetch_files(fs, source: Source, partial: Path) -> int:
    fetched = 0
    for name, size, _ in source.files:
        dst = partial / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            fs.get_file(f"{source.folder}/{name}", str(dst))
        except FileNotFoundError:
            raise ContentChanged(name) from None
        if size is not None and dst.stat().st_size != size:
            raise ContentChanged(name)
        fetched += dst.stat().st_size
    return fetched


def _write_source(source: Source, partial: Path) -> None:
    from infra.secrets import redact_text

    names = {name for name, _, _ in source.files}
    meta = SOURCE if SOURCE not in names else f".structcse_{SOURCE}"  # never over a file of the content
    (partial / meta).write_text(json.dumps({"uri": redact_text(source.uri), "files": len(source.files)}))


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            _fsync(path)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _count(fetched: int) -> None:
    global _downloads, _bytes
    with _counter_lock:
        _downloads += 1
        _bytes += fetched
