"""A failed job never feeds the next: what marks a set as whole, and the check every consumer runs.

A job that writes sets into an output folder (``python -m ingest``, its ``aspects``, ``dsbats`` and
``pairs`` jobs) marks that folder ``_job-<job>.json`` — ``{"job", "job_id", "status": "running"}`` when it
starts, ``"done"`` when its last manifest is written (one marker per job, so two jobs may share a folder).
Each set manifest it writes carries the job's name and ``job_id`` and ``file_sizes`` (every parquet file of
the set and its size), written after the files.

:func:`verify_set` — run by train, eval and Tune (``setformat.io.check_set``) before Ray starts — refuses
in one line naming the job to rerun: a set of a job that did not finish (still ``running``: killed, or
still going), a set left by an earlier job than the folder's last one, a set without a manifest in a job's
folder, and a listed file that is missing or has another size. Readers then read only the listed files
(``setformat.io.set_files``): :func:`listed_files` never globs a folder a structcse job wrote.

A job first checks its ``--out`` (``infra.owned.check_destination``), takes its lease
(``_lease-<job>.json``, ``infra.lease``: one job of a kind per folder at a time) and claims the folder; the set
folders it rewrites whole are emptied of an earlier run's parts then (through ``infra.owned.remove_owned``), its
manifests name the files it wrote and their ``rows`` is checked against the files' footers when sealed. Nested
sets (``{out}/{variant}/aspect_triplets``) carry the job's marker in their own folder. What a reader checked is
then pinned (``setformat.io.pin_set``): a listed file that changes afterwards stops the reader in one line.
"""

from __future__ import annotations

import atexit
import json
import os
import time
import uuid

from infra.storage import Location, is_uri, local_path, locate
from setformat import schemas

MANIFEST = "_manifest.json"
_running: dict[str, tuple[str, str]] = {}  # output folder -> (job, job_id) started by this process
_leases: dict[tuple[str, str], object] = {}  # (output folder, job) -> the infra.lease.Lease this process holds
_nested: dict[tuple[str, str], list[str]] = {}  # (output folder, job) -> its nested folders with their own marker


def job_file(out: str, job: str) -> str:
    return f"{out.rstrip('/')}/_job-{job}.json"


def _parent(folder: str) -> str:
    return folder.rstrip("/").rsplit("/", 1)[0] if "/" in folder.rstrip("/") else "."


def read_job(out: str | Location, job: str) -> dict | None:
    """The marker of ``job`` in the output folder ``out``, or None."""
    marker = locate(out).child(f"_job-{job}.json")
    try:
        return json.loads(marker.read_bytes())
    except FileNotFoundError:
        return None
    except ValueError:
        return {"job": job, "status": "unreadable"}


