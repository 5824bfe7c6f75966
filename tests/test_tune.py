"""Ray Tune on the demo world: the evaluation pool scores trials asynchronously with each method's own
metric, ASHA compares trials at equal examples seen and stops bad ones, and the search writes what a
user reads (report, plots, best config, best model)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from train.config import ConfigError, TrainConfig
from tune.search import TuneSettings, build_search_space, load_tune_settings, run_search

REPO = Path(__file__).resolve().parents[1]


def _base(model, data, dev, method="simcse_unsup", **extra) -> TrainConfig:
    return TrainConfig.from_dict(
        {"method": method, "model": str(model), "data": str(data), "dev_data": str(dev), "pooling": "mean",
         "batch_size": 16, "max_steps": 12, "checkpoint_every_steps": 3, "cpus_per_worker": 0.5,
         "log_every_steps": 0, "max_len": 32, **extra}
    ).validate()


# The search end to end (4 trials, ASHA stopping the bad ones, the report, best config and best model, a
# finished search refused): python bench/tune.py --parts e (its last line says which checks held).


@pytest.mark.parametrize("batch_size", [16, 32, 48])
def test_a_trial_reports_and_ends_at_the_same_examples_whatever_its_batch(batch_size, tmp_path):
    """ASHA compares trials at equal examples seen: a trial of any batch size checkpoints (and so is scored)
    every ``report_every_examples`` examples and trains on ``max_examples`` in all."""
    from tune.trials import resolved_trial_config

    (tmp_path / "sts-dev.csv").write_text("g\tf\t2012\t1\t5.0\ta\tb\n")
    base = _base("m", "x", tmp_path, max_steps=96, checkpoint_every_steps=16)
    private = {"base": base.to_dict(), "storage_path": str(tmp_path / "trials"), "report_every_examples": 256,
               "max_examples": 1536, "max_failures": None}
    cfg = resolved_trial_config({"lr": 1e-4, "batch_size": batch_size}, private, "train-t1")
    assert (cfg.checkpoint_every_steps, cfg.max_steps) == (256 // batch_size, 1536 // batch_size)
    assert (cfg.lr, cfg.run_name, cfg.storage_path) == (1e-4, "train-t1", str(tmp_path / "trials"))


def test_a_finished_search_and_another_search_in_its_folder_are_refused(demo_world, demo_sets, demo_tiny_bert,
                                                                         tmp_path):
    """Before Ray starts: the state a finished search leaves in its folder stops a rerun, and a search with
    another base config is not run in that folder."""
    from train.plan import make_plan
    from tune.search import _write_state, validate_settings

    base = _base(demo_tiny_bert, demo_sets[0], demo_world.sts_dir)
    settings = TuneSettings(search_space={"lr": {"choice": [3e-4]}}, searcher="grid", name="done",
                            storage_path=str(tmp_path / "runs"))
    validate_settings(settings)  # as run_search does first (it fills in num_samples)
    _write_state(str(tmp_path / "runs" / "done"), make_plan(base).worker_config, settings, done=True)
    with pytest.raises(ConfigError, match=r"has finished \(its report: .*done/search_report\.md\)"):
        run_search(base, settings)
    with pytest.raises(ConfigError, match="another base config"):
        run_search(base.with_overrides(["seed=7"]), settings)


@pytest.mark.end_to_end
def test_a_gausscse_checkpoint_is_scored_by_snli_dev_auprc(demo_world, demo_tiny_bert, ray_session, tmp_path):
    """What a GaussCSE trial's checkpoints are scored by: the pool reads the SNLI-dev folder once and
    scores the asymmetric-similarity AUPRC (methods.md §4), not cosine; the search ranks on it. The
    figure against one computed here: the dev files read line by line, sim(h‖p) = 1 / (1 + KL(N_h ‖ N_p))
    in numpy from the model's μ and σ² (GaussCSE Eq. 1-2, diagonal), the reference's
    ``auc(recall, precision)`` from scikit-learn."""
    import numpy as np
    import torch
    from sklearn.metrics import auc, precision_recall_curve

    from train.config import metric_for
    from train.encoder import Encoder
    from train.methods.gausscse import GaussCSE
    from train.saved_models import load
    from tune.scorers import start_pool, stop_pool

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
    premises, hypotheses, labels = (Path(demo_world.nli_dir, f"{part}.dev").read_text(encoding="utf-8").splitlines()
                                    for part in ("s1", "s2", "labels"))
    y = np.array([label.strip() == "entailment" for label in labels])
    model = load(checkpoint / "model")
    assert model.method.options.similarity == "kl_sum"
    (mu_h, var_h), (mu_p, var_p) = ((np.asarray(x, dtype=np.float64) for x in model.gaussian(texts))
                                    for texts in (hypotheses, premises))
    kl = 0.5 * (np.log(var_p) - np.log(var_h) + var_h / var_p + (mu_h - mu_p) ** 2 / var_p - 1).sum(axis=1)

    def trapezoid_auprc(scores):
        precision, recall, _ = precision_recall_curve(y, scores)
        return auc(recall, precision)

    e_p, e_h = model.encode(premises).astype(np.float64), model.encode(hypotheses).astype(np.float64)
    cosine = (e_p * e_h).sum(1) / np.linalg.norm(e_p, axis=1) / np.linalg.norm(e_h, axis=1)
    assert scored["dev_auprc"] == pytest.approx(trapezoid_auprc(1 / (1 + kl)), abs=1e-6)
    assert abs(scored["dev_auprc"] - trapezoid_auprc(cosine)) > 1e-3  # not the cosine's figure


def test_the_pool_scores_as_sentence_transformers_does_and_replaces_a_dead_scorer(demo_world, demo_tiny_bert,
                                                                                 ray_session, tmp_path):
    """A live pool's name is never reused (a second start of it is refused: it may hold another dev set); a
    checkpoint's dev Spearman is the one computed here with sentence-transformers' loader and scipy; a pool of
    one scorer (each scorer is a process that loads torch: one keeps the test short), killed: the next
    checkpoint goes to a replacement, which scores it as the first did."""
    from sentence_transformers import SentenceTransformer

    from tests.test_eval import direct_sts_figures
    from train.encoder import Encoder
    from tune.scorers import PoolNameTaken, start_pool, stop_pool

    checkpoint = tmp_path / "step-0000001"
    Encoder(str(demo_tiny_bert), "mean", 32, None).save_sentence_transformer(checkpoint / "model")
    pool = start_pool("sts_spearman", str(demo_world.sts_dir), name="pool-test", namespace="structcse-test", size=1,
                      num_cpus=0)
    with pytest.raises(PoolNameTaken, match="structcse-test/pool-test is alive already"):
        start_pool("sts_spearman", str(demo_world.sts_dir), name="pool-test", namespace="structcse-test", size=1,
                   num_cpus=0)
    try:
        first = ray_session.get(pool.score.remote(str(checkpoint)), timeout=120)
        ray_session.get(pool.kill_scorer.remote(0), timeout=30)
        again = ray_session.get(pool.score.remote(str(checkpoint)), timeout=120)
        stats = ray_session.get(pool.stats.remote(), timeout=30)
    finally:
        assert stop_pool("pool-test", "structcse-test")
    want = direct_sts_figures(SentenceTransformer(str(checkpoint / "model"), local_files_only=True),
                              demo_world.sts_dir / "sts-dev.csv")
    assert first["dev_spearman"] == pytest.approx(want["spearman"], abs=1e-6)
    assert first["score_finished_at"] >= first["score_started_at"]
    assert again["dev_spearman"] == pytest.approx(first["dev_spearman"], abs=1e-6)
    assert stats["replaced"] >= 1 and stats["scored"] == [2] and stats["size"] == 1
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
    from tune.search import TuneSettings, run_search

    local = TrainConfig.from_dict({"method": "simcse_unsup", "data": "x", "num_workers": 0})
    with pytest.raises(ConfigError, match=r"num_workers=0 \(local mode\) cannot run in a Tune trial"):
        run_search(local, TuneSettings(search_space={"lr": {"choice": [1e-5]}}))
    with pytest.raises(ConfigError, match=r"num_workers=0 \(local mode\) cannot run in a Tune trial"):
        run_search(dataclasses.replace(local, num_workers=1),
                   TuneSettings(search_space={"num_workers": {"choice": [0, 1]}}))

