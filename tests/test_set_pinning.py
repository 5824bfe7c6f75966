"""A set is the files its manifest lists, pinned (setformat/integrity.py, setformat/io.py): a file rewritten
after the check stops the reader in one line instead of mixing two jobs' rows; a job's manifest lists the files
it wrote (a smaller rerun leaves no stale part listed); nested sets carry their job's marker; a job's --out is
leased (a second job refuses naming the first) and checked (a user's folder or a bucket root: exit 2, nothing
deleted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from setformat.schemas import SchemaError
from setformat.integrity import finish_job, start_job, verify_set
from setformat.io import (pin_set, pinned_dataset, pinned_refusal, read_manifest, read_pinned, read_table, write_manifest,
                         write_table)
from tests.test_aspect_pwc import write_folder

ROOT = Path(__file__).resolve().parents[1]


def _sentences(rows: int, tag: str) -> pa.Table:
    return pa.table({"sentence": [f"{tag} {i}" for i in range(rows)], "page_id": list(range(rows)),
                     "sentence_index": [0] * rows})


def _ingested(out: str) -> str:
    """A finished ingest's sentences set: two files of 3 rows."""
    job_id = start_job(out, "ingest", "python -m ingest")
    for k in range(2):
        write_table(_sentences(3, "first"), f"{out}/sentences/shard-{k:05d}.parquet")
    write_manifest(f"{out}/sentences", "sentences", 6, files=["shard-00000.parquet", "shard-00001.parquet"])
    finish_job(out, job_id)
    return f"{out}/sentences"


def _one_line(error) -> str:
    text = str(error)
    assert "\n" not in text, text
    return text


def test_a_file_rewritten_after_the_check_is_refused_in_one_line_never_read_mixed(tmp_path, ray_session):
    out = str(tmp_path / "sets")
    folder = _ingested(out)
    pinned = pin_set(folder, "sentences", required=["sentence"])
    assert pinned.rows == 6 and [f.name for f in pinned.files] == ["shard-00000.parquet", "shard-00001.parquet"]
    # a second ingest into the same --out rewrites one file (same size: only its stamp tells), and is killed
    start_job(out, "ingest", "python -m ingest")
    write_table(_sentences(3, "other"), f"{out}/sentences/shard-00001.parquet")
    for read in (lambda: read_pinned(pinned, ["sentence"]),  # the driver's read of what it checked
                 lambda: read_table(folder, ["sentence"])):  # a fresh read: no glob of a folder a job wrote
        with pytest.raises(SchemaError) as refused:
            read()
        line = _one_line(refused.value)
        assert "sentences" in line and "python -m ingest" in line, line
    with pytest.raises(SchemaError, match=r"shard-00001.parquet changed since it was checked"):
        read_pinned(pinned)
    # Ray Data's read tasks (the training's reads, every epoch) refuse it too: the driver gets the same line back
    with pytest.raises(Exception, match=r"shard-00001.parquet changed since it was checked") as in_ray:
        pinned_dataset(pinned, ["sentence"]).take_all()
    assert _one_line(pinned_refusal(in_ray.value)).startswith("set 'sentences' at ")


def test_a_smaller_aspects_rerun_leaves_no_stale_part(tmp_path, monkeypatch):
    from ingest.aspects import pwc
    from ingest.aspects.__main__ import main

    monkeypatch.setattr(pwc, "FILE_ROWS", 1)  # a file per row: a run with fewer rows writes fewer parts
    folder = write_folder(tmp_path / "pwc")
    out = tmp_path / "aspects"
    assert main(["--pwc", str(folder), "--out", str(out), "--fold", "1"]) == 0
    first = sorted(p.name for p in (out / "aspect_docs").glob("*.parquet"))
    assert main(["--pwc", str(folder), "--out", str(out), "--fold", "2"]) == 0  # 4 test docs, not 12
    for name in ("aspect_docs", "task/aspect_triplets", "method/aspect_triplets"):
        manifest = read_manifest(out / name)
        on_disk = sorted(p.name for p in (out / name).glob("*.parquet"))
        assert on_disk == sorted(manifest["files"]) == sorted(manifest["file_sizes"]), name
        assert read_table(out / name).num_rows == manifest["rows"], name
    assert read_manifest(out / "aspect_docs")["rows"] == 4 and len(first) == 12


