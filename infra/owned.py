"""Never delete what structcse did not write: what marks a folder as structcse's, the one function that deletes,
and the check every command runs on where it will write.

A folder is structcse's when it holds one of :data:`MARKERS` at its top (``_structcse.json``, which every
output folder gets when a command starts writing it, or a publication's, set's, job's or run's own file), or
when its name is one structcse gives its own staging and versions (``.v-…``, ``.<name>.new-…``,
``.<name>.old-…``). A file or folder inside a folder of structcse's is structcse's.

* :func:`remove_owned` — every deletion in the project: it refuses (:class:`NotOurs`) anything else.
* :func:`check_destination` — before a command writes ``dest``: a bucket root is never a destination, and a
  folder that exists, is not empty and carries no marker is the user's: refused in one line naming it
  (:class:`ForeignDestination`, exit 2), unless the user asked to write beside what is there.
* :func:`claim` — write ``_structcse.json`` into a destination (what wrote it, when, the version).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time

from infra.storage import StorageError, is_uri, local_path  # noqa: F401 - the one URI test

OWNER = "_structcse.json"
MARKERS = (OWNER, "_files.json", "_current.json", "_publishing.json", "_lease.json", "_manifest.json",
           "run_key.json", "train_summary.json", "checkpoint_manager_snapshot.json")
_MARKER_PATTERNS = (re.compile(r"^_job-[A-Za-z0-9_.-]+\.json$"), re.compile(r"^_lease-[A-Za-z0-9_.-]+\.json$"))
_OWN_NAMES = re.compile(r"^(\.v-.+|\..+\.(new|old)-.+)$")


class NotOurs(PermissionError):
    """A deletion of something structcse did not write."""


class ForeignDestination(StorageError):
    """A destination that holds what structcse did not write (or a bucket root)."""


def own_name(name: str) -> bool:
    """A name structcse gives its own staging copies and versions (``.v-…``, ``.<name>.new-…``, ``.<name>.old-…``)."""
    return bool(_OWN_NAMES.match(name))


def is_marker(name: str) -> bool:
    return name in MARKERS or any(p.match(name) for p in _MARKER_PATTERNS)


def _names(fs, root: str) -> list[str] | None:
    try:
        return [e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(root, detail=False)]
    except (FileNotFoundError, NotADirectoryError):
        return None


def is_ours(path: str | os.PathLike) -> bool:
    """Whether structcse wrote the folder (or file) ``path`` (see the module docstring)."""
    from infra.storage import filesystem

    text = os.fspath(path).rstrip("/")
    fs, root = filesystem(text)
    if _OWN_NAMES.match(root.rsplit("/", 1)[-1]):
        return True
    if fs.isdir(root) and any(is_marker(n) for n in (_names(fs, root) or [])):
        return True
    parent = root.rsplit("/", 1)[0] if "/" in root else "."
    if _OWN_NAMES.match(parent.rsplit("/", 1)[-1]):
        return True
    return any(is_marker(n) for n in (_names(fs, parent) or []))


def remove_owned(path: str | os.PathLike, what: str = "folder") -> bool:
    """Delete ``path`` (a folder recursively) when structcse wrote it; :class:`NotOurs` when it did not.
    False when nothing was there."""
    from infra.secrets import redact_text
    from infra.storage import filesystem

    text = os.fspath(path).rstrip("/")
    fs, root = filesystem(text)
    if bucket_root(text) or root in ("", "/", os.path.expanduser("~")):
        raise NotOurs(f"not removing {what} {redact_text(text)}: a bucket or filesystem root is never removed")
    if not fs.exists(root):
        return False
    if not is_ours(text):
        raise NotOurs(f"not removing {what} {redact_text(text)}: structcse did not write it (none of its markers "
                      "is there)")
    if not is_uri(text):
        if os.path.isdir(root) and not os.path.islink(root):
            shutil.rmtree(root, ignore_errors=False, onerror=_gone_is_fine)
        else:
            try:
                os.unlink(root)
            except FileNotFoundError:
                pass
        return True
    try:
        fs.rm(root, recursive=fs.isdir(root))
    except FileNotFoundError:
        pass
    return True


def _gone_is_fine(function, path, exc_info):
    if not issubclass(exc_info[0], FileNotFoundError):
        raise exc_info[1]


def bucket_root(path: str | os.PathLike) -> bool:
    """True for a URI that names a whole bucket (``s3://bucket``, ``gs://bucket/``)."""
    text = os.fspath(path)
    if not is_uri(text):
        return False
    return "/" not in text.split("://", 1)[1].strip("/")


def check_destination(dest: str | os.PathLike, what: str, flag: str | None = None, overwrite: bool = False) -> None:
    """Refuse, in one line naming it, to write ``dest`` when it is a bucket root, or when it exists, is not
    empty and carries none of structcse's markers (the user's own folder). ``flag``: the option that writes
    beside what is there (named in the message); ``overwrite``: the user gave it."""
    from infra.secrets import redact_text
    from infra.storage import filesystem

    text = os.fspath(dest).rstrip("/")
    shown = redact_text(text)
    if bucket_root(text):
        raise ForeignDestination(f"{what} {shown} is a bucket root: structcse never writes one; give a folder in "
                                 f"it ({shown}/structcse)")
    if overwrite:
        return
    fs, root = filesystem(text)
    if not fs.exists(root):
        return
    if not fs.isdir(root):
        raise ForeignDestination(f"{what} {shown} is a file, not a folder")
    names = _names(fs, root) or []
    if names and not any(is_marker(n) for n in names) and not is_ours(text):  # a partial in a folder of ours passes
        beside = f", or pass {flag} to write beside what is there (nothing of it is removed)" if flag else ""
        raise ForeignDestination(f"{what} {shown} holds {len(names)} entr{'y' if len(names) == 1 else 'ies'} "
                                 f"structcse did not write ({', '.join(sorted(names)[:3])}"
                                 f"{', ...' if len(names) > 3 else ''}); choose an empty or new folder{beside}")


def claim(dest: str | os.PathLike, command: str) -> None:
    """Mark ``dest`` as structcse's (``_structcse.json``); an existing mark is kept."""
    from infra.storage import filesystem

    from infra import conditional
    from infra.version import code_version

    text = os.fspath(dest).rstrip("/")
    fs, root = filesystem(text)
    if fs.exists(f"{root}/{OWNER}"):
        return
    record = {"written_by": "structcse", "command": command, "since": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                       time.gmtime()),
              "code_version": code_version()}
    if not is_uri(text):
        os.makedirs(root, exist_ok=True)
    try:
        conditional.create(f"{text}/{OWNER}", json.dumps(record, indent=1, sort_keys=True).encode())
    except conditional.ConditionFailed:
        pass
