"""The one storage client (``infra/storage.py``) as the stages use it: a write that fails commits nothing (locally,
in a bucket of moto's S3 server, in ``memory://``), the pyarrow filesystem handed to Ray pickles as its protocol
(no botocore session, no copy of the environment), and ``memory://`` serves as a set path and as a run's
storage path in local mode."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from tests.conftest import MOTO_BUCKET


class _Stop(Exception):
    pass


@pytest.mark.parametrize("where", ["local", "s3", "memory"])
def test_a_failed_write_commits_nothing(where, s3_server, tmp_path):
    from infra.storage import filesystem
    from setformat.io import read_table, table_writer, write_json, write_table

    root = {"local": str(tmp_path / "set"), "s3": f"s3://{MOTO_BUCKET}/writes/set",
            "memory": "memory://writes/set"}[where]
    fs, folder = filesystem(root)
    table = pa.table({"sentence": ["a", "b"]})
    with pytest.raises(_Stop):
        with table_writer(f"{root}/shard-00000.parquet", table.schema) as writer:
            writer.write_table(table)
            raise _Stop  # the body fails after a batch was written
    assert not fs.exists(f"{folder}/shard-00000.parquet")
    assert not fs.exists(folder) or fs.ls(folder) == []  # no temporary file left beside it either

    write_table(table, f"{root}/shard-00000.parquet")
    write_json({"rows": 2}, f"{root}/_manifest.json")
    assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(folder, detail=False)) == ["_manifest.json", "shard-00000.parquet"]
    assert read_table(f"{root}/shard-00000.parquet").equals(table)


def test_arrow_filesystem_pickles_as_its_protocol(s3_server):
    import cloudpickle

    from infra.storage import arrow_filesystem

    fs, path = arrow_filesystem(f"{s3_server}/runs")
    assert path == f"{MOTO_BUCKET}/runs"
    assert pickle.loads(pickle.dumps(fs)) == fs  # a worker's copy is its process's own instance
    assert b"structcse-moto-secret" not in cloudpickle.dumps(fs)  # no environment travels with it


def test_memory_set_and_storage_in_local_mode(ray_session, demo_sets, demo_tiny_bert):
    import json

    from infra.storage import filesystem
    from train.config import TrainConfig
    from train.run import run

    local, _ = demo_sets
    fs, _ = filesystem("memory://")
    fs.put(str(local), "/memory-test/sets", recursive=True)
    cfg = TrainConfig.from_dict({
        "method": "simcse_unsup", "model": str(demo_tiny_bert), "data": "memory://memory-test/sets/sentences",
        "storage_path": "memory://memory-test/runs", "run_name": "mem", "batch_size": 8, "max_len": 16,
        "max_steps": 2, "checkpoint_every_steps": 2, "log_every_steps": 0, "num_workers": 0}, "test")
    outcome = run(cfg)
    assert outcome.model_path == "memory://memory-test/runs/mem/model"
    assert outcome.checkpoint_path.startswith("memory://memory-test/runs/mem/step-")
    summary = json.loads(fs.cat_file("/memory-test/runs/mem/train_summary.json"))
    assert summary["last_metrics"]["step"] == 2
