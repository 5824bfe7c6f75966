"""Paths that may be URIs: ``s3://``, ``gs://``, ``memory://``, ``file://`` or a local path, through fsspec.

``is_uri(path)`` tells the two apart (``infra.storage.is_uri``: a ``file://`` URI is a local path; a
``pathlib.Path`` of ``s3://bucket/x`` is the local ``s3:/bucket/x``);
``as_local(path)`` is a path, or a URI's local copy; ``local_copy(uri)`` brings a remote folder (a trained model)
or file into the node's cache once per content (``infra.cache``: a lock per key, safe for many workers at once).
Credentials come from the environment or the provider chain (fsspec's); nothing here writes them: the
cache key is a hash, and the cache's ``source.json`` holds the URI with any secret redacted.
"""

from __future__ import annotations

import os
from pathlib import Path

# the node's cache of remote folders and files lives in infra/cache.py; its names stay importable from here
from infra.cache import CACHE_ENV, COMPLETE, as_local, cache_root, local_copy  # noqa: F401
from infra.storage import is_uri, local_path  # noqa: F401 - the one URI test, importable from here


def read_text(path: str | os.PathLike, what: str = "file") -> str:
    """The text of a local file or of the object at a URI; FileNotFoundError names ``what`` and the path."""
    from infra.secrets import redact_text
    from infra.storage import filesystem

    text = os.fspath(path)
    fs, local = filesystem(text)
    if not fs.isfile(local):
        raise FileNotFoundError(f"{what} {redact_text(text)} does not exist")
    return fs.cat_file(local).decode()


def put_files(local: str | os.PathLike, uri: str) -> None:
    """Copy each file of the local folder ``local`` into the folder at ``uri``, beside what is there (an object
    store's PUT makes each object appear whole; nothing there is removed)."""
    from infra.storage import filesystem

    fs, remote = filesystem(uri)
    base = Path(local)
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        fs.put_file(str(path), f"{remote.rstrip('/')}/{path.relative_to(base).as_posix()}")


PARTS = ".parts"  # beside an appended file in a bucket: its appended pieces, one object each


def append_text(path: str | os.PathLike, text: str) -> None:
    """Add ``text`` to the end of an append-only log: a local file is opened for append (its folder made);
    an object store has no append, so each call writes one new object ``{path}.parts/{time}-{random}`` (the
    bytes written are the new text's, never the log's whole). :func:`read_appended` reads either back."""
    import time
    import uuid

    text_path = os.fspath(path)
    if not is_uri(text_path):
        text_path = local_path(text_path)
        Path(text_path).parent.mkdir(parents=True, exist_ok=True)
        with open(text_path, "a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        return
    from infra.storage import filesystem

    fs, remote = filesystem(text_path)
    with fs.open(f"{remote}{PARTS}/{time.time_ns():020d}-{uuid.uuid4().hex[:8]}", "wb") as f:
        f.write(text.encode())


def read_appended(path: str | os.PathLike) -> str:
    """The whole text of an append-only log (``append_text``): the file, then its pieces in the order written;
    "" when there is neither."""
    from infra.storage import filesystem

    fs, local = filesystem(os.fspath(path))
    text = fs.cat_file(local).decode() if fs.isfile(local) else ""
    try:
        parts = sorted(fs.ls(f"{local}{PARTS}", detail=False))
    except FileNotFoundError:
        parts = []
    return text + "".join(fs.cat_file(p).decode() for p in parts)


def appended_logs(folder: str, suffix: str) -> list[str]:
    """The append-only logs in ``folder`` whose names end in ``suffix`` (each once, as ``append_text``'s path)."""
    from infra.storage import filesystem

    fs, root = filesystem(folder)
    try:
        names = [n.rstrip("/").rsplit("/", 1)[-1] for n in fs.ls(root, detail=False)]
    except FileNotFoundError:
        return []
    logs = {n[: -len(PARTS)] if n.endswith(suffix + PARTS) else n for n in names}
    return sorted(f"{folder.rstrip('/')}/{n}" for n in logs if n.endswith(suffix))
