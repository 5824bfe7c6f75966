"""The node's cache of remote models and files (``infra/cache.py``) against moto's real S3 server: 8 processes
asking for one model at once download it once and never touch each other's copy; a killed copy's partial is
swept; a single file is copied alone; a half-published folder is refused, a republished one read at its
current version. The 20-repeat race is ``bench/cache_race.py``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import MOTO_BUCKET, REPO

# one racer: import and connect first, then wait for the start signal, so the 8 ask within milliseconds
RACER = """
import json, os, sys, time
from pathlib import Path
from infra.cache import downloads, local_copy
from infra.storage import filesystem
uri, ready, go = sys.argv[1:4]
filesystem(uri)[0].ls(uri.split("://")[1].split("/")[0])
Path(ready, str(os.getpid())).touch()
while not os.path.exists(go):
    time.sleep(0.002)
try:
    path = local_copy(uri)
    print(json.dumps({"path": str(path), "downloads": downloads()[0],
                      "inode": (path / "weights.bin").stat().st_ino}))
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
"""


def _put_model(s3, prefix: str, seed: int, sizes=(2_000_000, 500_000, 1_000)) -> dict[str, bytes]:
    files = {name: os.urandom(size) if seed >= 0 else b"" for name, size in
             zip(("weights.bin", "tokenizer.json", "config.json"), sizes)}
    for name, data in files.items():
        s3.pipe_file(f"{MOTO_BUCKET}/{prefix}/{name}", data)
    return files


@pytest.fixture
def s3(s3_server, tmp_path, monkeypatch):
    from infra.storage import filesystem

    monkeypatch.setenv("STRUCTCSE_CACHE", str(tmp_path / "cache"))
    return filesystem(s3_server)[0]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def test_eight_processes_download_once_and_share_one_copy(s3, s3_server, tmp_path):
    files = _put_model(s3, "race/model", seed=1)
    uri = f"{s3_server}/race/model"
    ready, go = tmp_path / "ready", tmp_path / "go"
    ready.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    racers = [subprocess.Popen([sys.executable, "-c", RACER, uri, str(ready), str(go)], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, text=True) for _ in range(8)]
    deadline = time.monotonic() + 60
    while len(list(ready.iterdir())) < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    answers = [json.loads(r.communicate(timeout=60)[0].strip().splitlines()[-1]) for r in racers]

    assert [a.get("error") for a in answers] == [None] * 8
    assert sum(a["downloads"] for a in answers) == 1  # one process fetched it; seven used its copy
    assert len({a["path"] for a in answers}) == 1 and len({a["inode"] for a in answers}) == 1
    copy = Path(answers[0]["path"])
    assert {n: (copy / n).read_bytes() for n in files} == files
    assert json.loads((copy / "source.json").read_text())["uri"] == uri
    assert {p.name for p in copy.parent.iterdir()} - {f"{copy.name}.lock", "_structcse.json"} == {copy.name}  # no partial left


def test_a_complete_copy_is_never_deleted_when_the_model_changes(s3, s3_server):
    from infra.cache import downloads, local_copy

    _put_model(s3, "keep/model", seed=1, sizes=(1000, 10, 10))
    first = local_copy(f"{s3_server}/keep/model")
    stat = (first / "weights.bin").stat()
    with open(first / "weights.bin", "rb") as loading:  # another worker loading from the copy
        new = _put_model(s3, "keep/model", seed=2, sizes=(1000, 10, 10))
        before = downloads()[0]
        second = local_copy(f"{s3_server}/keep/model")
        assert second != first and (second / "weights.bin").read_bytes() == new["weights.bin"]
        assert downloads()[0] == before + 1
        assert len(loading.read()) == 1000
    assert (first / "weights.bin").stat().st_ino == stat.st_ino and (first / ".structcse_complete").is_file()
    assert local_copy(f"{s3_server}/keep/model") == second and downloads()[0] == before + 1


def test_stale_partials_are_swept_under_the_lock(s3, s3_server):
    from infra.cache import cache_key, cache_root, describe, local_copy

    uri = f"{s3_server}/stale/model"
    _put_model(s3, "stale/model", seed=1, sizes=(100, 10, 10))
    target = cache_root() / "models" / cache_key(describe(uri)[1])
    here = socket.gethostname()
    killed = target.with_name(f"{target.name}.partial.{_dead_pid()}.{here}")  # a SIGKILLed copy on this node
    legacy = target.with_name(f"{target.name}.partial.{_dead_pid()}")  # the old cache's name for one
    abandoned = target.with_name(f"{target.name}.partial.1.other-node")  # another node's, untouched for 2 h
    running = target.with_name(f"{target.name}.partial.1.busy-node")  # another node's, being written now
    # another container on this host (same hostname, its own pid namespace): its pid means nothing here
    from infra.lease import this_process

    dead = _dead_pid()
    ours_dead = target.with_name(f"{target.name}.partial.{dead}.{here}")
    other_ns = target.with_name(f"{target.name}.partial.{dead + 1}.{here}")
    for partial in (killed, legacy, abandoned, running, ours_dead, other_ns):
        (partial / "sub").mkdir(parents=True)
        (partial / "sub" / "weights.bin").write_bytes(b"half")
    (ours_dead / ".structcse_owner.json").write_text(json.dumps({**this_process(), "pid": dead}))
    (other_ns / ".structcse_owner.json").write_text(json.dumps({**this_process(), "pid": dead, "pid_ns": "other"}))
    old = time.time() - 7200
    for path in (abandoned, abandoned / "sub", abandoned / "sub" / "weights.bin"):
        os.utime(path, (old, old))

    assert local_copy(uri) == target and (target / ".structcse_complete").is_file()
    assert not killed.exists() and not legacy.exists() and not abandoned.exists() and not ours_dead.exists()
    assert running.exists() and other_ns.exists()


def test_a_single_file_is_copied_alone(s3, s3_server):
    from infra.cache import downloads, local_copy

    s3.pipe_file(f"{MOTO_BUCKET}/data/sts-dev.csv", b"a,b,1.0\n")
    s3.pipe_file(f"{MOTO_BUCKET}/data/huge-train.csv", os.urandom(3_000_000))
    before = downloads()
    copy = local_copy(f"{s3_server}/data/sts-dev.csv", "data")
    assert copy.name == "sts-dev.csv" and copy.read_bytes() == b"a,b,1.0\n"
    assert sorted(p.name for p in copy.parent.iterdir()) == [".structcse_complete", "source.json", "sts-dev.csv"]
    assert downloads() == (before[0] + 1, before[1] + 8)  # the 3 MB beside it never fetched

    s3.pipe_file(f"{MOTO_BUCKET}/data/sts-dev.csv", b"a,b,2.0\n")  # a new ETag: a new copy, the old one kept
    again = local_copy(f"{s3_server}/data/sts-dev.csv", "data")
    assert again.parent != copy.parent and again.read_bytes() == b"a,b,2.0\n" and copy.is_file()


def test_a_half_published_folder_is_refused_and_a_republished_one_read_at_its_version(s3, s3_server, tmp_path):
    from infra.cache import cache_root, local_copy
    from infra.publish import PUBLISHING, IncompleteError, publish_folder

    _put_model(s3, "half/model", seed=1, sizes=(100, 10, 10))
    s3.pipe_file(f"{MOTO_BUCKET}/half/model/{PUBLISHING}", b"{}")  # its writer was killed before _files.json
    with pytest.raises(IncompleteError) as refused:
        local_copy(f"{s3_server}/half/model")
    assert "\n" not in str(refused.value) and f"{s3_server}/half/model" in str(refused.value)
    assert not (cache_root() / "models").exists() or not any((cache_root() / "models").iterdir())

    for version in (b"one", b"two"):
        local = tmp_path / version.decode()
        local.mkdir()
        (local / "config.json").write_bytes(version)
        publish_folder(local, f"{s3_server}/pub/model")
    assert s3.isfile(f"{MOTO_BUCKET}/pub/model/_current.json")  # the second went to a version folder
    copy = local_copy(f"{s3_server}/pub/model")
    assert (copy / "config.json").read_bytes() == b"two"
    assert sorted(p.name for p in copy.iterdir()) == [".structcse_complete", "_files.json", "config.json",
                                                     "source.json"]
