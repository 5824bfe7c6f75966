"""Conditional writes of small objects: the stores' own compare-and-swap, so that a lost race between two
writers is an error and never a mix.

Every object read here comes with a *token* naming the version read: an S3 ``ETag``, a GCS ``generation``, a
local file's content digest. A write names the version it replaces:

* :func:`create` — only when nothing is there (S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``, a
  local temp file hard-linked into place: ``link`` never replaces);
* :func:`replace` — only when what is there is still the version read (S3 ``If-Match``, GCS
  ``ifGenerationMatch``; locally, the check and the rename under a lock file beside the object);
* :func:`delete` — the same condition for a removal.

A failed condition raises :class:`ConditionFailed` (a ``FileExistsError``). Other filesystems (``memory://``)
get the same checks in one process only.
"""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path

_process_lock = threading.Lock()


class ConditionFailed(FileExistsError):
    """The object is not the version the write was conditioned on: another writer got there first."""


def _protocol(fs) -> str:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return {"s3a": "s3", "gcs": "gs", "local": "file"}.get(protocol, protocol)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _local_lock(path: str):
    from filelock import FileLock

    target = Path(path)
    return FileLock(str(target.with_name(f".{target.name}.lock")), timeout=30)


def _precondition(error: Exception) -> bool:
    code = str(getattr(error, "response", {}).get("Error", {}).get("Code", "")) if hasattr(error, "response") else ""
    text = str(error)
    return code in ("PreconditionFailed", "412", "ConditionalRequestConflict") or "pre-conditions" in text \
        or "412" in text or "Precondition" in text or isinstance(error, FileExistsError)


@contextmanager
def _refusal(uri: str, gone: str = "raise"):
    """The store's refusal of a condition (HTTP 412; s3fs maps it to FileExistsError) as :class:`ConditionFailed`.
    No object there: ``"failed"``, the condition failed; ``"done"``, nothing to do; ``"raise"``, as it is."""
    try:
        yield
    except FileNotFoundError:
        if gone == "failed":
            raise ConditionFailed(uri) from None
        if gone == "raise":
            raise
    except Exception as e:  # noqa: BLE001 - botocore's ClientError, gcsfs's HttpError: told apart by _precondition
        if _precondition(e):
            raise ConditionFailed(uri) from None
        raise


def read(uri: str) -> tuple[bytes, str]:
    """``(bytes, token)`` of the object at ``uri``; FileNotFoundError when there is none."""
    from infra.storage import filesystem

    fs, path = filesystem(uri)
    kind = _protocol(fs)
    if kind == "s3":
        bucket, key, _ = fs.split_path(path)
        answer = fs.call_s3("get_object", Bucket=bucket, Key=key)
        data = _read_body(fs, answer["Body"])
        return data, answer["ETag"]
    if kind == "gs":
        for _ in range(10):  # the generation read before and after the bytes: the same, or read again
            generation = str(fs.info(path).get("generation") or "")
            data = fs.cat_file(path)
            if str(fs.info(path).get("generation") or "") == generation:
                return data, generation
        raise ConditionFailed(f"{uri} kept changing while it was read")
    data = fs.cat_file(path)
    return data, _digest(data)


def _read_body(fs, body) -> bytes:
    from fsspec.asyn import sync

    async def whole():
        async with body as stream:
            return await stream.read()

    return sync(fs.loop, whole)


def create(uri: str, data: bytes) -> str:
    """Write ``data`` at ``uri`` only when nothing is there; its token. :class:`ConditionFailed` otherwise."""
    return _applied_or_raise(uri, data, _create)


def replace(uri: str, data: bytes, token: str) -> str:
    """Write ``data`` at ``uri`` only when the object there is still the version ``token``; the new token."""
    return _applied_or_raise(uri, data, lambda u, d: _replace(u, d, token))


def _applied_or_raise(uri: str, data: bytes, write) -> str:
    """A conditional write whose first attempt the store applied but whose answer was lost (a reset) is retried
    by the client and then fails its own condition: what is there is then this write's bytes (each writer's are
    unique: a lease id and renewal time, a new version's name), and the write succeeded."""
    try:
        return write(uri, data)
    except ConditionFailed:
        try:
            there, token = read(uri)
        except FileNotFoundError:
            raise ConditionFailed(uri) from None
        if there == data:
            return token
        raise


