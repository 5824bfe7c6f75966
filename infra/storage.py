"""The one storage client: every local path and URI (``s3://``, ``gs://``, ``memory://``, ``file://``) is read
and written through fsspec, configured here, so one set of endpoint, credential and retry settings serves
ingest, training, Tune and evaluation alike.

* :func:`filesystem` — ``(fs, path)`` for a path or URI. Object stores get bounded retries with backoff:
  botocore's ``standard`` retry mode for ``s3://`` (it retries ``503 SlowDown``, throttling codes, reset and
  timed-out connections) with short connect timeouts, gcsfs's own retries for ``gs://``. Every retry is
  counted in this process (:func:`retries`), so a stage can say in one line how hard the store pushed back.
* :func:`arrow_filesystem` — the same fsspec filesystem for pyarrow and Ray (``pyarrow.fs.PyFileSystem``
  over fsspec's handler): Ray Train's ``storage_filesystem``, Ray Data's and pyarrow's ``filesystem=``.
* :func:`check_storage` — before any Ray work: the endpoint answers and the bucket exists (never created:
  ``s3fs`` makes a missing bucket on the first ``makedirs``), in one line naming the endpoint or the bucket,
  within seconds.

Settings (environment, so Ray's workers share them): ``STRUCTCSE_STORAGE_ATTEMPTS`` (default 10 attempts per
request), ``STRUCTCSE_STORAGE_CONNECT_TIMEOUT`` (seconds, default 5). Credentials stay fsspec's and the
provider chain's: nothing here reads or writes a key.
"""

from __future__ import annotations

import os
import threading

ATTEMPTS_ENV = "STRUCTCSE_STORAGE_ATTEMPTS"
CONNECT_TIMEOUT_ENV = "STRUCTCSE_STORAGE_CONNECT_TIMEOUT"

_lock = threading.Lock()
_retries = 0
_reporting = False


class StorageError(RuntimeError):
    """Storage that cannot be used: an endpoint that does not answer, a bucket that does not exist."""


def _attempts() -> int:
    return max(1, int(os.environ.get(ATTEMPTS_ENV) or 10))


def _connect_timeout() -> float:
    return float(os.environ.get(CONNECT_TIMEOUT_ENV) or 5)


def _count_retry(**kwargs) -> None:
    """botocore's ``needs-retry`` hook is asked after every attempt; count the attempts it retries."""
    global _retries
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
    with _lock:
        _retries += 1


def retries() -> int:
    """Requests this process retried (a throttled or failed attempt that was tried again or gave up)."""
    return _retries


def storage_options(protocol: str) -> dict:
    """The fsspec options of ``protocol``'s filesystem: bounded retries and timeouts."""
    if protocol in ("s3", "s3a"):
        from aiobotocore.session import AioSession

        session = AioSession()
        session.register("needs-retry.s3", _count_retry)
        return {"session": session,
                "config_kwargs": {"retries": {"mode": "standard", "max_attempts": _attempts()},
                                  "connect_timeout": _connect_timeout(), "read_timeout": 60}}
    if protocol in ("gs", "gcs"):
        return {"retries": _attempts()}
    return {}


_instances: dict = {}


def filesystem(path: str | os.PathLike):
    """``(fs, path inside fs)`` for a local path or a URI, the filesystem configured as the module says (one
    instance per protocol and process)."""
    import fsspec
    from fsspec.core import split_protocol, strip_protocol

    text = os.fspath(path)
    protocol, _ = split_protocol(text)
    if protocol is None:
        return fsspec.filesystem("file"), os.path.abspath(os.path.expanduser(text))
    protocol = {"s3a": "s3", "gcs": "gs"}.get(protocol, protocol)
    key = (protocol, os.getpid(), os.environ.get("AWS_ENDPOINT_URL_S3"), os.environ.get("AWS_ENDPOINT_URL"),
           os.environ.get("STORAGE_EMULATOR_HOST"))
    fs = _instances.get(key)
    if fs is None:
        cls = fsspec.get_filesystem_class(protocol)
        fs = cls(**storage_options(protocol), skip_instance_cache=True) if protocol in ("s3", "gs") else cls()
        _instances[key] = fs
    return fs, fs._strip_protocol(text) if hasattr(fs, "_strip_protocol") else strip_protocol(text)


