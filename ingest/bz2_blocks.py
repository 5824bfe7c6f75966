"""What a damaged bzip2 file still holds, block by block, as ``bzip2recover`` finds it.

A bzip2 stream is a 4-byte header (``BZh`` and the block size digit), then blocks
that are *bit*-aligned, each opening with the 48-bit magic ``0x314159265359`` and
its 32-bit CRC, then the 48-bit end-of-stream magic ``0x177245385090`` and the
stream's combined CRC. Every block decodes alone: cut out its bits, wrap them in a
header and an end-of-stream marker whose combined CRC is the block's own CRC (the
combined CRC of a one-block stream), and ``bz2.decompress`` reads it, checking the
block's CRC. A corrupt block fails that check and is lost; the blocks after it are not.

`find_blocks` scans a file for the two magics at every bit offset (``bytes.find`` on
the five bytes of the magic that are whole at each of the eight shifts, the partial
bytes checked after), chunk by chunk; `recover` yields the decoded bytes of the file
with a `Gap` wherever a block could not be read, and is how `ingest.wikipedia` reads
on after a single-stream dump's decoder failed; `recovered_lines` splits it into lines
(a damaged Wikidata ``.json.bz2``). A marker found by chance inside
compressed bits (one in 2**48 bit positions) splits a block in two halves that both
fail: such a pair is tried again as one block.
"""

from __future__ import annotations

import bz2
from collections.abc import Iterator
from dataclasses import dataclass

from infra.storage import open_file

BLOCK_MAGIC = 0x314159265359
EOS_MAGIC = 0x177245385090
_SCAN_BYTES = 16 << 20


@dataclass(frozen=True)
class Gap:
    """Compressed bytes ``[start, end)`` of the file that could not be decoded."""

    start: int
    end: int
    error: str
    at_end: bool  # the damage runs to the end of the file: it ends early (a truncated download)


def _patterns(magic: int) -> list[tuple[int, bytes, int, int, int, int]]:
    """Per bit shift k: (k, the five whole bytes, first partial byte, its mask, last partial byte, its mask)."""
    out = []
    for k in range(8):
        window = (magic << (8 - k)).to_bytes(7, "big") if k else magic.to_bytes(6, "big") + b"\0"
        first_mask = (1 << (8 - k)) - 1 if k else 0xFF
        last_mask = (0xFF << (8 - k)) & 0xFF if k else 0
        out.append((k, window[1:6], window[0], first_mask, window[6], last_mask))
    return out


_PATTERNS = {BLOCK_MAGIC: _patterns(BLOCK_MAGIC), EOS_MAGIC: _patterns(EOS_MAGIC)}


def _find_in(data: bytes, base: int, limit: int, magic: int) -> Iterator[int]:
    """Bit offsets (from the file's start) of ``magic`` starting in ``data[:limit]``'s bytes."""
    for k, core, first, first_mask, last, last_mask in _PATTERNS[magic]:
        start = 1
        while True:
            p = data.find(core, start)
            if p < 0 or p - 1 >= limit:
                break
            start = p + 1
            if p + 5 >= len(data) and last_mask:
                continue  # the last partial byte is past the data: found again in the next chunk
            if data[p - 1] & first_mask == first & first_mask and (
                    not last_mask or data[p + 5] & last_mask == last & last_mask):
                yield (base + p - 1) * 8 + k


def find_blocks(f, size: int) -> list[tuple[int, int]]:
    """Every block of the file as (start bit, end bit): from its magic to the next block or end-of-stream
    magic, or to the end of the file."""
    markers: list[tuple[int, int]] = []
    offset = 0
    while offset < size:
        f.seek(max(0, offset - 1))
        data = f.read(_SCAN_BYTES + 8)  # one byte before (a shifted magic's first partial byte), 7 after
        base = max(0, offset - 1)
        limit = offset - base + _SCAN_BYTES
        for magic in (BLOCK_MAGIC, EOS_MAGIC):
            markers.extend((bit, magic) for bit in _find_in(data, base, limit, magic) if bit >= offset * 8 - 8)
        offset += _SCAN_BYTES
    markers = sorted(set(markers))
    blocks = []
    for index, (bit, magic) in enumerate(markers):
        if magic == BLOCK_MAGIC:
            end = markers[index + 1][0] if index + 1 < len(markers) else size * 8
            blocks.append((bit, end))
    return blocks


