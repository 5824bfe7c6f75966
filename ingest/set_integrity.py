"""A failed job never feeds the next: what marks a set as whole, and the check every consumer runs.

A job that writes sets into an output folder (``python -m ingest``, its ``aspects``, ``dsbats`` and
``pairs`` jobs) marks that folder ``_job-<job>.json`` — ``{"job", "job_id", "status": "running"}`` when it
starts, ``"done"`` when its last manifest is written (one marker per job, so two jobs may share a folder).
Each set manifest it writes carries the job's name and ``job_id`` and ``file_sizes`` (every parquet file of
the set and its size), written after the files.

:func:`verify_set` — run by train, eval and Tune (``ingest.sets.check_set``) before Ray starts — refuses
in one line naming the job to rerun: a set of a job that did not finish (still ``running``: killed, or
still going), a set left by an earlier job than the folder's last one, a set without a manifest in a job's
folder, and a listed file that is missing or has another size. Readers then read only the listed files
(``ingest.sets.set_files``).
"""

from __future__ import annotations

import json
import os
import time
import uuid

from ingest import schemas

MANIFEST = "_manifest.json"
_running: dict[str, tuple[str, str]] = {}  # output folder -> (job, job_id) started by this process


def job_file(out: str, job: str) -> str:
    return f"{out.rstrip('/')}/_job-{job}.json"


def _parent(folder: str) -> str:
    return folder.rstrip("/").rsplit("/", 1)[0] if "/" in folder.rstrip("/") else "."


def read_job(out: str, job: str) -> dict | None:
    """The marker of ``job`` in the output folder ``out``, or None."""
    from infra.storage import filesystem

    fs, path = filesystem(job_file(out, job))
    try:
        return json.loads(fs.cat_file(path))
    except FileNotFoundError:
        return None
    except ValueError:
        return {"job": job, "status": "unreadable"}


