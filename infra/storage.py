"""The one storage client: every local path and URI (``s3://``, ``gs://``, ``memory://``, ``file://``) is read
and written through fsspec, configured here, so one set of endpoint, credential and retry settings serves
ingest, training, Tune and evaluation alike.

* :func:`filesystem` — ``(fs, path)`` for a path or URI. Object stores get one bounded retry loop per
  request, with backoff: botocore's ``standard`` retry mode for ``s3://`` (it retries ``503 SlowDown``,
  throttling codes, reset and timed-out connections; s3fs's own request retries are off, so the attempts are
  botocore's alone), gcsfs's ``retry_request`` for ``gs://`` with this module's attempts (gcsfs fixes its 6 at
  class definition; :class:`_BoundedGCS` re-wraps the request). A response body cut short (a reset mid-body)
  is read again by s3fs's read retries (``cat``, ``open``'s ranged reads, ``get``), bounded by the same
  attempts; gcsfs retries the whole request. Every failed attempt (retried, or the last one) is counted in
  this process (:func:`retries`), so a stage can say in one line how hard the store pushed back. No listing
  cache: ``exists``, ``isfile``, ``size``, ``ls`` ask the store each time (another process may have written
  since).
* :func:`arrow_filesystem` — the same fsspec filesystem for pyarrow and Ray (``pyarrow.fs.PyFileSystem``
  over fsspec's handler): Ray Train's ``storage_filesystem``, Ray Data's and pyarrow's ``filesystem=``.
* :func:`check_storage` — before any Ray work: the endpoint answers and the bucket exists (never created:
  ``s3fs`` makes a missing bucket on the first ``makedirs``), in one line naming the endpoint or the bucket,
  with the same attempts and timeouts as every other request.

Settings (environment, so Ray's workers share them): ``STRUCTCSE_STORAGE_ATTEMPTS`` (default 10 attempts per
request), ``STRUCTCSE_STORAGE_CONNECT_TIMEOUT`` (seconds, default 5), ``STRUCTCSE_STORAGE_READ_TIMEOUT``
(seconds without a byte from the store, default 15). The bound: a request to an endpoint that accepts
connections and never answers fails after exactly ``attempts`` attempts, within
``attempts × read timeout`` (``+ connect timeout`` each where connecting hangs too) plus the backoff between
them: for ``s3://`` botocore's ``rand × min(2**(k-1), 20)`` s before retry ``k`` (at most 3 s in all for 3
attempts, 111 s for 10), for ``gs://`` gcsfs's ``min(rand + 2**(k-1), 32)`` s (at most 5 s for 3 attempts,
164 s for 10). At the defaults: 10 × 15 s + 111 s ≈ 4.4 min (s3), 10 × 15 s + 164 s ≈ 5.2 min (gs); with
``STRUCTCSE_STORAGE_ATTEMPTS=3``: under 48 s (s3), 50 s (gs). Credentials stay fsspec's and the provider
chain's: nothing here reads or writes a key.
"""

from __future__ import annotations

import contextlib
import os
import threading

ATTEMPTS_ENV = "STRUCTCSE_STORAGE_ATTEMPTS"
CONNECT_TIMEOUT_ENV = "STRUCTCSE_STORAGE_CONNECT_TIMEOUT"
READ_TIMEOUT_ENV = "STRUCTCSE_STORAGE_READ_TIMEOUT"
SETTINGS_ENV = (ATTEMPTS_ENV, CONNECT_TIMEOUT_ENV, READ_TIMEOUT_ENV)

_lock = threading.Lock()
_retries = 0
_reporting = False
_said = False  # a StorageError of check_storage said this process's storage failure (and its attempts)


def is_uri(path) -> bool:
    """The one test of a path: True for a URI that names a store (``s3://``, ``gs://``, ``memory://``, …),
    False for a local path — a ``file://`` URI included, which is a local path written as a URI (the local
    checks, such as the symlink guard of a set folder, apply to it too; :func:`local_path` strips it)."""
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    return isinstance(text, str) and "://" in text and not text.startswith("file://")


def local_path(path) -> str:
    """A local path as the OS takes it: ``file:///x`` -> ``/x``; any other path as given."""
    text = os.fspath(path)
    return text[len("file://"):] if text.startswith("file://") else text


class StorageError(RuntimeError):
    """Storage that cannot be used: an endpoint that does not answer, a bucket that does not exist."""


def _attempts() -> int:
    return max(1, int(os.environ.get(ATTEMPTS_ENV) or 10))


def _connect_timeout() -> float:
    return float(os.environ.get(CONNECT_TIMEOUT_ENV) or 5)


