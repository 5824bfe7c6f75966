"""Atomic publication: a folder a reader may pick up (a final model, a checkpoint, Tune's best model, the
demo's output in a bucket) is visible only when whole, by one writer at a time, and never over what structcse
did not write.

A published folder holds ``_files.json`` — its version token and every file's relative name and size —
written last. Readers call :func:`resolve` (where the published content of a folder is, pinned: one version)
and :func:`check_complete` (refuse, in one line, a folder whose manifest does not match what is there, or one
still being written; a pointer that moved meanwhile is resolved again).

* **One writer**: a publication holds the destination's lease (``infra.lease``: the store's conditional
  writes) from its first file to its last; a second writer refuses in one line naming the first.
* **Not the user's**: a destination that exists, is not empty and holds none of structcse's markers, or a
  bucket root, is refused (``infra.owned.check_destination``); nothing here deletes what structcse did not
  write (``infra.owned.remove_owned``).
* **Local folders**: the new copy is written beside the old one under a hidden name
  (``.model.new-<token>-<host>-<pid>``) and swapped in with one ``renameat2(RENAME_EXCHANGE)``; where the
  filesystem answers that call with EINVAL or ENOSYS (NFS, old kernels), two renames, the first undone if
  the second fails, and a copy a kill left between them (``.model.old-…``) restored by the next writer.
* **Buckets** (no rename): every publication uploads a version prefix (``model/.v-<time>-<token>/``) and
  then moves the pointer ``model/_current.json`` with a write conditioned on the pointer it read (S3
  ``If-Match`` / ``If-None-Match: *``, GCS ``ifGenerationMatch``): a reader sees the old version or the new
  one, and a writer that lost a race fails. The version replaced stays readable (readers that resolved it
  keep copying); only versions older than it, and copies killed writers left, are removed.

``STRUCTCSE_PUBLISH_FILE_DELAY_S`` slows publication (seconds per file) for fault drills: it is how
``bench/integrity.py`` lands a kill inside one.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import time
import uuid
from pathlib import Path

from infra.storage import StorageError, local_path
from infra.storage import is_uri as _is_uri

FILES = "_files.json"  # written last: {"version": token, "files": {relative name: size}}
PUBLISHING = "_publishing.json"  # written first in a bucket version; a version with it and no manifest is partial
POINTER = "_current.json"  # a bucket folder's published version: {"version": ".v-...", "previous": ...}
LEASE = "_lease.json"  # a bucket folder's lease while it is published
VERSION_PREFIX = ".v-"
ROOT_COPY = "."  # "previous" of a pointer that replaced an unversioned first copy (written before versions)
DELAY_ENV = "STRUCTCSE_PUBLISH_FILE_DELAY_S"
READ_ATTEMPTS = 5  # resolutions tried when the pointer moves under a reader
_OURS = {FILES, PUBLISHING, POINTER, LEASE}


class IncompleteError(OSError):
    """A folder that is being written, or was left half-written by a killed writer."""


class LostRace(StorageError):
    """Another writer moved the pointer while this one published: nothing of this writer's is published."""


def _token() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{time.time_ns() % 10**9:09d}-{uuid.uuid4().hex[:8]}"


def _delay() -> None:
    seconds = float(os.environ.get(DELAY_ENV) or 0)
    if seconds > 0:
        time.sleep(seconds)


def _local_files(folder: Path) -> dict[str, int]:
    return {p.relative_to(folder).as_posix(): p.stat().st_size
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name not in _OURS}


def lease_uri(dest: str) -> str:
    """The lease object of the destination ``dest``: inside a bucket folder, beside a local one (a local folder
    is swapped whole)."""
    if _is_uri(dest):
        return f"{dest}/{LEASE}"
    path = Path(local_path(dest))
    return str(path.with_name(f".{path.name}.lease.json"))


def publish_folder(local_dir: str | os.PathLike, dest: str | os.PathLike, what: str = "folder",
                   command: str | None = None) -> str:
    """Publish the local folder ``local_dir`` at ``dest`` (a local path or a URI); returns ``dest``."""
    from infra.lease import Lease
    from infra.owned import check_destination

    src = Path(local_dir)
    files = _local_files(src)
    dest_text = os.fspath(dest).rstrip("/")
    check_destination(dest_text, what)
    with Lease(lease_uri(dest_text), what, command or f"publishing {what}", target=dest_text) as lease:
        if _is_uri(dest_text):
            _publish_remote(src, files, dest_text, lease)
        else:
            _publish_local(src, files, Path(local_path(dest_text)), lease)
    return dest_text