def _markers(out: str) -> list[dict]:
    from infra.storage import filesystem

    fs, root = filesystem(out)
    try:
        names = [e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(root, detail=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    jobs = [n[len("_job-"):-len(".json")] for n in names if n.startswith("_job-") and n.endswith(".json")]
    return [m for m in (read_job(out, job) for job in sorted(jobs)) if m]


def start_job(out: str, job: str, command: str | None = None) -> str:
    """Mark ``out`` as being written by ``job``; returns the job's id (set manifests written from now on carry it)."""
    from infra.publish import write_text_atomic

    job_id = uuid.uuid4().hex[:16]
    marker = {"job": job, "job_id": job_id, "status": "running",
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": command or job}
    write_text_atomic(job_file(out, job), json.dumps(marker, indent=2, sort_keys=True))
    _running[out.rstrip("/")] = (job, job_id)
    return job_id


def finish_job(out: str, job_id: str) -> None:
    """Mark ``out``'s job done (after its last manifest)."""
    from infra.publish import write_text_atomic

    job = _running.get(out.rstrip("/"), (None, None))[0]
    marker = read_job(out, job) if job else None
    if marker is None or marker.get("job_id") != job_id:
        raise RuntimeError(f"{job_file(out, job or '?')}: another {job} job ({(marker or {}).get('job_id')}) started "
                           f"writing this folder while job {job_id} ran; two jobs must not write one folder at once")
    marker.update(status="done", finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    write_text_atomic(job_file(out, job), json.dumps(marker, indent=2, sort_keys=True))
    _running.pop(out.rstrip("/"), None)


def parquet_sizes(folder: str, names: list[str] | None = None) -> dict[str, int]:
    """``{file name: size}`` of the files ``names`` of ``folder`` (each asked for), or of its visible parquet
    files."""
    from infra.storage import filesystem

    fs, root = filesystem(folder)
    if names:  # each named file asked for (a HEAD): a listing that lags behind the writes cannot drop one
        return {name: int(fs.size(f"{root.rstrip('/')}/{name}")) for name in sorted({os.path.basename(n) for n in names})}
    if not fs.isdir(root):
        return {}
    wanted = None
    out = {}
    for info in fs.ls(root, detail=True, refresh=True) if hasattr(fs, "invalidate_cache") else fs.ls(root, detail=True):
        name = info["name"].rstrip("/").rsplit("/", 1)[-1]
        if name.endswith(".parquet") and not name.startswith((".", "_")) and (wanted is None or name in wanted):
            out[name] = int(info["size"])
    return dict(sorted(out.items()))


def seal_fields(folder: str, manifest: dict) -> dict:
    """What a set manifest adds when it is written: ``file_sizes`` and the running job's ``job_id``."""
    fields = {"file_sizes": parquet_sizes(folder, manifest.get("files") or None)}
    running = _running.get(_parent(folder).rstrip("/"))
    if running:
        fields["job"], fields["job_id"] = running
    return fields


def _rerun(marker: dict, out: str) -> str:
    command = marker.get("command") or marker.get("job") or "the job"
    return f"rerun `{command}` (its --out {out})"


def verify_set(path: str, kind: str) -> None:
    """Raise ``SchemaError`` in one line if the set at ``path`` is not whole (see the module docstring)."""
    from infra.secrets import redact_text
    from infra.storage import filesystem

    folder = os.fspath(path).rstrip("/")
    fs, root = filesystem(folder)
    if not fs.isdir(root):
        return  # a single parquet file, or a missing folder: check_set says so
    out = _parent(folder)
    shown = redact_text(folder)
    try:
        manifest = json.loads(fs.cat_file(f"{root}/{MANIFEST}"))
    except FileNotFoundError:
        manifest = None
    if manifest is not None and manifest.get("job"):
        marker = read_job(out, manifest["job"])  # None: the set was copied without its job's folder: files checked
    else:  # no manifest, or one written before jobs were marked: any job of the folder still running
        marker = next((m for m in _markers(out) if m.get("status") != "done"), None)
    if marker is not None:
        if marker.get("status") != "done":
            raise schemas.SchemaError(
                f"set {kind!r} at {shown}: the {marker.get('job', 'ingest')} job writing {redact_text(out)} "
                f"(started {marker.get('started', '?')}) did not finish; {_rerun(marker, redact_text(out))}")
        if manifest is not None and manifest.get("job_id") != marker.get("job_id"):
            raise schemas.SchemaError(
                f"set {kind!r} at {shown} was left by an earlier job, not by the last {marker.get('job')} job into "
                f"{redact_text(out)}; {_rerun(marker, redact_text(out))} with the inputs that make this set, "
                "or remove the folder")
    if manifest is None and _markers(out):
        marker = _markers(out)[0]
        raise schemas.SchemaError(f"set {kind!r} at {shown}: no {MANIFEST}; the job that writes it did not "
                                  f"finish; {_rerun(marker, redact_text(out))}")
    if manifest is None:
        return  # a folder of parquet files not written by a structcse job
    for name, size in (manifest.get("file_sizes") or {}).items():
        try:
            actual = fs.size(f"{root}/{name}")
        except FileNotFoundError:
            actual = None
        if actual != size:
            state = "is missing" if actual is None else f"has {actual} bytes, the manifest says {size}"
            rerun = _rerun(marker, redact_text(out)) if marker else "rerun the job that wrote it"
            raise schemas.SchemaError(f"set {kind!r} at {shown}: {name} {state}; {rerun}")


def listed_files(folder: str) -> list[str] | None:
    """The file names the manifest of the set folder ``folder`` lists, when it is whole and current; else None
    (the folder's parquet files are then read as found: a job reading its own output, a folder of parquet
    files not written by a structcse job)."""
    from infra.storage import filesystem

    fs, root = filesystem(folder)
    try:
        manifest = json.loads(fs.cat_file(f"{root.rstrip('/')}/{MANIFEST}"))
    except (FileNotFoundError, ValueError, NotADirectoryError):
        return None
    sizes = manifest.get("file_sizes")
    if not sizes:
        return None
    if manifest.get("job"):
        marker = read_job(_parent(folder), manifest["job"])
        if marker is None or marker.get("status") != "done" or marker.get("job_id") != manifest.get("job_id"):
            return None
    return sorted(sizes)
