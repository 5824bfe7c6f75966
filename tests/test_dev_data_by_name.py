"""Dev data by name: ``dev_data`` (``--dev-data``) may be a Hugging Face Hub dataset for the metrics that read one
(``mteb/stsbenchmark-sts`` for the STS metrics, ``stanfordnlp/snli`` for GaussCSE's NLI AUPRC), read as the
evaluation reads it (``infra.hub_data``: the cache, ``STRUCTCSE_HUB_COPIES``, or the hub). Offline without a
copy, the run stops before Ray starts, in one line that says how to give a folder instead. Tested offline with
copies in the hub's own format written from the demo world's SentEval-layout folders (``eval.hub_copies``)."""

from __future__ import annotations

import math

import pytest

from train.config import ConfigError, TrainConfig


def _config(**values) -> TrainConfig:
    return TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": "d", **values})


@pytest.fixture(scope="module")
def hub_copies(demo_world, tmp_path_factory):
    from eval.hub_copies import write_hub_copies

    out = tmp_path_factory.mktemp("hub_copies")
    written = write_hub_copies(out, stsb=demo_world.sts_dir, snli=demo_world.nli_dir)
    assert {"mteb/stsbenchmark-sts", "stanfordnlp/snli"} <= set(written)
    return out


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    """No Hugging Face cache holds anything; the hub is not asked (HF_HUB_OFFLINE, as the whole suite)."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("STRUCTCSE_HUB_COPIES", raising=False)


@pytest.mark.parametrize(("values", "accepted"), [
    ({"dev_data": "mteb/stsbenchmark-sts"}, True),
    ({"dev_data": "mteb/stsbenchmark-sts", "method": "rse"}, True),
    ({"dev_data": "stanfordnlp/snli", "method": "gausscse"}, True),
    ({"dev_data": "mteb/stsbenchmark-sts", "method": "aspectcse"}, False),  # an aspect_docs set folder only
    ({"dev_data": "./no/such/folder"}, False),
])
def test_a_hub_name_is_dev_data_where_the_metric_reads_one(values, accepted):
    cfg = _config(**values)
    if accepted:
        cfg.validate()
        return
    with pytest.raises(ConfigError) as caught:
        cfg.validate()
    assert "does not exist" in str(caught.value) and "\n" not in str(caught.value)


def test_offline_without_a_copy_the_plan_stops_in_one_line(demo_sets, demo_tiny_bert, offline_cache, tmp_path):
    from train.plan import make_plan

    cfg = _config(data=str(demo_sets[0]), model=str(demo_tiny_bert), storage_path=str(tmp_path),
                  dev_data="mteb/stsbenchmark-sts")
    with pytest.raises(ConfigError) as caught:
        make_plan(cfg)
    message = str(caught.value)
    assert message.startswith("dev_data 'mteb/stsbenchmark-sts': mteb/stsbenchmark-sts: not in the Hugging Face cache")
    assert "dev_data=FOLDER (--dev-data)" in message and "STRUCTCSE_HUB_COPIES" in message and "\n" not in message


def test_dev_data_by_name_reads_the_same_pairs_as_the_folder(demo_world, hub_copies, offline_cache, monkeypatch):
    from score.dev_metrics import DEV_METRICS

    monkeypatch.setenv("STRUCTCSE_HUB_COPIES", str(hub_copies))
    sts = DEV_METRICS["sts_spearman"]
    by_name, by_folder = sts.read("mteb/stsbenchmark-sts"), sts.read(str(demo_world.sts_dir))
    assert (by_name.sentences1, by_name.sentences2, by_name.scores) == (
        by_folder.sentences1, by_folder.sentences2, by_folder.scores)
    nli = DEV_METRICS["nli_auprc"]
    by_name, by_folder = nli.read("stanfordnlp/snli"), nli.read(str(demo_world.nli_dir))
    assert (by_name.premises, by_name.hypotheses, by_name.labels) == (
        by_folder.premises, by_folder.hypotheses, by_folder.labels)


def test_a_run_selects_its_checkpoint_on_dev_data_named_on_the_hub(ray_session, demo_world, demo_sets, demo_tiny_bert,
                                                                   hub_copies, offline_cache, monkeypatch, tmp_path):
    """A local-mode run with ``dev_data=mteb/stsbenchmark-sts`` scores its checkpoints on the copy's validation
    split: the selected model's score is the folder's ``sts-dev.csv`` score of the same model."""
    from score.dev_metrics import DEV_METRICS
    from train.saved_models import load
    from train.run import run

    monkeypatch.setenv("STRUCTCSE_HUB_COPIES", str(hub_copies))
    cfg = _config(data=str(demo_sets[0]), model=str(demo_tiny_bert), storage_path=str(tmp_path), run_name="hub_dev",
                  dev_data="mteb/stsbenchmark-sts", num_workers=0, max_steps=2, checkpoint_every_steps=1,
                  batch_size=16, pooling="mean", log_every_steps=0, mixed_precision="none")
    outcome = run(cfg)
    metric = DEV_METRICS["sts_spearman"]
    folder_score = metric.score(load(outcome.model_path), metric.read(str(demo_world.sts_dir)))
    assert math.isfinite(outcome.metrics["dev_spearman"])
    assert outcome.metrics["dev_spearman"] == pytest.approx(folder_score, abs=1e-6)