def _bits(f, start: int, end: int) -> tuple[int, int]:
    f.seek(start // 8)
    raw = f.read((end + 7) // 8 - start // 8)
    value = int.from_bytes(raw, "big") >> ((8 - end % 8) % 8)
    n = end - start
    return value & ((1 << n) - 1), n


def decode_block(f, start: int, end: int) -> bytes:
    """The decoded bytes of the block at bits [start, end); OSError or EOFError when it is damaged."""
    value, n = _bits(f, start, end)
    if n < 80:
        raise EOFError(f"{n} bits: shorter than a block header")
    crc = (value >> (n - 80)) & 0xFFFFFFFF
    value = (value << 80) | (EOS_MAGIC << 32) | crc
    n += 80
    pad = -n % 8
    return bz2.decompress(b"BZh9" + (value << pad).to_bytes((n + pad) // 8, "big"))


def recover(path: str, skip: int = 0) -> Iterator[bytes | Gap]:
    """The file's decoded bytes block by block, a `Gap` for each run of blocks that cannot be decoded.
    The first ``skip`` decoded bytes of the intact blocks before the first damage are not yielded
    (a streaming decoder already read them)."""
    with open_file(path, "rb") as f:
        size = f.size if hasattr(f, "size") and f.size is not None else f.seek(0, 2)
        blocks = find_blocks(f, size)
        index, skipped, damaged = 0, 0, False
        gap: list | None = None  # [start byte, end byte, first error]
        while index < len(blocks):
            start, end = blocks[index]
            step = 1
            try:
                data = decode_block(f, start, end)
            except (OSError, EOFError, ValueError) as first_error:
                try:  # a chance marker inside compressed bits split one block in two
                    if index + 1 >= len(blocks) or blocks[index + 1][0] != end:
                        raise first_error
                    data, step = decode_block(f, start, blocks[index + 1][1]), 2
                except (OSError, EOFError, ValueError):
                    damaged = True
                    if gap is None:
                        gap = [start // 8, (end + 7) // 8, f"{type(first_error).__name__}: {first_error}"]
                    else:
                        gap[1] = (end + 7) // 8
                    index += 1
                    continue
            if gap is not None:
                yield Gap(gap[0], gap[1], gap[2], at_end=False)
                gap = None
            index += step
            if not damaged and skipped < skip:  # still inside what the streaming decoder read
                take = min(len(data), skip - skipped)
                skipped += take
                data = data[take:]
            if data:
                yield data
        if gap is not None:
            yield Gap(gap[0], gap[1], gap[2], at_end=gap[1] >= size)
        elif not blocks:
            yield Gap(0, size, "no bzip2 block found", at_end=True)


@dataclass(frozen=True)
class LostLines:
    """A run of damaged bzip2 blocks (``gap``) and the lines seen cut by it (at most one: a line begun
    before it, or ended after it); the lines wholly inside it are not seen and cannot be counted."""

    lines: int
    gap: Gap


def recovered_lines(path: str) -> Iterator[tuple[int, bytes] | LostLines]:
    """The lines of a damaged ``.bz2`` read block by block, a `LostLines` at each
    run of lost blocks. Offsets after a gap count the bytes recovered, not the file's (which are unknown)."""
    pos, pending, gap, cut_before = 0, b"", None, 0
    for chunk in recover(path):
        if isinstance(chunk, Gap):
            if gap is not None:
                yield LostLines(max(cut_before, int(bool(pending.strip()))), gap)
                cut_before = 0
            else:
                cut_before = int(bool(pending.strip()))
            pos += len(pending)
            gap, pending = chunk, b""
            continue
        data = pending + chunk
        if gap is not None:  # the rest of the line the gap cut
            newline = data.find(b"\n")
            if newline < 0:
                pending = data
                continue
            yield LostLines(max(cut_before, int(bool(data[:newline].strip()))), gap)
            gap, cut_before = None, 0
            pos += newline + 1
            data = data[newline + 1:]
        *lines, pending = data.split(b"\n")
        for line in lines:
            yield pos, line + b"\n"
            pos += len(line) + 1
    if gap is not None:
        yield LostLines(max(cut_before, int(bool(pending.strip()))), gap)
    elif pending:
        yield pos, pending