def _read_timeout() -> float:
    return float(os.environ.get(READ_TIMEOUT_ENV) or 15)


def _count(n: int = 1) -> None:
    global _retries
    with _lock:
        _retries += n


def _count_retry(**kwargs) -> None:
    """botocore's ``needs-retry`` hook is asked after every attempt; count the attempts it retries."""
    response = kwargs.get("response")
    if response is None and kwargs.get("caught_exception") is None:
        return
    if response is not None:
        meta = (response[1] or {}).get("ResponseMetadata", {}) if isinstance(response, tuple) else {}
        status = meta.get("HTTPStatusCode", 200)
        error = (response[1] or {}).get("Error", {}) if isinstance(response, tuple) else {}
        if status < 500 and error.get("Code") not in {"SlowDown", "Throttling", "ThrottlingException",
                                                         "RequestTimeout", "RequestTimeTooSkewed"}:
            return
    _count()


def retries() -> int:
    """Requests this process retried (a throttled or failed attempt that was tried again or gave up)."""
    return _retries


def storage_options(protocol: str) -> dict:
    """The fsspec options of ``protocol``'s filesystem: bounded retries and timeouts, no listing cache."""
    if protocol in ("s3", "s3a"):
        from aiobotocore.session import AioSession

        session = AioSession()
        session.register("needs-retry.s3", _count_retry)
        return {"session": session, "use_listings_cache": False,
                "config_kwargs": {"retries": {"mode": "standard", "total_max_attempts": _attempts()},
                                  "connect_timeout": _connect_timeout(), "read_timeout": _read_timeout()}}
    if protocol in ("gs", "gcs"):
        from aiohttp import ClientTimeout

        # sock_read: the longest wait for a byte (headers or body), not a cap on a whole large download
        return {"use_listings_cache": False,
                "requests_timeout": ClientTimeout(total=None, sock_connect=_connect_timeout(),
                                                  sock_read=_read_timeout())}
    return {}


def _bounded_s3():
    """s3fs's ``S3FileSystem`` with one retry loop per request, botocore's: s3fs's ``_call_s3`` wraps every
    call in its own ``retries`` (5) attempts around botocore's, so botocore's ``max_attempts=2`` (which counts
    the retries after the first attempt: 3 requests; ``total_max_attempts`` counts them all) made 15 requests
    (and a ``cat``'s read wrapper 5 times more). Here a call is made once by s3fs (botocore retries it), and
    what botocore gave up on is raised as not retryable; ``retries`` (our attempts) is left to s3fs's body
    re-reads (``cat_file``, ranged reads of ``open``, ``get_file``), which retry only a body cut short. Each
    failed body read is counted."""
    from s3fs import S3FileSystem
    from s3fs.core import S3_RETRYABLE_ERRORS, _error_wrapper

    class _Body:
        """A ``get_object`` body whose failed reads (a reset or a short body) are counted."""

        def __init__(self, body):
            self._body = body

        def __getattr__(self, name):
            return getattr(self._body, name)

        async def read(self, *args, **kwargs):
            try:
                return await self._body.read(*args, **kwargs)
            except S3_RETRYABLE_ERRORS:
                _count()
                raise

        def close(self):
            return self._body.close()

    class BoundedS3FileSystem(S3FileSystem):
        # s3fs's body re-reads; the requests' attempts are botocore's total_max_attempts
        retries = property(lambda self: _attempts())

        async def _call_s3(self, method, *akwarglist, **kwargs):
            await self.set_session()
            s3 = await self.get_s3(kwargs.get("Bucket"))
            call = getattr(s3, method)
            additional = self._get_s3_method_kwargs(call, *akwarglist, **kwargs)
            try:
                out = await _error_wrapper(call, kwargs=additional, retries=1)
            except S3_RETRYABLE_ERRORS as e:  # botocore's attempts are spent: not one for s3fs's read retries
                raise OSError(f"{type(e).__name__}: {e}") from e
            if method == "get_object" and isinstance(out, dict) and "Body" in out:
                out["Body"] = _Body(out["Body"])
            return out

    BoundedS3FileSystem.__module__, BoundedS3FileSystem.__qualname__ = __name__, "BoundedS3FileSystem"
    return BoundedS3FileSystem


