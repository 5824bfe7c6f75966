"""Results a user can trust (Tune): one evaluation pool per search, a score that never comes cancelled and its
trial failed, the base config trained to its budget and said so, Optuna told each trial's best score, a resumed
search over changed data refused, this run's trials at once on a resume, a searched key every trial overrides
refused, an untrained baseline per encoder shape, each trial's own end. Real Ray, Tune and evaluation pools
(one pool shared by the module's tests: each scorer is a process that loads torch); no search is run whole."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.test_tune import _base
from train.config import ConfigError
from tune.search import TuneSettings, run_search, validate_settings


def _settings(storage, **extra) -> TuneSettings:
    settings = TuneSettings(**{"search_space": {"lr": {"choice": [3e-4, 1e-3]}}, "searcher": "grid",
                               "storage_path": str(storage), **extra})
    validate_settings(settings)  # as run_search does first (it fills in num_samples)
    return settings


def _one_line(error) -> str:
    text = str(error.value)
    assert "\n" not in text, text
    return text


@pytest.fixture(scope="module")
def checkpoint(demo_tiny_bert, tmp_path_factory) -> Path:
    """A checkpoint-shaped folder: the tiny BERT, mean pooling."""
    from train.encoder import Encoder

    folder = tmp_path_factory.mktemp("checkpoint") / "step-0000001"
    Encoder(str(demo_tiny_bert), "mean", 32, None).save_sentence_transformer(folder / "model")
    return folder


class Search:
    def __init__(self, folder, pool, name):
        self.folder, self.pool, self.name = folder, pool, name


@pytest.fixture(scope="module")
def search_a(demo_world, ray_session, tmp_path_factory):
    """A live search named ``tune`` (the default name) in storage A: its lease held, its pool (one scorer) started
    as run_search starts them."""
    from tune.scorers import start_search_pool, stop_pool
    from tune.state import search_lease

    folder = str(tmp_path_factory.mktemp("storage_a") / "tune")
    with search_lease(folder, "tune"):
        pool, name = start_search_pool(folder, "sts_spearman", str(demo_world.sts_dir),
                                       _settings(Path(folder).parent, eval_actors=1, eval_actor_cpus=0))
        yield Search(folder, pool, name)
        stop_pool(name, "structcse-tune")


def _score(ray, pool, checkpoint) -> float:
    return ray.get(pool.score.remote(str(checkpoint), timeout_s=120), timeout=150)["dev_spearman"]


# ---------------------------------------------------------------- 1. one pool per search


def test_searches_named_alike_get_pools_of_their_own_and_a_live_search_is_not_joined(
        search_a, checkpoint, demo_world, demo_sets, demo_tiny_bert, ray_session, tmp_path):
    """Two searches of the same name in two storages, each with its own dev set: each pool is its search's own
    (named by the folder and the run) and scores on its own dev set; ending one leaves the other scoring. A
    second search in a live search's folder is refused in one line, before Ray."""
    from infra.lease import LeaseHeld
    from tune.scorers import POOL_NAMESPACE, start_search_pool, stop_pool
    from tune.state import search_lease

    dev_b = tmp_path / "dev_b"  # the same pairs, the gold scores reversed: the Spearman of any model negated
    dev_b.mkdir()
    rows = [line.split("\t") for line in (demo_world.sts_dir / "sts-dev.csv").read_text().splitlines()]
    (dev_b / "sts-dev.csv").write_text("".join("\t".join([*r[:4], f"{5 - float(r[4]):.3f}", *r[5:]]) + "\n"
                                               for r in rows))
    folder_b = str(tmp_path / "storage_b" / "tune")
    with search_lease(folder_b, "tune"):
        pool_b, name_b = start_search_pool(folder_b, "sts_spearman", str(dev_b),
                                           _settings(tmp_path / "storage_b", eval_actors=1, eval_actor_cpus=0))
        assert name_b != search_a.name and name_b.startswith("eval-pool-")
        on_a, on_b = _score(ray_session, search_a.pool, checkpoint), _score(ray_session, pool_b, checkpoint)
        assert on_a > 0.1 and on_b == pytest.approx(-on_a, abs=1e-6)
        assert stop_pool(name_b, POOL_NAMESPACE)
    assert _score(ray_session, search_a.pool, checkpoint) == pytest.approx(on_a, abs=1e-6)  # A's pool lives on

    with pytest.raises(LeaseHeld) as held:
        with search_lease(search_a.folder, "tune"):
            pass
    assert _one_line(held).startswith(f"search folder {search_a.folder} is being written by python -m tune --name tune")
    base = _base(demo_tiny_bert, demo_sets[0], demo_world.sts_dir)
    with pytest.raises(LeaseHeld, match="is being written by python -m tune --name tune"):
        run_search(base, _settings(Path(search_a.folder).parent, name="tune"))


