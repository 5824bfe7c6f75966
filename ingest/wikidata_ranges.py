"""Line-aligned byte ranges of a Wikidata JSON dump (plain, gzip, bz2): the units
that ``ingest.wikidata`` reads in parallel.

Units of work
-------------
``plan_ranges`` cuts every file into ``WikidataRange`` s; ``read_range``
reads one of them anywhere (a Ray task, a test) and returns rows of
``schemas.WIKIDATA`` in file order. Every line of a file belongs to exactly
one range, so concatenating the rows of a file's ranges in ``range_id`` order
gives exactly the rows of reading the file in one range.

* ``"none"`` (plain ``.json``): ``start``/``end`` are file byte offsets. A
  range owns the lines that *start* at an offset in ``[start, end)``: the
  reader seeks to ``start``, skips to the next line start unless
  ``start == 0`` or the byte before ``start`` is ``\\n``, and reads whole lines
  while the line start is ``< end`` (the last one may run past ``end``).
* ``"bz2"``: the same rule on *uncompressed* offsets. The block-offset index
  of the file is built once with ``indexed_bzip2`` (parallel), written to
  ``index_dir`` as a plain ``.npz`` (two int64 arrays and a JSON header, read
  with ``allow_pickle=False``: an index planted in a shared work folder is data,
  never code) under a name derived from the file's path, size and mtime
  (reused if present, written atomically), with the dump's size, mtime and a
  checksum of its first and last MiB inside, checked by every reader before it
  seeks (a dump replaced under its index is an error, not wrong offsets), so a
  seek costs at most one bz2 block (~900 kB) of decompression. Single-stream
  (``lbzip2``-style, no stream index) and multi-stream files both work.
* ``"gz"``: the real dump is ~2,000 gzip members ``cat``-ed together
  (Wikimedia ``dumpwikibasejson.sh``: a ``[\\n`` member, batch members of
  entities joined by ``,\\n``, tiny ``,\\n`` members between batches and a
  ``\\n]\\n`` member). So only *some* member boundaries are line boundaries
  (a batch ends mid-line, in ``}``; the ``,\\n`` member after it ends the
  line); the planner checks rather than assumes. ``start``/
  ``end`` are *compressed* offsets of member starts and a reader decompresses
  every member in ``[start, end)``. See ``plan_gz`` for how split points are
  chosen; a gz file with no usable split point (e.g. what ``gzip file.json``
  makes) is one range.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import BinaryIO

from infra.storage import filesystem, open_file
from ingest import bz2_blocks
from setformat.io import file_stamp, write_bytes

COMPRESSIONS = ("none", "gz", "bz2")
GZIP_MAGIC = b"\x1f\x8b\x08"
GZ_VERIFY_BYTES = 4096  # decompressed bytes a candidate member start must yield
GZ_PROBE_BYTES = 8 << 20  # how far back to look for the member before a split point
_READ_CHUNK = 1 << 20
_GZ_OUT_CHUNK = 8 << 20


class DumpError(ValueError):
    """A dump file or range cannot be read as planned (not a content error)."""


# --------------------------------------------------------------------------
# ranges


@dataclass
class WikidataRange:
    """One unit of parallel work; see the module docstring for ``start``/``end``."""

    range_id: int
    path: str
    compression: str  # "none" | "gz" | "bz2"
    start: int
    end: int
    index_path: str | None = None  # bz2: the block-offset index (.npz)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WikidataRange:
        return cls(**json.loads(text))


def compression_of(path: str) -> str:
    name = path.lower()
    if name.endswith(".bz2"):
        return "bz2"
    if name.endswith((".gz", ".gzip")):
        return "gz"
    return "none"


def _open(path: str) -> BinaryIO:
    return open_file(path, "rb")


def plan_ranges(paths: list[str], target_bytes: int, index_dir: str) -> list[WikidataRange]:
    """Cut each file into ranges of about ``target_bytes`` (uncompressed bytes
    for ``none``/``bz2``, compressed bytes for ``gz``). ``range_id`` numbers the
    ranges of all files in order. ``index_dir`` receives the bz2 indexes."""
    if target_bytes <= 0:
        raise ValueError(f"target_bytes must be positive, got {target_bytes}")
    ranges: list[WikidataRange] = []
    for path in paths:
        compression = compression_of(path)
        index_path = None
        if compression == "bz2":
            index_path, size = bz2_index(path, index_dir)
            # no index (the file cannot be decoded to its end): one range, read as a stream up to the fault
            spans = _even_spans(size, target_bytes) if index_path else [(0, 1 << 62)]
        elif compression == "gz":
            spans = plan_gz(path, target_bytes)
        else:
            spans = _even_spans(file_stamp(path)[0], target_bytes)
        for start, end in spans:
            ranges.append(WikidataRange(len(ranges), path, compression, start, end, index_path))
    return ranges


def _even_spans(size: int, target_bytes: int) -> list[tuple[int, int]]:
    if size <= 0:
        return [(0, 0)]
    return [(s, min(s + target_bytes, size)) for s in range(0, size, target_bytes)]


# --------------------------------------------------------------------------
# bz2


INDEX_SUFFIX = ".bz2index.npz"
_FINGERPRINT_BYTES = 1 << 20


def _fingerprint(path: str, size: int) -> str:
    """sha256 of the file's first and last MiB (and its size): cheap enough for every reader."""
    digest = hashlib.sha256(str(size).encode())
    with _open(path) as f:
        digest.update(f.read(_FINGERPRINT_BYTES))
        if size > _FINGERPRINT_BYTES:
            f.seek(max(size - _FINGERPRINT_BYTES, _FINGERPRINT_BYTES))
            digest.update(f.read())
    return digest.hexdigest()