def _bounded_gcs():
    """gcsfs's ``GCSFileSystem`` retrying ``STRUCTCSE_STORAGE_ATTEMPTS`` times: gcsfs decorates ``_request``
    (and its file downloads) with ``retry_request(retries=6)`` when the class is defined, so neither a
    ``retries=`` argument nor an instance attribute changes it. Here the undecorated methods of
    ``gcsfs.core.GCSFileSystem`` are wrapped again with our attempts, each failed attempt that gcsfs retries
    (or gives up on) counted; ``_get_file_concurrent``, whose parts are requests retried on their own, is made
    once. The class sits under gcsfs's experimental ``ExtendedGcsFileSystem`` where gcsfs exports that one
    (its zonal and HNS buckets' gRPC calls keep their own retry settings)."""
    import functools
    import logging

    import gcsfs
    from gcsfs.core import GCSFileSystem as Core
    from gcsfs.retry import is_retriable, retry_request

    class RaisedAnyway(logging.Filter):
        """``retry_request`` logs the error it gives up on, traceback and all, then raises it: the caller
        says it (a command in one line)."""

        def filter(self, record):
            return record.funcName != "retry_request"

    logging.getLogger("gcsfs").addFilter(RaisedAnyway())

    @functools.lru_cache(maxsize=None)
    def retrying(name: str, attempts: int):
        inner = getattr(Core, name).__wrapped__

        async def attempt(self, *args, **kwargs):
            try:
                return await inner(self, *args, **kwargs)
            except Exception as e:
                if is_retriable(e):
                    _count()
                raise

        attempt.__name__ = inner.__name__
        return retry_request(retries=attempts)(attempt)

    class BoundedCore(Core):
        retries = property(lambda self: _attempts())

        async def _request(self, *args, **kwargs):
            return await retrying("_request", self.retries)(self, *args, **kwargs)

        async def _get_file_request(self, *args, **kwargs):
            return await retrying("_get_file_request", self.retries)(self, *args, **kwargs)

        _get_file_concurrent = Core._get_file_concurrent.__wrapped__

    if gcsfs.GCSFileSystem is Core:
        cls = BoundedCore
    else:
        class cls(gcsfs.GCSFileSystem, BoundedCore):  # MRO: Extended, ..., BoundedCore, Core
            pass
    cls.__module__, cls.__name__, cls.__qualname__ = __name__, "BoundedGCSFileSystem", "BoundedGCSFileSystem"
    return cls


_CLASSES = {"BoundedS3FileSystem": _bounded_s3, "BoundedGCSFileSystem": _bounded_gcs}


def __getattr__(name: str):
    """The bounded filesystem classes, made on first use (s3fs and gcsfs are the ``cloud`` extra's) and
    importable by name, so an instance pickles."""
    if name in _CLASSES:
        cls = globals()[name] = _CLASSES[name]()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_instances: dict = {}
_resolved = 0  # paths and URIs this process turned into a filesystem (a Location passed down is not one)


class Location:
    """A local path or a URI resolved once, at the edge of a command: ``uri`` as it was named (what messages,
    manifests and logs say), ``fs`` the filesystem :func:`filesystem` gives it, ``path`` the path inside ``fs``.
    What travels down a command is this object; a function that takes ``str | Location`` calls
    :func:`locate`, which returns a Location as it is, and :func:`filesystem` of a Location resolves nothing.
    ``child`` and ``parent`` move inside the same filesystem. It is a path (``os.fspath`` gives ``uri``) and it
    pickles as ``uri``: a Ray worker resolves it once in its own process (its own filesystem instance)."""

    __slots__ = ("uri", "fs", "path")

    def __init__(self, uri: str, fs, path: str):
        self.uri, self.fs, self.path = uri, fs, path

    def __fspath__(self) -> str:
        return self.uri

    def __str__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"Location({self.uri!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Location) and (self.uri, self.path) == (other.uri, other.path)

    def __hash__(self) -> int:
        return hash((self.uri, self.path))

    def __reduce__(self):
        return locate, (self.uri,)

    @property
    def remote(self) -> bool:
        """True for an object store (``s3://``, ``gs://``, ``memory://``, ...), False for a local path."""
        return is_uri(self.uri)

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def child(self, name: str) -> "Location":
        """``name`` inside this folder (``a/b`` goes two levels down)."""
        name = name.strip("/")
        return Location(f"{self.uri.rstrip('/')}/{name}", self.fs, f"{self.path.rstrip('/')}/{name}")

    @property
    def parent(self) -> "Location":
        """The folder holding this one (a bucket's root is its own parent; a relative name's is ``.``)."""
        uri, path = self.uri.rstrip("/"), self.path.rstrip("/")
        uri_up = "." if "/" not in uri else uri.rsplit("/", 1)[0]
        if uri_up.endswith(":/"):
            uri_up = uri
        path_up = path.rsplit("/", 1)[0] if "/" in path else path
        return Location(uri_up, self.fs, path_up or "/")

    def exists(self) -> bool:
        return self.fs.exists(self.path)

    def isdir(self) -> bool:
        return self.fs.isdir(self.path)

    def isfile(self) -> bool:
        return self.fs.isfile(self.path)

    def read_bytes(self) -> bytes:
        return self.fs.cat_file(self.path)