def _create(uri: str, data: bytes) -> str:
    from infra.storage import filesystem

    fs, path = filesystem(uri)
    kind = _protocol(fs)
    if kind == "s3":
        bucket, key, _ = fs.split_path(path)
        with _refusal(uri):
            return fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")["ETag"]
    if kind == "gs":
        with _refusal(uri):
            fs.pipe_file(path, data, mode="create")
        return str(fs.info(path).get("generation") or "")
    if kind == "file":
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_beside(target, data)
        try:
            os.link(tmp, target)  # never replaces: the first writer's file stays
        except FileExistsError:
            raise ConditionFailed(uri) from None
        finally:
            os.unlink(tmp)
        return _digest(data)
    with _process_lock:
        if fs.exists(path):
            raise ConditionFailed(uri)
        fs.pipe_file(path, data)
    return _digest(data)


def _replace(uri: str, data: bytes, token: str) -> str:
    from infra.storage import filesystem

    fs, path = filesystem(uri)
    kind = _protocol(fs)
    if kind == "s3":
        bucket, key, _ = fs.split_path(path)
        with _refusal(uri, gone="failed"):
            return fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfMatch=token)["ETag"]
    if kind == "gs":
        return _gcs_upload(fs, path, data, token, uri)
    if kind == "file":
        target = Path(path)
        with _local_lock(path):
            try:
                current = _digest(target.read_bytes())
            except FileNotFoundError:
                raise ConditionFailed(uri) from None
            if current != token:
                raise ConditionFailed(uri)
            os.replace(_temp_beside(target, data), target)
        return _digest(data)
    with _process_lock:
        if not fs.exists(path) or _digest(fs.cat_file(path)) != token:
            raise ConditionFailed(uri)
        fs.pipe_file(path, data)
    return _digest(data)


def delete(uri: str, token: str) -> None:
    """Remove the object at ``uri`` only when it is still the version ``token`` (gone already: done)."""
    from infra.storage import filesystem

    fs, path = filesystem(uri)
    kind = _protocol(fs)
    if kind == "s3":
        bucket, key, _ = fs.split_path(path)
        with _refusal(uri, gone="done"):
            fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=token)
        return
    if kind == "gs":
        bucket, key, _ = fs.split_path(path)
        with _refusal(uri, gone="done"):  # the generation looked at too: a store that ignored the condition
            if str(fs.info(path).get("generation") or "") != token:
                raise ConditionFailed(uri)
            fs.call("DELETE", "b/{}/o/{}", bucket, key, ifGenerationMatch=token)
        return
    if kind == "file":
        with _local_lock(path):
            try:
                if _digest(Path(path).read_bytes()) != token:
                    raise ConditionFailed(uri)
                os.unlink(path)
            except FileNotFoundError:
                return
        return
    with _process_lock:
        if fs.exists(path):
            if _digest(fs.cat_file(path)) != token:
                raise ConditionFailed(uri)
            fs.rm_file(path)


def _gcs_upload(fs, path: str, data: bytes, generation: str, uri: str) -> str:
    bucket, key, _ = fs.split_path(path)
    from urllib.parse import quote

    import json

    boundary = f"structcse-{uuid.uuid4().hex}"  # a multipart upload: metadata and bytes in one request
    body = (f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{json.dumps({'name': key})}"
            f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n").encode() + data + \
        f"\r\n--{boundary}--\r\n".encode()
    with _refusal(uri, gone="failed"):
        answer = fs.call("POST", f"{fs._location}/upload/storage/v1/b/{quote(bucket)}/o", uploadType="multipart",
                         ifGenerationMatch=generation, data=body, json_out=True,
                         headers={"Content-Type": f"multipart/related; boundary={boundary}"})
    return str(answer.get("generation") or "")


def _temp_beside(target: Path, data: bytes) -> Path:
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return tmp