# ---------------------------------------------------------------- 2. a score that never comes


def test_a_score_that_never_comes_is_cancelled_asked_again_and_fails_its_trial(search_a, checkpoint, ray_session,
                                                                               tmp_path):
    """A checkpoint whose files never arrive (``_files.json`` a FIFO nobody writes: a stalled network store) is
    given up on after ``timeout_s``: its scorer is stopped and replaced, the request asked again, and after the
    attempts the checkpoint is recorded unscored, which fails its trial's training run at once. The pool is then
    free: the next checkpoint is scored (with the request still on the scorer, it would wait forever)."""
    from tune.scorers import POOL_NAMESPACE, PoolValidation, UnscoredCheckpoint, fit_failing_on_unscored

    hung = tmp_path / "step-0000003"
    (hung / "model").mkdir(parents=True)
    os.mkfifo(hung / "model" / "_files.json")
    before = ray_session.get(search_a.pool.stats.remote(), timeout=30)
    validation = PoolValidation(search_a.name, POOL_NAMESPACE, timeout_s=2, trial_id="trial-hung", attempts=2)
    started = time.monotonic()
    with pytest.raises(TimeoutError) as failed:
        validation(str(hung), step=3, examples_seen=48)
    assert time.monotonic() - started < 2 * 2 + 10
    assert f"checkpoint {hung} (step 3) was not scored in 2 attempt(s) of 2 s (validation_timeout_s)" in str(failed.value)
    after = ray_session.get(search_a.pool.stats.remote(), timeout=30)
    assert after["timed_out"] - before["timed_out"] == 2 and after["retried"] - before["retried"] == 1
    assert after["replaced"] - before["replaced"] >= 1  # the scorer that hung on it was stopped
    assert [u["step"] for u in after["unscored"] if u["trial_id"] == "trial-hung"] == [3]

    training = threading.Event()  # a trial's training run, going on until its trial is failed
    started = time.monotonic()
    with pytest.raises(UnscoredCheckpoint, match="step 3"):
        fit_failing_on_unscored(lambda: training.wait(60), search_a.name, POOL_NAMESPACE, "trial-hung", poll_s=0.2)
    assert time.monotonic() - started < 10
    training.set()
    assert fit_failing_on_unscored(lambda: "trained", search_a.name, POOL_NAMESPACE, "another-trial",
                                   poll_s=0.2) == "trained"

    assert _score(ray_session, search_a.pool, checkpoint) > 0.1  # nothing left ahead of it on the scorer
    ray_session.get(search_a.pool.ready.remote(), timeout=120)