def open_file(path: str | os.PathLike, mode: str = "rb", **kwargs):
    """``fsspec.open``'s file (``compression``, ``encoding``, ... as ``fs.open`` takes them) through
    :func:`filesystem`: a context manager."""
    fs, inner = filesystem(path)
    return fs.open(inner, mode, **kwargs)


def _handler(protocol: str):
    from pyarrow.fs import FSSpecHandler

    class Handler(FSSpecHandler):
        """Pickled as its protocol: a Ray worker rebuilds :func:`filesystem`'s own instance from its environment
        (the fsspec instance's botocore session holds hooks and a copy of ``os.environ``, neither of which
        should travel)."""

        def __reduce__(self):
            return _handler, (protocol,)

    return Handler(filesystem(f"{protocol}://")[0])


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
    return PyFileSystem(_handler(fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0])), inner


def _endpoint(protocol: str) -> str:
    if protocol == "s3":
        return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "AWS S3"
    if protocol == "gs":
        return os.environ.get("STORAGE_EMULATOR_HOST") or "Google Cloud Storage"
    return protocol


def check_storage(uri: str, what: str = "storage") -> None:
    """For a bucket URI: raise :class:`StorageError` in one line, within seconds, when its endpoint does not
    answer or its bucket does not exist. Local paths and ``memory://`` pass."""
    from fsspec.core import split_protocol

    from infra.secrets import redact_text

    protocol, rest = split_protocol(os.fspath(uri))
    protocol = {"s3a": "s3", "gcs": "gs"}.get(protocol or "", protocol)
    if protocol not in ("s3", "gs"):
        return
    bucket = rest.split("/", 1)[0]
    endpoint = redact_text(_endpoint(protocol))
    if protocol == "s3":
        import botocore.session
        from botocore.config import Config
        from botocore.exceptions import ClientError, EndpointConnectionError, ConnectTimeoutError

        client = botocore.session.get_session().create_client(
            "s3", config=Config(retries={"mode": "standard", "max_attempts": 2}, connect_timeout=3, read_timeout=10))
        try:
            client.head_bucket(Bucket=bucket)
        except (EndpointConnectionError, ConnectTimeoutError) as e:
            raise StorageError(f"{what} {redact_text(uri)}: the S3 endpoint {endpoint} does not answer "
                               f"({type(e).__name__})") from None
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
    import requests

    host = os.environ.get("STORAGE_EMULATOR_HOST")
    base = (host if host and "://" in host else f"http://{host}") if host else "https://storage.googleapis.com"
    fs, _ = filesystem(uri)
    try:
        if host:
            answer = requests.get(f"{base}/storage/v1/b/{bucket}", timeout=(3, 10))
            status = answer.status_code
        else:
            status = 200 if fs.exists(bucket) else 404
    except requests.RequestException as e:
        raise StorageError(f"{what} {redact_text(uri)}: the GCS endpoint {endpoint} does not answer "
                           f"({type(e).__name__})") from None
    if status == 404:
        raise StorageError(f"{what} {redact_text(uri)}: bucket {bucket!r} does not exist at {endpoint} "
                           "(it is never created for you)")
    if status >= 400:
        raise StorageError(f"{what} {redact_text(uri)}: {endpoint} answered HTTP {status}")


def report_retries_at_exit(prog: str) -> None:
    """At this process's exit, one line on stderr saying how many storage requests were retried (when any):
    a store that throttled is survived, and said."""
    import atexit
    import sys

    global _reporting
    if _reporting:  # one line per process, however many entry points ran in it
        return
    _reporting = True

    def line() -> None:
        if _retries:
            print(f"{prog}: storage: {_retries} request(s) retried after a throttled, failed or reset attempt "
                  f"(bounded: {_attempts()} attempts each; {ATTEMPTS_ENV})", file=sys.stderr, flush=True)

    atexit.register(line)