def write_bz2_index(index_path: str, header: dict, block_offsets: dict[int, int]) -> None:
    """The index as ``.npz``: ``compressed_bits``/``uncompressed_bytes`` (int64) and ``header`` (JSON bytes)."""
    import numpy as np

    bits = np.fromiter(block_offsets.keys(), dtype=np.int64, count=len(block_offsets))
    out = np.fromiter(block_offsets.values(), dtype=np.int64, count=len(block_offsets))
    buffer = io.BytesIO()
    np.savez(buffer, compressed_bits=bits, uncompressed_bytes=out,
             header=np.frombuffer(json.dumps(header, sort_keys=True).encode(), dtype=np.uint8))
    write_bytes(buffer.getvalue(), index_path)  # in the job's _work folder: local, or the bucket (every node reads it)


def read_bz2_index(index_path: str) -> tuple[dict, dict[int, int]]:
    """(header, block offsets) of an index file; anything but this project's plain ``.npz`` is a DumpError."""
    import numpy as np

    fs, local = filesystem(index_path)
    try:
        with fs.open(local, "rb") as f, np.load(io.BytesIO(f.read()), allow_pickle=False) as npz:
            header = json.loads(bytes(npz["header"]).decode())
            offsets = dict(zip(npz["compressed_bits"].tolist(), npz["uncompressed_bytes"].tolist()))
    except (ValueError, KeyError, OSError, EOFError, json.JSONDecodeError) as e:
        raise DumpError(f"{index_path}: not a bz2 block index written by structcse (refused, nothing in it was "
                        f"run: {e}); delete it and rerun to rebuild it") from None
    if not isinstance(header, dict) or not {"size", "stamp", "fingerprint", "uncompressed_size"} <= header.keys():
        raise DumpError(f"{index_path}: bz2 index header lacks size/stamp/fingerprint/uncompressed_size; "
                        "delete it and rerun to rebuild it")
    return header, offsets


def _check_index_matches(index_path: str, header: dict, path: str) -> None:
    size, stamp = file_stamp(path)
    now = {"size": size, "stamp": stamp, "fingerprint": _fingerprint(path, size)}
    changed = [k for k, v in now.items() if header.get(k) != v]
    if changed:
        raise DumpError(f"{path} changed since its bz2 index {index_path} was built ({', '.join(changed)} differ); "
                        "rerun the job so the index is rebuilt")