def seal(folder: str | os.PathLike) -> None:
    """Write ``_files.json`` into the local folder ``folder`` (last): a copy made of it by another writer (Ray
    Train's checkpoint upload) can then be checked whole with :func:`check_complete` (``require_manifest``)."""
    folder = Path(folder)
    write_text_atomic(folder / FILES, _manifest_text(_local_files(folder), _token()))


def _manifest_text(files: dict[str, int], version: str) -> str:
    return json.dumps({"version": version, "files": files}, indent=1, sort_keys=True)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (whose leftovers may not be swept)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _publish_local(src: Path, files: dict[str, int], dest: Path, lease) -> None:
    from infra.owned import remove_owned

    dest.parent.mkdir(parents=True, exist_ok=True)
    _recover_local(dest)
    token = _token()
    staging = dest.with_name(f".{dest.name}.new-{token}-{socket.gethostname().replace('-', '_')}-{os.getpid()}")
    staging.mkdir()
    (staging / PUBLISHING).write_text("{}")
    for name in files:
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / name, staging / name)
        _delay()
    (staging / FILES).write_text(_manifest_text(files, token))
    (staging / PUBLISHING).unlink()
    _fsync_tree(staging)
    lease.check()
    if not dest.exists():
        _rename_noreplace(staging, dest)
        return
    if _exchange(staging, dest):  # staging now holds the old copy
        remove_owned(str(staging), "superseded copy")
        return
    old = dest.with_name(f".{dest.name}.old-{token}")
    os.rename(dest, old)
    try:
        os.rename(staging, dest)
    except BaseException:
        os.rename(old, dest)  # undone: the old copy is published again
        raise
    remove_owned(str(old), "superseded copy")


def _recover_local(dest: Path) -> None:
    """Under the destination's lease: what killed writers left beside ``dest``. A copy set aside by a writer
    killed between its two renames (``.old-*``, and no ``dest``) is published again; staging copies
    (``.new-*``) and other set-aside copies are removed: no other writer can be using them."""
    from infra.owned import remove_owned

    olds = sorted(dest.parent.glob(f".{dest.name}.old-*"))
    if olds and not dest.exists():
        os.rename(olds.pop(), dest)
    for left in [*olds, *dest.parent.glob(f".{dest.name}.new-*")]:
        remove_owned(str(left), "copy a killed writer left")


def _fsync_tree(folder: Path) -> None:
    for p in folder.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())


_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, getattr(errno, "EOPNOTSUPP", errno.EINVAL)}


def _renameat2(a: Path, b: Path, flags: int) -> bool:
    """Linux ``renameat2``; False where the call or the flag is unsupported (EINVAL, ENOSYS: NFS, old
    kernels, other systems), OSError for any other failure."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(b))


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (``RENAME_EXCHANGE``); False where that is unsupported."""
    return _renameat2(a, b, _RENAME_EXCHANGE)


def _rename_noreplace(a: Path, b: Path) -> None:
    """Rename ``a`` to ``b`` only if ``b`` does not exist (``RENAME_NOREPLACE``, else a check under the lease)."""
    if not _renameat2(a, b, _RENAME_NOREPLACE):
        if b.exists():
            raise FileExistsError(errno.EEXIST, "exists", str(b))
        os.rename(a, b)


