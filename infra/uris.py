"""Paths that may be URIs: ``s3://``, ``gs://``, ``memory://``, ``file://`` or a local path, through fsspec.

``is_uri(path)`` tells the two apart (a ``pathlib.Path`` of ``s3://bucket/x`` is the local ``s3:/bucket/x``);
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


def is_uri(path: str | os.PathLike | None) -> bool:
    """True for ``scheme://...`` (a ``file://`` URI too), False for a local path."""
    return isinstance(path, str) and "://" in path


def read_text(path: str | os.PathLike, what: str = "file") -> str:
    """The text of a local file or of the object at a URI; FileNotFoundError names ``what`` and the path."""
    from infra.secrets import redact_text
    from infra.storage import filesystem

    text = os.fspath(path)
    fs, local = filesystem(text)
    if not fs.isfile(local):
        raise FileNotFoundError(f"{what} {redact_text(text)} does not exist")
    return fs.cat_file(local).decode()


def upload_folder(local: str | os.PathLike, uri: str) -> None:
    """Publish the local folder ``local`` at ``uri`` whole (``infra.publish.publish_folder``: the copy there
    stays readable until the new one is complete)."""
    from infra.publish import publish_folder

    publish_folder(local, uri)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to a local file (its folder made) or to the object at a URI, whole or not at all."""
    from infra.publish import write_text_atomic

    write_text_atomic(path, text)


def put_files(local: str | os.PathLike, uri: str) -> None:
    """Copy each file of the local folder ``local`` into the folder at ``uri``, beside what is there (an object
    store's PUT makes each object appear whole; nothing there is removed)."""
    from infra.storage import filesystem

    fs, remote = filesystem(uri)
    base = Path(local)
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        fs.put_file(str(path), f"{remote.rstrip('/')}/{path.relative_to(base).as_posix()}")
