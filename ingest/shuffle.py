"""Grouped work over a Ray Dataset with bounded memory: a shuffle through files.

``map_buckets(ds, key, fn, shuffle)`` calls ``fn`` on every row of each key together, a hash
bucket of keys per call. It runs in two rounds of tasks, as MapReduce and datatrove do:

1. **scatter** (a Ray Data ``map_batches`` over ``ds``, one call per ``SCATTER_ROWS`` rows): each batch's rows
   are sorted by a 64-bit hash of their key (``setformat.io.row_hashes``) and written to one
   Arrow IPC file in the job's work folder, as ``SLICES`` record batches, one per equal range
   of hashes. The call returns its file's name, rows and Arrow bytes.
2. **reduce** (one Ray task per bucket): the bucket count is chosen *now*, from the rows and
   bytes the scatter measured, so that one bucket holds at most ``Shuffle.bucket_bytes`` of
   Arrow data and ``Shuffle.bucket_rows`` rows (for ``map_keys``, whose ``fn`` takes Python
   dicts, ``Shuffle.key_rows`` rows). Bucket ``b`` is the b-th of equal hash ranges; its task reads that range from every
   scatter file (only the record batches that overlap it, memory-mapped when local) into one
   chunk per column, calls ``fn`` and writes the result to one IPC file. The scatter files are
   then removed.

The sides of a join are either one schema (``fn`` gets their union, told apart by which columns are
null) or each its own (``_side_schemas``: each side's files hold only its columns, and ``fn`` gets a
table per side): the second scatters and reads no null columns.

The result is a Dataset over the reduce files, one block per bucket: reading it again is a
read of files, not a rerun. Memory per task is bounded by construction — a scatter task holds
one block, a reduce task one bucket — whatever the size of the input, and nothing waits in
Ray's object store for a barrier, so nothing is spilled. Every group is whole in one call
and ``fn``'s output depends on its keys' rows only, so results do not depend on how many
buckets there were.

The work folder must be one that every node reads (the job's ``_work``, on shared storage or
a bucket, as pass 1's files already are). ``Shuffle.remove()`` deletes its folder, through
``infra.owned.remove_owned`` (each shuffle's folder carries structcse's marker).
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from infra.owned import claim, remove_owned
from infra.storage import filesystem, is_uri, local_path

SCATTER_ROWS = 262_144  # rows per scatter call (and file), by default: a task holds one such batch
READ_ROWS = 65_536  # rows per record batch of a result file: what a task reading it holds at a time
# a reduce worker exits after this many calls: what a long-lived worker keeps (Python's heap, pages of Ray's
# object store it has touched) grew with the dump's size, ~0.1 GB at 30x bench/ingest_scale.py's smallest input
REDUCE_CALLS_PER_WORKER = 10
SLICES = 256  # record batches per scatter file: a reduce reads only the ones its hash range overlaps
_SHIFT = 56  # a hash's slice: its top 8 bits
_HASH = "_hash"
_TOP = 1 << 64


def memory_sizes(memory_per_cpu: int) -> dict:
    """What one CPU's memory budget allows a shuffle: 1/32 of it as one reduce call's Arrow
    input (its ``fn`` sorts, joins and copies it several times over: pass 2's add up to ~5x
    their input to the worker's own ~0.3 GB at their peak, measured in ``bench/ingest_scale.py``), at most
    1/96 of it in rows (a call's hash tables, sort indices and takes cost per row whatever a row's width: a
    bucket of narrow rows, such as a side of three integers, would otherwise hold 2-3x the rows and peak
    higher), and a row bound for calls that turn rows into Python dicts (~1 KB each)."""
    bucket_bytes = max(64 << 10, memory_per_cpu // 32)
    return {"bucket_bytes": bucket_bytes, "bucket_rows": max(16, bucket_bytes // 96),
            "key_rows": max(16, bucket_bytes // 1024)}


@dataclass
class Shuffle:
    """Where a job's shuffles write (a folder of the job's own, created fresh) and how much
    one reduce call may hold."""

    folder: str
    memory_per_cpu: int = 2 << 30
    steps: list[dict] = field(default_factory=list)  # per map_buckets call: rows, bytes, buckets, the largest

    @classmethod
    def in_work(cls, work: str, memory_per_cpu: int = 2 << 30) -> "Shuffle":
        return cls(f"{work.rstrip('/')}/shuffle-{uuid.uuid4().hex[:12]}", memory_per_cpu)

    @property
    def bucket_bytes(self) -> int:
        return memory_sizes(self.memory_per_cpu)["bucket_bytes"]

    @property
    def bucket_rows(self) -> int:
        return memory_sizes(self.memory_per_cpu)["bucket_rows"]

    @property
    def key_rows(self) -> int:
        return memory_sizes(self.memory_per_cpu)["key_rows"]

    def remove(self) -> None:
        """Delete this shuffle's folder (marked as structcse's when its first shuffle started)."""
        remove_owned(self.folder, "shuffle folder")


def limit_ray_data(memory_per_cpu: int) -> None:
    """Ray Data's object-store budget for this process's pipelines: a quarter of ``memory_per_cpu``
    per CPU of the cluster (the blocks in flight between a read and a scatter); its streaming
    executor holds back reads beyond it instead of spilling. (The sorts left to Ray Data, the
    entity vocabulary's, are bounded by the model's vocabulary, not by the dump.)"""
    import ray
    from ray.data import DataContext
    from ray.data.context import ShuffleStrategy

    ctx = DataContext.get_current()
    cpus = max(1.0, ray.cluster_resources().get("CPU", 1.0))
    ctx.execution_options.resource_limits = ctx.execution_options.resource_limits.copy(
        object_store_memory=int(cpus * memory_per_cpu / 4))
    ctx.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    # blocks no larger than a quarter of a reduce call's input: a task between a read and a scatter
    # holds a few of them, whatever the size of the file or the set it reads
    ctx.target_max_block_size = max(1 << 20, memory_sizes(memory_per_cpu)["bucket_bytes"] // 4)


def _write_ipc(table: pa.Table, path: str, batches: list[pa.RecordBatch] | None = None) -> int:
    fs, local = filesystem(path)
    fs.makedirs(fs._parent(local), exist_ok=True)
    with fs.open(local, "wb") as f, pa.ipc.new_file(f, table.schema) as writer:
        for batch in batches if batches is not None else table.to_batches(max_chunksize=READ_ROWS):
            writer.write_batch(batch)
    return table.nbytes


def _open_ipc(path: str):
    if is_uri(path):
        fs, local = filesystem(path)
        return pa.ipc.open_file(fs.open(local, "rb"))
    return pa.ipc.open_file(pa.memory_map(local_path(path)))


# ---------------------------------------------------------------- scatter


def _scatter(block: pa.Table, key: list[str], folder: str, shift: int | None = None, side: int = 0,
             schema: pa.Schema | None = None) -> pa.Table:
    from setformat.io import align, row_hashes

    if schema is not None:  # a side of its own: only its columns are written
        block = align(block, schema)
    if shift is None:
        hashes = row_hashes(block, key)
    else:  # by value: value v's rows are the hash range [v << shift, (v + 1) << shift)
        hashes = block[key[0]].to_numpy().astype(np.uint64) << np.uint64(shift)
    order = np.argsort(hashes, kind="stable")
    hashes = hashes[order]
    table = block.take(pa.array(order)).append_column(_HASH, pa.array(hashes, pa.uint64()))
    bounds = np.searchsorted(hashes, np.arange(1, SLICES, dtype=np.uint64) << np.uint64(_SHIFT), side="left")
    starts = np.r_[0, bounds]
    ends = np.r_[bounds, len(table)]
    combined = table.combine_chunks()
    batches = [combined.slice(int(s), int(e - s)).to_batches(max_chunksize=None)[0] if e > s
               else pa.RecordBatch.from_pylist([], schema=combined.schema) for s, e in zip(starts, ends)]
    path = f"{folder}/map/{side}-{uuid.uuid4().hex}.arrow"
    nbytes = _write_ipc(combined, path, batches)
    rows = len(table)
    del block, table, combined, batches
    peak = _peak_rss_mb()  # since the last call in this worker ended: this block's read, its map and its scatter
    _hand_back_memory()  # the worker runs the next block
    _reset_peak_rss()
    return pa.table({"file": [path], "side": [side], "rows": [rows], "bytes": [nbytes], "peak_rss_mb": [peak]})


# ---------------------------------------------------------------- reduce


def _read_range(path: str, lo: int, hi: int) -> pa.Table | None:
    reader = _open_ipc(path)
    first, last = lo >> _SHIFT, (hi - 1) >> _SHIFT
    batches = [reader.get_batch(i) for i in range(first, min(last, reader.num_record_batches - 1) + 1)]
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return None
    table = pa.Table.from_batches(batches)
    hashes = table[_HASH].to_numpy()
    inside = (hashes >= np.uint64(lo)) & (hashes <= np.uint64(hi - 1))
    if not inside.any():
        return None
    return table if inside.all() else table.filter(pa.array(inside))


def _reduce(files: list[list[str]], lo: int, hi: int, out_path: str, fn, kwargs: dict,
            side_schemas: list[pa.Schema] | None) -> dict:
    _hand_back_memory()  # what the worker's earlier task (a Ray Data map, perhaps) left
    _reset_peak_rss()
    sides = [_read_bucket(side_files, lo, hi) for side_files in files]
    if all(side is None for side in sides):
        return {"file": None, "rows": 0, "in_rows": 0, "in_bytes": 0, "peak_rss_mb": _peak_rss_mb()}
    if side_schemas is not None:  # a side with no rows in this bucket: an empty table of its columns
        sides = [side if side is not None else schema.empty_table() for side, schema in zip(sides, side_schemas)]
    in_rows, in_bytes = sum(len(side) for side in sides), sum(side.nbytes for side in sides)
    sides = [side.drop_columns([_HASH]) if _HASH in side.column_names else side for side in sides]
    result = fn(*sides, **kwargs)
    del sides
    _write_ipc(result, out_path)
    rows = len(result)
    del result
    peak = _peak_rss_mb()
    _hand_back_memory()  # this worker runs the next task
    _reset_peak_rss()
    return {"file": out_path, "rows": rows, "in_rows": in_rows, "in_bytes": in_bytes, "peak_rss_mb": peak}


def _read_bucket(files: list[str], lo: int, hi: int) -> pa.Table | None:
    """The rows of hash range ``[lo, hi)`` in ``files``, one chunk per column (None when there are none): fn's
    takes and sorts would otherwise each concatenate the parts (a chunk per scatter file, more of them the
    larger the input) over again; the scatter files are unmapped when it returns."""
    parts = [t for t in (_read_range(path, lo, hi) for path in files) if t is not None]
    return pa.concat_tables(parts).combine_chunks() if parts else None


def _hand_back_memory() -> None:
    """Return the pages freed by a call to the system, so that a reused worker starts its next call where a
    fresh one would: Arrow's pool, and glibc's heap (numpy's large arrays come from it; glibc keeps freed
    heap pages mapped once it has raised its mmap threshold, and a long-lived worker's RSS creeps up)."""
    pa.default_memory_pool().release_unused()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _libc():
    import ctypes

    try:
        libc = ctypes.CDLL(None)  # this process's own symbols: glibc's, on Linux
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None  # (not glibc: nothing to trim)


_LIBC = _libc()


def _reset_peak_rss() -> None:
    """Reset this process's peak RSS (Linux: ``clear_refs`` 5), so that the peak read after a call is
    that call's own, not an earlier task's in the same reused worker."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss_mb() -> float | None:
    """This process's peak RSS since ``_reset_peak_rss`` (``VmHWM``), in MB; None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _read_files(batch: pa.Table, max_bytes: int):
    """Result files as blocks of about ``max_bytes`` (whole record batches of ``READ_ROWS`` rows, a larger
    one cut): read, not memory-mapped, so a task holds the block it is on, not every page of the file it
    has passed."""
    from setformat.io import bounded_blocks

    def record_batches():
        for path in batch["path"].to_pylist():
            fs, local = filesystem(path)
            reader = pa.ipc.open_file(fs.open(local, "rb") if is_uri(path) else pa.OSFile(local, "rb"))
            yield from (reader.get_batch(i) for i in range(reader.num_record_batches))

    yield from bounded_blocks(record_batches(), max_bytes)


def ipc_dataset(files: list[str]):
    """IPC files as a Ray Dataset, one block per file (no blocks when there are none)."""
    import ray.data

    if not files:
        return ray.data.from_items([])
    from ray.data import DataContext

    return ray.data.from_items([{"path": f} for f in files], override_num_blocks=len(files)).map_batches(
        _read_files, batch_format="pyarrow", batch_size=1,
        fn_kwargs={"max_bytes": DataContext.get_current().target_max_block_size})


def buckets_for(rows: int, nbytes: int, bucket_bytes: int, bucket_rows: int | None = None) -> int:
    """How many buckets keep each under ``bucket_bytes`` (and ``bucket_rows``); no upper limit."""
    count = math.ceil(nbytes / bucket_bytes) if nbytes else 1
    if bucket_rows:
        count = max(count, math.ceil(rows / bucket_rows))
    return max(1, count)


def count_rows(ds) -> int:
    """The rows of ``ds``, counted where its blocks are made: only a count per block travels."""
    return sum(r["rows"] for r in ds.map_batches(_row_count, batch_format="pyarrow", batch_size=None).take_all())


def count_bytes(ds) -> int:
    """The Arrow bytes of ``ds``'s rows, counted where its blocks are made."""
    return sum(r["bytes"] for r in ds.map_batches(_row_count, batch_format="pyarrow", batch_size=None).take_all())


def _row_count(block: pa.Table) -> pa.Table:
    return pa.table({"rows": [len(block)], "bytes": [block.nbytes]})


def map_buckets(ds, key: str | list[str], fn, shuffle: Shuffle, /, _bucket_rows: int | None = None,
                _by_value: int | None = None, _batch_rows: int = SCATTER_ROWS,
                _side_schemas: list[pa.Schema] | None = None, **kwargs):
    """``fn(bucket_table, **kwargs) -> pa.Table`` once per hash bucket of ``key``; a Dataset of the results.

    ``fn`` sees every row of each of its keys in one pyarrow Table (one call per bucket, not
    per key: a task per tiny group costs milliseconds and there are millions of them). Runs
    now (both rounds, see the module's docstring); the returned Dataset reads the results.
    ``ds`` may be a list of Datasets (the sides of a join): each is scattered in the tasks that
    read it, so its blocks never pass through Ray's object store (``Dataset.union`` would put
    every block there on its way to the scatter).
    ``_by_value=n``: ``key`` is one integer column with values in ``range(n)`` (an output file's
    number), and each value is its own bucket: a call holds one file's rows, however the hashes fall.
    ``_batch_rows``: rows per scatter call (fewer for wide rows, such as whole lead sections).
    ``_side_schemas``: ``ds`` is a list of sides, each with its own columns (one schema per side): each is
    scattered to files of its own, holding only its columns, and ``fn`` is called with one table per side,
    ``fn(side_0, side_1, ..., **kwargs)`` (empty, with its columns, when the bucket has none of its rows).
    Without it, the sides share one schema and ``fn`` sees them as one table."""
    import ray

    key = [key] if isinstance(key, str) else list(key)
    step = f"{shuffle.folder}/{uuid.uuid4().hex[:8]}"
    claim(shuffle.folder, "shuffle")  # what infra.owned.remove_owned deletes: the step's scatter files, then all
    claim(step, "shuffle")
    shift = 64 - max(1, (_by_value - 1).bit_length()) if _by_value else None
    started = time.perf_counter()
    inputs = list(ds) if isinstance(ds, (list, tuple)) else [ds]
    if _side_schemas is not None and len(_side_schemas) != len(inputs):
        raise ValueError(f"{len(inputs)} sides and {len(_side_schemas)} side schemas")
    sides = [side.map_batches(_scatter, batch_format="pyarrow", batch_size=_batch_rows,
                              fn_kwargs={"key": key, "folder": step, "shift": shift, "side": i,
                                         "schema": _side_schemas[i] if _side_schemas else None})
             for i, side in enumerate(inputs)]
    scattered = (sides[0].union(*sides[1:]) if len(sides) > 1 else sides[0]).take_all()
    groups = len(inputs) if _side_schemas else 1
    files = [[r["file"] for r in scattered if r["side"] == i or groups == 1] for i in range(groups)]
    rows = sum(r["rows"] for r in scattered)
    nbytes = sum(r["bytes"] for r in scattered)
    if _by_value:
        count = _by_value
        ranges = [(v << shift, (v + 1) << shift) for v in range(count)]
    else:
        count = buckets_for(rows, nbytes, shuffle.bucket_bytes, min(_bucket_rows or shuffle.bucket_rows,
                                                                    shuffle.bucket_rows))
        ranges = [((b * _TOP) // count, ((b + 1) * _TOP) // count) for b in range(count)]
    scattered_at = time.perf_counter()
    reduce = ray.remote(num_cpus=1, max_retries=3, max_calls=REDUCE_CALLS_PER_WORKER)(_reduce)
    files_ref = ray.put(files)
    results = ray.get([reduce.remote(files_ref, lo, hi, f"{step}/out/{b:06d}.arrow", fn, kwargs, _side_schemas)
                       for b, (lo, hi) in enumerate(ranges)], timeout=24 * 3600)
    remove_owned(f"{step}/map", "shuffle's scatter files")
    out_files = [r["file"] for r in results if r["file"]]
    if sum(r["in_rows"] for r in results) != rows:
        raise RuntimeError(f"shuffle on {key}: {rows} rows scattered, {sum(r['in_rows'] for r in results)} reduced")
    shuffle.steps.append({"key": key, "fn": getattr(kwargs.get("fn"), "__name__", None) or fn.__name__,
                          "rows": rows, "bytes": nbytes, "buckets": count,
                          "largest_bucket_rows": max(r["in_rows"] for r in results),
                          "largest_bucket_bytes": max(r["in_bytes"] for r in results),
                          "largest_call_peak_rss_mb": max((r["peak_rss_mb"] or 0) for r in results),
                          "largest_scatter_peak_rss_mb": max(((r["peak_rss_mb"] or 0) for r in scattered), default=0),
                          "scatter_s": round(scattered_at - started, 2),
                          "reduce_s": round(time.perf_counter() - scattered_at, 2)})
    return ipc_dataset(out_files)


def value_runs(values: np.ndarray) -> list[tuple[int, int]]:
    """The ``[start, end)`` of each run of equal values in ``values`` (a sorted column's groups)."""
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]]) if len(values) else np.zeros(0, np.int64)
    return list(zip(starts.tolist(), np.r_[starts[1:], len(values)].tolist()))