def test_checkpoints_left_unscored_are_counted_in_the_report(tmp_path):
    """A search whose trials all failed for a checkpoint left unscored: the report says no trial was scored, each
    trial's row ended in an error, and the pool's counts (timeouts, retries, the checkpoints left unscored)."""
    from tune.report import write_search_report
    from tune.scorers import UnscoredCheckpoint

    base, settings, private = _search_of(tmp_path)
    (tmp_path / "tune").mkdir()
    error = "checkpoint step-0000016 (step 16) was not scored in 2 attempt(s) of 600 s (validation_timeout_s)"
    results = [_result("t0", {"lr": 3e-4, "batch_size": 16}, [256], [], tmp_path, error=UnscoredCheckpoint(error))]
    stats = {"size": 1, "scored": [3], "timed_out": 2, "retried": 1, "cancelled": 0,
             "unscored": [{"trial_id": "t0", "step": 16, "error": error}]}
    outcome = write_search_report(results, base, settings, "dev_spearman", str(tmp_path / "tune"), private,
                                  max_t=992, untrained={"score": None, "error": "not asked"},
                                  pool_stats=stats)
    text = (tmp_path / "tune" / "search_report.md").read_text()
    assert "**No trial was scored.**" in text and outcome.baseline_line == "no trial was scored"
    assert "| `t0` (base config) | 0.0003 | 16 | - | - | base | - | - | 256 | error |" in text
    assert ("Evaluation pool: 3 scores by 1 scorer(s); 2 request(s) not answered within validation_timeout_s (dropped "
            "from the queue, or their scorer stopped and replaced), 1 asked again, 0 cancelled; 1 checkpoint(s) left "
            "unscored: trial `t0` step 16 (each failed its trial).") in text
    assert outcome.pool["unscored"][0]["step"] == 16


# ---------------------------------------------------------------- 3. the base config, trained to its budget


def test_asha_never_stops_the_base_config_before_its_budget(tmp_path):
    """ASHA stops a trial below its rung's cutoff, but never the base config's own: it trains to its budget, its
    scores still count in the rungs."""
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import TrialScheduler

    from tune.searchers import build_scheduler

    settings = _settings(tmp_path, scheduler="asha", reduction_factor=2, grace_period=256)
    scheduler = build_scheduler(settings, max_t=1024, base_point={"lr": 3e-4})
    scheduler.set_search_properties("dev_spearman", "max")
    good, base, bad = (Trial("__fake", config={"lr": lr}, stub=True) for lr in (1e-3, 3e-4, 3e-3))
    for trial in (good, base, bad):
        scheduler.on_trial_add(None, trial)

    def decide(trial, examples, score):
        return scheduler.on_trial_result(None, trial, {"examples_seen": examples, "dev_spearman": score})

    assert decide(good, 256, 0.8) == TrialScheduler.CONTINUE
    assert decide(base, 256, 0.2) == TrialScheduler.CONTINUE  # below the cutoff: ASHA alone would stop it
    assert decide(bad, 256, 0.1) == TrialScheduler.STOP
    assert decide(base, 512, 0.3) == TrialScheduler.CONTINUE
    assert decide(base, 1024, 0.3) == TrialScheduler.STOP  # its budget's end


