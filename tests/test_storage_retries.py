"""The storage client's bounds as infra/storage.py states them: an endpoint that accepts and never answers gets
exactly ``STRUCTCSE_STORAGE_ATTEMPTS`` requests per call (s3fs's and gcsfs's own retry loops do not multiply
them), each failing after ``STRUCTCSE_STORAGE_READ_TIMEOUT``, gs:// retries counted too; no listing cache (an
object another client wrote after a listing is seen); a store that resets after applying a PUT or cuts a GET's
body in half gives back the bytes written."""

from __future__ import annotations

import os
import time

import pytest

from tests.conftest import MOTO_BUCKET
from tests.silent_endpoint import SilentEndpoint


@pytest.fixture()
def silent(monkeypatch):
    server = SilentEndpoint()
    monkeypatch.setenv("STRUCTCSE_STORAGE_ATTEMPTS", "2")
    monkeypatch.setenv("STRUCTCSE_STORAGE_READ_TIMEOUT", "1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "any-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "any-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.endpoint)
    yield server
    server.stop()


@pytest.mark.parametrize("protocol", ["s3", "gs"])
def test_a_silent_endpoint_gets_exactly_the_attempts_and_fails_in_seconds(silent, protocol):
    pytest.importorskip("gcsfs" if protocol == "gs" else "s3fs")
    from infra import storage

    fs, path = storage.filesystem(f"{protocol}://silent-bucket/some/object.bin")
    before, started = storage.retries(), time.monotonic()
    with pytest.raises(OSError):  # botocore's ReadTimeoutError, gcsfs's timeout: after the attempts
        fs.cat_file(path)
    took = time.monotonic() - started
    assert silent.requests == 2, silent.requests  # not s3fs's 5 (or gcsfs's 6) times botocore's
    assert took < 6, took  # 2 × 1 s read timeout + backoff (s3: ≤ 1 s, gs: ≤ 2 s)
    assert storage.retries() - before == 2  # each failed attempt counted, gs:// too

    started = time.monotonic()
    with pytest.raises(storage.StorageError, match=r"does not answer .* after 2 attempts"):
        storage.check_storage(f"{protocol}://silent-bucket/sets", "--out")
    assert silent.requests == 4, silent.requests  # the pre-flight makes the same attempts
    assert time.monotonic() - started < 6


def _another_client(protocol: str):
    """A filesystem of its own (as another process has): its writes go past any cache of infra.storage's."""
    import fsspec

    return fsspec.filesystem(protocol, skip_instance_cache=True, use_listings_cache=False)


@pytest.mark.parametrize("protocol", ["s3", "gs"])
def test_no_listing_cache_an_object_written_elsewhere_after_a_listing_is_seen(protocol, s3_server, gcs_server):
    from infra.storage import filesystem

    bucket = s3_server if protocol == "s3" else gcs_server
    if bucket is None:
        pytest.skip("gcsfs or fake-gcs-server is not installed")
    fs, folder = filesystem(f"{bucket}/listing-cache/{os.getpid()}-{time.monotonic_ns()}")
    fs.pipe_file(f"{folder}/first.bin", b"abc")
    assert [p.rsplit("/", 1)[1] for p in fs.ls(folder, detail=False)] == ["first.bin"]  # a listing made
    assert fs.size(f"{folder}/first.bin") == 3

    other = _another_client(protocol)
    other.pipe_file(f"{folder}/second.bin", b"0123456789")
    other.pipe_file(f"{folder}/first.bin", b"abcdef")  # replaced
    assert fs.exists(f"{folder}/second.bin") and fs.isfile(f"{folder}/second.bin")
    assert fs.size(f"{folder}/second.bin") == 10
    assert fs.size(f"{folder}/first.bin") == 6
    assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(folder, detail=False)) == ["first.bin", "second.bin"]
    other.rm(f"{folder}/second.bin")
    assert not fs.exists(f"{folder}/second.bin")


@pytest.fixture()
def faulty(s3_server, monkeypatch):
    from tests.fault_proxy import FaultProxy

    proxy = FaultProxy(os.environ["AWS_ENDPOINT_URL_S3"], rate=0.0, reset_share=0.0, seed=5)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.endpoint)
    yield proxy
    proxy.stop()


def test_resets_after_a_put_was_applied_and_truncated_gets_give_back_the_bytes(faulty, tmp_path):
    from infra import storage

    fs, root = storage.filesystem(f"s3://{MOTO_BUCKET}/faults/{time.monotonic_ns()}")
    data = {f"{root}/part-{i}.bin": os.urandom(2000 + 131 * i) for i in range(8)}
    before = storage.retries()
    faulty.rate, faulty.reset_after_share = 0.3, 1.0  # writes: a fault is a PUT applied, its answer dropped
    for path, body in data.items():
        fs.pipe_file(path, body)
    writes = faulty.counts
    assert writes["reset_after_apply"] > 0 and writes["faults_by_method"].get("PUT"), writes
    faulty.reset_after_share, faulty.truncate_share = 0.0, 1.0  # reads: a GET's body cut in half
    for i, (path, body) in enumerate(data.items()):
        assert fs.cat_file(path) == body
        with fs.open(path, "rb") as f:  # ranged reads
            assert f.read() == body
        fs.get_file(path, str(tmp_path / f"copy-{i}"))
        assert (tmp_path / f"copy-{i}").read_bytes() == body
    faulty.rate = 0.0
    assert faulty.counts["truncated"] > 0, faulty.counts
    # each body cut short is counted (a reset before the answer may be resent by aiohttp itself, uncounted)
    assert storage.retries() - before >= faulty.counts["truncated"]

    # s3fs with its own retries off and nothing else (the obvious fix for the multiplied attempts): a body cut
    # short is not read again
    import s3fs

    plain = s3fs.S3FileSystem(retries=1, skip_instance_cache=True, endpoint_url=faulty.endpoint)
    faulty.rate = 1.0
    with pytest.raises(Exception):
        plain.cat_file(next(iter(data)))
    faulty.rate = 0.0


def test_a_command_says_its_retries_when_it_returns_once_however_nested(capsys):
    """A command's retry line comes when its ``main`` returns, not at the process's exit: a process that runs
    commands in turn (this test session, a notebook) shows each command's line with its own output, and the
    last line of ``pytest`` stays pytest's. A command inside another (the demo's ingest) is said once, by the
    outermost, with both commands' retries; a command that retried nothing says nothing."""
    from infra import storage

    with storage.retries_reported("demo"):
        storage._count(2)  # what botocore's needs-retry hook and gcsfs's retry count per retried attempt
        with storage.retries_reported("ingest"):
            storage._count(1)
        assert capsys.readouterr().err == ""  # the inner command said nothing of its own
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("demo: storage: 3 request(s) retried after a throttled"), err
    with storage.retries_reported("eval"):
        pass
    assert capsys.readouterr().err == ""