def test_nested_sets_are_refused_while_their_job_runs(tmp_path, monkeypatch):
    from ingest.aspects import pwc
    from ingest.aspects.__main__ import main

    folder = write_folder(tmp_path / "pwc")
    out = tmp_path / "aspects"
    seen = {}
    build = pwc.build_pwc_sets

    def build_then_look(*args, **kwargs):  # the job's sets are written; the job has not finished
        result = build(*args, **kwargs)
        for name, kind in (("aspect_docs", "aspect_docs"), ("task/aspect_triplets", "aspect_triplets")):
            with pytest.raises(SchemaError) as refused:
                verify_set(str(out / name), kind)
            seen[name] = _one_line(refused.value)
        return result

    monkeypatch.setattr(pwc, "build_pwc_sets", build_then_look)
    assert main(["--pwc", str(folder), "--out", str(out)]) == 0
    assert set(seen) == {"aspect_docs", "task/aspect_triplets"}
    assert all("did not finish" in line and "python -m ingest.aspects --pwc" in line for line in seen.values()), seen
    verify_set(str(out / "task" / "aspect_triplets"), "aspect_triplets")  # whole once the job is done


def test_a_second_job_into_the_same_out_refuses_naming_the_first(tmp_path, capsys):
    from ingest.aspects.__main__ import main

    folder = write_folder(tmp_path / "pwc")
    out = tmp_path / "aspects"
    assert main(["--pwc", str(folder), "--out", str(out)]) == 0
    before = sorted(p.relative_to(out) for p in out.rglob("*.parquet"))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom setformat.integrity import start_job\n"
         f"start_job({str(out)!r}, 'aspects', 'python -m ingest.aspects --pwc --first')\n"
         "print('started', flush=True)\ntime.sleep(120)"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "started"
        capsys.readouterr()
        assert main(["--pwc", str(folder), "--out", str(out), "--fold", "2"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert "python -m ingest.aspects --pwc --first" in err and f"pid {holder.pid}" in err, err
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.relative_to(out) for p in out.rglob("*.parquet")) == before  # the refused job removed nothing


def test_a_users_folder_or_a_bucket_root_is_refused_as_out_with_nothing_deleted(tmp_path, capsys, s3_server,
                                                                                 demo_world):
    from infra.storage import filesystem
    from ingest.__main__ import main as ingest_main
    from ingest.aspects.__main__ import main as aspects_main

    mine = tmp_path / "mine"
    (mine / "aspect_docs").mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    (mine / "aspect_docs" / "part-00000.parquet").write_bytes(b"my bytes")
    assert aspects_main(["--pwc", str(write_folder(tmp_path / "pwc")), "--out", str(mine)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "structcse did not write" in err, err
    assert (mine / "notes.txt").read_text() == "mine"
    assert (mine / "aspect_docs" / "part-00000.parquet").read_bytes() == b"my bytes"

    fs, _ = filesystem(f"{s3_server}/user-folder/mine.txt")
    fs.pipe(f"{s3_server}/user-folder/mine.txt".split("://", 1)[1], b"mine")
    dump = str(demo_world.wikipedia_dump)
    for out, says in ((f"{s3_server}/user-folder", "structcse did not write"), (s3_server, "bucket root")):
        assert ingest_main(["--wikipedia", dump, "--out", out]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and says in err, err
    assert fs.cat_file(f"{s3_server}/user-folder/mine.txt".split("://", 1)[1]) == b"mine"


def test_a_job_seals_only_the_files_it_names_with_the_rows_they_hold(tmp_path):
    out = str(tmp_path / "sets")
    job_id = start_job(out, "ingest", "python -m ingest")
    write_table(_sentences(3, "a"), f"{out}/sentences/shard-00000.parquet")
    with pytest.raises(ValueError, match="must name the files the job wrote"):
        write_manifest(f"{out}/sentences", "sentences", 3)  # a listing would certify an earlier run's parts
    with pytest.raises(SchemaError, match="would say 4 rows, its 1 file.s. hold 3"):
        write_manifest(f"{out}/sentences", "sentences", 4, files=["shard-00000.parquet"])
    write_manifest(f"{out}/sentences", "sentences", 3, files=["shard-00000.parquet"])
    finish_job(out, job_id)
    assert read_table(f"{out}/sentences").num_rows == 3