def _result(trial_id, config, trained, scored, path, error=None):
    """A real ``ray.tune.Result`` as a trial of the search leaves it: training reports (``examples_trained``)
    and scores (``examples_seen``, ``validated_step``) in one frame."""
    from ray.tune import Result

    frame = pd.DataFrame([{"examples_trained": e, "step": e // config["batch_size"]} for e in trained]
                         + [{"examples_seen": e, "dev_spearman": v, "validated_step": e // config["batch_size"]}
                            for e, v in scored])
    return Result(metrics={"trial_id": trial_id, "config": config}, checkpoint=None, error=error,
                  path=str(path / f"trial-{trial_id}"), metrics_dataframe=frame)


def _search_of(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "sts-dev.csv").write_text("g\tf\t2012\t1\t5.0\ta\tb\n")
    base = _base("m", "x", tmp_path / "dev", batch_size=16, max_steps=62, checkpoint_every_steps=16, lr=3e-4)
    settings = _settings(tmp_path, search_space={"lr": {"choice": [3e-4, 1e-3]}, "batch_size": {"choice": [16, 48]}})
    private = {"base": base.to_dict(), "storage_path": str(tmp_path / "trials"), "report_every_examples": 256,
               "max_examples": 992, "max_failures": None, "num_rows": 100_000}
    return base, settings, private


def test_the_report_states_the_base_configs_budget_when_it_was_cut_short(tmp_path):
    """A base config stopped early (a search before the exemption, an error) is compared as it was: the report,
    its headline and the JSON say it trained 256 of its 992 examples, beside the best trial's full run."""
    from tune.report import write_search_report

    base, settings, private = _search_of(tmp_path)
    (tmp_path / "tune").mkdir()  # Tune's experiment folder
    results = [_result("base0", {"lr": 3e-4, "batch_size": 16}, [256], [(256, 0.60)], tmp_path),
               _result("best1", {"lr": 1e-3, "batch_size": 16}, [256, 512, 768, 992],
                       [(256, 0.61), (512, 0.62), (992, 0.63)], tmp_path)]
    outcome = write_search_report(results, base, settings, "dev_spearman", str(tmp_path / "tune"), private,
                                  max_t=992, untrained={"score": None, "error": "not asked"})
    assert outcome.base_config == {"trial_id": "base0", "score": 0.60, "examples_seen": 256, "budget": 992,
                                   "full_budget": False, "ended": "stopped at 256 of 992 examples"}
    assert outcome.baseline_line == ("best dev_spearman 0.6300: the best trial is +0.0300 over the base config "
                                     "(0.6000, stopped at 256 of its 992 examples)")
    text = (tmp_path / "tune" / "search_report.md").read_text()
    assert ("Base config (lr=0.0003, batch_size=16, trial `base0`): dev_spearman **0.6000**. It was stopped at 256 "
            "of its 992 examples") in text
    results[0] = _result("base0", {"lr": 3e-4, "batch_size": 16}, [256, 512, 768, 992], [(992, 0.60)], tmp_path)
    full = write_search_report(results, base, settings, "dev_spearman", str(tmp_path / "tune"), private,
                               max_t=992, untrained={"score": None, "error": "not asked"})
    assert full.base_config["full_budget"] and full.base_config["budget"] == 992
    assert full.baseline_line == "best dev_spearman 0.6300: the best trial is +0.0300 over the base config (0.6000)"


# ---------------------------------------------------------------- 4. optuna


def test_optuna_is_told_each_trials_best_score_and_passes_over_training_reports(tmp_path):
    """Tune hands the searcher every result: training reports carry no score (it comes later, in a result of
    its own), and the last result is rarely the best. Optuna's study gets each trial's best score."""
    pytest.importorskip("optuna")
    from tune.searchers import build_search_alg
    from tune.settings import build_search_space

    settings = _settings(tmp_path, searcher="optuna", num_samples=2,
                         search_space={"lr": {"loguniform": [1e-5, 1e-3]}})
    search_alg = build_search_alg(settings, base_point={"lr": 3e-4})
    assert search_alg.set_search_properties("dev_spearman", "max", build_search_space(settings.search_space))
    assert search_alg.suggest("t0") == {"lr": 3e-4}  # the base config first
    for result in ({"examples_trained": 256, "loss": 2.1, "training_iteration": 1},
                   {"dev_spearman": 0.61, "examples_seen": 256, "training_iteration": 2},
                   {"dev_spearman": 0.65, "examples_seen": 512, "training_iteration": 3},
                   {"examples_trained": 768, "loss": 1.9, "training_iteration": 4},
                   {"dev_spearman": 0.58, "examples_seen": 768, "training_iteration": 5}):
        search_alg.on_trial_result("t0", result)
    search_alg.on_trial_complete("t0", {"examples_trained": 768, "loss": 1.9, "training_iteration": 6})
    study = search_alg.searcher._ot_study
    assert [t.value for t in study.trials] == [0.65]


def test_optuna_over_a_grid_is_refused_at_build_in_one_line(tmp_path):
    from tune.searchers import check_optuna

    with pytest.raises(ConfigError) as grid:
        check_optuna(_settings(tmp_path, searcher="optuna", search_space={"lr": {"grid": [1e-4, 3e-4]}}))
    assert _one_line(grid) == "searcher optuna samples its values: search space 'lr' is a grid; use choice"


# ---------------------------------------------------------------- 5. a resumed search over other data


def test_a_resumed_search_over_changed_dev_or_training_data_is_refused(demo_world, demo_sets, demo_tiny_bert,
                                                                       tmp_path):
    """The search's state records what its data held: a dev file rewritten in place, or a training set re-ingested
    into the same folder, is refused in one line naming it, where the paths alone would have matched."""
    import shutil

    from train.plan import make_plan
    from tune.state import check_restore

    dev, sets = tmp_path / "dev", tmp_path / "sets"
    shutil.copytree(demo_world.sts_dir, dev)
    shutil.copytree(demo_sets[0], sets)
    base = make_plan(_base(demo_tiny_bert, sets, dev)).worker_config
    folder = str(tmp_path / "runs" / "s")
    settings = _settings(tmp_path / "runs", name="s")
    assert check_restore(folder, base, settings) is False  # a fresh search: its state written
    assert check_restore(folder, base, settings) is False  # the same data: it may continue
    dev_file = dev / "sts-dev.csv"
    dev_file.write_text(dev_file.read_text().replace("\t2.", "\t3.", 1))
    with pytest.raises(ConfigError) as changed:
        check_restore(folder, base, settings)
    assert _one_line(changed).startswith(f"{folder} holds a search over other data: dev_data ({dev}) changed since "
                                         "it started; its trials would mix the two")
    shutil.rmtree(folder)
    assert check_restore(folder, base, settings) is False
    part = sorted((sets / "sentences").glob("*.parquet"))[0]
    part.write_bytes(part.read_bytes())  # the same bytes written again: another file in the set's folder
    os.utime(part, (time.time() + 5, time.time() + 5))
    with pytest.raises(ConfigError, match=r"over other data: set sentences changed since it started"):
        check_restore(folder, base, settings)


# ---------------------------------------------------------------- 6. the trials at once, on a resume


def _search_alg_of(tuner):
    """The search algorithm a ``Tuner`` will run (for a restored one, read back from its ``tuner.pkl``), and the
    way Tune's controller holds it (a ``Searcher`` inside a ``SearchGenerator``), which saves and restores it."""
    from ray.tune.search import SearchGenerator, Searcher

    search_alg = tuner._local_tuner._tune_config.search_alg
    return search_alg, (SearchGenerator(search_alg) if isinstance(search_alg, Searcher) else search_alg)


@pytest.mark.parametrize("searcher", ["random", "optuna"])
def test_a_continued_search_runs_the_trials_at_once_this_run_asks_for(searcher, ray_session, tmp_path):
    """Tune reads a continued search's algorithm back from its first run (``tuner.pkl``, then the state Tune saved
    as it ran): the continued search runs at most this run's ``max_concurrent_trials``, not the first run's."""
    from ray import tune

    from tune.search import build_tuner, restore_tuner

    if searcher == "optuna":
        pytest.importorskip("optuna")

    def trainable(config):
        tune.report({"dev_spearman": config["lr"]})

    base = _base("m", "x", _dev(tmp_path), lr=3e-4)
    space = {"lr": tune.choice([3e-4, 1e-3])}
    first = _settings(tmp_path, searcher=searcher, num_samples=2, max_concurrent_trials=2, name="resumed")
    tuner = build_tuner(trainable, space, first, str(tmp_path), base, 1024, "dev_spearman")
    search_alg, held = _search_alg_of(tuner)
    assert search_alg.max_concurrent == 2
    held.save_to_dir(str(tmp_path / "resumed"), session_str="first")  # what Tune saves as the first run goes
    again = _settings(tmp_path, searcher=searcher, num_samples=2, max_concurrent_trials=1, name="resumed")
    restored, held = _search_alg_of(restore_tuner(str(tmp_path / "resumed"), trainable, again))
    held.restore_from_dir(str(tmp_path / "resumed"))  # what Tune's controller does as the search resumes
    assert restored.max_concurrent == 1


def _dev(tmp_path) -> Path:
    (tmp_path / "dev").mkdir(exist_ok=True)
    (tmp_path / "dev" / "sts-dev.csv").write_text("g\tf\t2012\t1\t5.0\ta\tb\n")
    return tmp_path / "dev"


# ---------------------------------------------------------------- 7. a searched key every trial overrides


@pytest.mark.parametrize("key, values", [("max_steps", [100, 400]), ("checkpoint_every_steps", [4, 8])])
def test_a_searched_key_every_trial_overrides_is_refused_naming_it(key, values, demo_world, demo_sets,
                                                                  demo_tiny_bert, tmp_path):
    base = _base(demo_tiny_bert, demo_sets[0], demo_world.sts_dir)
    with pytest.raises(ConfigError) as refused:
        run_search(base, _settings(tmp_path, search_space={key: {"choice": values}}))
    assert _one_line(refused).startswith(f"search space: {key!r} cannot be searched: each trial ")
    assert not (tmp_path / "tune").exists()  # refused before anything was written


# ---------------------------------------------------------------- 8. an untrained baseline per encoder shape


def test_the_untrained_encoder_is_scored_per_encoder_shape(search_a, demo_world, demo_tiny_bert, ray_session,
                                                           tmp_path):
    """A trial with a searched pooling starts from another encoder than the base config's: it is scored on its
    own and compared with it; a trial that differs only in lr shares the base config's."""
    from tune.untrained import score_untrained_encoders

    base = _base(demo_tiny_bert, "x", demo_world.sts_dir)
    configs = {"cls1": base.with_overrides(["pooling=cls"]), "lr2": base.with_overrides(["lr=1e-3"])}
    scored = score_untrained_encoders(search_a.pool, base, configs, {}, str(tmp_path / "tune"), "dev_spearman")
    assert len(scored["shapes"]) == 2 and scored["shapes"][0] is scored["base"]
    assert scored["by_trial"]["lr2"] is scored["base"] and scored["base"]["pooling"] == "mean"
    cls = scored["by_trial"]["cls1"]
    assert cls["shape"] == {"pooling": "cls"} and cls["pooling"] == "cls"
    assert cls["score"] is not None and abs(cls["score"] - scored["base"]["score"]) > 1e-4


# ---------------------------------------------------------------- 9. how each trial ended


def test_ended_is_each_trials_own_and_a_grace_period_past_max_t_is_refused(demo_world, demo_sets, demo_tiny_bert,
                                                                          tmp_path):
    """A batch of 48 trains 960 of the 992 examples a batch of 16 does (whole batches): it ran to its end, as
    the report says; one stopped by ASHA says where, of its own budget. A grace period at or past max_t, which
    leaves ASHA nothing to stop, is refused in one line."""
    from tune.report import trial_rows

    base, settings, private = _search_of(tmp_path)
    results = [_result("b16", {"lr": 3e-4, "batch_size": 16}, [256, 512, 768, 992], [(992, 0.6)], tmp_path),
               _result("b48", {"lr": 3e-4, "batch_size": 48}, [240, 480, 720, 960], [(960, 0.6)], tmp_path),
               _result("cut", {"lr": 1e-3, "batch_size": 48}, [240, 480], [(240, 0.3)], tmp_path)]
    ended = {r["trial_id"]: (r["budget"], r["ended"]) for r in trial_rows(results, settings, "dev_spearman", 992,
                                                                          private)}
    assert ended == {"b16": (992, "ran to the end"), "b48": (960, "ran to the end"),
                     "cut": (960, "stopped at 480 of 960 examples")}

    short = _base(demo_tiny_bert, demo_sets[0], demo_world.sts_dir)  # at most 12 steps x 16: max_t <= 192
    with pytest.raises(ConfigError) as refused:
        run_search(short, _settings(tmp_path, grace_period=192))
    assert re.fullmatch(r"grace_period 192 >= max_t \d+ examples: ASHA's first rung would be at the end of every "
                        r"trial, so it could stop none; lower grace_period or use scheduler fifo", _one_line(refused))
    assert not (tmp_path / "tune").exists()
