"""The cloud path against a real S3 API: moto's server on 127.0.0.1 (``tests/conftest.py``'s ``s3_server``),
reached through ``AWS_ENDPOINT_URL_S3`` by fsspec, pyarrow and Ray Train's storage alike.

One short test per stage: ingest writes its sets into a bucket (the same parquet bytes as on a local
folder, its bz2 index in the bucket's ``_work``); training reads sets from a bucket, checkpoints and
writes the final model, its card and its summary there; a model in a bucket is
loaded through a local copy made once per content; the config, the base model and the dev data read
from a bucket; eval of a model and data in a bucket; the demo's output uploaded to one. Nothing is ever created under a local ``s3:`` folder
(what a URI taken for a path becomes). The end-to-end proof (2 workers, a run resumed from the bucket,
Tune, eval, each beside the same on local folders) is ``bench/cloud.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import fsspec

from tests.conftest import MOTO_BUCKET


def _bucket_files(fs, prefix: str) -> dict[str, bytes]:
    return {name[len(prefix) + 1:]: fs.cat_file(name) for name in fs.find(prefix)}


def test_ingest_writes_the_same_sets_into_a_bucket(ray_session, s3_server, demo_world, demo_sets, tmp_path, monkeypatch):
    from ingest.pipeline import IngestConfig, run_ingest
    from structcse.demo import ENTITY_LINK_THRESHOLD

    monkeypatch.chdir(tmp_path)  # a URI taken for a local path would land here as s3:/...
    out = f"{s3_server}/ingest/sets"
    run_ingest(IngestConfig(wikipedia=[str(demo_world.wikipedia_dump)], wikidata=[str(demo_world.wikidata_dump)],
                            out=out, shard_bytes=1, entity_link_threshold=ENTITY_LINK_THRESHOLD))
    local, _ = demo_sets
    fs = fsspec.filesystem("s3")
    remote = _bucket_files(fs, f"{MOTO_BUCKET}/ingest/sets")
    local_parquet = {str(p.relative_to(local)): p.read_bytes() for p in sorted(local.glob("*/*.parquet"))
                     if not p.parent.name.startswith("_")}
    assert local_parquet, "the local demo sets hold no parquet files"
    assert {k: v for k, v in remote.items() if k in local_parquet} == local_parquet
    assert any(k.startswith("_work/wikidata_index/") and k.endswith(".bz2index.npz") for k in remote)
    assert not (tmp_path / "s3:").exists()


def test_train_reads_and_checkpoints_in_a_bucket(ray_session, s3_server, demo_sets, demo_tiny_bert, tmp_path,
                                                         monkeypatch):
    import yaml

    from structcse.demo import generate_demo_world
    from train.config import load_config
    from train.run import run
    from train.saved_models import load

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STRUCTCSE_CACHE", str(tmp_path / "cache"))
    local, _ = demo_sets
    fs = fsspec.filesystem("s3")
    fs.put(str(local / "sentences"), f"{MOTO_BUCKET}/train/sets/sentences", recursive=True)
    fs.put(str(demo_tiny_bert), f"{MOTO_BUCKET}/train/base", recursive=True)  # --model s3://...
    fs.put(str(generate_demo_world(tmp_path / "world", seed=0).sts_dir), f"{MOTO_BUCKET}/train/sts", recursive=True)
    fs.pipe_file(f"{MOTO_BUCKET}/configs/bucket.yaml", yaml.safe_dump({  # --config s3://...
        "method": "simcse_unsup", "model": f"{s3_server}/train/base", "data": f"{s3_server}/train/sets",
        "dev_data": f"{s3_server}/train/sts", "storage_path": f"{s3_server}/runs", "run_name": "bucket",
        "batch_size": 8, "max_len": 16, "max_steps": 2, "checkpoint_every_steps": 2, "log_every_steps": 0,
        # local mode: the same Ray Train storage path into the bucket without a worker group's start (~20 s);
        # runs on workers against a bucket are bench/cloud.py's train, resume and job_submit stages
        "num_workers": 0}).encode())
    cfg = load_config(f"{s3_server}/configs/bucket.yaml")
    first = run(cfg)
    assert first.metrics.get("dev_spearman") is not None  # the dev data was read from the bucket
    run_folder = f"{MOTO_BUCKET}/runs/bucket"
    assert first.model_path == f"s3://{run_folder}/model"
    assert first.checkpoint_path.startswith(f"s3://{run_folder}/step-")
    from infra.publish import resolve

    model = resolve(first.model_path)  # a bucket's model folder: the version its _current.json names
    assert model.startswith(f"s3://{run_folder}/model/.v-")
    assert fs.isfile(f"{model}/modules.json") and fs.isfile(f"{run_folder}/run_key.json")
    card = fs.cat_file(f"{model}/README.md").decode()
    assert "simcse_unsup" in card  # the model card is appended in the bucket too
    summary = json.loads(fs.cat_file(f"{run_folder}/train_summary.json"))
    assert summary["model_path"] == first.model_path

    assert summary["last_metrics"]["step"] == 2
    assert not (tmp_path / "s3:").exists()
    # resuming from the bucket (a second run of the same command) is bench/cloud.py's "resume" stage: a Ray
    # Train run costs ~25 s here, and the suite stays under 10 minutes

    # the model in the bucket: loaded through one local copy per content
    model = load(first.model_path)
    assert Path(model.path).is_relative_to(tmp_path / "cache")
    copied = {p: p.stat().st_mtime_ns for p in Path(model.path).rglob("*")}
    again = load(first.model_path)
    assert again.path == model.path and {p: p.stat().st_mtime_ns for p in Path(model.path).rglob("*")} == copied
    assert (again.encode(["the river town"]) == model.encode(["the river town"])).all()


def test_eval_reads_model_and_data_from_a_bucket(s3_server, demo_sets, demo_tiny_bert, tmp_path, monkeypatch, capsys):
    from eval.cli import main
    from structcse.demo import generate_demo_world

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STRUCTCSE_CACHE", str(tmp_path / "cache"))
    fs = fsspec.filesystem("s3")
    sts = generate_demo_world(tmp_path / "world", seed=0).sts_dir
    fs.put(str(demo_tiny_bert), f"{MOTO_BUCKET}/eval/base", recursive=True)
    fs.put(str(sts), f"{MOTO_BUCKET}/eval/sts", recursive=True)
    scores = []
    for model, data in ((str(demo_tiny_bert), str(sts)), (f"{s3_server}/eval/base", f"{s3_server}/eval/sts")):
        assert main(["--task", "sts", "--data", data, "--split", "dev", "--model", model]) == 0
        scores.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["spearman"])
    assert scores[0] == scores[1]
    assert main(["--task", "sts", "--data", f"{s3_server}/eval/absent", "--model", str(demo_tiny_bert)]) == 2
    assert "no folder at s3://" in capsys.readouterr().err
    assert not (tmp_path / "s3:").exists()


def test_config_and_demo_output_at_a_uri(s3_server, tmp_path):
    from structcse.demo_pipeline import demo_to
    from train.config import ConfigError, load_config

    try:
        load_config(f"{s3_server}/configs/absent.yaml")
    except ConfigError as e:
        assert str(e) == f"config file {s3_server}/configs/absent.yaml does not exist"
    else:
        raise AssertionError("a missing config in a bucket loaded")

    def small_demo(out, seed, skip_tune):  # what demo() leaves: a folder of files, paths in its result
        (out / "runs").mkdir(parents=True)
        (out / "runs" / "summary.json").write_text(json.dumps({"seed": seed}))
        return {"report": str(out / "report.json"), "skip_tune": skip_tune}

    result = demo_to(f"{s3_server}/demo", 3, True, run=small_demo)
    from infra.publish import resolve

    published = resolve(f"{s3_server}/demo")
    assert published.startswith(f"{s3_server}/demo/.v-")
    assert result == {"report": f"{published}/report.json", "skip_tune": True}
    fs = fsspec.filesystem("s3")
    assert json.loads(fs.cat_file(f"{published}/runs/summary.json")) == {"seed": 3}
