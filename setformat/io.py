"""Set I/O: the one place that reads, hashes, groups and writes parquet sets.

A set is a folder of ``*.parquet`` files plus its manifest, ``_manifest.json``
(``docs/architecture.md``; schemas in ``setformat/schemas.py``). The leading
underscore is what Arrow's dataset discovery skips, so a set folder reads as
is with ``pandas.read_parquet``, ``pyarrow.dataset`` or
``ray.data.read_parquet``; sets written before it was named so
(``manifest.json``, its first name, ``docs/architecture.md``) are still read. Paths are fsspec
URIs, so ``s3://…`` and ``gs://…`` work where local paths work. Ingest jobs,
train, eval and tune all use this module:

- reading: ``set_files`` (the parquet files of a set folder), ``check_set``
  (against the schema declared in ``setformat/schemas.py``), ``read_table``
  (a pyarrow Table, no Ray: train and eval), ``read_dataset`` (a Ray Dataset
  with one read task per file: ingest jobs), ``read_manifest``;
- hashing: ``stable_hash`` (one string), ``row_hashes`` (the rows of a table,
  vectorised), ``hash_buckets`` (a bucket number per row): the same in every process, so the grouping jobs
  built on them (``ingest/shuffle.py``'s ``map_buckets`` and ``map_keys``) give the same sets on any cluster;
- writing: ``write_table`` / ``table_writer`` / ``write_json`` / ``write_bytes``
  (whole or not at all: locally a hidden temp name renamed into place, in a
  bucket one upload of a local temp file; a retried task overwrites the same
  file and a reader never sees a half-written one), ``write_manifest``,
  ``file_digest`` (size and sha256 of an input, for manifests).

Ray is imported only by the functions that build Ray Datasets, so train and
eval read sets without it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from infra.storage import Location, filesystem, is_uri, local_path, locate
from setformat import schemas

MANIFEST = "_manifest.json"  # a set folder's manifest
LEGACY_MANIFEST = "manifest.json"  # an older layout's manifest name: read when MANIFEST is absent, never written

# ---------------------------------------------------------------- reading


def _set_files(path: str | Path | Location) -> tuple[fsspec.AbstractFileSystem | None, list[str]]:
    """(the filesystem of a URI, or None for a local path; the set's files on it)."""
    fs, files, _ = _listed(path)
    return fs, files


def _listed(path: str | Path | Location) -> tuple[fsspec.AbstractFileSystem | None, list[str], dict[str, int | None]]:
    """``_set_files`` and the sizes the manifest gives the files (``{file: size}``, empty for files read as
    found)."""
    where = locate(path)
    fs, local = where.fs, where.path
    sizes: dict[str, int | None] = {}
    if fs.isdir(local):
        from setformat.integrity import listed_sizes

        listed = listed_sizes(where)  # a set a job wrote: its manifest's files, never one it does not list
        if listed is not None:
            files = [f"{local.rstrip('/')}/{name}" for name in sorted(listed)]
            sizes = {f: listed[os.path.basename(f)] for f in files}
        else:  # parquet files no structcse job wrote, or a job's own folder mid-job
            files = sorted(fs.glob(f"{local.rstrip('/')}/*.parquet"))
        if not where.remote:  # a link planted in a shared set folder must not read outside it
            root = os.path.realpath(local)
            outside = [f for f in files if os.path.dirname(os.path.realpath(f)) != root]
            if outside:
                raise schemas.SchemaError(f"set at {where}: {os.path.basename(outside[0])} is a link to "
                                          f"{os.path.realpath(outside[0])}, outside the set folder; refused")
    else:
        files = [local] if fs.exists(local) else []
    return (fs if where.remote else None), files, sizes


def set_files(path: str | Path | Location) -> list[str]:
    """The parquet files of a set folder, sorted (its manifest and hidden temp
    files are skipped); a path to one parquet file is that file. URIs stay URIs."""
    fs, files = _set_files(path)
    if os.fspath(path).startswith("file://"):  # a local path written as a URI: its files named the same way
        return [f"file://{f}" for f in files]
    return [fs.unstrip_protocol(f) for f in files] if fs else files


# ---------------------------------------------------------------- pinned sets: what a reader checked


@dataclass(frozen=True)
class PinnedFile:
    """One file of a checked set: where it is (a URI stays a URI), its size and the stamp its store gave it
    (S3's ETag, GCS's generation, a local file's mtime and inode)."""

    path: str
    size: int
    stamp: str

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class PinnedSet:
    """A set as a reader checked it (:func:`pin_set`): its files, pinned. The driver hands it to whatever reads
    the set later (Ray Data's read tasks, the workers): :func:`read_pinned` reads exactly these files and stops
    in one line (``SchemaError``, naming the set and the job to rerun) at a file that changed since."""

    path: str  # the set as named: a folder, a parquet file, a URI
    kind: str | None
    files: tuple[PinnedFile, ...]
    rows: int | None = None  # from the footers, when they were read (check_set)
    schema: pa.Schema | None = None
    location: Location | None = field(default=None, compare=False, repr=False)  # ``path`` resolved, once

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    @property
    def where(self) -> Location:
        return self.location if self.location is not None else locate(self.path)

    def file(self, f: PinnedFile) -> Location:
        """Where the pinned file ``f`` is, on the set's own filesystem (nothing resolved again)."""
        where = self.where
        inner = where.fs._strip_protocol(f.path) if where.remote else local_path(f.path)
        return Location(f.path, where.fs, inner)

    def record(self) -> list[dict]:
        return [{"name": f.name, "size": f.size, "stamp": f.stamp} for f in self.files]


def _stamp(info: dict) -> str:
    """What tells a file rewritten at the same path: the store's ETag or generation, a local file's mtime and
    inode (a file written whole is a new inode: ``os.replace``)."""
    for key in ("generation", "ETag", "etag", "VersionId", "md5Hash"):
        if info.get(key):
            return f"{key}={str(info[key]).strip(chr(34))}"
    mtime = info.get("mtime") or info.get("LastModified") or info.get("updated") or info.get("created") or ""
    return f"mtime={mtime}" + (f",ino={info['ino']}" if info.get("ino") else "")


def _info(fs, path: str) -> dict:
    if hasattr(fs, "invalidate_cache"):
        try:
            fs.invalidate_cache(path)
        except Exception:  # noqa: BLE001 - a cache that cannot be cleared: the info below asks anyway
            pass
    return fs.info(path)


def _changed(pinned_set_path: str, kind: str | None, name: str, was: str, now: str) -> schemas.SchemaError:
    from infra.secrets import redact_text
    from setformat.integrity import rerun_hint

    folder = os.fspath(pinned_set_path)
    label = f"set {kind!r}" if kind else "set"
    return schemas.SchemaError(f"{label} at {redact_text(folder)}: {name} {_CHANGED} ({was} -> "
                               f"{now}); this reader reads only the files it checked, so it stopped; "
                               f"{rerun_hint(folder) if _is_folder(folder) else 'rerun this command'}")


def _is_folder(path: str) -> bool:
    try:
        fs, local = filesystem(path)
        return fs.isdir(local)
    except Exception:  # noqa: BLE001 - only the wording of an error depends on it
        return False


def _pin_files(where: Location, kind: str | None) -> tuple[PinnedFile, ...]:
    fs, files, sizes = _listed(where)
    pinned = []
    for f in files:
        try:
            info = _info(where.fs, f)
        except FileNotFoundError:
            raise _changed(where, kind, os.path.basename(f), "listed", "missing") from None
        size = int(info["size"])
        if sizes.get(f) is not None and size != sizes[f]:
            raise _changed(where, kind, os.path.basename(f), f"{sizes[f]} bytes in the manifest",
                           f"{size} bytes")
        pinned.append(PinnedFile(fs.unstrip_protocol(f) if fs else f, size, _stamp(info)))
    return tuple(pinned)


def pin_set(path: str | Path | Location, kind: str | None = None, required: list[str] | None = None) -> PinnedSet:
    """The set at ``path`` checked (with ``kind``: ``check_set``) and its files pinned: names, sizes and
    stamps, and (with ``kind``) its rows from the footers. What the driver hands every later reader."""
    where = locate(path)
    if kind is not None:
        return _check(where, kind, required)
    return PinnedSet(where.uri, None, _pin_files(where, None), location=where)


def _now(pinned: PinnedSet, f: PinnedFile) -> tuple[int | None, str]:
    at = pinned.file(f)
    try:
        info = _info(at.fs, at.path)
    except FileNotFoundError:
        return None, "missing"
    return int(info["size"]), _stamp(info)


def read_pinned_file(pinned: PinnedSet, f: PinnedFile, columns: list[str] | None = None) -> pa.Table:
    """The pinned file ``f`` of ``pinned``, read only if it is the file that was checked: a local file is
    opened and its open handle's size, mtime and inode compared (what is read is what was compared); a file in
    a bucket is compared before and after the read (size and ETag / generation). A file that changed is a
    ``SchemaError`` in one line naming the set and the job to rerun."""
    def describe(size, stamp):
        return "missing" if size is None else f"{size} bytes, {stamp}"

    if not is_uri(f.path):
        try:
            handle = open(local_path(f.path), "rb")
        except FileNotFoundError:
            raise _changed(pinned.path, pinned.kind, f.name, describe(f.size, f.stamp), "missing") from None
        with handle:
            st = os.fstat(handle.fileno())
            local_stamp = _stamp({"mtime": st.st_mtime, "ino": st.st_ino})
            if st.st_size != f.size or local_stamp != f.stamp:
                raise _changed(pinned.path, pinned.kind, f.name, describe(f.size, f.stamp),
                               describe(st.st_size, local_stamp))
            return pq.read_table(handle, columns=columns)
    from infra.storage import arrow_filesystem

    for attempt in ("before", "after"):
        size, stamp = _now(pinned, f)
        if (size, stamp) != (f.size, f.stamp):
            raise _changed(pinned.path, pinned.kind, f.name, describe(f.size, f.stamp), describe(size, stamp))
        if attempt == "before":
            arrow_fs, inner = arrow_filesystem(pinned.file(f))
            table = pq.read_table(inner, columns=columns, filesystem=arrow_fs)
    return table


def read_pinned(pinned: PinnedSet, columns: list[str] | None = None) -> pa.Table:
    """The pinned set as one pyarrow Table of ``columns``, its files in name order (:func:`read_pinned_file`)."""
    if not pinned.files:
        raise schemas.SchemaError(f"set at {pinned.path}: no parquet files found")
    tables = [read_pinned_file(pinned, f, columns) for f in pinned.files]
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")


def read_pinned_batch(batch: pa.Table, pinned: PinnedSet, columns: list[str] | None = None) -> pa.Table:
    """Ray Data's read of a pinned set (``map_batches`` over ``{"index"}`` rows): the pinned files named."""
    tables = [read_pinned_file(pinned, pinned.files[i], columns) for i in batch["index"].to_pylist()]
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")


def pinned_dataset(pinned: PinnedSet, columns: list[str] | None = None):
    """The pinned set as a Ray Dataset: Ray Data's parquet reader over exactly the checked files (its own read
    plan and blocks), each block then checked against the driver's pins (:func:`check_pinned_block`: its file's
    size and stamp now, after the read); a file rewritten since the check stops the run in one line."""
    import ray.data

    from infra.storage import arrow_filesystem

    fs, _ = arrow_filesystem(pinned.file(pinned.files[0]))
    wanted = None if columns is None else list(columns)
    for f in pinned.files:  # the driver looks again first: Ray's reader opens every file as the dataset is made
        _check_now(pinned, f)
    try:
        ds = ray.data.read_parquet([pinned.file(f).path for f in pinned.files], filesystem=fs,
                                   columns=wanted, include_paths=True)
    except FileNotFoundError:
        for f in pinned.files:  # the one that went in between: said as the others are
            _check_now(pinned, f)
        raise
    return ds.map_batches(check_pinned_block, batch_format="pyarrow", batch_size=None,
                          fn_kwargs={"pinned": pinned}).drop_columns(["path"])


def check_pinned_block(block: pa.Table, pinned: PinnedSet) -> pa.Table:
    """A block Ray Data read: every file its rows came from is still the file the driver checked (looked at
    after the read, so what was read is what was checked), else the one-line ``SchemaError``."""
    by_inner = {pinned.file(f).path.lstrip("/"): f for f in pinned.files}
    for inner in set(block.column("path").to_pylist()):
        f = by_inner.get(str(inner).lstrip("/"))
        if f is None:
            raise schemas.SchemaError(f"set at {pinned.path}: Ray Data read {inner}, a file the set does not list")
        _check_now(pinned, f)
    return block


def _check_now(pinned: PinnedSet, f: PinnedFile) -> None:
    """The one-line ``SchemaError`` when the file ``f`` is no longer the one the driver checked."""
    size, stamp = _now(pinned, f)
    if (size, stamp) != (f.size, f.stamp):
        was = f"{f.size} bytes, {f.stamp}"
        raise _changed(pinned.path, pinned.kind, f.name, was, "missing" if size is None else f"{size} bytes, {stamp}")


_CHANGED = "changed since it was checked"


def pinned_refusal(error: BaseException, pins: list | None = None) -> schemas.SchemaError | None:
    """The one-line ``SchemaError`` of a pinned read (:func:`read_pinned_file`) that failed inside a Ray task or
    a Ray Train worker, out of the error Ray wraps it in (its message holds the worker's traceback), or None.
    ``pins``: the run's pinned sets; a read that found one of their files gone (Ray Data's reader opens the
    file before the block is checked) is the same refusal, the file "missing"."""
    refusal = _changed_refusal(error)
    if refusal is not None or not pins:
        return refusal
    text = "\n".join(_chain_texts(error))
    for pinned in pins:
        for f in pinned.files:
            inner = pinned.file(f).path
            if inner in text and ("FileNotFoundError" in text or "No such file" in text or "NoSuchKey" in text):
                return _changed(pinned.path, pinned.kind, f.name, f"{f.size} bytes, {f.stamp}", "missing")
    return None


def _chain_texts(error: BaseException) -> list[str]:
    texts, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        texts.append(f"{type(error).__name__}: {error}")
        error = error.__cause__ or error.__context__
    return texts


def _changed_refusal(error: BaseException) -> schemas.SchemaError | None:
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = str(error)
        if isinstance(error, schemas.SchemaError) and _CHANGED in text and "\n" not in text:
            return error
        for line in text.splitlines():
            if _CHANGED in line and "SchemaError: " in line:
                return schemas.SchemaError(line.split("SchemaError: ", 1)[1].strip())
        error = error.__cause__ or error.__context__
    return None


def read_table(path: str | Path | Location, columns: list[str] | None = None, *, kind: str | None = None) -> pa.Table:
    """The set (or parquet file) at ``path`` as one pyarrow Table of ``columns``
    (default: all), its files in name order. With ``kind`` (a key of
    ``schemas.SCHEMAS``) the set is first checked against its declared schema
    (``check_set``; only ``columns`` when given): a missing or mistyped
    column is a ``SchemaError`` naming the set and the column. The files read are the ones checked
    (:func:`pin_set`): one rewritten in between is a ``SchemaError``, never a mix of two jobs' rows."""
    pinned = pin_set(path, kind, required=columns)
    if not pinned.files:
        raise schemas.SchemaError(f"set at {path}: no parquet files found")
    return read_pinned(pinned, columns)


def _types_match(got: pa.DataType, want: pa.DataType) -> bool:
    strings = (pa.types.is_string, pa.types.is_large_string)
    return (got.equals(want) or (pa.types.is_integer(got) and pa.types.is_integer(want))
            or (any(f(got) for f in strings) and any(f(want) for f in strings)))


def check_set(path: str | Path | Location, kind: str, required: list[str] | None = None) -> pa.Schema:
    """Check the set at ``path`` against its declared schema ``schemas.SCHEMAS[kind]``
    (only the ``required`` columns a consumer reads, when given), from the files'
    footers (every file's: a truncated or foreign file is named here, before any worker
    reads it). Returns the set's schema; a missing folder, no files, an unreadable
    footer, a missing or mistyped column is a ``SchemaError`` naming the set, the file
    and the column. (:func:`pin_set` also returns the files checked, pinned.)"""
    return _check(locate(path), kind, required).schema


def _check(path: Location, kind: str, required: list[str] | None = None) -> PinnedSet:
    if kind not in schemas.SCHEMAS:
        raise schemas.SchemaError(f"unknown set kind {kind!r}; known: {sorted(schemas.SCHEMAS)}")
    from setformat.integrity import verify_set

    verify_set(path, kind)  # a set of a job that did not finish is refused before any footer is read
    pinned = _pin_files(path, kind)
    fs = path.fs if path.remote else None
    files = [fs._strip_protocol(f.path) if fs else local_path(f.path) for f in pinned]
    if not files:
        if not path.remote and not os.path.exists(path.path):
            raise schemas.SchemaError(f"set {kind!r} at {path}: no such folder")
        raise schemas.SchemaError(f"set {kind!r} at {path}: no parquet files found")
    schemas_found, rows = [], 0
    for f in files:
        try:
            metadata = pq.read_metadata(f, filesystem=fs)
        except (pa.ArrowException, OSError) as e:
            raise schemas.SchemaError(f"set {kind!r} at {path}: {os.path.basename(f)} is not a readable parquet file "
                                      f"({type(e).__name__}: {e}); rebuild the set or remove the file") from None
        schemas_found.append(metadata.schema.to_arrow_schema())
        rows += metadata.num_rows
    found = schemas_found[0]
    for f, other in zip(files[1:], schemas_found[1:]):
        if other.names != found.names:
            raise schemas.SchemaError(f"set {kind!r} at {path}: {os.path.basename(f)} has columns {other.names}, "
                                      f"{os.path.basename(files[0])} has {found.names}")
    declared = schemas.SCHEMAS[kind]
    for name in required or declared.names:
        if name not in found.names:
            raise schemas.SchemaError(f"set {kind!r} at {path}: missing column {name!r} (found columns: {found.names})")
        want, got = declared.field(name).type, found.field(name).type
        if not _types_match(got, want):
            raise schemas.SchemaError(f"set {kind!r} at {path}: column {name!r} has type {got}, expected {want}")
    return PinnedSet(path.uri, kind, pinned, rows=rows, schema=found, location=path)


def check_set_folder(path: str | Path, kind: str, required: list[str] | None = None) -> pa.Schema:
    """``check_set`` of a folder a user named (an evaluation's ``--data``): a local path that does
    not exist is a ``FileNotFoundError`` naming it; a folder that is not the set, a ``SchemaError``
    saying so."""
    from infra.preflight import did_you_mean, missing_path, subfolders_holding

    folder = Path(local_path(path)).expanduser()
    local = not is_uri(str(path))
    if local and not folder.exists():
        raise FileNotFoundError(missing_path(folder, f"{kind} set folder", SET_LAYOUT))
    if local and folder.is_dir() and not set_files(folder):  # the wrong layout: say where a set is, if one is inside
        inside = subfolders_holding(folder, is_set_folder)
        named = [sub for sub in inside if sub.name == kind]
        raise schemas.SchemaError(f"{path} is not {_a(kind)} {kind} set: it holds no parquet files (expected "
                                  f"{SET_LAYOUT}){did_you_mean(named or inside)}")
    try:
        return check_set(path, kind, required=required)
    except schemas.SchemaError as error:
        raise schemas.SchemaError(f"{path} is not {_a(kind)} {kind} set: {error}") from error


SET_LAYOUT = f"a set folder written by ingest: *.parquet files and {MANIFEST}"


def is_set_folder(folder: str | Path) -> bool:
    """A local folder holding parquet files and a manifest (``_manifest.json``; a legacy ``manifest.json``)."""
    folder = Path(folder)
    return ((folder / MANIFEST).is_file() or (folder / LEGACY_MANIFEST).is_file()) and any(folder.glob("*.parquet"))


def _a(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def read_json(path: str | Location) -> dict | None:
    """The JSON object at ``path``, or None when there is no file."""
    fs, local = filesystem(path)
    if not fs.exists(local):
        return None
    with fs.open(local, "r") as f:
        return json.load(f)


def manifest_path(path: str | Path | Location) -> Location:
    """Where the manifest of the set folder at ``path`` is: ``_manifest.json``, or a legacy
    ``manifest.json`` when only that exists."""
    folder = locate(path)
    legacy = folder.child(LEGACY_MANIFEST)
    return legacy if legacy.exists() and not folder.child(MANIFEST).exists() else folder.child(MANIFEST)


def read_manifest(path: str | Path | Location) -> dict:
    """The manifest of the set folder at ``path`` (``_manifest.json``; a legacy ``manifest.json``)."""
    manifest = read_json(manifest_path(path))
    if manifest is None:
        raise schemas.SchemaError(f"{path}: no {MANIFEST} (not a set written by ingest?)")
    return manifest


_READ_ROWS = 8192  # rows per record batch read from a parquet file: a block is whole batches of it


def bounded_blocks(record_batches, max_bytes: int):
    """``record_batches`` as tables of about ``max_bytes`` of Arrow data each: whole batches, a larger one cut
    into slices (zero-copy); nothing when there are no rows."""
    pending, size = [], 0
    for record_batch in record_batches:
        step = max(1, record_batch.num_rows * max_bytes // max(1, record_batch.nbytes))
        for start in range(0, record_batch.num_rows, step):
            piece = record_batch.slice(start, step)
            if pending and size + piece.nbytes > max_bytes:
                yield pa.Table.from_batches(pending)
                pending, size = [], 0
            pending.append(piece)
            size += piece.nbytes
    if pending:
        yield pa.Table.from_batches(pending)


def _read_files(batch: pa.Table, columns: list[str] | None, max_bytes: int | None = None):
    """Each parquet file of ``batch["path"]`` as blocks of about ``max_bytes`` of Arrow data (whole
    files when None), read a batch at a time: a task holds one block, whatever the size of the file.
    (Measured as Arrow holds the rows: parquet's own sizes are of encoded pages, a small fraction of
    that for dictionary-encoded strings and nested lists.)"""
    for path in batch["path"].to_pylist():
        fs, local = filesystem(path) if is_uri(path) else (None, local_path(path))
        if max_bytes is None:
            yield pq.read_table(local, columns=columns, filesystem=fs)
            continue
        with (fs.open(local, "rb") if fs is not None else open(local, "rb")) as f:
            parquet = pq.ParquetFile(f)
            if not parquet.metadata.num_rows:
                empty = parquet.schema_arrow.empty_table()
                yield empty.select(columns) if columns else empty
                continue
            yield from bounded_blocks(parquet.iter_batches(batch_size=_READ_ROWS, columns=columns), max_bytes)


def read_dataset(path: str | Location | list[str], columns: list[str] | None = None):
    """A set folder, a parquet file or a list of parquet files as a Ray Dataset,
    one read task per file, its blocks no larger than Ray Data's ``target_max_block_size``
    (a single-file set as large as the dump is read a block at a time). (Ray Data's
    ``read_parquet`` costs ~2 s of metadata work per call on a small set; the files read
    here are written by the jobs themselves and sized by them.)"""
    import ray.data
    from ray.data import DataContext

    files = set_files(path) if isinstance(path, (str, os.PathLike)) else list(path)
    return ray.data.from_items([{"path": f} for f in files], override_num_blocks=max(1, len(files))).map_batches(
        _read_files, batch_format="pyarrow", batch_size=1,
        fn_kwargs={"columns": columns, "max_bytes": DataContext.get_current().target_max_block_size})


# ---------------------------------------------------------------- hashing

_U64 = np.uint64
_NULL_HASH = _U64(0x9E3779B97F4A7C15)


def stable_hash(text: str) -> int:
    """A 64-bit hash that is the same in every process (Python's ``hash`` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def mix64(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over a uint64 array: every input bit reaches every output bit."""
    with np.errstate(over="ignore"):
        h = (h ^ (h >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> _U64(27))) * _U64(0x94D049BB133111EB)
    return h ^ (h >> _U64(31))


def _column_hashes(column: pa.Array) -> np.ndarray:
    if pa.types.is_integer(column.type):
        values = column.fill_null(0).to_numpy().astype(np.int64).view(np.uint64)
    elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        # each distinct string hashed once: key columns repeat (wikis, titles, types, QIDs)
        encoded = pc.dictionary_encode(column)
        distinct = np.array([stable_hash(text) for text in encoded.dictionary.to_pylist()] or [0], np.uint64)
        values = distinct[encoded.indices.fill_null(0).to_numpy()]
    else:
        raise TypeError(f"row_hashes takes string and integer key columns, not {column.type}")
    values = mix64(values)
    return np.where(column.is_valid().to_numpy(zero_copy_only=False), values, _NULL_HASH) if column.null_count else values


def row_hashes(table: pa.Table, columns: list[str], seed: int = 0) -> np.ndarray:
    """A 64-bit hash of each row's values in ``columns`` (strings and integers),
    the same in every process and for any chunking of the table: shuffle buckets
    and seeded per-row draws, vectorised (a Python hash per row costs ~2 µs, on
    millions of rows per shuffle)."""
    h = np.full(len(table), seed, np.uint64)
    with np.errstate(over="ignore"):
        for name in columns:
            column = table[name]
            column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            h = mix64(h * _U64(0x100000001B3) + _column_hashes(column))
    return h


def find_rows(rows: pa.Table, table: pa.Table, key: list[str]) -> pa.Array | None:
    """The row of ``table`` holding each row of ``rows``' ``key`` values (null where none): found on
    ``row_hashes`` of the key, then the keys compared, so that neither side is copied (an Arrow hash join
    copies every column of its output). None when two keys of ``table`` that ``rows`` asks for share a
    hash: the caller joins instead, or says so."""
    found = pc.index_in(pa.array(row_hashes(rows, key)), value_set=pa.array(row_hashes(table, key)))
    matched = found.is_valid()
    for name in key:
        same = pc.equal(rows[name].filter(matched), table[name].take(found.drop_null()))
        if not pc.all(pc.fill_null(same, False), min_count=0).as_py():
            return None
    return found


def hash_buckets(table: pa.Table, key: list[str], buckets: int) -> pa.Array:
    """Each row's bucket in ``range(buckets)``: ``row_hashes`` of its ``key`` columns."""
    return pa.array((row_hashes(table, key) % np.uint64(buckets)).astype(np.int64), pa.int64())


# ---------------------------------------------------------------- writing


def align(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s columns in order, each cast to its type, missing ones null:
    the sides of a reduce-side join (and a file's rows) share one schema."""
    columns = [table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def _tmp_name(local: str) -> str:
    """Hidden, so readers of the folder (pyarrow, Ray Data, ``set_files``) never see a half-written file."""
    folder, name = os.path.split(local)
    return os.path.join(folder, f".{name}.tmp-{os.getpid()}")


@contextmanager
def _whole_file(path: str):
    """A binary file to write ``path`` through: ``path`` appears only when the body finishes, whole, and a
    body that raises leaves nothing. Locally: a hidden name beside it, renamed into place. In a bucket: a
    local temporary file sent in one ``put_file`` (a single PUT, or a multipart upload that is visible only
    once complete), never ``fs.open``'s buffered file (its ``__exit__`` commits what it holds even when the
    body raised) and never a temporary object renamed (on S3 a copy and a delete: two more requests that
    can fail, leaving an empty or a stray object)."""
    from fsspec.implementations.local import LocalFileSystem

    fs, local = filesystem(path)
    if isinstance(fs, LocalFileSystem):
        os.makedirs(os.path.dirname(local), exist_ok=True)
        tmp = _tmp_name(local)
        try:
            with open(tmp, "wb") as f:
                yield f
            os.replace(tmp, local)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return
    with tempfile.TemporaryDirectory(prefix="structcse-put-") as staging:
        tmp = os.path.join(staging, os.path.basename(local))
        with open(tmp, "wb") as f:
            yield f
        fs.put_file(tmp, local)


def write_table(table: pa.Table, path: str) -> None:
    """Write whole under a fixed name (:func:`_whole_file`): a retried task overwrites the same file."""
    with _whole_file(path) as f:
        pq.write_table(table, f)


@contextmanager
def table_writer(path: str, schema: pa.Schema):
    """A ``ParquetWriter`` for batches; the file appears at ``path`` only when it is closed cleanly."""
    with _whole_file(path) as f, pq.ParquetWriter(f, schema) as writer:
        yield writer


def write_bytes(data: bytes, path: str) -> None:
    """Write ``data`` to ``path`` whole or not at all (:func:`_whole_file`)."""
    with _whole_file(path) as f:
        f.write(data)


def write_json(obj: dict, path: str) -> None:
    """Write ``obj`` as indented JSON with sorted keys, whole (keys and tokens redacted: ``infra.secrets``)."""
    from infra.secrets import redact

    write_bytes(json.dumps(redact(obj), indent=2, sort_keys=True).encode(), path)


def code_version() -> str:
    """A manifest's ``code_version``: the project's version with the git commit when the code runs from a
    checkout (``0.13.0+g1a2b3c4``, ``.dirty`` with uncommitted changes), else the version alone; looked up
    once per process (:func:`infra.version.code_version`)."""
    from infra.version import code_version as _code_version

    return _code_version()


def file_stamp(path: str) -> tuple[int, str]:
    """(size, a modification stamp) of a local or fsspec path: what tells a file replaced at the same path."""
    fs, fs_path = filesystem(path)
    info = fs.info(fs_path)
    stamp = info.get("mtime") or info.get("LastModified") or info.get("ETag") or info.get("created") or ""
    return int(info["size"]), str(stamp)


def file_digest(path: str) -> dict:
    """Size and sha256 of an input file, for the manifests."""
    fs, local = filesystem(path)
    digest = hashlib.sha256()
    with fs.open(local, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return {"path": path, "bytes": fs.size(local), "sha256": digest.hexdigest()}


def write_manifest(path: str, set_name: str, rows: int, **fields) -> dict:
    """Write the manifest (``_manifest.json``) of the set folder at ``path``: its name, row
    count, ``schema_version`` and ``code_version``, plus ``fields`` (config,
    files, inputs and their digests, rows dropped and why, ...). Returns it."""
    manifest = {"schema_version": schemas.SCHEMA_VERSION, "code_version": code_version(), **fields,
                "set": set_name, "rows": rows}
    return write_set_manifest(manifest, path)


def write_set_manifest(manifest: dict, folder: str) -> dict:
    """Write ``manifest`` as the set folder's ``_manifest.json``, after its files, with their sizes and the
    running job's id (``setformat.integrity.seal_fields``). Returns what was written."""
    from setformat.integrity import seal_fields

    manifest = {**manifest, **seal_fields(folder.rstrip("/"), manifest)}
    write_json(manifest, f"{folder.rstrip('/')}/{MANIFEST}")
    return manifest