def _markers(out: str | Location) -> list[dict]:
    out = locate(out)
    try:
        names = [e.rstrip("/").rsplit("/", 1)[-1] for e in out.fs.ls(out.path, detail=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    jobs = [n[len("_job-"):-len(".json")] for n in names if n.startswith("_job-") and n.endswith(".json")]
    return [m for m in (read_job(out, job) for job in sorted(jobs)) if m]


def start_job(out: str, job: str, command: str | None = None, *, nested: tuple[str, ...] | list[str] = (),
              sets: tuple[str, ...] | list[str] = ()) -> str:
    """Mark ``out`` as being written by ``job``; returns the job's id (set manifests written from now on carry it).

    First the destination is checked (``infra.owned.check_destination``: a bucket root, or a folder holding what
    structcse did not write, is refused in one line, nothing deleted), then the job's lease is taken
    (``{out}/_lease-{job}.json``, held until :func:`finish_job` or the process ends: a second job of the same kind
    into the same ``out`` refuses in one line naming the first, ``infra.lease.LeaseHeld``), then ``out`` is claimed
    (``_structcse.json``). ``nested``: subfolders holding sets of their own (``{out}/{variant}/aspect_triplets``):
    they carry the job's marker too, so their sets are refused while it runs. ``sets``: the set folders (relative to
    ``out``) the job rewrites whole: what an earlier run left in them is removed now (``infra.owned.remove_owned``),
    so no manifest of this job can list a stale part."""
    from infra.lease import Lease
    from infra.owned import check_destination, claim
    from infra.publish import write_text_atomic

    out = out.rstrip("/")
    command = command or job
    check_destination(out, "--out")
    held = _leases.pop((out, job), None)
    if held is not None:  # a job of this process that ended without finish_job (it raised): superseded
        held.release()
    lease = Lease(f"{out}/_lease-{job}.json", f"the {job} job's --out", command).acquire()
    try:
        claim(out, command)
        job_id = uuid.uuid4().hex[:16]
        marker = {"job": job, "job_id": job_id, "status": "running",
                  "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": command}
        write_text_atomic(job_file(out, job), json.dumps(marker, indent=2, sort_keys=True))
        folders = [out] + [f"{out}/{sub.strip('/')}" for sub in nested]
        for folder in folders[1:]:
            write_text_atomic(job_file(folder, job), json.dumps({**marker, "out": out}, indent=2, sort_keys=True))
        for name in sets:
            clear_set(out, name, command)
    except BaseException:
        lease.release()
        raise
    for folder in folders:
        _running[folder] = (job, job_id)
    _nested[(out, job)] = folders[1:]
    _leases[(out, job)] = lease
    return job_id


def clear_set(out: str, name: str, command: str) -> None:
    """Remove the set folder ``{out}/{name}`` an earlier run left (the job now starting in ``out`` rewrites it
    whole), then mark the new one structcse's (``_structcse.json``), so that what a killed run leaves in it is
    removed by the next one (:func:`remove_in_out`)."""
    from infra.owned import claim

    folder = f"{out.rstrip('/')}/{name.strip('/')}"
    remove_in_out(out, folder, f"the {name} set an earlier run left", command)
    claim(folder, command)


def remove_in_out(out: str, path: str, what: str, command: str | None = None) -> bool:
    """Remove ``path`` (a file or a folder inside the output folder ``out``) that the job writing ``out``
    made: a stale set, a pass-1 file of an earlier plan, a work folder. ``out`` must be structcse's (the job
    checked it with ``infra.owned.check_destination`` and claimed it); the folder holding ``path`` (or
    ``path`` itself, a folder) is marked structcse's first when it carries no marker of its own (a killed run
    may have written its files before any manifest), and ``infra.owned.remove_owned`` deletes it, refusing
    anything else. Returns whether something was there."""
    from infra.owned import NotOurs, claim, is_marker, is_ours, remove_owned
    from infra.secrets import redact_text
    from infra.storage import filesystem

    out, path = out.rstrip("/"), os.fspath(path).rstrip("/")
    if not is_uri(out):  # a local --out may be relative, the listing's paths absolute
        out, path = os.path.abspath(local_path(out)), os.path.abspath(local_path(path))
    if not path.startswith(out + "/"):
        raise NotOurs(f"not removing {what} {redact_text(path)}: it is not inside the job's --out {redact_text(out)}")
    fs, root = filesystem(path)
    if not fs.exists(root):
        return False
    if not is_ours(out):
        raise NotOurs(f"not removing {what} {redact_text(path)}: its --out {redact_text(out)} carries no structcse "
                      "marker")
    holder = path if fs.isdir(root) else path.rsplit("/", 1)[0]
    holder_fs, holder_root = filesystem(holder)
    try:
        names = [e.rstrip("/").rsplit("/", 1)[-1] for e in holder_fs.ls(holder_root, detail=False)]
    except (FileNotFoundError, NotADirectoryError):
        names = []
    if holder != out and not any(is_marker(n) for n in names):
        claim(holder, command or "structcse")
    return remove_owned(path, what)


def remove_stale_subsets(out: str, job: str, keep: list[str] | tuple[str, ...]) -> list[str]:
    """Remove the subfolders of ``out`` that an earlier ``job`` marked as its nested output (their own
    ``_job-<job>.json``) and that this run does not write (``keep``): a variant an earlier aspects run wrote and
    this one does not. Returns the names removed."""
    from infra.owned import remove_owned
    from infra.storage import filesystem

    fs, root = filesystem(out)
    removed = []
    try:
        entries = fs.ls(root, detail=False)
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for entry in entries:
        name = entry.rstrip("/").rsplit("/", 1)[-1]
        if name in keep or name.startswith((".", "_")) or not fs.isdir(entry):
            continue
        marker = read_job(f"{out.rstrip('/')}/{name}", job)
        if marker is not None and marker.get("out"):
            remove_owned(f"{out.rstrip('/')}/{name}", f"the {name} sets an earlier {job} job wrote")
            removed.append(name)
    return removed


def finish_job(out: str, job_id: str) -> None:
    """Mark ``out``'s job done (after its last manifest), its nested folders first; release its lease."""
    from infra.publish import write_text_atomic

    out = out.rstrip("/")
    job = _running.get(out, (None, None))[0]
    marker = read_job(out, job) if job else None
    if marker is None or marker.get("job_id") != job_id:
        raise RuntimeError(f"{job_file(out, job or '?')}: another {job} job ({(marker or {}).get('job_id')}) started "
                           f"writing this folder while job {job_id} ran; two jobs must not write one folder at once")
    lease = _leases.get((out, job))
    if lease is not None:
        lease.check()  # a job whose lease was taken over must not mark its sets whole
    finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for folder in _nested.pop((out, job), []):
        nested = read_job(folder, job) or {**marker, "out": out}
        nested.update(status="done", finished=finished)
        write_text_atomic(job_file(folder, job), json.dumps(nested, indent=2, sort_keys=True))
        _running.pop(folder, None)
    marker.update(status="done", finished=finished)
    write_text_atomic(job_file(out, job), json.dumps(marker, indent=2, sort_keys=True))
    _running.pop(out, None)
    lease = _leases.pop((out, job), None)
    if lease is not None:
        lease.release()


def _release_leases() -> None:
    for key in list(_leases):
        lease = _leases.pop(key, None)
        if lease is not None:
            lease.release()


atexit.register(_release_leases)


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
    for info in fs.ls(root, detail=True):
        name = info["name"].rstrip("/").rsplit("/", 1)[-1]
        if name.endswith(".parquet") and not name.startswith((".", "_")) and (wanted is None or name in wanted):
            out[name] = int(info["size"])
    return dict(sorted(out.items()))


def seal_fields(folder: str, manifest: dict) -> dict:
    """What a set manifest adds when it is written: ``file_sizes`` and the running job's ``job_id``.

    A job's manifest is built from the files the job wrote (``files``): a manifest written while a job of this
    process writes the folder's output folder without them is refused (a listing would certify what an earlier
    run left). Its ``rows`` must be the sum of its files' parquet footers: checked here, before it is written."""
    running = _running.get(_parent(folder).rstrip("/"))
    if running and manifest.get("files") is None:
        raise ValueError(f"set {manifest.get('set')!r} at {folder}: the {running[0]} job's manifest must name the "
                         "files the job wrote (files=[...]), not a listing of the folder")
    sizes = parquet_sizes(folder, manifest.get("files") or None)
    if manifest.get("rows") is not None:
        counted = footer_rows(folder, list(sizes))
        if sum(counted.values()) != int(manifest["rows"]):
            raise schemas.SchemaError(
                f"set {manifest.get('set')!r} at {folder}: the manifest would say {manifest['rows']} rows, its "
                f"{len(counted)} file(s) hold {sum(counted.values())} ({counted}); not sealed")
    fields = {"file_sizes": sizes}
    if running:
        fields["job"], fields["job_id"] = running
    return fields


def footer_rows(folder: str, names: list[str]) -> dict[str, int]:
    """``{file name: rows}`` of the parquet files ``names`` of ``folder``, from their footers."""
    import pyarrow.parquet as pq

    from infra.storage import filesystem

    fs, root = filesystem(folder)
    local = not is_uri(os.fspath(folder))
    return {name: pq.read_metadata(f"{root.rstrip('/')}/{name}", filesystem=None if local else fs).num_rows
            for name in names}


def _rerun(marker: dict, out: str) -> str:
    from infra.secrets import redact_text

    command = marker.get("command") or marker.get("job") or "the job"
    return f"rerun `{command}` (its --out {redact_text(marker['out']) if marker.get('out') else out})"


def verify_set(path: str | Location, kind: str) -> None:
    """Raise ``SchemaError`` in one line if the set at ``path`` is not whole (see the module docstring)."""
    from infra.secrets import redact_text

    where = locate(path)
    fs, root = where.fs, where.path.rstrip("/")
    if not fs.isdir(root):
        return  # a single parquet file, or a missing folder: check_set says so
    out = where.parent
    shown = redact_text(where.uri.rstrip("/"))
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
                f"set {kind!r} at {shown}: the {marker.get('job', 'ingest')} job writing {redact_text(out.uri)} "
                f"(started {marker.get('started', '?')}) did not finish; {_rerun(marker, redact_text(out.uri))}")
        if manifest is not None and manifest.get("job_id") != marker.get("job_id"):
            raise schemas.SchemaError(
                f"set {kind!r} at {shown} was left by an earlier job, not by the last {marker.get('job')} job into "
                f"{redact_text(out.uri)}; {_rerun(marker, redact_text(out.uri))} with the inputs that make this set, "
                "or remove the folder")
    markers = _markers(out) if manifest is None else []
    if markers:
        marker = markers[0]
        raise schemas.SchemaError(f"set {kind!r} at {shown}: no {MANIFEST}; the job that writes it did not "
                                  f"finish; {_rerun(marker, redact_text(out.uri))}")
    if manifest is None:
        return  # a folder of parquet files not written by a structcse job
    for name, size in (manifest.get("file_sizes") or {}).items():
        try:
            actual = fs.size(f"{root}/{name}")
        except FileNotFoundError:
            actual = None
        if actual != size:
            state = "is missing" if actual is None else f"has {actual} bytes, the manifest says {size}"
            rerun = _rerun(marker, redact_text(out.uri)) if marker else "rerun the job that wrote it"
            raise schemas.SchemaError(f"set {kind!r} at {shown}: {name} {state}; {rerun}")


def listed_files(folder: str | Location) -> list[str] | None:
    """The file names the manifest of the set folder ``folder`` lists (:func:`listed_sizes`), or None for a
    plain folder of parquet files (no manifest, no job marker beside it) and for the folder of a job of this
    process reading what it writes; a folder a structcse job wrote is never globbed (``SchemaError``)."""
    sizes = listed_sizes(folder)
    return None if sizes is None else sorted(sizes)


def listed_sizes(folder: str | Location) -> dict[str, int | None] | None:
    """``{file name: size}`` of the files the manifest of the set folder ``folder`` lists, when the set is whole
    and current (a size is None where the manifest lists the file without one).

    None (the folder's parquet files are then read as found) only for a folder without a manifest and without a
    job marker in its output folder (parquet files not written by a structcse job), or for a folder of the job
    this process is running (it reads its own output mid-job). Any other folder a structcse job wrote — a set
    of a job that did not finish, a set left by an earlier job, a folder without manifest in a job's output
    folder, a manifest that lists no files — is a one-line ``SchemaError`` naming the job to rerun."""
    from infra.secrets import redact_text

    where = locate(folder)
    folder, out, kind = where.uri.rstrip("/"), where.parent, where.name
    try:
        manifest = json.loads(where.child(MANIFEST).read_bytes())
    except (FileNotFoundError, NotADirectoryError):
        manifest = None
    except ValueError:
        raise schemas.SchemaError(f"set at {redact_text(folder)}: its {MANIFEST} is not readable JSON; rerun the "
                                  "job that wrote it") from None
    own = _running.get(out.uri)
    if manifest is None:
        if own is not None or not _markers(out):
            return None
        verify_set(where, kind)  # raises: a folder without manifest in a job's output folder
        raise schemas.SchemaError(f"set at {redact_text(folder)}: no {MANIFEST} in an output folder a structcse "
                                  "job wrote; rerun the job that writes it")
    kind = manifest.get("set") or kind
    mine = own is not None and own == (manifest.get("job"), manifest.get("job_id"))
    if not mine:
        verify_set(where, kind)  # a set of a job that did not finish, or of an earlier job: refused in one line
    sizes = manifest.get("file_sizes")
    if sizes:
        return dict(sorted(sizes.items()))
    if manifest.get("files"):
        return {os.path.basename(name): None for name in sorted(manifest["files"])}
    raise schemas.SchemaError(f"set {kind!r} at {redact_text(folder)}: its {MANIFEST} lists no files (written "
                              "before manifests listed them); rerun the job that wrote it")


def rerun_hint(folder: str) -> str:
    """What to rerun when the set folder ``folder`` changed under a reader: its job, as its marker says now."""
    from infra.secrets import redact_text

    where = locate(folder)
    out = where.parent
    try:
        job = json.loads(where.child(MANIFEST).read_bytes()).get("job")
    except (FileNotFoundError, NotADirectoryError, ValueError, OSError):
        job = None
    marker = read_job(out, job) if job else next(iter(_markers(out)), None)
    if marker is None:
        return "rerun the job that wrote it, then this command"
    if marker.get("status") == "running":
        return (f"the {marker.get('job')} job writing {redact_text(marker.get('out') or out.uri)} (started "
                f"{marker.get('started', '?')}) is rewriting it: let it finish (or "
                f"{_rerun(marker, redact_text(out.uri))}), then rerun this command")
    return (f"the {marker.get('job')} job into {redact_text(marker.get('out') or out.uri)} rewrote it (finished "
            f"{marker.get('finished', '?')}): rerun this command to read the set as it is now")
