"""Atomic publication (infra/publish.py): a writer killed while it publishes leaves the old copy readable and
nothing a reader takes for whole; readers refuse a partial folder in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.publish import (FILES, IncompleteError, check_complete, is_complete, publish_folder, resolve,
                           write_text_atomic)

REPO = Path(__file__).resolve().parents[1]


def _folder(root: Path, tag: str, files: int = 4) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (root / f"part-{i}.bin").write_bytes(f"{tag}-{i}".encode() * (100 + i))
    (root / "sub").mkdir(exist_ok=True)
    (root / "sub" / "config.json").write_text(json.dumps({"tag": tag}))
    return root


def _read(folder: str) -> dict[str, bytes]:
    from infra.storage import filesystem

    fs, root = filesystem(resolve(folder))
    return {name[len(root) + 1:]: fs.cat_file(name) for name in fs.find(root)
            if not name.rsplit("/", 1)[-1].startswith("_") and not name[len(root) + 1:].startswith(".v-")}


def _publish_in_child(src: Path, dest: str, delay: float) -> subprocess.Popen:
    env = {**os.environ, "STRUCTCSE_PUBLISH_FILE_DELAY_S": str(delay), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", "import sys; from infra.publish import publish_folder; "
                             "publish_folder(sys.argv[1], sys.argv[2])", str(src), dest], env=env)


def test_local_publication_replaces_whole_and_keeps_the_old_copy_until_then(tmp_path):
    old, new = _folder(tmp_path / "old", "old"), _folder(tmp_path / "new", "new")
    dest = tmp_path / "run" / "model"
    publish_folder(old, dest)
    assert _read(str(dest)) == _read(str(old)) and is_complete(dest)
    child = _publish_in_child(new, str(dest), delay=0.5)
    deadline = time.time() + 30
    while not list(dest.parent.glob(".model.new-*/part-0.bin")) and time.time() < deadline:
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    assert _read(str(dest)) == _read(str(old)), "the old model must stay whole while the new one is written"
    staging = next(dest.parent.glob(".model.new-*"))
    with pytest.raises(IncompleteError, match="not complete"):
        check_complete(staging, "model folder")
    publish_folder(new, dest)  # the rerun
    assert _read(str(dest)) == _read(str(new))
    assert check_complete(dest) == str(dest)


def test_bucket_publication_is_versioned_and_a_killed_upload_is_never_read(s3_server, tmp_path):
    old, new = _folder(tmp_path / "old", "old"), _folder(tmp_path / "new", "new")
    dest = f"{s3_server}/publish-test/model"
    publish_folder(old, dest)
    first = resolve(dest)
    assert first.startswith(f"{dest}/.v-") and _read(dest) == _read(str(old))
    child = _publish_in_child(new, dest, delay=0.5)
    from infra.storage import filesystem

    fs, root = filesystem(dest)
    deadline = time.time() + 30
    while len(fs.glob(f"{root}/.v-*/part-0.bin")) < 2 and time.time() < deadline:
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    assert resolve(dest) == first and _read(dest) == _read(str(old)), "the pointer still names the old copy"
    partial = next(f"s3://{v}" for v in fs.glob(f"{root}/.v-*") if f"s3://{v}" != first)
    with pytest.raises(IncompleteError, match="being written"):
        check_complete(partial, "model folder")
    publish_folder(new, dest)  # the killed writer's lease: its process is gone on this host, so it has expired
    assert resolve(dest) not in (first, partial) and _read(dest) == _read(str(new))
    left = sorted(f"s3://{v}" for v in fs.glob(f"{root}/.v-*"))
    assert left == sorted([first, resolve(dest)]), "the killed version is swept; the one replaced stays readable"
    assert _read(first) == _read(str(old))
    publish_folder(old, dest)
    assert first not in {f"s3://{v}" for v in fs.glob(f"{root}/.v-*")}, "versions older than the one replaced go"
    assert not fs.exists(f"{root}/_lease.json"), "the lease is released"


def test_a_file_missing_or_cut_short_is_refused(tmp_path):
    dest = tmp_path / "model"
    publish_folder(_folder(tmp_path / "src", "a"), dest)
    (dest / "part-1.bin").write_bytes(b"cut")
    with pytest.raises(IncompleteError, match="part-1.bin has 3 bytes"):
        check_complete(dest, "model folder")
    (dest / "part-1.bin").unlink()
    assert not is_complete(dest)
    assert json.loads((dest / FILES).read_text())["files"]["part-2.bin"] == len(b"a-2") * 102


def test_a_folder_structcse_did_not_write_is_read_as_is(tmp_path):
    folder = _folder(tmp_path / "by-hand", "x")
    assert check_complete(folder) == str(folder)
    assert not is_complete(folder, require_manifest=True)


def test_small_files_are_written_whole(tmp_path, s3_server):
    write_text_atomic(tmp_path / "a" / "summary.json", "{}")
    assert (tmp_path / "a" / "summary.json").read_text() == "{}"
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["summary.json"]
    write_text_atomic(f"{s3_server}/publish-test/summary.json", "{\"a\": 1}")
    from infra.storage import read_text

    assert read_text(f"{s3_server}/publish-test/summary.json") == "{\"a\": 1}"


def test_a_copy_left_by_a_killed_local_writer_is_swept_by_the_next_publication(tmp_path):
    src = _folder(tmp_path / "src", "a")
    dest = tmp_path / "model"
    child = _publish_in_child(src, str(dest), delay=0.5)
    deadline = time.time() + 30
    while not list(tmp_path.glob(".model.new-*/part-0.bin")) and time.time() < deadline:
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    assert list(tmp_path.glob(".model.new-*")) and not dest.exists()
    publish_folder(src, dest)
    assert not list(tmp_path.glob(".model.new-*")) and is_complete(dest, require_manifest=True)
