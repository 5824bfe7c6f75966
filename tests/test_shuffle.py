"""ingest/shuffle.py: grouped work through files, buckets sized from the rows they hold."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pytest

from ingest.shuffle import Shuffle, buckets_for, count_rows, map_buckets, map_keys, memory_sizes

ROWS = [{"key": f"k{i % 97}", "n": i, "text": "x" * (i % 50)} for i in range(6000)]
OUT = pa.schema([pa.field("key", pa.string()), pa.field("count", pa.int64()), pa.field("total", pa.int64())])


def _per_key(key_rows):
    return [{"key": key_rows[0]["key"], "count": len(key_rows), "total": sum(r["n"] for r in key_rows)}]


def _keys_in_bucket(bucket: pa.Table) -> pa.Table:
    return pa.table({"keys": [sorted(set(bucket["key"].to_pylist()))], "rows": [len(bucket)]})


def _sums(bucket: pa.Table) -> pa.Table:
    sums = bucket.group_by("key").aggregate([("n", "count"), ("n", "sum")])
    return sums.select(["key", "n_count", "n_sum"]).rename_columns(["key", "count", "total"])


def _want():
    want = defaultdict(list)
    for r in ROWS:
        want[r["key"]].append(r["n"])
    return [{"key": k, "count": len(v), "total": sum(v)} for k, v in sorted(want.items())]


def test_bucket_count_comes_from_the_rows_with_no_upper_limit():
    assert buckets_for(0, 0, 100) == 1
    assert buckets_for(10, 1000, 100) == 10
    assert buckets_for(10**9, 10**15, 128 << 20) == 7450581  # what a cap would have held at 400
    assert buckets_for(5000, 10, 100, bucket_rows=1000) == 5
    sizes = memory_sizes(2 << 30)
    assert sizes == {"bucket_bytes": 64 << 20, "bucket_rows": 699050, "key_rows": 65536}
    assert Shuffle("unused", 2 << 30).bucket_rows == 699050


@pytest.mark.parametrize("memory_per_cpu", [2 << 30, 1 << 20])
def test_every_row_of_a_key_in_one_call_whatever_the_bucket_count(ray_session, tmp_path, memory_per_cpu):
    ds = ray_session.data.from_items(ROWS, override_num_blocks=6)
    shuffle = Shuffle.in_work(str(tmp_path / "_work"), memory_per_cpu)
    got = sorted(map_keys(ds, "key", _per_key, OUT, shuffle).take_all(), key=lambda r: r["key"])
    assert got == _want()
    buckets = map_buckets(ds, ["key"], _keys_in_bucket, shuffle).take_all()
    seen = [k for b in buckets for k in b["keys"]]
    assert sorted(seen) == sorted({r["key"] for r in ROWS}) and len(seen) == len(set(seen))
    assert sum(b["rows"] for b in buckets) == len(ROWS)
    step = shuffle.steps[-1]
    assert step["rows"] == len(ROWS) and step["buckets"] == len(buckets)
    if memory_per_cpu == 1 << 20:  # 64 KiB buckets: the ~200 KB input is split, each bucket under the bound
        assert step["buckets"] >= 3
        assert step["largest_bucket_bytes"] <= 2 * (64 << 10)  # a bucket is a hash range: about even
        assert step["buckets"] >= 6000 / shuffle.bucket_rows  # narrow rows: the row bound (682) sets the count
        assert step["largest_bucket_rows"] <= 2 * shuffle.bucket_rows
        assert shuffle.steps[0]["buckets"] == 94  # map_keys: also at most 64 rows per bucket, 6000 / 64
    else:
        assert step["buckets"] == 1
    # the scatter files are gone once reduced; remove() deletes the results and the folder
    assert not list((tmp_path / "_work").glob("shuffle-*/*/map/*.arrow"))
    assert list((tmp_path / "_work").glob("shuffle-*/*/out/*.arrow"))
    shuffle.remove()
    assert not any((tmp_path / "_work").iterdir())


def test_a_bucket_holds_only_its_hash_range(ray_session, tmp_path):
    """Many more buckets than the 256 slices a scatter file is cut into: a bucket reads a part of a slice."""
    ds = ray_session.data.from_items(ROWS, override_num_blocks=3)
    shuffle = Shuffle.in_work(str(tmp_path / "_work"), 1 << 20)
    got = map_buckets(ds, "key", _sums, shuffle, _bucket_rows=16).take_all()  # 375 buckets of 16 rows or so
    assert sorted(got, key=lambda r: r["key"]) == _want()
    assert shuffle.steps[0]["buckets"] == 375
    buckets = map_buckets(ds, "key", _keys_in_bucket, shuffle, _bucket_rows=16).take_all()
    assert all(b["rows"] for b in buckets)  # a bucket whose hash range holds no row is not called
    assert sum(b["rows"] for b in buckets) == len(ROWS)
    shuffle.remove()


def test_empty_input_gives_an_empty_dataset(ray_session, tmp_path):
    ds = ray_session.data.from_items(ROWS, override_num_blocks=2).filter(lambda r: False)
    shuffle = Shuffle.in_work(str(tmp_path / "_work"))
    assert map_keys(ds, "key", _per_key, OUT, shuffle).take_all() == []
    shuffle.remove()


def _values_in_call(bucket: pa.Table) -> pa.Table:
    return pa.table({"values": [sorted(set(bucket["file"].to_pylist()))], "rows": [len(bucket)]})


def test_by_value_one_call_per_output_file_and_sides_as_a_list(ray_session, tmp_path):
    """``_by_value``: each value of an int column (an output file's number) is one call, however its rows
    hash; the sides of a join given as a list are scattered apart and meet in the calls."""
    left = ray_session.data.from_items([{"file": i % 5, "n": i} for i in range(3000)], override_num_blocks=4)
    right = ray_session.data.from_items([{"file": i % 5, "n": -i} for i in range(100)], override_num_blocks=2)
    shuffle = Shuffle.in_work(str(tmp_path / "_work"))
    calls = map_buckets([left, right], "file", _values_in_call, shuffle, _by_value=5).take_all()
    assert sorted(c["values"] for c in calls) == [[0], [1], [2], [3], [4]]
    assert sum(c["rows"] for c in calls) == 3100
    assert count_rows(left) == 3000
    shuffle.remove()


def _join_apart(left: pa.Table, right: pa.Table) -> pa.Table:
    joined = left.join(right, keys="key", join_type="left outer")
    return pa.table({"columns": [[left.column_names, right.column_names]], "left": [len(left)],
                     "right": [len(right)], "matched": [joined["label"].null_count == 0 and len(joined) == len(left)]})


def test_sides_apart_each_with_its_own_columns(ray_session, tmp_path):
    """``_side_schemas``: each side of a join is scattered with only its columns and ``fn`` gets one table per
    side, an empty one with its columns when a bucket holds none of that side's rows."""
    left_schema = pa.schema([pa.field("key", pa.string()), pa.field("n", pa.int64())])
    right_schema = pa.schema([pa.field("key", pa.string()), pa.field("label", pa.string())])
    left = ray_session.data.from_items([{"key": f"k{i % 40}", "n": i, "extra": 1.5} for i in range(2000)],
                                       override_num_blocks=3)
    right = ray_session.data.from_items([{"key": f"k{i}", "label": f"L{i}"} for i in range(20)])
    shuffle = Shuffle.in_work(str(tmp_path / "_work"), 1 << 20)  # 64 KiB buckets: several, some with no right rows
    calls = map_buckets([left, right], "key", _join_apart, shuffle, _bucket_rows=100,
                        _side_schemas=[left_schema, right_schema]).take_all()
    assert len(calls) >= 10 and sum(c["left"] for c in calls) == 2000 and sum(c["right"] for c in calls) == 20
    assert all(c["columns"] == [["key", "n"], ["key", "label"]] for c in calls)  # "extra" was not scattered
    assert any(c["right"] == 0 for c in calls) and not any(c["matched"] for c in calls if c["right"] == 0)
    assert shuffle.steps[-1]["rows"] == 2020
    with pytest.raises(ValueError, match="2 sides and 1 side schemas"):
        map_buckets([left, right], "key", _join_apart, shuffle, _side_schemas=[left_schema])
    shuffle.remove()


def test_results_are_read_back_in_blocks_of_bounded_bytes(ray_session, tmp_path):
    """A reduce's result file is read in blocks of about ``max_bytes`` (Ray Data's ``target_max_block_size``,
    set from ``--memory-per-cpu``), not a record batch or a file at a time, and ``count_bytes`` sums them."""
    import numpy as np

    from ingest.shuffle import _read_files, _write_ipc, count_bytes, ipc_dataset, value_runs

    table = pa.table({"n": np.arange(200_000), "text": ["y" * 40] * 200_000})  # ~10 MB, 4 record batches
    path = str(tmp_path / "result.arrow")
    _write_ipc(table, path)
    blocks = list(_read_files(pa.table({"path": [path]}), max_bytes=1 << 20))
    assert sum(len(b) for b in blocks) == len(table) and pa.concat_tables(blocks).equals(table)
    assert max(b.nbytes for b in blocks) <= (1 << 20) + 64 and len(blocks) >= 10
    assert count_bytes(ipc_dataset([path])) == sum(b.nbytes for b in blocks)
    assert value_runs(np.array([3, 3, 5, 7, 7, 7])) == [(0, 2), (2, 3), (3, 6)]
    assert value_runs(np.array([], np.int64)) == []
