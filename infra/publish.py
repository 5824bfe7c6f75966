"""Atomic publication: a folder a reader may pick up (a final model, a checkpoint, Tune's best model) is
visible only when whole, and the copy it replaces stays readable until then.

A published folder holds ``_files.json`` — every file's relative name and size — written last. Readers call
:func:`resolve` (where the published content of a folder is) and :func:`check_complete` (refuse, in one line,
a folder whose manifest does not match what is there, or one still being written).

* **Local folders**: the new copy is written beside the old one under a hidden name
  (``.model.new-<token>``) and swapped in with one ``renameat2(RENAME_EXCHANGE)`` (Linux), else two
  renames; the old copy is deleted only after the new one is in place.
* **Buckets** (no rename): a first publication uploads into the folder itself, with ``_publishing.json``
  written first and ``_files.json`` last. Replacing a complete copy uploads the new one under a version
  prefix (``model/.v-<time>-<token>/``) and then writes the pointer ``model/_current.json`` — one PUT, so
  a reader sees the old version or the new one. Older versions are removed after the pointer moved.

Readers accept a folder structcse did not write (no manifest, no pointer, no ``_publishing.json``) as is:
a model a user uploaded by hand. ``STRUCTCSE_PUBLISH_FILE_DELAY_S`` slows publication (seconds per file) for
fault drills: it is how ``bench/integrity.py`` lands a kill inside one.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
from pathlib import Path

FILES = "_files.json"  # written last: {"files": {relative name: size}}
PUBLISHING = "_publishing.json"  # written first in a bucket folder; a folder with it and no manifest is partial
POINTER = "_current.json"  # a bucket folder whose content was replaced: {"version": ".v-..."}
VERSION_PREFIX = ".v-"
DELAY_ENV = "STRUCTCSE_PUBLISH_FILE_DELAY_S"
_OURS = {FILES, PUBLISHING, POINTER}


class IncompleteError(OSError):
    """A folder that is being written, or was left half-written by a killed writer."""


def _token() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


def _delay() -> None:
    seconds = float(os.environ.get(DELAY_ENV) or 0)
    if seconds > 0:
        time.sleep(seconds)


def _local_files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name not in _OURS}


def _is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def publish_folder(local_dir: str | os.PathLike, dest: str | os.PathLike) -> str:
    """Publish the local folder ``local_dir`` at ``dest`` (a local path or a URI); returns ``dest``."""
    src = Path(local_dir)
    files = _local_files(src)
    dest_text = os.fspath(dest).rstrip("/")
    if _is_uri(dest_text):
        _publish_remote(src, files, dest_text)
    else:
        _publish_local(src, files, Path(dest_text.removeprefix("file://")))
    return dest_text


def seal(folder: str | os.PathLike) -> None:
    """Write ``_files.json`` into the local folder ``folder`` (last): a copy made of it by another writer (Ray
    Train's checkpoint upload) can then be checked whole with :func:`check_complete` (``require_manifest``)."""
    folder = Path(folder)
    (folder / FILES).write_text(_manifest_text(_local_files(folder)))


def _manifest_text(files: dict[str, int]) -> str:
    return json.dumps({"files": files}, indent=1, sort_keys=True)


def _sweep_local(dest: Path) -> None:
    """Copies of ``dest`` that a killed writer on this host left beside it (their pid is gone)."""
    host = socket.gethostname()
    for left in dest.parent.glob(f".{dest.name}.new-*"):
        owner = left.name.rsplit("-", 2)
        if len(owner) == 3 and owner[1] == host.replace("-", "_") and owner[2].isdigit() and not pid_alive(int(owner[2])):
            shutil.rmtree(left, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (whose leftovers may not be swept)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _publish_local(src: Path, files: dict[str, int], dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    _sweep_local(dest)
    staging = dest.with_name(f".{dest.name}.new-{_token()}-{socket.gethostname().replace('-', '_')}-{os.getpid()}")
    staging.mkdir()
    (staging / PUBLISHING).write_text("{}")
    for name in files:
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / name, staging / name)
        _delay()
    (staging / FILES).write_text(_manifest_text(files))
    (staging / PUBLISHING).unlink()
    _fsync_tree(staging)
    if not dest.exists():
        os.rename(staging, dest)
        return
    if _exchange(staging, dest):  # staging now holds the old copy
        shutil.rmtree(staging, ignore_errors=True)
        return
    old = dest.with_name(f".{dest.name}.old-{_token()}")
    os.rename(dest, old)
    os.rename(staging, dest)
    shutil.rmtree(old, ignore_errors=True)


def _fsync_tree(folder: Path) -> None:
    for p in folder.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where that is unavailable."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _publish_remote(src: Path, files: dict[str, int], dest: str) -> None:
    from infra.storage import filesystem

    fs, root = filesystem(dest)
    replacing = fs.isfile(f"{root}/{POINTER}") or fs.isfile(f"{root}/{FILES}")
    target = f"{root}/{VERSION_PREFIX}{_token()}" if replacing else root
    if not replacing and fs.exists(root):
        fs.rm(root, recursive=True)  # a partial first copy: nothing complete to keep
    fs.pipe_file(f"{target}/{PUBLISHING}", b"{}")
    for name in files:
        fs.put_file(str(src / name), f"{target}/{name}")
        _delay()
    fs.pipe_file(f"{target}/{FILES}", _manifest_text(files).encode())
    if not replacing:
        fs.rm_file(f"{target}/{PUBLISHING}")
        return
    fs.rm_file(f"{target}/{PUBLISHING}")
    fs.pipe_file(f"{root}/{POINTER}", json.dumps({"version": target.rsplit("/", 1)[1]}).encode())
    _remove_superseded(fs, root, target.rsplit("/", 1)[1])


def _remove_superseded(fs, root: str, current: str) -> None:
    """After the pointer moved: the old versions and the first, unversioned copy's files."""
    for entry in fs.ls(root, detail=True, refresh=True):
        name = entry["name"].rstrip("/").rsplit("/", 1)[1]
        if name in (current, POINTER):
            continue
        try:
            fs.rm(entry["name"], recursive=entry.get("type") == "directory")
        except FileNotFoundError:
            pass


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
    name = root.rstrip("/").rsplit("/", 1)[-1]
    return name.startswith(VERSION_PREFIX) or (name.startswith(".") and (".new-" in name or ".old-" in name))


def is_complete(folder: str | os.PathLike, require_manifest: bool = False) -> bool:
    """True when the published content of ``folder`` is whole (a folder structcse did not write counts as whole,
    unless ``require_manifest``)."""
    try:
        return completeness(resolve(folder), require_manifest) is None
    except IncompleteError:
        return False


def check_complete(folder: str | os.PathLike, what: str = "folder", require_manifest: bool = False) -> str:
    """The folder holding ``folder``'s published content; :class:`IncompleteError` in one line if it is partial."""
    from infra.secrets import redact_text

    resolved = resolve(folder)
    why = completeness(resolved, require_manifest)
    if why is not None:
        raise IncompleteError(f"{what} {redact_text(os.fspath(folder))} is not complete: {why}; "
                              "rerun the command that writes it")
    return resolved


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write a small text file whole or not at all: a local temp file renamed over it, or one PUT."""
    target = os.fspath(path)
    if _is_uri(target):
        from infra.storage import filesystem

        fs, remote = filesystem(target)
        fs.pipe_file(remote, text.encode())
        return
    local = Path(target.removeprefix("file://"))
    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = local.with_name(f".{local.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    tmp.write_text(text)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, local)


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
