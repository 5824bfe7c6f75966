"""Ray Tune on the demo world: the evaluation pool scores trials asynchronously with each method's own
metric, ASHA compares trials at equal examples seen and stops bad ones, and the search writes what a
user reads (report, plots, best config, best model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from train.config import ConfigError, TrainConfig
from tune.search import TuneSettings, build_search_space, load_tune_settings, run_search

REPO = Path(__file__).resolve().parents[1]


def _base(model, data, dev, method="simcse_unsup", **extra) -> TrainConfig:
    return TrainConfig.from_dict(
        {"method": method, "model": str(model), "data": str(data), "dev_data": str(dev), "pooling": "mean",
         "batch_size": 16, "max_steps": 12, "checkpoint_every_steps": 3, "cpus_per_worker": 0.5,
         "log_every_steps": 0, "max_len": 32, **extra}
    ).validate()


def test_asha_stops_bad_trials_at_equal_data(
        demo_world, demo_sets, demo_tiny_bert, tmp_path):
    out, _ = demo_sets
    # 1536 examples, a report every 256: long enough that a bad trial's first rung score (it comes
    # seconds after its checkpoint, from the pool) arrives while the trial still trains
    base = _base(demo_tiny_bert, out, demo_world.sts_dir, lr=3e-4, max_steps=96, checkpoint_every_steps=16)
    settings = TuneSettings(
        search_space={"lr": {"choice": [3e-4, 10.0]}, "batch_size": {"choice": [16, 32]}},
        searcher="grid", max_concurrent_trials=2, reduction_factor=2, grace_period=256,
        name="asha", storage_path=str(tmp_path / "runs"),
    )
    outcome = run_search(base, settings, log=lambda *a: None)
    rows = {(r["values"]["lr"], r["values"]["batch_size"]): r for r in outcome.trials}
    assert len(rows) == 4 and not outcome.results.errors
    # equal data: a batch-32 trial takes half the steps of a batch-16 one for the same examples
    for result in outcome.results:
        frame = result.metrics_dataframe
        trained = frame[frame["loss"].notna()]
        assert (trained["examples_trained"] == trained["step"] * result.config["batch_size"]).all()
        assert set(trained["examples_trained"]) <= set(range(256, 1537, 256))  # every 256 examples, whatever the batch
    good = [rows[(3e-4, 16)], rows[(3e-4, 32)]]
    bad = [rows[(10.0, 16)], rows[(10.0, 32)]]
    assert all(r["best"] is not None for r in good + bad)
    assert min(r["best"] for r in good) > max(r["best"] for r in bad)
    # ASHA stopped at least one lr=10 trial at a rung, and it trained no further; a good trial ran to the end
    assert any(r["examples_seen"] < 1536 and r["ended"].startswith("stopped") for r in bad), \
        [(r["values"], r["examples_seen"], r["curve"]) for r in bad]
    assert max(r["examples_seen"] for r in good) == 1536
    assert max(len(r["curve"]) for r in good) == 6, [r["curve"] for r in good]  # each of its checkpoints scored
    for result in outcome.results:  # each score is tagged with the step (and examples) of its checkpoint
        frame = result.metrics_dataframe
        scored = frame[frame["dev_spearman"].notna()]
        assert (scored["validated_step"] * result.config["batch_size"] == scored["examples_seen"]).all()
        # a score starts only after its checkpoint was reported (whether it lands while the trial still
        # trains depends on the machine's speed; the stopped bad trial above shows that it can)
        reported = frame[frame["loss"].notna()].set_index("step")["reported_at"]
        assert (scored["score_started_at"].to_numpy() >= reported.loc[scored["validated_step"]].to_numpy()).all(), \
            frame[["step", "reported_at", "score_started_at", "score_finished_at"]]
    # what the user reads
    folder = tmp_path / "runs" / "asha"
    report = (folder / "search_report.md").read_text()
    assert "| trial | lr | batch_size | best dev_spearman |" in report and "stopped at" in report
    assert (folder / "learning_curves.png").stat().st_size > 1000 and (folder / "search_space.png").is_file()
    best_cfg = yaml.safe_load((folder / "best_config.yaml").read_text())
    assert best_cfg["lr"] == pytest.approx(3e-4) and best_cfg["batch_size"] == outcome.best_config["batch_size"]
    assert best_cfg["max_steps"] * best_cfg["batch_size"] == 1536
    TrainConfig.from_dict(best_cfg).validate()  # python -m train --config best_config.yaml runs it as is
    from train.dev_metrics import DEV_METRICS, score_model_dir

    metric = DEV_METRICS["sts_spearman"]
    rescored = score_model_dir(metric, folder / "best_model", metric.read(str(demo_world.sts_dir)))
    assert rescored == pytest.approx(outcome.best_metrics["dev_spearman"], abs=1e-6)
    # a finished search is not silently rerun, a different one in its folder is refused
    with pytest.raises(ConfigError, match="has finished"):
        run_search(base, settings, log=lambda *a: None)
    with pytest.raises(ConfigError, match="another base config"):
        run_search(base.with_overrides(["seed=7"]), settings, log=lambda *a: None)


def test_a_gausscse_checkpoint_is_scored_by_snli_dev_auprc(demo_world, demo_tiny_bert, ray_session, tmp_path):
    """What a GaussCSE trial's checkpoints are scored by: the pool reads the SNLI-dev folder once and
    scores the asymmetric-similarity AUPRC (methods.md §4), not cosine; the search ranks on it."""
    import torch

    from eval.pool import start_pool, stop_pool
    from train.dev_metrics import auprc_trapezoid, metric_for, read_nli_dev
    from train.encoder import Encoder
    from train.methods.gausscse import GaussCSE
    from train.model import load

    base = _base(demo_tiny_bert, "x", demo_world.nli_dir, method="gausscse")
    assert metric_for(base).key == "dev_auprc"  # run_search's metric: the method's own
    checkpoint = tmp_path / "step-0000001"
    Encoder(str(demo_tiny_bert), "mean", 32, None).save_sentence_transformer(checkpoint / "model")
    torch.manual_seed(0)
    hidden = load(checkpoint / "model").encode(["x"]).shape[1]
    GaussCSE(GaussCSE.Options(), hidden_size=hidden, temperature=0.05).save_heads(checkpoint / "model")
    pool = start_pool("nli_auprc", str(demo_world.nli_dir), name="gauss-pool", namespace="structcse-test", size=1,
                      num_cpus=0)
    try:
        scored = ray_session.get(pool.score.remote(str(checkpoint)), timeout=120)
    finally:
        stop_pool("gauss-pool", "structcse-test")
    assert "dev_spearman" not in scored and scored["score_finished_at"] >= scored["score_started_at"]
    premises, hypotheses, y = read_nli_dev(demo_world.nli_dir)
    model = load(checkpoint / "model")
    expected = auprc_trapezoid(model.asymmetric_similarity(hypotheses, premises), y)
    cosine = auprc_trapezoid(model.cosine(premises, hypotheses), y)
    assert scored["dev_auprc"] == pytest.approx(expected, abs=1e-6)
    assert abs(expected - cosine) > 1e-6


def test_a_dead_scorer_is_replaced_and_the_checkpoint_rescored(demo_world, demo_tiny_bert, ray_session, tmp_path):
    from eval.pool import start_pool, stop_pool
    from train.encoder import Encoder

    checkpoint = tmp_path / "step-0000001"
    Encoder(str(demo_tiny_bert), "mean", 32, None).save_sentence_transformer(checkpoint / "model")
    pool = start_pool("sts_spearman", str(demo_world.sts_dir), name="pool-test", namespace="structcse-test", size=2,
                      num_cpus=0)
    try:
        first = ray_session.get(pool.score.remote(str(checkpoint)), timeout=120)
        ray_session.get(pool.kill_scorer.remote(0), timeout=30)
        ray_session.get(pool.kill_scorer.remote(1), timeout=30)
        again = ray_session.get(pool.score.remote(str(checkpoint)), timeout=120)
        stats = ray_session.get(pool.stats.remote(), timeout=30)
    finally:
        assert stop_pool("pool-test", "structcse-test")
    assert again["dev_spearman"] == pytest.approx(first["dev_spearman"], abs=1e-6)
    assert stats["replaced"] >= 1 and sum(stats["scored"]) == 2
    assert not stop_pool("pool-test", "structcse-test")


def test_search_space_and_settings_errors(tmp_path):
    with pytest.raises(ConfigError, match="learning_rate"):
        build_search_space({"learning_rate": {"loguniform": [1e-5, 1e-3]}})
    with pytest.raises(ConfigError, match="must be one of"):
        build_search_space({"lr": {"normal": [0, 1]}})
    with pytest.raises(ConfigError, match=r"low < high"):
        build_search_space({"lr": {"loguniform": [1e-4, -1]}})
    with pytest.raises(ConfigError, match="batch_size"):  # a wrong-typed value fails here, before Ray starts
        build_search_space({"batch_size": {"choice": [16, "big"]}})
    with pytest.raises(ConfigError, match="grid search takes choice"):
        build_search_space({"lr": {"loguniform": [1e-5, 1e-3]}}, grid=True)
    bad = tmp_path / "tune.yaml"
    bad.write_text(json.dumps({"num_samples": 2, "schedular": "asha"}))
    with pytest.raises(ConfigError, match="schedular"):
        load_tune_settings(bad)
    bad.write_text(json.dumps({"searcher": "bayes"}))
    with pytest.raises(ConfigError, match="searcher"):
        load_tune_settings(bad)
    for path in sorted((REPO / "configs" / "tune").glob("*.yaml")):
        settings = load_tune_settings(path)
        assert settings.searcher == "grid" and {"lr", "batch_size"} <= set(settings.search_space)
    with pytest.raises(ConfigError, match="dev_metric 'p_at_10' is not one of"):  # a method's metric is declared
        TrainConfig.from_dict({"method": "aspectcse", "data": "x", "dev_data": str(tmp_path),
                               "dev_metric": "p_at_10"}).validate()
    with pytest.raises(ConfigError, match="'dev_sts' is now 'dev_data'"):
        TrainConfig.from_dict({"dev_sts": "x"})