def locate(path: str | os.PathLike | Location) -> Location:
    """``path`` as a :class:`Location`: resolved here, once (a Location is returned as it is)."""
    if isinstance(path, Location):
        return path
    fs, inner = filesystem(path)
    return Location(os.fspath(path), fs, inner)


def resolutions() -> int:
    """How many paths and URIs this process has turned into a filesystem (:func:`filesystem` of a string)."""
    return _resolved


def filesystem(path: str | os.PathLike | Location):
    """``(fs, path inside fs)`` for a local path or a URI, the filesystem configured as the module says (one
    instance per protocol and process); for a :class:`Location`, its own (nothing resolved again)."""
    import fsspec
    from fsspec.core import split_protocol, strip_protocol

    global _resolved
    if isinstance(path, Location):
        return path.fs, path.path
    _resolved += 1
    text = os.fspath(path)
    protocol, _ = split_protocol(text)
    if protocol is None:
        return fsspec.filesystem("file"), os.path.abspath(os.path.expanduser(text))
    protocol = {"s3a": "s3", "gcs": "gs"}.get(protocol, protocol)
    key = (protocol, os.getpid(), os.environ.get("AWS_ENDPOINT_URL_S3"), os.environ.get("AWS_ENDPOINT_URL"),
           os.environ.get("STORAGE_EMULATOR_HOST"), *(os.environ.get(name) for name in SETTINGS_ENV))
    fs = _instances.get(key)
    if fs is None:
        if protocol in ("s3", "gs"):
            cls = __getattr__({"s3": "BoundedS3FileSystem", "gs": "BoundedGCSFileSystem"}[protocol])
            fs = cls(**storage_options(protocol), skip_instance_cache=True)
        else:
            fs = fsspec.get_filesystem_class(protocol)()
        _instances[key] = fs
    return fs, fs._strip_protocol(text) if hasattr(fs, "_strip_protocol") else strip_protocol(text)


def open_file(path: str | os.PathLike, mode: str = "rb", **kwargs):
    """``fsspec.open``'s file (``compression``, ``encoding``, ... as ``fs.open`` takes them) through
    :func:`filesystem`: a context manager."""
    fs, inner = filesystem(path)
    return fs.open(inner, mode, **kwargs)


def _handler(protocol: str, fs=None):
    from pyarrow.fs import FSSpecHandler

    class Handler(FSSpecHandler):
        """Pickled as its protocol: a Ray worker rebuilds :func:`filesystem`'s own instance from its environment
        (the fsspec instance's botocore session holds hooks and a copy of ``os.environ``, neither of which
        should travel)."""

        def __reduce__(self):
            return _handler, (protocol,)

    return Handler(fs if fs is not None else filesystem(f"{protocol}://")[0])


def arrow_filesystem(path: str | os.PathLike):
    """``(pyarrow filesystem, path inside it)``: :func:`filesystem`'s fsspec filesystem as pyarrow sees it (Ray
    Train's ``RunConfig(storage_filesystem=...)``, Ray Data's and pyarrow's ``filesystem=``). It pickles as its
    protocol, so Ray's workers use their own process's instance."""
    from fsspec.core import split_protocol
    from pyarrow.fs import LocalFileSystem, PyFileSystem

    fs, inner = filesystem(path)
    protocol = split_protocol(os.fspath(path))[0]
    if protocol in (None, "file", "local"):
        return LocalFileSystem(), inner
    return PyFileSystem(_handler(fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0], fs)), inner


def _endpoint(protocol: str) -> str:
    if protocol == "s3":
        return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "AWS S3"
    if protocol == "gs":
        return os.environ.get("STORAGE_EMULATOR_HOST") or "Google Cloud Storage"
    return protocol


def check_storage(uri: str, what: str = "storage") -> None:
    """For a bucket URI: raise :class:`StorageError` in one line when its endpoint does not answer (after the
    module's attempts, within its bound) or its bucket does not exist. Local paths and ``memory://`` pass."""
    from fsspec.core import split_protocol

    global _said
    protocol, rest = split_protocol(os.fspath(uri))
    protocol = {"s3a": "s3", "gcs": "gs"}.get(protocol or "", protocol)
    if protocol not in ("s3", "gs"):
        return
    try:
        _check(protocol, rest, uri, what)
    except StorageError:
        _said = True  # the one line a command prints says it: no second line about the retries at exit
        raise


