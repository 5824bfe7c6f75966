"""Paths that may be URIs: ``s3://``, ``gs://``, ``memory://``, ``file://`` or a local path, through fsspec.

``is_uri(path)`` tells the two apart (a ``pathlib.Path`` of ``s3://bucket/x`` is the local ``s3:/bucket/x``);
``as_local(path)`` is a path, or a URI's local copy; ``local_copy(uri)`` brings a remote folder (a trained model) into a local cache once, keyed by what the
folder holds (file names, sizes and ETags or modification times), so a second ``eval --model s3://...``
of the same model reads nothing but the listing, and a model rewritten at the same URI is fetched again.
Credentials come from the environment or the provider chain (fsspec's); nothing here writes them: the
cache key is a hash, and the cache's ``source.json`` holds the URI with any secret redacted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

CACHE_ENV = "STRUCTCSE_CACHE"  # where remote models are cached (default ~/.cache/structcse)
COMPLETE = ".structcse_complete"  # written last: a folder without it is an interrupted copy


def is_uri(path: str | os.PathLike | None) -> bool:
    """True for ``scheme://...`` (a ``file://`` URI too), False for a local path."""
    return isinstance(path, str) and "://" in path


def as_local(path: str | os.PathLike, kind: str = "models") -> str:
    """``path`` itself, or for a URI the local copy of the folder there (:func:`local_copy`)."""
    text = os.fspath(path)
    return str(local_copy(text, kind)) if is_uri(text) else text


def read_text(path: str | os.PathLike, what: str = "file") -> str:
    """The text of a local file or of the object at a URI; FileNotFoundError names ``what`` and the path."""
    import fsspec

    from infra.secrets import redact_text

    text = os.fspath(path)
    fs, local = fsspec.core.url_to_fs(os.path.expanduser(text) if not is_uri(text) else text)
    if not fs.isfile(local):
        raise FileNotFoundError(f"{what} {redact_text(text)} does not exist")
    return fs.cat_file(local).decode()


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "structcse").expanduser()


def local_copy(uri: str, kind: str = "models") -> Path:
    """A local folder with the contents of the folder at ``uri`` (copied at most once per content); for a
    file at ``uri``, its local copy."""
    import fsspec

    from infra.secrets import redact_text

    fs, root = fsspec.core.url_to_fs(uri)
    root = root.rstrip("/")
    if fs.isfile(root):
        return local_copy(uri.rstrip("/").rsplit("/", 1)[0], kind) / root.rsplit("/", 1)[1]
    if not fs.isdir(root):
        raise FileNotFoundError(f"no folder at {redact_text(uri)}")
    listing = fs.find(root, detail=True)
    files = sorted((name[len(root) + 1:], info.get("size"), str(info.get("ETag") or info.get("mtime") or ""))
                   for name, info in listing.items()
                   if info.get("type") != "directory" and len(name) > len(root) + 1 and not name.endswith("/"))
    if not files:
        raise FileNotFoundError(f"the folder at {redact_text(uri)} is empty")
    key = hashlib.sha256(json.dumps([uri, files]).encode()).hexdigest()[:32]
    target = cache_root() / kind / key
    if (target / COMPLETE).is_file():
        return target
    partial = target.with_name(f"{key}.partial.{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    for name, _, _ in files:
        dst = partial / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(f"{root}/{name}", str(dst))
    (partial / "source.json").write_text(json.dumps({"uri": redact_text(uri), "files": len(files)}))
    (partial / COMPLETE).write_text("")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


def upload_folder(local: str | os.PathLike, uri: str, replace: bool = True) -> None:
    """Copy the local folder ``local`` to the folder at ``uri`` (what was there first removed when ``replace``)."""
    import fsspec

    fs, remote = fsspec.core.url_to_fs(uri)
    remote = remote.rstrip("/")
    if replace and fs.exists(remote):
        fs.rm(remote, recursive=True)
    fs.put(f"{os.fspath(local).rstrip('/')}/", f"{remote}/", recursive=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to a local file (its folder made) or to the object at a URI."""
    import fsspec

    text_path = os.fspath(path)
    if not is_uri(text_path):
        Path(text_path).parent.mkdir(parents=True, exist_ok=True)
        Path(text_path).write_text(text)
        return
    fs, remote = fsspec.core.url_to_fs(text_path)
    with fs.open(remote, "w") as f:
        f.write(text)