# ---------------------------------------------------------------- per key, in Python


def key_groups(table: pa.Table, key: list[str]) -> list[tuple[tuple, list[dict]]]:
    """The rows of ``table`` as ``[(key values, rows)]`` sorted by key: a bucket split by key."""
    groups: dict[tuple, list[dict]] = {}
    for row in table.to_pylist():
        groups.setdefault(tuple(row[k] for k in key), []).append(row)
    return sorted(groups.items(), key=lambda kv: kv[0])


def _per_key(bucket: pa.Table, key: list[str], fn, schema: pa.Schema, kwargs: dict) -> pa.Table:
    out: list[dict] = []
    for _, rows in key_groups(bucket, key):
        out.extend(fn(rows, **kwargs))
    return pa.Table.from_pylist(out, schema=schema)


def map_keys(ds, key: str | list[str], fn, schema: pa.Schema, shuffle: Shuffle, /, **kwargs):
    """``fn(rows_of_one_key, **kwargs) -> rows`` (lists of dicts) for every value of
    ``key``, in key order within each bucket; the rows out have ``schema``.
    (``map_buckets`` with the keys split in Python inside each bucket, whose buckets
    are also bounded by ``Shuffle.key_rows``.)"""
    key = [key] if isinstance(key, str) else list(key)
    return map_buckets(ds, key, _per_key, shuffle, _bucket_rows=shuffle.key_rows, key=key, fn=fn, schema=schema,
                       kwargs=kwargs)
