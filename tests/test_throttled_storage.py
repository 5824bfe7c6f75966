"""Object storage as it behaves (infra/storage.py): a store answering a share of requests ``503 SlowDown`` or
resetting the connection (tests/fault_proxy.py in front of moto's server) gives the same sets and models as
one that does not, the retries counted; a missing bucket or an endpoint that does not answer is one line in
seconds, and a bucket is never created."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from tests.conftest import MOTO_BUCKET


@pytest.fixture()
def throttled(s3_server, monkeypatch):
    import os

    from tests.fault_proxy import FaultProxy

    proxy = FaultProxy(os.environ["AWS_ENDPOINT_URL_S3"], rate=0.12, reset_share=0.5, seed=3)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.endpoint)  # infra.storage makes a client for this endpoint
    yield proxy
    proxy.stop()


def test_sets_and_models_written_through_a_throttling_store_are_the_same(throttled, tmp_path, monkeypatch):
    from infra import storage
    from infra.publish import check_complete, publish_folder
    from infra.cache import local_copy
    from setformat.io import read_table, write_manifest, write_table

    monkeypatch.setenv("STRUCTCSE_CACHE", str(tmp_path / "cache"))
    before = storage.retries()
    table = pa.table({"sentence": [f"sentence {i}" for i in range(500)], "page_id": list(range(500))})
    where = f"s3://{MOTO_BUCKET}/throttled/sets/sentences"
    for part in range(2):
        write_table(table.slice(part * 250, 250), f"{where}/shard-{part:05d}.parquet")
    manifest = write_manifest(where, "sentences", 500, files=[f"shard-{p:05d}.parquet" for p in range(2)])
    assert len(manifest["file_sizes"]) == 2
    assert read_table(where).equals(table)
    model = tmp_path / "model"
    model.mkdir()
    for i in range(3):
        (model / f"part-{i}.bin").write_bytes(bytes([i]) * (1000 + i))
    for _ in range(2):  # a first publication, then a replacement (a version and its pointer)
        publish_folder(model, f"s3://{MOTO_BUCKET}/throttled/model")
    check_complete(f"s3://{MOTO_BUCKET}/throttled/model")
    copy = local_copy(f"s3://{MOTO_BUCKET}/throttled/model")
    assert {p.name: p.read_bytes() for p in copy.glob("part-*")} == {p.name: p.read_bytes() for p in model.iterdir()}
    faults = throttled.counts
    assert faults["slowdown"] > 0 and faults["reset"] > 0, faults
    assert storage.retries() > before  # counted, so a command can say so at its end


def test_a_missing_bucket_is_named_and_never_created(s3_server, capsys):
    from infra.storage import StorageError, check_storage, filesystem
    from ingest.__main__ import main

    with pytest.raises(StorageError, match="bucket 'structcse-absent' does not exist .* never created"):
        check_storage("s3://structcse-absent/sets", "--out")
    assert main(["--wikipedia", __file__, "--out", "s3://structcse-absent/sets"]) == 2
    assert "bucket 'structcse-absent' does not exist" in capsys.readouterr().err
    fs, _ = filesystem("s3://structcse-absent")
    assert not fs.exists("structcse-absent")


def test_an_endpoint_that_does_not_answer_is_one_line_in_seconds(monkeypatch):
    from infra.storage import StorageError, check_storage

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setenv("STRUCTCSE_STORAGE_ATTEMPTS", "3")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "any-key")  # signed, then sent: the endpoint is what fails
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "any-secret")  # the pre-flight makes the attempts every request makes
    started = time.time()
    with pytest.raises(StorageError, match=r"the S3 endpoint http://127.0.0.1:9 does not answer .* after 3 attempts"):
        check_storage("s3://any-bucket/sets", "--data")
    assert time.time() - started < 20