def _check(protocol: str, rest: str, uri: str, what: str) -> None:
    from infra.secrets import redact_text

    bucket = rest.split("/", 1)[0]
    endpoint = redact_text(_endpoint(protocol))
    if protocol == "s3":
        import botocore.session
        from botocore.config import Config
        from botocore.exceptions import ClientError, HTTPClientError, NoCredentialsError
        from botocore.exceptions import ConnectionError as BotoConnectionError

        session = botocore.session.get_session()
        session.register("needs-retry.s3", _count_retry)
        client = session.create_client("s3", config=Config(
            retries={"mode": "standard", "total_max_attempts": _attempts()}, connect_timeout=_connect_timeout(),
            read_timeout=_read_timeout()))
        try:
            client.head_bucket(Bucket=bucket)
        except (BotoConnectionError, HTTPClientError) as e:  # refused, reset, timed out: after every attempt
            raise StorageError(f"{what} {redact_text(uri)}: the S3 endpoint {endpoint} does not answer "
                               f"({type(e).__name__} after {_attempts()} attempts; {ATTEMPTS_ENV})") from None
        except NoCredentialsError:
            raise StorageError(f"{what} {redact_text(uri)}: no S3 credentials found for {endpoint} (the provider "
                               "chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile, an instance role)") from None
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket", "NotFound"):
                raise StorageError(f"{what} {redact_text(uri)}: bucket {bucket!r} does not exist at {endpoint} "
                                   "(it is never created for you)") from None
            if code in ("403", "AccessDenied"):
                raise StorageError(f"{what} {redact_text(uri)}: access to bucket {bucket!r} denied at {endpoint} "
                                   "(check the credentials in the environment)") from None
            raise StorageError(f"{what} {redact_text(uri)}: {endpoint} answered {code or e}") from None
        return
    import asyncio

    import aiohttp
    from gcsfs.retry import HttpError

    fs, _ = filesystem(uri)  # the same attempts, timeouts and retry count as every gs:// request
    try:
        fs.call("GET", "b/{}", bucket, json_out=True)
    except FileNotFoundError:
        raise StorageError(f"{what} {redact_text(uri)}: bucket {bucket!r} does not exist at {endpoint} "
                           "(it is never created for you)") from None
    except HttpError as e:
        raise StorageError(f"{what} {redact_text(uri)}: {endpoint} answered HTTP {e.code}") from None
    except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError) as e:
        raise StorageError(f"{what} {redact_text(uri)}: the GCS endpoint {endpoint} does not answer "
                           f"({type(e.__cause__ or e).__name__} after {_attempts()} attempts; {ATTEMPTS_ENV})") from None
    except OSError as e:
        if "Forbidden" in str(e):
            raise StorageError(f"{what} {redact_text(uri)}: access to bucket {bucket!r} denied at {endpoint} "
                               "(check the credentials in the environment)") from None
        raise StorageError(f"{what} {redact_text(uri)}: {endpoint} answered {redact_text(str(e))[:200]}") from None


@contextlib.contextmanager
def retries_reported(prog: str):
    """Around a command (its ``main``): when it ends, one line on stderr saying how many storage requests it
    retried (when any): a store that throttled is survived, and said. A command run inside another (the demo's
    ingest) is said once, by the outermost; a command whose storage failure was already said
    (``check_storage``) adds no second line. Said when the command returns, not at the process's exit: a
    process that runs commands in turn (a test session, a notebook) prints each one's line with its output."""
    import sys

    global _reporting, _said
    if _reporting:
        yield
        return
    _reporting, _said, start = True, False, _retries
    try:
        yield
    finally:
        _reporting = False
        retried = _retries - start
        if retried and not _said:
            print(f"{prog}: storage: {retried} request(s) retried after a throttled, failed or reset attempt "
                  f"(bounded: {_attempts()} attempts each; {ATTEMPTS_ENV})", file=sys.stderr, flush=True)


def read_text(path: str | os.PathLike, what: str = "file") -> str:
    """The text of a local file or of the object at a URI; FileNotFoundError names ``what`` and the path."""
    from infra.secrets import redact_text

    text = os.fspath(path)
    fs, local = filesystem(text)
    if not fs.isfile(local):
        raise FileNotFoundError(f"{what} {redact_text(text)} does not exist")
    return fs.cat_file(local).decode()
