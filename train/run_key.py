"""What a run trains, recorded in its folder, so that rerunning a command resumes only the same training.

``{storage}/{run_name}/run_key.json`` (written when a run starts fresh) holds:

* ``config``: every config key that shapes the trained weights (the method and its options, lr, batch,
  seed, pooling, …); the keys in :data:`RESUME_FREE` are left out: they say where, on what and for how
  long a run trains (``max_steps`` and ``epochs`` grow on resume, workers and GPUs change between
  machines), not what it learns;
* ``sets``: each set the method reads, by the sha256 of its manifest (a set rebuilt from other input,
  or with other settings, has another manifest);
* ``model``: the base model: a local folder by the sha256 of its ``config.json`` and the names and sizes
  of its weight files; a hub name by name (and ``revision``, if the config pins one).

A run folder with checkpoints is resumed only when its key equals the new run's; otherwise
:func:`check_run_key` raises a ``ConfigError`` that lists what differs and the two ways on: a new
``--name``, or ``--overwrite`` (the old folder removed first). ``--resume`` asks for a resume and
fails when there is nothing compatible to resume. A run folder written before keys existed resumes
as before, with a warning.

A fresh start also writes a ``run_id`` (random) beside the key: :func:`run_fingerprint`, the sha256 of the
whole record, names this run and no other — not an older run of the same config whose folder was removed
and whose leftovers remain. Every checkpoint carries it (``train.checkpoints``), and only checkpoints that
carry it are resumed from or selected.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from pathlib import Path

from infra.storage import filesystem
from infra.cache import as_local
from infra.storage import is_uri
from setformat.io import file_digest, manifest_path, read_json, write_json
from train.config import ConfigError, TrainConfig

log = logging.getLogger(__name__)
RUN_KEY = "run_key.json"
RUN_ID = "run_id"  # written with the key at a fresh start; not part of what is compared
RESUME_FREE = frozenset({
    "storage_path", "run_name", "max_steps", "epochs", "num_workers", "use_gpu", "cpus_per_worker",
    "mixed_precision", "chunk_size", "pretokenize", "checkpoint_every_steps", "keep_checkpoints",
    "log_every_steps", "max_failures", "data", "dev_data", "dev_metric", "checkpoint_metric",
    "validation_timeout_s", "compile", "compile_layers", "unpad", "base_pooling", "feed",
})
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".h5", ".msgpack")


def _sha256(path: str) -> str | None:
    fs, local = filesystem(path)
    return file_digest(path)["sha256"] if fs.exists(local) else None


def model_key(model: str) -> dict:
    folder = Path(as_local(model)).expanduser()  # a model in a bucket: keyed by its URI and its content
    if not folder.is_dir():
        return {"name": model}
    weights = {p.name: p.stat().st_size for p in sorted(folder.iterdir())
               if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES)}
    where = {"uri": model} if is_uri(model) else {"folder": str(folder.resolve())}
    return {**where, "config_sha256": _sha256(str(folder / "config.json")), "weights": weights}


def run_key(cfg: TrainConfig, set_paths: dict) -> dict:
    from train.methods import METHODS

    config = {k: v for k, v in cfg.to_dict().items()
              if k not in RESUME_FREE and k != "model" and (k not in METHODS or k == cfg.method)}
    sets = {kind: _sha256(manifest_path(path)) for kind, path in sorted(set_paths.items())}
    from infra.secrets import redact  # a key in the environment never reaches a file, here as anywhere

    return redact(json.loads(json.dumps({"config": config, "sets": sets, "model": model_key(cfg.model)}, default=str)))


def _differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {_short(a)} -> {_short(b)}")
    return out


def _short(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _has_checkpoints(fs, run_dir: str) -> bool:
    return bool(fs.exists(run_dir) and (fs.glob(f"{run_dir}/step-*") or fs.exists(f"{run_dir}/checkpoint_manager_snapshot.json")))


def check_run_key(cfg: TrainConfig, run_dir: str, set_paths: dict, *, resume: bool = False,
                  overwrite: bool = False) -> str:
    """Before Ray starts: ``"fresh"`` (key written), ``"resume"`` (same key), or a ``ConfigError``.

    ``overwrite``: an existing run folder is removed first (only one that holds a run: checkpoints, a
    key or a summary). ``resume``: a fresh start is an error."""
    if resume and overwrite:
        raise ConfigError("--resume and --overwrite ask for opposite things: pass one")
    fs, local = filesystem(run_dir)
    key = run_key(cfg, set_paths)
    if overwrite and fs.exists(local):
        markers = ("run_key.json", "train_summary.json", "checkpoint_manager_snapshot.json")
        if not (any(fs.exists(f"{local}/{m}") for m in markers) or fs.glob(f"{local}/step-*")):
            raise ConfigError(f"--overwrite: {run_dir} exists but holds no training run; not removing it")
        log.info(f"[train] --overwrite: removing the previous run at {run_dir}")
        from infra.owned import OWNER, remove_owned

        for entry in fs.ls(local, detail=False):  # all but this run's lease and the folder's owner mark
            name = entry.rstrip("/").rsplit("/", 1)[-1]
            if not name.startswith("_lease") and name != OWNER and not name.startswith(f".{OWNER}"):
                remove_owned(f"{run_dir.rstrip('/')}/{name}", "previous run's file")
    if not _has_checkpoints(fs, local):
        if resume:
            raise ConfigError(f"--resume: no run to resume at {run_dir} (no checkpoint); drop --resume to start it")
        write_json({**key, RUN_ID: uuid.uuid4().hex}, f"{run_dir.rstrip('/')}/{RUN_KEY}")
        return "fresh"
    old = read_json(f"{run_dir.rstrip('/')}/{RUN_KEY}")
    if old is None:
        log.warning(f"[train] warning: {run_dir} has checkpoints but no {RUN_KEY} (written before runs were keyed): "
                    "resuming without checking that it trained the same config, sets and base model")
        write_json({**key, RUN_ID: uuid.uuid4().hex}, f"{run_dir.rstrip('/')}/{RUN_KEY}")
        return "resume"
    differences = _differences({k: v for k, v in old.items() if k != RUN_ID}, key)
    if differences:
        name = os.path.basename(run_dir.rstrip("/"))
        raise ConfigError(
            f"run {name!r} at {run_dir} trained something else, so it is not resumed: "
            + "; ".join(differences[:8]) + (f"; and {len(differences) - 8} more" if len(differences) > 8 else "")
            + f". Start fresh under a new name (--name {name}-2; --set run_name={name}-2 where there is no --name) "
            f"or replace it (--overwrite, or remove {run_dir})")
    return "resume"


def run_fingerprint(run_dir: str) -> str | None:
    """The fingerprint of the run in ``run_dir``: the sha256 (16 hex digits) of its ``run_key.json`` record
    (key and ``run_id``), read through the storage client; None when the folder has no record."""
    fs, path = filesystem(f"{run_dir.rstrip('/')}/{RUN_KEY}")
    try:
        record = json.loads(fs.cat_file(path))
    except FileNotFoundError:
        return None
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]