def _publish_remote(src: Path, files: dict[str, int], dest: str, lease) -> None:
    from infra import conditional
    from infra.secrets import redact_text
    from infra.storage import filesystem

    fs, root = filesystem(dest)
    _sweep_remote(fs, dest, root)
    token = _token()
    version = f"{VERSION_PREFIX}{token}"
    target = f"{root}/{version}"
    fs.pipe_file(f"{target}/{PUBLISHING}", b"{}")
    for name in files:
        fs.put_file(str(src / name), f"{target}/{name}")
        _delay()
    fs.pipe_file(f"{target}/{FILES}", _manifest_text(files, token).encode())
    fs.rm_file(f"{target}/{PUBLISHING}")
    lease.check()
    try:
        data, pointer_token = conditional.read(f"{dest}/{POINTER}")
        previous = str(json.loads(data).get("version") or ROOT_COPY)
    except FileNotFoundError:
        pointer_token = None
        previous = ROOT_COPY if fs.isfile(f"{root}/{FILES}") else None
    record = json.dumps({"version": version, "previous": previous}).encode()
    try:
        if pointer_token is None:
            conditional.create(f"{dest}/{POINTER}", record)
        else:
            conditional.replace(f"{dest}/{POINTER}", record, pointer_token)
    except conditional.ConditionFailed:
        raise LostRace(f"{redact_text(dest)}: another writer published it while this one did; this copy "
                       f"({version}) was not published") from None
    _remove_superseded(fs, dest, root, keep={version, previous})


def _versions(fs, root: str) -> list[str]:
    try:
        names = [e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(root, detail=False)]
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(VERSION_PREFIX))


def _sweep_remote(fs, dest: str, root: str) -> None:
    """Under the lease: versions a killed writer left (no ``_files.json``) that the pointer does not name."""
    from infra.owned import remove_owned

    current = _pointed(dest)
    for name in _versions(fs, root):
        if name != current and not fs.isfile(f"{root}/{name}/{FILES}"):
            remove_owned(f"{dest}/{name}", "version a killed writer left")


def _pointed(dest: str) -> str | None:
    from infra.storage import filesystem

    fs, root = filesystem(dest)
    try:
        return str(json.loads(fs.cat_file(f"{root}/{POINTER}")).get("version") or "") or None
    except FileNotFoundError:
        return None


def _remove_superseded(fs, dest: str, root: str, keep: set) -> None:
    """After the pointer moved: versions older than the one replaced (that one stays readable for readers that
    resolved it before), and an unversioned first copy's listed files once it is two publications old."""
    from infra.owned import remove_owned

    kept = sorted(k for k in keep if k and k != ROOT_COPY)
    for name in _versions(fs, root):
        if name not in keep and name < kept[0]:
            remove_owned(f"{dest}/{name}", "superseded version")
    if ROOT_COPY in keep:
        return
    try:
        listed = json.loads(fs.cat_file(f"{root}/{FILES}")).get("files", {})
    except (FileNotFoundError, ValueError):
        return
    for name in listed:  # listed in structcse's own _files.json: its own files, nothing else at the root
        if name not in _OURS and not name.startswith(VERSION_PREFIX):
            remove_owned(f"{dest}/{name}", "superseded file")
    remove_owned(f"{dest}/{FILES}", "superseded manifest")


def resolve(folder: str | os.PathLike) -> str:
    """Where the published content of ``folder`` is: the version a bucket folder's pointer names, else the
    folder itself."""
    text = os.fspath(folder).rstrip("/")
    if not _is_uri(text):
        return text
    from infra.storage import filesystem

    fs, root = filesystem(text)
    try:
        pointer = json.loads(fs.cat_file(f"{root}/{POINTER}"))
    except FileNotFoundError:
        return text
    version = str(pointer.get("version", ""))
    if not version.startswith(VERSION_PREFIX) or "/" in version:
        raise IncompleteError(f"{text}/{POINTER} names no version folder ({version!r})")
    return f"{text}/{version}"


def completeness(folder: str | os.PathLike, require_manifest: bool = False) -> str | None:
    """None when ``folder`` (already resolved) is whole; else why not, in a few words. ``require_manifest``:
    a folder without ``_files.json`` is partial (checkpoints: structcse always seals them)."""
    from infra.storage import filesystem

    fs, root = filesystem(os.fspath(folder).rstrip("/"))
    if not fs.isdir(root):
        return "no such folder"
    try:
        manifest = json.loads(fs.cat_file(f"{root}/{FILES}"))
    except FileNotFoundError:
        if require_manifest or fs.isfile(f"{root}/{PUBLISHING}") or _staging_name(root):
            return "it is being written, or its writer was killed (no _files.json)"
        return None  # not written by structcse
    except ValueError:
        return f"its {FILES} is not JSON"
    for name, size in sorted(manifest.get("files", {}).items()):
        try:
            actual = fs.size(f"{root}/{name}")
        except FileNotFoundError:
            return f"{name} listed in {FILES} is missing"
        if actual != size:
            return f"{name} has {actual} bytes, {FILES} says {size}"
    return None


