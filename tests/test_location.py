"""A location resolved once (infra/storage.py ``Location``): a set folder named at the edge of a command becomes its
filesystem and inner path there, and what the set readers pass down is that object — checking, pinning, reading
and re-checking a set resolve nothing again; a string is resolved once per call."""

from __future__ import annotations

import os
import pickle

from infra.storage import locate, resolutions
from setformat.integrity import finish_job, start_job, verify_set
from setformat.io import check_set, manifest_path, pin_set, read_manifest, read_pinned, read_table, write_manifest, \
    write_table
from tests.test_set_pinning import _sentences


def _ingested(out: str) -> str:
    job_id = start_job(out, "ingest", "python -m ingest")
    for k in range(2):
        write_table(_sentences(3, f"part {k}"), f"{out}/sentences/shard-{k:05d}.parquet")
    write_manifest(f"{out}/sentences", "sentences", 6, files=["shard-00000.parquet", "shard-00001.parquet"])
    finish_job(out, job_id)
    return f"{out}/sentences"


def test_a_set_named_once_is_checked_pinned_and_read_without_its_path_resolved_again(tmp_path):
    where = locate(_ingested(str(tmp_path / "sets")))
    before = resolutions()
    verify_set(where, "sentences")
    assert check_set(where, "sentences", required=["sentence"]).names == ["sentence", "page_id", "sentence_index"]
    pinned = pin_set(where, "sentences", required=["sentence"])
    assert read_pinned(pinned, ["sentence"]).num_rows == 6
    assert read_table(where, ["sentence"], kind="sentences")["sentence"].to_pylist()[3] == "part 1 0"
    assert read_manifest(where)["rows"] == 6 and manifest_path(where).name == "_manifest.json"
    assert resolutions() == before


def test_a_set_named_as_a_string_is_resolved_once_per_call(tmp_path):
    folder = _ingested(str(tmp_path / "sets"))
    before = resolutions()
    read_table(folder, ["sentence"], kind="sentences")
    assert resolutions() - before == 1


def test_a_location_is_its_uri_as_a_path_pickles_as_it_and_moves_inside_its_filesystem(tmp_path):
    bucket = locate("memory://structcse-test/sets")
    assert os.fspath(bucket) == str(bucket) == "memory://structcse-test/sets" and bucket.remote
    intros = bucket.child("intros")
    assert (intros.uri, intros.path, intros.fs) == ("memory://structcse-test/sets/intros", "/structcse-test/sets/intros",
                                                    bucket.fs)
    assert intros.parent == bucket and bucket.parent.uri == "memory://structcse-test"
    assert pickle.loads(pickle.dumps(intros)) == intros
    assert locate("sets").parent.uri == "." and not locate(f"file://{tmp_path}").remote

    pinned = pin_set(locate(_ingested(str(tmp_path / "sets"))), "sentences", required=["sentence"])
    back = pickle.loads(pickle.dumps(pinned))  # what a Ray worker gets: resolved once there, on unpickling
    before = resolutions()
    assert read_pinned(back, ["sentence"]).num_rows == 6 and resolutions() == before