def bz2_index(path: str, index_dir: str) -> tuple[str | None, int]:
    """Path of the block-offset index of ``path`` (built if absent) and the file's uncompressed size;
    ``(None, 0)`` when the file cannot be decoded to its end (truncated or corrupt): its one range is
    then read as a stream, and the lines before the fault are kept."""
    import indexed_bzip2

    size, stamp = file_stamp(path)
    key = hashlib.sha256(f"{path}\0{size}\0{stamp}".encode()).hexdigest()[:24]
    fs, local_dir = filesystem(index_dir)  # write_bytes makes a local folder; a bucket needs none
    index_path = f"{index_dir.rstrip('/')}/{os.path.basename(path)}.{key}{INDEX_SUFFIX}"
    if fs.exists(f"{local_dir.rstrip('/')}/{os.path.basename(index_path)}"):
        header, _ = read_bz2_index(index_path)
        _check_index_matches(index_path, header, path)
        return index_path, int(header["uncompressed_size"])
    try:
        with _bz2_source(path) as source, indexed_bzip2.open(source, parallelization=os.cpu_count() or 1) as f:
            offsets = f.block_offsets()
            uncompressed = f.size()
    except (RuntimeError, ValueError, OSError, EOFError):  # indexed_bzip2 on a truncated or corrupt file: std::exception,
        # or ValueError naming the bad block data ("selector 598 out of maximum range")
        return None, 0
    header = {"path": path, "size": size, "stamp": stamp, "fingerprint": _fingerprint(path, size),
              "uncompressed_size": int(uncompressed)}
    write_bz2_index(index_path, header, offsets)
    return index_path, uncompressed


class _bz2_source:
    """A local path as itself (indexed_bzip2 reads it natively), else an fsspec file."""

    def __init__(self, path: str):
        self.path = path
        self.file = None

    def __enter__(self):
        fs, fs_path = filesystem(self.path)
        if "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)):
            return fs_path
        self.file = fs.open(fs_path, "rb")
        return self.file

    def __exit__(self, *exc):
        if self.file is not None:
            self.file.close()


def _iter_bz2_lines(rng: WikidataRange) -> Iterator[tuple[int, bytes]]:
    import indexed_bzip2

    if rng.index_path is None:  # no index could be built (a damaged file): the whole file, block by block
        yield from bz2_blocks.recovered_lines(rng.path)
        return
    header, offsets = read_bz2_index(rng.index_path)
    _check_index_matches(rng.index_path, header, rng.path)
    with _bz2_source(rng.path) as source, indexed_bzip2.open(source, parallelization=1) as f:
        f.set_block_offsets(offsets)
        yield from _iter_seekable_lines(f, rng.start, rng.end)


# --------------------------------------------------------------------------
# plain