def _staging_name(root: str) -> bool:
    from infra.owned import own_name

    return own_name(root.rstrip("/").rsplit("/", 1)[-1])


def is_complete(folder: str | os.PathLike, require_manifest: bool = False) -> bool:
    """True when the published content of ``folder`` is whole (a folder structcse did not write counts as whole,
    unless ``require_manifest``)."""
    try:
        return completeness(resolve(folder), require_manifest) is None
    except IncompleteError:
        return False


def check_complete(folder: str | os.PathLike, what: str = "folder", require_manifest: bool = False) -> str:
    """The folder holding ``folder``'s published content; :class:`IncompleteError` in one line if it is partial.
    A pointer that moved while the version it named was checked is resolved again (a replacement under the
    reader is not an incomplete folder)."""
    from infra.secrets import redact_text

    for _ in range(READ_ATTEMPTS):
        resolved = resolve(folder)
        why = completeness(resolved, require_manifest)
        if why is None:
            return resolved
        if resolve(folder) == resolved:
            break
    raise IncompleteError(f"{what} {redact_text(os.fspath(folder))} is not complete: {why}; "
                          "rerun the command that writes it")


def version_of(folder: str | os.PathLike) -> str | None:
    """The version token of the published copy at ``folder`` (resolved first): what a reader compares before
    and after it read the folder, to know it read one version. None for a folder structcse did not publish."""
    from infra.storage import filesystem

    resolved = resolve(folder)
    fs, root = filesystem(resolved)
    try:
        manifest = json.loads(fs.cat_file(f"{root.rstrip('/')}/{FILES}"))
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None
    return f"{resolved}#{manifest.get('version', '')}"


def read_pinned(folder: str | os.PathLike, read, what: str = "folder"):
    """``read(folder)`` of one published version of ``folder``: the version is noted before and after, and a read
    that straddled a replacement (the version changed, or a file vanished under it) is made again."""
    from infra.secrets import redact_text

    error: BaseException | None = None
    for _ in range(READ_ATTEMPTS):
        before = version_of(folder)
        try:
            result = read(folder)
        except Exception as e:  # noqa: BLE001 - a failure of a straddled read is retried, any other is raised
            if version_of(folder) == before:
                raise
            error = e
            continue
        if version_of(folder) == before:
            return result
    raise IncompleteError(f"{what} {redact_text(os.fspath(folder))} was replaced {READ_ATTEMPTS} times while it was "
                          f"read ({type(error).__name__ if error else 'changed'}); read it again once its writer "
                          "has finished")


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write a small text file whole or not at all (:func:`write_bytes_atomic`)."""
    write_bytes_atomic(path, text.encode())


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """The project's one way to write a small file whole or not at all: locally a temporary file beside it,
    fsynced and renamed over it (its folder made); in a bucket one PUT."""
    target = os.fspath(path)
    if _is_uri(target):
        from infra.storage import filesystem

        fs, remote = filesystem(target)
        fs.pipe_file(remote, data)
        return
    local = Path(local_path(target))
    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = local.with_name(f".{local.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, local)
    finally:
        if tmp.exists():
            tmp.unlink()


def published_names(folder: str | os.PathLike) -> list[str]:
    """The relative names of the files a reader copies from ``folder`` (already resolved): not the
    publication's own files, not a version being written beside an unversioned first copy."""
    from infra.storage import filesystem

    fs, root = filesystem(os.fspath(folder).rstrip("/"))
    names = []
    for name in sorted(fs.find(root)):
        rel = name[len(root.rstrip("/")) + 1:]
        if rel and rel not in _OURS and not rel.startswith(VERSION_PREFIX):
            names.append(rel)
    return names


def put_files(local: str | os.PathLike, uri: str) -> None:
    """Copy each file of the local folder ``local`` into the folder at ``uri``, beside what is there (an object
    store's PUT makes each object appear whole; nothing there is removed). Not a publication: no manifest, no
    lease; for inputs (a base model, a dev set) a run will read."""
    from infra.storage import filesystem

    fs, remote = filesystem(uri)
    base = Path(local)
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        fs.put_file(str(path), f"{remote.rstrip('/')}/{path.relative_to(base).as_posix()}")
