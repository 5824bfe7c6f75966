"""Tune as safe in a bucket as on disk (issue 44, item 7): the restore checks (fingerprint, finished search, a
Tune experiment of another command) say the same lines for a bucket as for a local folder, and the untrained
encoder's kept score is keyed on everything that changes it."""

from __future__ import annotations

import uuid

import pytest

from tests.test_tune import _base
from train.config import ConfigError
from tune.search import STATE_FILE, TuneSettings, run_search, validate_settings


def _storage(kind: str, s3_server: str, tmp_path) -> str:
    return str(tmp_path / "runs") if kind == "local" else f"{s3_server}/tune-{uuid.uuid4().hex[:8]}"


def _settings(storage: str, lr: float = 3e-4) -> TuneSettings:
    settings = TuneSettings(search_space={"lr": {"choice": [lr]}}, searcher="grid", name="s", storage_path=storage)
    validate_settings(settings)  # as run_search does first (it fills in num_samples)
    return settings


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_a_rerun_with_another_search_space_is_refused_in_a_bucket_as_on_disk(kind, s3_server, demo_world, demo_sets,
                                                                            demo_tiny_bert, tmp_path):
    """A first run leaves its fingerprint (read back through the storage client); a rerun with another search
    space, a finished search and a Tune experiment without a fingerprint are refused before Ray, in the same
    line whatever the storage."""
    from infra.storage import filesystem
    from train.plan import make_plan
    from tune.search import _check_restore, _write_state

    storage = _storage(kind, s3_server, tmp_path)
    folder = f"{storage}/s"
    base = _base(demo_tiny_bert, demo_sets[0], demo_world.sts_dir)
    worker_base = make_plan(base).worker_config
    assert _check_restore(folder, worker_base, _settings(storage)) is False  # a fresh search
    fs, state = filesystem(f"{folder}/{STATE_FILE}")
    assert fs.isfile(state)
    with pytest.raises(ConfigError) as refused:
        run_search(base, _settings(storage, lr=1e-3))
    assert str(refused.value) == (f"{folder} holds a search with another base config or settings; use another "
                                  "--name (or remove that folder to start over)")
    _write_state(folder, worker_base, _settings(storage), done=True)
    with pytest.raises(ConfigError) as finished:
        run_search(base, _settings(storage))
    assert str(finished.value) == (f"the search in {folder} has finished (its report: {folder}/search_report.md); "
                                   "use another --name to run it again")
    fs.rm_file(state)
    fs.pipe_file(f"{state.rsplit('/', 1)[0]}/tuner.pkl", b"")  # what Tune's can_restore looks for
    with pytest.raises(ConfigError) as foreign:
        run_search(base, _settings(storage))
    assert str(foreign.value) == f"{folder} holds a Tune experiment this command did not start; use another --name"


def test_memory_storage_and_a_missing_bucket_are_refused_in_one_line(demo_world, demo_sets, demo_tiny_bert,
                                                                     s3_server):
    base = _base(demo_tiny_bert, demo_sets[0], demo_world.sts_dir)
    with pytest.raises(ConfigError, match="Tune's trials run in other processes"):
        run_search(base, _settings("memory://tune"))
    with pytest.raises(ConfigError, match="bucket 'no-such-bucket-7' does not exist"):
        run_search(base, _settings("s3://no-such-bucket-7/tune"))


def test_the_untrained_key_changes_with_dev_content_seed_pooling_options_and_max_len(s3_server, tmp_path):
    import fsspec

    from tune.scorers import untrained_key

    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "sts-dev.csv").write_text("g\tf\t2012\t1\t5.0\ta\tb\n")
    base = _base("m", "x", dev, method="gausscse")

    def key(cfg, data_info=None):
        return untrained_key(cfg, data_info or {}, "dev_auprc")

    first = key(base)
    assert key(base) == first  # nothing changed: the kept score stands
    changed = {key(base.with_overrides([override])) for override in
               ("seed=7", "pooling=cls", "max_len=64", "gausscse.similarity=per_dim", "model=other")}
    assert first not in changed and len(changed) == 5
    assert key(base, {"num_entities": 3}) != first
    (dev / "sts-dev.csv").write_text("g\tf\t2012\t1\t1.0\ta\tb\n")  # same size, same name: other content
    assert key(base) != first
    assert untrained_key(base, {}, "dev_spearman") != untrained_key(base, {}, "dev_auprc")
    remote = f"{s3_server}/dev-{uuid.uuid4().hex[:8]}"  # a dev set in a bucket: keyed by the objects' ETags
    fs = fsspec.filesystem("s3")
    fs.put(f"{dev}/", f"{remote.removeprefix('s3://')}/", recursive=True)
    in_bucket = key(base.with_overrides([f"dev_data={remote}"]))
    fs.pipe_file(f"{remote.removeprefix('s3://')}/sts-dev.csv", b"g\tf\t2012\t1\t3.0\ta\tb\n")
    assert key(base.with_overrides([f"dev_data={remote}"])) != in_bucket