def _iter_seekable_lines(f: BinaryIO, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(offset, line) of the lines that start in ``[start, end)``."""
    pos = start
    if start > 0:
        f.seek(start - 1)
        if f.read(1) != b"\n":
            pos += len(f.readline())  # the rest of a line owned by the range before
    else:
        f.seek(0)
    while pos < end:
        line = f.readline()
        if not line:
            break
        yield pos, line
        pos += len(line)


def _iter_plain_lines(rng: WikidataRange) -> Iterator[tuple[int, bytes]]:
    with _open(rng.path) as f:
        yield from _iter_seekable_lines(f, rng.start, rng.end)


# --------------------------------------------------------------------------
# gz


def plan_gz(path: str, target_bytes: int) -> list[tuple[int, int]]:
    """Compressed ``(start, end)`` spans of a multi-member gzip file.

    Split points are chosen greedily: after a split at ``s`` (the first is 0),
    the next is the first offset ``c >= s + target_bytes`` such that

    1. ``c`` holds ``1f 8b 08`` and decompressing from ``c`` yields
       ``GZ_VERIFY_BYTES`` (or everything up to the end of the file) without
       error, so ``c`` is a real member start, not those bytes inside
       compressed data; and
    2. the nearest ``1f 8b 08`` before ``c`` (at most ``GZ_PROBE_BYTES``
       back, not before ``s``) that decompresses as a whole member (CRC
       checked) ending exactly at ``c`` has data ending with ``\\n``, so
       ``c`` starts a line.

    Offsets failing either test are never split points, so a file whose
    members do not end at line ends (``gzip`` output is one member anyway)
    is one range; correctness never depends on the member layout. In the
    real dump a batch member start qualifies (its predecessor is the ~20-byte
    ``,\\n`` member); the ``,\\n`` member start does not (its predecessor, a
    batch, ends in ``}``, and lies farther back than the probe).

    Only the bytes near candidate split points are read and decompressed,
    except when no split point qualifies, when the rest of the file is
    scanned once for candidates.
    """
    size = file_stamp(path)[0]
    if size == 0:
        return [(0, 0)]
    with _open(path) as f:
        if f.read(3) != GZIP_MAGIC:
            raise DumpError(f"{path}: not a gzip file (no gzip header at offset 0)")
        splits = [0]
        while True:
            nominal = splits[-1] + target_bytes
            if nominal >= size:
                break
            split = None
            for candidate in _gz_candidates(f, nominal, size):
                if _gz_member_starts_line(f, candidate, splits[-1], size):
                    split = candidate
                    break
            if split is None:
                break
            splits.append(split)
    return [(s, e) for s, e in zip(splits, splits[1:] + [size])]


def _gz_candidates(f: BinaryIO, start: int, stop: int) -> Iterator[int]:
    """Offsets in ``[start, stop)`` where ``1f 8b 08`` occurs, in order."""
    pos = start
    while pos < stop:
        f.seek(pos)
        block = f.read(min(_READ_CHUNK, stop - pos) + len(GZIP_MAGIC) - 1)
        if not block:
            return
        limit = min(_READ_CHUNK, stop - pos)
        i = block.find(GZIP_MAGIC)
        while 0 <= i < limit:
            yield pos + i
            i = block.find(GZIP_MAGIC, i + 1)
        pos += limit


def _gz_decompresses_from(f: BinaryIO, offset: int, size: int) -> bool:
    """Whether the members from ``offset`` yield ``GZ_VERIFY_BYTES`` (or
    everything up to the end of the file, ending with a complete member)
    without error."""
    f.seek(offset)
    d = None
    produced = 0
    pos = offset
    try:
        while pos < size:
            data = f.read(min(64 << 10, size - pos))
            if not data:
                break
            pos += len(data)
            while data:
                if d is None:
                    d = zlib.decompressobj(31)
                produced += len(d.decompress(data, GZ_VERIFY_BYTES))
                if produced >= GZ_VERIFY_BYTES:
                    return True
                # below the output limit, so all input was consumed unless the member ended
                if d.eof:
                    data, d = d.unused_data, None
                else:
                    data = b""
    except zlib.error:
        return False
    return d is None and produced > 0


def _gz_member_starts_line(f: BinaryIO, c: int, lower: int, size: int) -> bool:
    """Whether ``c`` is a member start whose previous member's data ends with
    ``\n`` (see ``plan_gz``). The look-back window grows from 64 KiB to
    ``GZ_PROBE_BYTES``, so the common case (a tiny previous member) reads
    little."""
    if not _gz_decompresses_from(f, c, size):
        return False
    window = b""
    lo = c
    width = 64 << 10
    while lo > lower:
        new_lo = max(lower, c - width)
        f.seek(new_lo)
        window = f.read(lo - new_lo) + window
        searched, lo = lo - new_lo, new_lo  # candidates in window[:searched] are new
        view = memoryview(window)
        p = window.rfind(GZIP_MAGIC, 0, searched + len(GZIP_MAGIC) - 1)
        while p >= 0:
            if p < searched:
                verdict = _gz_member_ends_at(view[p:])
                if verdict is not None:
                    return verdict
            p = window.rfind(GZIP_MAGIC, 0, p)
        if width >= GZ_PROBE_BYTES:
            break
        width = min(width * 8, GZ_PROBE_BYTES)
    return False


def _gz_member_ends_at(compressed: bytes | memoryview) -> bool | None:
    """Decompress the member at the start of ``compressed``. If it is a whole
    member (CRC checked) that ends exactly at the end of ``compressed``:
    whether its data ends with ``\n``. Otherwise (not a member, one that
    ends earlier or runs past the end) None."""
    d = zlib.decompressobj(31)
    last = b""
    data = compressed
    try:
        while True:
            out = d.decompress(data, _GZ_OUT_CHUNK)
            if out:
                last = out[-1:]
            if d.eof:
                break
            data = d.unconsumed_tail
            if not data and len(out) < _GZ_OUT_CHUNK:
                return None  # runs past the end: the split offset would be inside it
    except zlib.error:
        return None
    if d.unused_data:
        return None
    return last == b"\n"


def _iter_gz_lines(rng: WikidataRange) -> Iterator[tuple[int, bytes]]:
    """(offset, line) of every line decompressed from the members in
    ``[start, end)``; offset = ``start`` + offset in that decompressed data."""
    size = file_stamp(rng.path)[0]
    last_range = rng.end >= size
    buf = b""
    buf_offset = rng.start  # offset (as defined above) of buf[0]
    d = None  # the decompressor of the current member; None between members
    pos = rng.start
    with _open(rng.path) as f:
        f.seek(rng.start)
        while pos < rng.end:
            data = f.read(min(_READ_CHUNK, rng.end - pos))
            if not data:
                raise DumpError(f"{rng.path}: file ends at {pos}, before the range end {rng.end}")
            pos += len(data)
            while True:
                if d is None:
                    if not data:
                        break
                    if last_range and not data.strip(b"\0"):
                        break  # zero padding after the last member
                    d = zlib.decompressobj(31)
                try:
                    out = d.decompress(data, _GZ_OUT_CHUNK)
                except zlib.error as e:
                    raise DumpError(
                        f"{rng.path}: gzip data error in the range starting at compressed offset "
                        f"{rng.start}, before offset {pos}: {e}"
                    ) from e
                if out:
                    buf += out
                    if b"\n" in out:
                        lines = buf.split(b"\n")
                        buf = lines.pop()
                        for line in lines:
                            yield buf_offset, line + b"\n"
                            buf_offset += len(line) + 1
                if d.eof:
                    data = d.unused_data
                    d = None
                else:
                    data = d.unconsumed_tail
                    if not data and len(out) < _GZ_OUT_CHUNK:
                        break
    if d is not None:
        raise DumpError(
            f"{rng.path}: the gzip member being read at compressed offset {rng.end} is incomplete "
            f"(truncated file, or a range end that is not a member start; range starts at {rng.start})"
        )
    if buf:
        if not last_range:
            raise DumpError(
                f"{rng.path}: the gzip range [{rng.start}, {rng.end}) does not end at a line "
                f"boundary (the member at compressed offset {rng.end} continues a line); "
                "plan it as one range"
            )
        yield buf_offset, buf


# --------------------------------------------------------------------------
# reading


def iter_range_lines(rng: WikidataRange) -> Iterator[tuple[int, bytes]]:
    """(offset, raw line) of every line a range owns, in file order."""
    if rng.compression == "none":
        return _iter_plain_lines(rng)
    if rng.compression == "bz2":
        return _iter_bz2_lines(rng)
    if rng.compression == "gz":
        return _iter_gz_lines(rng)
    raise ValueError(f"{rng.path}: unknown compression {rng.compression!r}; known: {COMPRESSIONS}")


