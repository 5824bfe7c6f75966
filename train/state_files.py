"""Reading back what training wrote (``state.pt``, ``heads.pt``) without running anything in it.

A run folder lives in shared storage (``--storage s3://…``): whoever can write
one file there must not get code run on every worker that resumes from it.
So these files are read with ``torch.load(weights_only=True)``: tensors,
numbers, strings, lists, tuples and dicts only, refused otherwise. They hold
nothing else (model/optimizer/scheduler state dicts, step counters, the
config as JSON-able values; the RNG needs no saving, ``train.loop``), so
byte-identical resume is unchanged.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import torch


class UnsafeStateError(ValueError):
    """A state or heads file holds something other than tensors and plain values (or is not a torch file)."""


def load_tensors(path: str | Path, *, mmap: bool = False) -> dict:
    """``path`` loaded as tensors and plain values on CPU; anything else is an ``UnsafeStateError`` naming it.

    ``mmap=True`` leaves tensor storages on disk (a cheap check of a large file's contents' types).
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UnsafeStateError(
            f"{path}: refused: it holds objects other than tensors and plain values, so it was not written by "
            f"structcse and loading it could run code ({first}). Nothing in it was run; remove the file (or the "
            "whole checkpoint folder) and resume from an earlier checkpoint or start fresh") from None
    except (RuntimeError, EOFError, OSError) as e:
        raise UnsafeStateError(f"{path}: not a readable torch state file ({type(e).__name__}: {e}); remove the "
                               "checkpoint folder holding it and rerun") from None
    if not isinstance(state, dict):
        raise UnsafeStateError(f"{path}: expected a dict of tensors, found {type(state).__name__}")
    return state


def check_local_checkpoints(run_dir: str | Path, state_file: str) -> int:
    """Before Ray starts a resume: every whole ``step-*/{state_file}`` under a local ``run_dir`` loads safely.

    Returns how many were checked (0 for a fresh run or remote storage, which the workers check as they load).
    """
    from infra.publish import is_complete

    run_dir = Path(run_dir)
    checked = 0
    for path in sorted(run_dir.glob(f"step-*/{state_file}")):
        if not is_complete(path.parent, require_manifest=True):
            continue  # a copy a killed writer left: never a resume candidate (train/checkpoints.py), not read
        load_tensors(path, mmap=True)
        checked += 1
    return checked
