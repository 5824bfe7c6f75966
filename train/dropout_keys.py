"""Dropout masks that are a function of (seed, global step, column, global row, site, position, feature).

A worker's dropout masks normally come from torch's generator, seeded per (seed, rank, step): the mask a
row gets depends on which worker encodes it and where in that worker's batch it sits. An elastic run
(``num_workers: [min, max]``) trains the same global batch at every world size (``train.global_order``),
but after a resize its rows sit on other workers, so they would get other masks, and SimCSE-unsup, whose
positive pair *is* two dropout masks, would train another model.

Here every kept/dropped decision is a hash of its coordinates instead: the loop gives each row of each
token column a 64-bit ``row_keys`` entry (``add_row_keys``: seed, global step, the column's place in the
batch, the row's place in the global batch, rank-major as ``GlobalOrder.share`` hands them out), and
``train.unpadded`` draws each dropout site's mask from them (``keyed_dropout``: splitmix64 of the row key,
the token position, the site and the feature). The epoch is a function of the global step, so it is in
the key too. A row gets the same masks on any worker, at any world size, in any GradCache chunk, and in
GradCache's replay. ``double`` (SimCSE-unsup's [x; x]) gives the second copy keys of its own.

The masks keep each element with probability 1 - p to 2^-24; they cost a few integer ops per element,
which is why only elastic runs use them.
"""

from __future__ import annotations

import torch

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
ROW_KEYS = "row_keys"  # the field of a token dict that holds them


def _signed(x: int) -> int:
    x &= _MASK64
    return x - (1 << 64) if x >> 63 else x


def mix_int(*parts: int) -> int:
    """splitmix64 over Python ints: one 64-bit key (as a signed int64) of ``parts``."""
    z = 0
    for part in parts:
        z = (z ^ (part & _MASK64)) + _GOLDEN & _MASK64
        z = ((z ^ (z >> 30)) * _M1) & _MASK64
        z = ((z ^ (z >> 27)) * _M2) & _MASK64
        z ^= z >> 31
    return _signed(z)


def _shr(z: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's ``>>`` is arithmetic)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def mix(z: torch.Tensor) -> torch.Tensor:
    """splitmix64's finalizer on an int64 tensor (wrapping arithmetic), elementwise."""
    z = z + _signed(_GOLDEN)
    z = (z ^ _shr(z, 30)) * _signed(_M1)
    z = (z ^ _shr(z, 27)) * _signed(_M2)
    return z ^ _shr(z, 31)


def row_keys(seed: int, step: int, column: int, rows: torch.Tensor) -> torch.Tensor:
    """The keys of ``rows`` (their places in the global batch) of token column ``column`` at ``step``."""
    return mix(rows.to(torch.int64) + mix_int(seed, step, column))


def add_row_keys(batch: dict, seed: int, step: int, first_row: int) -> dict:
    """``batch`` with ``row_keys`` in each token dict: this worker's rows are ``first_row ..`` of the global batch."""
    from train.batch import is_tokens, num_rows

    out, column = {}, 0
    for name, value in batch.items():
        if is_tokens(value):
            rows = torch.arange(first_row, first_row + num_rows(value), device=value["input_ids"].device)
            value = {**value, ROW_KEYS: row_keys(seed, step, column, rows)}
            column += 1
        out[name] = value
    return out


def second_copy(keys: torch.Tensor) -> torch.Tensor:
    """The keys of [x; x]'s second copy of rows keyed ``keys``."""
    return mix(keys ^ mix_int(0x5EC0D))


def token_keys(keys: torch.Tensor, length: int) -> torch.Tensor:
    """(rows,) row keys -> (rows, length) keys of their token positions."""
    positions = torch.arange(length, device=keys.device, dtype=torch.int64)
    return mix(keys[:, None] + positions[None, :] * _signed(_M1))


def keep_mask(keys: torch.Tensor, site: int, inner: int, p: float) -> torch.Tensor:
    """A 0/1 mask of shape ``keys.shape + (inner,)``: element (..., j) kept with probability 1 - p, a
    function of (its key, ``site``, j) alone."""
    base = mix(keys ^ mix_int(site))
    z = mix(base.unsqueeze(-1) + torch.arange(inner, device=keys.device, dtype=torch.int64))
    uniform = _shr(z, 40)  # the top 24 bits
    return uniform >= round(p * (1 << 24))


def keyed_dropout(states: torch.Tensor, keys: torch.Tensor, site: int, p: float) -> torch.Tensor:
    """Dropout of ``states`` (shape ``keys.shape + (d,)``) with the masks ``keep_mask`` draws."""
    if p <= 0:
        return states
    keep = keep_mask(keys, site, states.shape[-1], p)
    return states * keep.to(states.dtype) * (1.0 / (1.0 - p))
