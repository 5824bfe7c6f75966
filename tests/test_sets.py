"""setformat/io.py, the one set I/O module: listing, reading (local paths and URIs),
the schema check, the vectorised row hash and the grouped Ray Data work built on
it, atomic writes and manifests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from setformat import io as set_io
from setformat import schemas

ROWS = [{"sentence": f"sentence {i}", "page_id": i % 7, "title": f"T{i % 3}", "sentence_index": i, "wiki": "enwiki"}
        for i in range(40)]


@pytest.fixture()
def sentence_set(tmp_path):
    folder = tmp_path / "sentences"
    table = pa.Table.from_pylist(ROWS, schema=schemas.SENTENCES)
    for k in range(4):
        set_io.write_table(table.slice(10 * k, 10), str(folder / f"part-{k:05d}.parquet"))
    set_io.write_manifest(str(folder), "sentences", len(ROWS), config={"seed": 1})
    (folder / ".part-00009.parquet.tmp-123").write_bytes(b"half a file")  # a killed writer's leftover
    return folder


def test_set_files_skip_the_manifest_and_hidden_temp_files(sentence_set):
    files = set_io.set_files(sentence_set)
    assert [f.rsplit("/", 1)[1] for f in files] == [f"part-{k:05d}.parquet" for k in range(4)]
    assert set_io.set_files(sentence_set / "part-00002.parquet") == [str(sentence_set / "part-00002.parquet")]
    uri = set_io.set_files(f"file://{sentence_set}")
    assert uri[0].startswith("file://") and len(uri) == 4


def test_read_table_local_and_uri_give_the_rows_in_file_order(sentence_set):
    local = set_io.read_table(sentence_set)
    assert local.to_pylist() == ROWS
    assert set_io.read_table(f"file://{sentence_set}", ["sentence"]).column("sentence").to_pylist() == [
        r["sentence"] for r in ROWS]
    with pytest.raises(schemas.SchemaError, match="no parquet files"):
        set_io.read_table(sentence_set.parent / "nowhere")


def test_schema_check_names_the_set_and_the_column(sentence_set, tmp_path):
    assert set_io.read_table(sentence_set, ["sentence"], kind="sentences").num_rows == len(ROWS)
    bad = tmp_path / "bad"
    set_io.write_table(pa.table({"text": ["a"]}), str(bad / "part-00000.parquet"))
    with pytest.raises(schemas.SchemaError, match=r"set 'sentences' at .*bad: missing column 'sentence'"):
        set_io.read_table(bad, kind="sentences")
    typed = tmp_path / "typed"
    set_io.write_table(pa.table({"sentence": [1.5]}), str(typed / "part-00000.parquet"))
    with pytest.raises(schemas.SchemaError, match="column 'sentence' has type double"):
        set_io.read_table(typed, ["sentence"], kind="sentences")


def test_manifest_round_trip_and_missing_manifest(sentence_set, tmp_path):
    manifest = set_io.read_manifest(sentence_set)
    assert manifest["set"] == "sentences" and manifest["rows"] == 40 and manifest["config"] == {"seed": 1}
    assert manifest["schema_version"] == schemas.SCHEMA_VERSION
    assert set_io.read_manifest(f"file://{sentence_set}") == manifest
    with pytest.raises(schemas.SchemaError, match="no _manifest.json"):
        set_io.read_manifest(tmp_path)


def test_a_set_folder_reads_as_is_with_pandas_arrow_and_ray_data(sentence_set, ray_session, tmp_path):
    import pandas as pd
    import pyarrow.dataset as pads
    import ray

    assert (Path(sentence_set) / set_io.MANIFEST).is_file() and not (Path(sentence_set) / "manifest.json").exists()
    assert len(pd.read_parquet(sentence_set)) == 40
    assert pads.dataset(str(sentence_set), format="parquet").count_rows() == 40
    assert ray.data.read_parquet(str(sentence_set)).count() == 40
    # a set written before the rename keeps being read
    legacy = tmp_path / "legacy"
    shutil.copytree(sentence_set, legacy)
    (legacy / set_io.MANIFEST).rename(legacy / "manifest.json")
    assert set_io.read_manifest(legacy)["rows"] == 40


def test_writes_are_atomic_and_leave_no_temp_file(tmp_path):
    path = tmp_path / "out" / "part-00000.parquet"
    with pytest.raises(RuntimeError):
        with set_io.table_writer(str(path), schemas.SENTENCES) as writer:
            writer.write_table(pa.Table.from_pylist(ROWS[:3], schema=schemas.SENTENCES))
            raise RuntimeError("killed mid-write")
    assert not path.exists()  # a failed writer leaves only its hidden temp name, which readers skip
    set_io.write_table(pa.Table.from_pylist(ROWS[:3], schema=schemas.SENTENCES), str(path))
    set_io.write_table(pa.Table.from_pylist(ROWS[:5], schema=schemas.SENTENCES), str(path))  # a retry overwrites
    assert pq.read_table(path).num_rows == 5
    assert [p.name for p in path.parent.iterdir() if not p.name.startswith(".")] == ["part-00000.parquet"]


def test_row_hashes_ignore_chunking_and_tell_nulls_and_columns_apart():
    table = pa.table({"wiki": ["enwiki", "dewiki", None, "enwiki"] * 50, "page": list(range(200))})
    whole = set_io.row_hashes(table, ["wiki", "page"])
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=7))
    assert np.array_equal(set_io.row_hashes(chunked, ["wiki", "page"]), whole)
    assert len(set(whole.tolist())) == 200
    assert not np.array_equal(set_io.row_hashes(table, ["page", "wiki"]), whole)  # column order matters
    assert not np.array_equal(set_io.row_hashes(table, ["wiki", "page"], seed=1), whole)
    wiki = set_io.row_hashes(table, ["wiki"])
    assert len({wiki[0], wiki[1], wiki[2]}) == 3  # null is its own value, not "" and not another wiki
    buckets = set_io.hash_buckets(pa.table({"k": [f"key{i}" for i in range(4000)]}), ["k"], 8).to_numpy()
    counts = np.bincount(buckets, minlength=8)
    assert counts.min() > 400 and counts.max() < 600  # 500 expected per bucket


def test_row_hashes_are_the_same_in_another_process():
    table = pa.table({"title": ["Mining", "Zokano Group", "Bergbau"], "page": [3, 1, 2]})
    here = set_io.row_hashes(table, ["title", "page"]).tolist()
    code = ("import pyarrow as pa; from setformat import io as set_io; "
            "print(set_io.row_hashes(pa.table({'title': ['Mining', 'Zokano Group', 'Bergbau'], 'page': [3, 1, 2]}), "
            "['title', 'page']).tolist())")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert there.stdout.strip() == str(here)  # not Python's per-process salted hash()


def test_read_dataset_one_block_per_file(ray_session, sentence_set):
    ds = set_io.read_dataset(str(sentence_set), ["sentence", "page_id"])
    assert ds.materialize().num_blocks() == 4
    assert sorted(r["sentence"] for r in ds.take_all()) == sorted(r["sentence"] for r in ROWS)


def test_read_dataset_reads_a_large_file_a_bounded_block_at_a_time(ray_session, tmp_path):
    """A single-file set as large as the dump (a vocabulary, Wikidata's items) is never one block: a read
    task holds about ``target_max_block_size`` of it at a time, as Arrow holds the rows (parquet's own sizes
    are of encoded pages), and the rows are the file's, in order."""
    import ray
    from ray.data import DataContext

    rows = 50_000  # a repeated long string: a few bytes on disk (dictionary-encoded), 10 MB as Arrow holds it
    table = pa.table({"qid": [f"Q{i}" for i in range(rows)], "n": np.arange(rows), "text": ["x" * 200] * rows})
    pq.write_table(table, tmp_path / "big.parquet")
    blocks = list(set_io._read_files(pa.table({"path": [str(tmp_path / "big.parquet")]}), None, max_bytes=4 << 20))
    assert len(blocks) >= table.nbytes // (4 << 20) >= 2
    assert max(block.nbytes for block in blocks) <= 4 << 20
    ctx = DataContext.get_current()
    before = ctx.target_max_block_size
    ctx.target_max_block_size = 4 << 20
    try:
        read = ray.get(set_io.read_dataset([str(tmp_path / "big.parquet")]).to_arrow_refs(), timeout=120)
    finally:
        ctx.target_max_block_size = before
    assert pa.concat_tables(read).equals(table)
