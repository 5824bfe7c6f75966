"""A failed job never feeds the next (setformat/integrity.py): a set of a job that did not finish, a set left
by an earlier job, a listed file cut short are refused in one line naming the job to rerun; readers read only
the files a manifest lists."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest

from setformat.schemas import SchemaError
from setformat.integrity import finish_job, job_file, read_job, start_job
from setformat.io import check_set, set_files, write_manifest, write_table


def _sentences_set(out, job_id_holder: list | None = None, rows: int = 3, name: str = "shard-00000.parquet"):
    table = pa.table({"sentence": [f"sentence {i}" for i in range(rows)], "page_id": list(range(rows)),
                      "sentence_index": [0] * rows})
    write_table(table, f"{out}/sentences/{name}")
    return write_manifest(f"{out}/sentences", "sentences", rows, files=[name])


def test_a_set_of_a_job_that_did_not_finish_is_refused_naming_the_job(tmp_path):
    out = str(tmp_path / "sets")
    job_id = start_job(out, "ingest", "python -m ingest")
    manifest = _sentences_set(out)
    assert manifest["job_id"] == job_id and manifest["file_sizes"]["shard-00000.parquet"] > 0
    with pytest.raises(SchemaError, match=r"the ingest job writing .* did not finish; rerun `python -m ingest`"):
        check_set(f"{out}/sentences", "sentences", required=["sentence"])
    finish_job(out, job_id)
    assert read_job(out, "ingest")["status"] == "done"
    check_set(f"{out}/sentences", "sentences", required=["sentence"])


def test_a_set_left_by_an_earlier_job_is_refused(tmp_path):
    out = str(tmp_path / "sets")
    first = start_job(out, "ingest")
    _sentences_set(out)
    finish_job(out, first)
    second = start_job(out, "ingest")  # a rerun that wrote no sentences set, and finished
    finish_job(out, second)
    with pytest.raises(SchemaError, match="left by an earlier job"):
        check_set(f"{out}/sentences", "sentences", required=["sentence"])


def test_a_listed_file_cut_short_is_refused_and_an_unlisted_one_is_never_read(tmp_path):
    out = str(tmp_path / "sets")
    job_id = start_job(out, "ingest")
    _sentences_set(out)
    finish_job(out, job_id)
    stray = tmp_path / "sets" / "sentences" / "shard-00009.parquet"
    shutil.copy(tmp_path / "sets" / "sentences" / "shard-00000.parquet", stray)
    assert [p.rsplit("/", 1)[1] for p in set_files(f"{out}/sentences")] == ["shard-00000.parquet"]
    (tmp_path / "sets" / "sentences" / "shard-00000.parquet").write_bytes(b"")
    with pytest.raises(SchemaError, match="shard-00000.parquet has 0 bytes, the manifest says"):
        check_set(f"{out}/sentences", "sentences", required=["sentence"])


def test_a_folder_without_manifest_in_a_jobs_output_is_refused(tmp_path):
    out = str(tmp_path / "sets")
    job_id = start_job(out, "ingest")
    write_table(pa.table({"sentence": ["a"], "page_id": [1], "sentence_index": [0]}),
                f"{out}/sentences/shard-00000.parquet")
    finish_job(out, job_id)
    with pytest.raises(SchemaError, match="no _manifest.json"):
        check_set(f"{out}/sentences", "sentences", required=["sentence"])


def test_ingest_marks_its_job_and_seals_every_set(demo_sets):
    out, manifest = demo_sets
    job = json.loads(Path(job_file(str(out), "ingest")).read_text())
    assert job["status"] == "done" and job["job_id"] == manifest["job_id"]
    for name in ("sentences", "wikidata", "intros", "entities", "entity_pairs"):
        set_manifest = json.loads((out / name / "_manifest.json").read_text())
        assert (set_manifest["job"], set_manifest["job_id"]) == ("ingest", job["job_id"]), name
        assert set_manifest["file_sizes"], name
        sizes = {p.name: p.stat().st_size for p in (out / name).glob("*.parquet")}
        assert set_manifest["file_sizes"] == {k: sizes[k] for k in set_manifest["file_sizes"]}, name


def test_train_refuses_the_sets_of_a_killed_ingest_in_one_line(demo_sets, demo_tiny_bert, tmp_path, capsys):
    from train.cli import main

    out, _ = demo_sets
    copy = tmp_path / "sets"
    shutil.copytree(out / "sentences", copy / "sentences")
    marker = json.loads(Path(job_file(str(out), "ingest")).read_text())
    Path(job_file(str(copy), "ingest")).write_text(json.dumps({**marker, "status": "running"}))  # a killed ingest's
    started = time.time()
    code = main(["--config", "configs/simcse_unsup.yaml", "--data", str(copy), "--model", str(demo_tiny_bert),
                 "--storage", str(tmp_path / "runs"), "--num-workers", "0", "--max-steps", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "did not finish; rerun `python -m ingest`" in err
    assert time.time() - started < 30


def test_two_jobs_may_share_a_folder(tmp_path):
    out = str(tmp_path / "sets")
    ingest = start_job(out, "ingest")
    _sentences_set(out)
    finish_job(out, ingest)
    start_job(out, "aspects")  # another job into the same --out, still running: ingest's set stays whole
    check_set(f"{out}/sentences", "sentences", required=["sentence"])
