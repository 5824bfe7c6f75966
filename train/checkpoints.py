"""A run's checkpoints as its folder holds them: which are whole and this run's, the one a rerun resumes from,
the one the final model is selected from. One reading, through the storage client (``infra.storage``), for
local mode and Ray Train, a local run folder and a bucket alike, so they all resume and select the same way.

A checkpoint is ``{run folder}/step-NNNNNNN/`` (``state.pt``, ``metrics.json``, ``model/``, ``_files.json``).
It is a candidate only when

* it is whole: ``infra.publish.completeness(folder, require_manifest=True)`` is None — a folder a killed writer left,
  or one Ray Train was still uploading, has no ``_files.json`` or files missing or short;
* it is this run's: its ``metrics.json`` carries the run's fingerprint (:data:`FINGERPRINT`,
  ``train.run_key.run_fingerprint``: the sha256 of the run folder's ``run_key.json``, which holds a random
  ``run_id`` written at the fresh start). A leftover ``step-*`` of another run, or of an older run of the same
  config, is never resumed from nor selected.

Ray Train resumes from its own snapshot (``checkpoint_manager_snapshot.json``), which may lag what storage holds
(a worker group lost while reporting) and which local mode has none of; so at every start rank 0 finds the newest
candidate (:func:`newest_checkpoint`) and the loop takes whichever of the two is newer (:func:`resume_state`): a
local-mode run after a Ray Train run of the same folder, the reverse, and a restart after a lost node all go on
from the last step written.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

STEP_PREFIX = "step-"
STATE_FILE = "state.pt"
METRICS_FILE = "metrics.json"
FINGERPRINT = "run_fingerprint"  # the key in each checkpoint's metrics.json
_STEP = re.compile(r"^step-(\d+)$")


@dataclass(frozen=True)
class RunCheckpoint:
    path: str  # the folder holding the checkpoint's content (a bucket folder's published version): path or URI
    step: int
    metrics: dict  # its metrics.json, without the fingerprint


def dir_name(step: int) -> str:
    return f"{STEP_PREFIX}{step:07d}"


def step_of(path: str | None) -> int | None:
    """The step of a checkpoint path: its last ``step-N`` component (a published bucket version,
    ``step-N/.v-…``, included); None for a path without one."""
    for part in reversed(str(path or "").rstrip("/").split("/")):
        match = _STEP.match(part)
        if match:
            return int(match.group(1))
    return None


def checkpoint_metrics(metrics: dict, fingerprint: str | None) -> dict:
    """What ``metrics.json`` holds: the reported metrics and, in a keyed run, the run's fingerprint."""
    return {**metrics, FINGERPRINT: fingerprint} if fingerprint else dict(metrics)


def run_checkpoints(run_dir: str, fingerprint: str | None) -> list[RunCheckpoint]:
    """Every whole checkpoint of the run ``fingerprint`` names in ``run_dir`` (a path or a URI), oldest first.
    No fingerprint (a run folder without ``run_key.json``): none."""
    if not fingerprint:
        return []
    from infra.storage import filesystem

    fs, root = filesystem(run_dir)
    root = root.rstrip("/")
    try:
        names = fs.ls(root, detail=False)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        base = name.rstrip("/").rsplit("/", 1)[-1]
        step = step_of(base) if _STEP.match(base) else None
        if step is None:
            continue
        candidate = _candidate(f"{run_dir.rstrip('/')}/{base}", step, fingerprint)
        if candidate is not None:
            found.append(candidate)
    return sorted(found, key=lambda c: c.step)


def _candidate(folder: str, step: int, fingerprint: str) -> RunCheckpoint | None:
    """The checkpoint at ``folder`` when it is this run's and whole; else None."""
    from infra.publish import IncompleteError, completeness, resolve
    from infra.storage import filesystem

    try:
        content = resolve(folder)
    except IncompleteError:
        return None
    fs, inner = filesystem(content)
    try:
        metrics = json.loads(fs.cat_file(f"{inner.rstrip('/')}/{METRICS_FILE}"))
    except (FileNotFoundError, ValueError):
        return None
    if not isinstance(metrics, dict) or metrics.pop(FINGERPRINT, None) != fingerprint:
        return None  # another run's (or one written before checkpoints carried the fingerprint)
    if completeness(content, require_manifest=True) is not None:  # ``content``: already resolved
        return None
    return RunCheckpoint(path=content, step=step, metrics=metrics)


def newest_checkpoint(run_dir: str, fingerprint: str | None) -> RunCheckpoint | None:
    """The checkpoint a rerun of this run goes on from: its newest whole one."""
    found = run_checkpoints(run_dir, fingerprint)
    return found[-1] if found else None


def select(checkpoints: list[RunCheckpoint], metric: str | None) -> tuple[RunCheckpoint | None, str]:
    """(checkpoint, selected_by) among ``checkpoints`` (oldest first): the best by ``metric`` (max; a tie goes
    to the later step) and ``selected_by`` = ``metric``; else the latest and ``"latest: <why>"``."""
    if not checkpoints:
        return None, "latest: no whole checkpoint of this run in its folder"
    latest = checkpoints[-1]
    if not metric:
        return latest, "latest: no dev data, so no dev metric to select by"
    scored = [c for c in checkpoints if _number(c.metrics.get(metric)) is not None]
    if not scored:
        return latest, f"latest: no checkpoint has {metric}"
    return max(scored, key=lambda c: (_number(c.metrics[metric]), c.step)), metric


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def as_ray_checkpoint(path: str):
    """A ``ray.train.Checkpoint`` of the folder at ``path``, read through the storage client."""
    import ray.train

    from infra.storage import arrow_filesystem, is_uri, local_path

    if not is_uri(path):
        return ray.train.Checkpoint.from_directory(local_path(path))
    filesystem, inner = arrow_filesystem(path)
    return ray.train.Checkpoint(path=inner, filesystem=filesystem)


def load_state(path: str) -> dict:
    """``state.pt`` of the checkpoint folder at ``path`` (a path or a URI), loaded safely
    (``train.state_files.load_tensors``); from a bucket, only that file is fetched."""
    from train.state_files import load_tensors

    from infra.storage import is_uri, local_path

    if not is_uri(path):
        return load_tensors(Path(local_path(path)) / STATE_FILE)
    from infra.storage import filesystem

    fs, inner = filesystem(path)
    with tempfile.TemporaryDirectory(prefix="structcse-resume-") as tmp:
        local = Path(tmp) / STATE_FILE
        fs.get_file(f"{inner.rstrip('/')}/{STATE_FILE}", str(local))
        return load_tensors(local)


def resume_state(ray_checkpoint, resume_from: str | None) -> tuple[dict | None, str | None]:
    """(state, where it came from) for a worker starting: the newer of Ray Train's checkpoint (its snapshot's,
    or the last one of this fit after a restart) and ``resume_from`` (:func:`newest_checkpoint` at this start,
    the only one local mode has); (None, None) for a fresh start. A Ray checkpoint whose step cannot be told
    wins: it is this fit's own."""
    ray_step = step_of(ray_checkpoint.path) if ray_checkpoint is not None else None
    if resume_from and (ray_checkpoint is None or (ray_step is not None and ray_step < (step_of(resume_from) or 0))):
        return load_state(resume_from), resume_from
    if ray_checkpoint is None:
        return None, None
    from train.state_files import load_tensors

    with ray_checkpoint.as_directory() as d:
        return load_tensors(Path(d) / STATE_FILE), str(ray_checkpoint.path)
