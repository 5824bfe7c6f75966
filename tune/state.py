"""A search's folder, ``{storage}/{name}/``: the state file that says which search it holds (its config, its
settings and what its data held) and whether it finished, checked before a rerun continues it; the lease that
keeps it one live search's alone; the content fingerprints of the data a search reads."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json

from ray import tune

from infra.storage import arrow_filesystem
from train.config import ConfigError, TrainConfig

STATE_FILE = "structcse_search.json"
SEARCH_LEASE = "_lease-search.json"
RESUMABLE_SETTINGS = ("max_concurrent_trials", "validation_attempts")  # a continued search may change these
HASHED_FILE_BYTES = 64 * 1024**2  # files up to this size are keyed by their bytes; larger ones by size+mtime


def _digest(parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def content_fingerprint(path: str | None, hash_bytes: bool = True) -> str | None:
    """A hash of what the file or folder at ``path`` (local or URI, through ``infra.storage``) holds: each
    file's relative name, size and content tag. The tag is the store's checksum (S3's ETag, GCS's md5Hash or
    crc32c); without one, a hash of the bytes when ``hash_bytes`` (files up to ``HASHED_FILE_BYTES``), else
    the modification time. None when nothing is there (a Hugging Face model name)."""
    from infra.storage import filesystem

    if not path:
        return None
    fs, root = filesystem(path)
    root = root.rstrip("/")
    if fs.isfile(root):
        listing = {root: fs.info(root)}
    elif fs.isdir(root):
        listing = fs.find(root, detail=True)
    else:
        return None
    entries = []
    for name, info in sorted(listing.items()):
        if info.get("type") == "directory":
            continue
        size = info.get("size")
        tag = info.get("ETag") or info.get("md5Hash") or info.get("crc32c")
        if tag is None and hash_bytes and (size or 0) <= HASHED_FILE_BYTES:
            tag = hashlib.sha256(fs.cat_file(name)).hexdigest()
        elif tag is None:
            tag = info.get("mtime") or info.get("LastModified") or info.get("updated")
        entries.append([name[len(root):].lstrip("/"), size, str(tag)])
    return _digest(entries)


def set_fingerprint(path: str, pinned=None) -> str:
    """What an ingest set holds: its files as pinned (``setformat.io.pin_set``: names, sizes, ETag / generation /
    mtime and inode) and its manifest's record of the job that wrote them (job id, rows, file sizes)."""
    from setformat.schemas import SchemaError
    from setformat.io import pin_set, read_manifest

    pinned = pinned or pin_set(path)
    try:
        manifest = read_manifest(path)
    except (SchemaError, FileNotFoundError, ValueError):
        manifest = {}
    written = {k: manifest.get(k) for k in ("job_id", "rows", "files", "file_sizes")}
    return _digest({"files": [{**f, "name": f["name"].rsplit("/", 1)[-1]} for f in pinned.record()],
                    "manifest": written})


def search_data(base: TrainConfig, set_pins: dict | None = None) -> dict[str, str | None]:
    """``{what: content fingerprint}`` of every data a search reads: each training set (``set <kind>``), the dev
    data and the base model (names, sizes, tags; a model's large files by modification time)."""
    from train.methods import get_method
    from train.plan import resolve_sets

    method = get_method(base.method)
    set_paths = resolve_sets(base.data, method)
    data = {f"set {kind}": set_fingerprint(set_paths[kind], (set_pins or {}).get(kind)) for kind in method.sets}
    data["dev_data"] = content_fingerprint(base.dev_data)
    data["model"] = content_fingerprint(base.model, hash_bytes=False)
    return data


def search_fingerprint(base: TrainConfig, settings) -> str:
    """The search's base config and settings: what a continued search must share (the trials at once and the
    tries at a score may change)."""
    return _digest({"base": base.to_dict(), "settings": {k: v for k, v in dataclasses.asdict(settings).items()
                                                         if k not in RESUMABLE_SETTINGS}})


def check_restore(folder: str, base: TrainConfig, settings, data: dict | None = None) -> bool:
    """True when ``folder`` (a local folder or a URI, read through ``infra.storage``) holds this same search over
    the same data, interrupted; a different search there, or this search over data that changed since, is an
    error; a finished one is run again from scratch only after its folder is removed (by the user). ``data``:
    :func:`search_data` of ``base``, when the caller has it."""
    state = read_state(folder)
    data = data if data is not None else search_data(base)
    if state is None:
        if holds_tune_experiment(folder):
            raise ConfigError(f"{folder} holds a Tune experiment this command did not start; use another --name")
        write_state(folder, base, settings, done=False, data=data)
        return False
    if state.get("fingerprint") != search_fingerprint(base, settings):
        raise ConfigError(f"{folder} holds a search with another base config or settings; use another --name "
                          "(or remove that folder to start over)")
    recorded = state.get("data") or {}
    changed = sorted(k for k in data.keys() | recorded.keys() if recorded.get(k) != data.get(k))
    if changed:
        paths = {"dev_data": base.dev_data, "model": base.model}
        named = ", ".join(f"{k} ({paths[k]})" if k in paths else k for k in changed)
        raise ConfigError(f"{folder} holds a search over other data: {named} changed since it started"
                          + ("" if recorded else " (its data was not recorded)")
                          + "; its trials would mix the two: use another --name (or remove that folder to start over)")
    if state.get("done"):
        raise ConfigError(f"the search in {folder} has finished (its report: {folder}/search_report.md); use another "
                          "--name to run it again")
    return holds_tune_experiment(folder)


def holds_tune_experiment(folder: str) -> bool:
    """Tune's own restore check (its ``tuner.pkl``), asked through this project's storage client."""
    fs, path = arrow_filesystem(folder)
    return tune.Tuner.can_restore(path, storage_filesystem=fs)


def read_state(folder: str) -> dict | None:
    """The search's state file in ``folder`` (local or URI), or None when there is none."""
    from infra.storage import filesystem

    fs, path = filesystem(f"{folder.rstrip('/')}/{STATE_FILE}")
    try:
        text = fs.cat_file(path)
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise ConfigError(f"{folder}/{STATE_FILE} is not JSON; remove that folder to start over") from None


def write_state(folder: str, base: TrainConfig, settings, done: bool, data: dict | None = None) -> None:
    """The search's fingerprint, its data's and whether it finished, written whole (a rename locally, one PUT in a
    bucket)."""
    from infra.publish import write_text_atomic

    write_text_atomic(f"{folder.rstrip('/')}/{STATE_FILE}", json.dumps(
        {"fingerprint": search_fingerprint(base, settings), "data": data if data is not None else search_data(base),
         "done": done, "name": settings.name}, indent=2))


@contextlib.contextmanager
def search_lease(folder: str, name: str):
    """``folder``, one live search's alone while it runs: a second search with the same storage and name refuses
    in one line naming the first (``infra.lease``: ``_lease-search.json``, renewed while this process lives)."""
    from infra.lease import Lease

    with Lease(f"{folder.rstrip('/')}/{SEARCH_LEASE}", "search folder", f"python -m tune --name {name}") as lease:
        yield lease
