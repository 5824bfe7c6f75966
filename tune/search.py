"""Ray Tune over a training config: trials scored by a pool of evaluation actors, ASHA on equal data.

Each trial is a driver function that builds the method's ``TorchTrainer`` (the Train V2 + Tune
pattern) and fits it; ``TuneReportCallback`` forwards rank 0's training reports to Tune. Scoring is
asynchronous: every checkpoint is reported with ``validation=...``, Ray Train's validation task hands
it to the search's evaluation pool (``tune.scorers``: actors holding the dev data, one pool per run of a
search, shared by its trials), and the score reaches Tune tagged with the step and the examples seen it
belongs to, while the trial trains on. The metric is the method's own (``score.dev_metrics``: STS Spearman,
RSE's relational score, GaussCSE's SNLI-dev AUPRC), the one ``python -m train`` selects checkpoints on. A
score not given within ``validation_timeout_s`` is cancelled and asked again (``validation_attempts``); a
checkpoint left unscored fails its trial.

Fair comparison across batch sizes: ASHA's time attribute is ``examples_seen``, a trial reports
every ``report_every_examples`` examples (default: the base config's ``checkpoint_every_steps`` ×
``batch_size``), and a base config capped by ``max_steps`` caps every trial at the same number of
examples (``max_steps`` × base ``batch_size``); the search sets those keys for every trial, so searching
one of them is refused (``tune.trials``).

Searchers and scheduler (``tune.searchers``): ``random`` (Tune's BasicVariantGenerator), ``grid`` (every
combination of ``choice`` / ``grid`` values), ``optuna`` (TPE told each trial's best score; the ``tune``
extra). With ``include_base_config`` (default) the base config's own values are the first trial, which ASHA
never stops early, so the search compares every trial with the base config trained to its full budget; the
untrained encoder of every encoder shape among the trials (their step 0) is scored by the same pool once
the trials are done (``tune.untrained``), so the report also says whether training improved on it at all.

Folders: ``{storage}/{name}/`` is Tune's experiment (``Tuner.restore`` continues it when the command is rerun
after an interruption, over the same data: ``tune.state``); one live search holds it (a lease);
``{storage}/{name}/trials/train-<trial id>/`` holds each trial's Train run; ``tune.report`` writes the results
a user reads beside them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path

from ray import tune

from infra.logs import tune_verbosity
from infra.storage import arrow_filesystem
from infra.storage import is_uri, local_path
from train.config import ConfigError, TrainConfig
from train.ray_env import ray_for_training
from train.run import build_trainer
from tune.report import SearchOutcome, write_search_report
from tune.searchers import build_scheduler, build_search_alg, check_optuna, trials_at_once
from tune.settings import (  # noqa: F401 - read from here by callers and tests
    RESOURCE_KEYS,
    SAMPLERS,
    SCHEDULERS,
    SEARCHERS,
    TuneSettings,
    build_search_space,
    check_searched_resources,
    check_settings_against_base,
    grid_size,
    load_tune_settings,
    searched_values,
    validate_settings,
)
from tune.state import (  # noqa: F401 - read from here by callers and tests
    STATE_FILE,
    check_restore,
    holds_tune_experiment,
    read_state,
    search_data,
    search_fingerprint,
    search_lease,
    write_state,
)
from tune.trials import base_values, resolved_trial_config, trained_examples

log = logging.getLogger(__name__)

# A trial's driver only builds and waits on its TorchTrainer: it reserves no CPU (the Train workers
# and Ray Data's tasks need them), only a little memory, so a bundle exists for Tune to place. On a
# cluster that defines TRAIN_DRIVER (cluster.yaml: the on-demand head), drivers ask for a sliver of
# it, which pins them there: a spot node's loss then costs Train workers (retried), never a driver.
TRIAL_DRIVER_RESOURCES = {"cpu": 0, "memory": 256 * 1024**2}
DRIVER_PIN = "TRAIN_DRIVER"


# ---------------------------------------------------------------- one trial


def trial_config(config: dict, private: dict) -> TrainConfig:
    """The running trial's training config; its Train run is ``train-<trial id>``, so a restored
    trial resumes its run."""
    return resolved_trial_config(config, private, f"train-{tune.get_context().get_trial_id()}")


def trial_driver(config: dict, private: dict) -> None:
    """One trial: fits its TorchTrainer; its checkpoints are scored by the pool as it trains; a checkpoint the
    pool gives up on fails the trial."""
    from ray.train.v2.api.validation_config import (
        ValidationConfig,
        ValidationTaskConfig,
    )
    from ray.tune.integration.ray_train import TuneReportCallback

    from infra.ray_compat import tune_trial_report_queue
    from train.reporting import UNSCORED
    from tune.scorers import PoolValidation, fit_failing_on_unscored

    class TrainingReports(TuneReportCallback):
        """Training reports reach Tune with ``examples_seen`` renamed ``examples_trained``: ASHA's time
        attribute is only in the scores, so a trial reaching ``max_t`` in training is not stopped before
        its last checkpoints are scored, and every rung decision is taken on a score. The dev score's
        placeholder (``train.loop.UNSCORED``: Ray Train ranks the checkpoint by it until the pool's score
        replaces it) is left out: Tune sees scores only."""

        def after_report(self, run_context, metrics, checkpoint):
            renamed = [{("examples_trained" if k == "examples_seen" else k): v for k, v in m.items()
                        if not (isinstance(v, float) and v == UNSCORED)} for m in metrics]
            super().after_report(run_context, renamed, checkpoint)

    cfg = trial_config(config, private)
    pool = private["pool"]
    trial_id = tune.get_context().get_trial_id()
    report = TrainingReports()
    # the queue TuneReportCallback puts training reports on: scores join them there, when they are ready
    tune_queue = tune_trial_report_queue()
    scoring = PoolValidation(pool["name"], pool["namespace"], cfg.validation_timeout_s, forward=tune_queue,
                             trial_id=trial_id, attempts=private.get("validation_attempts", 1))
    validation = ValidationConfig(
        fn=scoring,
        task_config=ValidationTaskConfig(timeout_s=scoring.task_timeout_s()),
        ray_remote_kwargs={"num_cpus": 0, "max_retries": 0},  # the task only waits on the pool
    )
    trainer = build_trainer(cfg, callbacks=[report], validation=validation)
    fit_failing_on_unscored(trainer.fit, pool["name"], pool["namespace"], trial_id)


# ---------------------------------------------------------------- the search


def build_tuner(trainable, param_space: dict, settings: TuneSettings, storage: str, base: TrainConfig,
                max_t: int, metric: str):
    """The ``Tuner`` of a search: the searcher and scheduler of ``settings`` (``tune.searchers``); sampled values
    are a function of ``settings.seed``."""
    base_point = base_values(base, settings) if settings.include_base_config else None
    points = [base_point] if base_point is not None and settings.searcher != "grid" else []
    search_alg = build_search_alg(settings, points[0] if points else None)
    num_samples = settings.num_samples + (len(points) if settings.searcher == "random" else 0)
    return tune.Tuner(
        trainable,
        param_space=param_space,
        tune_config=tune.TuneConfig(metric=metric, mode=settings.mode, num_samples=num_samples,
                                    search_alg=search_alg, scheduler=build_scheduler(settings, max_t, base_point)),
        # Tune's status tables (~200 lines a search) and its "Configuration for experiment" box are its progress
        # display: off in a quiet run (a log file; infra.logs.tune_verbosity)
        run_config=tune.RunConfig(name=settings.name, **_tune_storage(storage), verbose=tune_verbosity()),
    )


def restore_tuner(folder: str, trainable, settings: TuneSettings):
    """The interrupted search in ``folder``, continued with this run's ``max_concurrent_trials``."""
    fs, path = arrow_filesystem(folder)  # the experiment through this project's storage client
    with trials_at_once(settings.max_concurrent_trials):  # Tune reads the first run's search algorithm back here
        return tune.Tuner.restore(path, trainable, resume_unfinished=True, resume_errored=True,
                                  storage_filesystem=fs)


# Ray Tune copies these from the driver's environment into every trial actor's runtime env
# (ray.tune.execution.class_cache), and Ray's runtime_env_agent.log records runtime envs in clear.
TUNE_PROPAGATED_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN", "AWS_SESSION_TOKEN")


@contextlib.contextmanager
def _credentials_withheld_from_trials(storage: str):
    """Keep cloud credentials out of the trials' runtime env (docs/security.md).

    Trials get credentials as every other Ray worker does: from their node's environment (a local Ray
    started by this process inherited it) or instance profile. With local storage the driver needs none
    during the search, so they are removed from this process's environment while it runs and restored
    after; with remote storage the driver itself needs them, so they stay and the leak is said once.
    """
    held = {k: os.environ[k] for k in TUNE_PROPAGATED_CREDENTIALS if k in os.environ}
    if held and is_uri(storage):
        log.warning(f"[tune] warning: Ray Tune copies {', '.join(sorted(held))} from this environment into every "
                    "trial's runtime env, which Ray logs in clear (runtime_env_agent.log); on a cluster unset them "
                    "here and let the nodes' instance profile supply credentials")
        held = {}
    for k in held:
        del os.environ[k]
    try:
        yield
    finally:
        os.environ.update(held)


def _scores_arrive_apart_from_training_reports():
    """A trial's training reports (loss, examples seen, checkpoint) reach Tune without the metric, which
    comes later in a result of its own; Tune's check that every result holds the metric is turned off
    (read by the Tune controller in this process: ``infra.ray_compat.tune_metric_checking_off``) while
    the search runs."""
    from infra.ray_compat import tune_metric_checking_off

    return tune_metric_checking_off()




def _scores_arrive_apart_from_training_reports():
    """A trial's training reports (loss, examples seen, checkpoint) reach Tune without the metric, which
    comes later in a result of its own; Tune's check that every result holds the metric is turned off
    (read by the Tune controller in this process: ``infra.ray_compat.tune_metric_checking_off``) while
    the search runs."""
    from infra.ray_compat import tune_metric_checking_off

    return tune_metric_checking_off()


def run_search(base: TrainConfig, settings: TuneSettings) -> SearchOutcome:
    """Run (or continue) the search; write its report; return the best trial's config and metrics."""
    from infra.secrets import SecretInConfigError, check_no_secrets
    from train.config import metric_for
    from train.plan import make_plan

    try:  # Tune saves every trial's config (params.json) before a trial validates it
        check_no_secrets({"base": base.to_dict()}, "tune base config")
    except SecretInConfigError as e:
        raise ConfigError(str(e)) from None
    validate_settings(settings)
    if base.num_workers == 0 or 0 in searched_values(settings, "num_workers"):
        raise ConfigError("num_workers=0 (local mode) cannot run in a Tune trial: Ray Train's local mode is not "
                          "available inside Tune's trials; set num_workers to 1 or more")
    if not base.dev_data:
        raise ConfigError("a search needs dev data to score trials: set dev_data (--dev-data PATH)")
    plan = make_plan(base)
    check_searched_resources(base, settings)
    base = plan.worker_config  # trials run in their own folders: relative --data/--dev-data/--model would miss
    dev_metric = metric_for(base)
    metric = settings.metric or dev_metric.key
    if metric != dev_metric.key:
        raise ConfigError(f"tune metric {metric!r}: the pool reports {dev_metric.key!r} ({dev_metric.name}, "
                          f"method {base.method}); leave metric unset or set dev_metric in the training config")
    base_examples = trained_examples(base, plan.num_rows)
    max_t = settings.max_t or base_examples
    report_every = settings.report_every_examples or (base.checkpoint_every_steps * base.batch_size
                                                      if base.checkpoint_every_steps else max_t)
    check_settings_against_base(settings, base, max_t)
    check_optuna(settings)
    storage = str(Path(local_path(settings.storage_path)).expanduser().resolve()) if not is_uri(settings.storage_path) \
        else settings.storage_path
    folder = f"{storage.rstrip('/')}/{settings.name}"
    _check_storage(storage)
    with search_lease(folder, settings.name):
        data = search_data(base, plan.set_pins)
        restoring = check_restore(folder, base, settings, data=data)
        if settings.searcher == "grid":
            log.info(f"[tune] grid of {grid_size(settings)} trials")
        ray_for_training(base)  # a local Ray that can never run the base config's workers: refused here
        private = {  # the same on a restore (the search's base config and data are checked equal), but the pool's
            "base": base.to_dict(),
            "storage_path": f"{folder}/trials",
            "report_every_examples": report_every,
            "max_examples": base_examples if base.max_steps else None,
            "max_failures": settings.trial_max_failures,
            "validation_attempts": settings.validation_attempts,
            "num_rows": plan.num_rows,
        }
        results, untrained, pool_stats, started = _run_trials(base, settings, plan, folder, storage, private, restoring,
                                                              max_t, metric, dev_metric)
        write_state(folder, base, settings, done=True, data=data)
    outcome = write_search_report(results, base, settings, metric, folder, private, max_t=max_t,
                                  untrained=untrained["base"], untrained_by_trial=untrained["by_trial"],
                                  pool_stats=pool_stats)
    log.info(f"[tune] {len(results)} trials in {time.time() - started:.0f} s; best {metric}="
             f"{outcome.best_metrics.get(metric, float('nan')):.4f} with {outcome.best_config}")
    log.info(f"[tune] {outcome.baseline_line}")
    return outcome


def _run_trials(base, settings, plan, folder, storage, private, restoring, max_t, metric, dev_metric):
    """The trials, on an evaluation pool of this run's own; then the untrained encoders on the same pool.
    Returns (Tune's results, the untrained encoders' scores, the pool's counts, when it started)."""
    import ray

    from tune.scorers import POOL_NAMESPACE, score_untrained_encoders, start_search_pool, stop_pool

    started = time.time()
    pool, pool_name = start_search_pool(folder, dev_metric.name, base.dev_data, settings)
    private["pool"] = {"name": pool_name, "namespace": POOL_NAMESPACE}
    resources = dict(TRIAL_DRIVER_RESOURCES)
    if ray.cluster_resources().get(DRIVER_PIN):
        resources[DRIVER_PIN] = 0.01
    trainable = tune.with_resources(tune.with_parameters(trial_driver, private=private), resources)
    pool_stats = {}
    try:
        if restoring:
            log.info(f"[tune] continuing the interrupted search in {folder}")
            tuner = restore_tuner(folder, trainable, settings)
        else:
            param_space = build_search_space(settings.search_space, grid=settings.searcher == "grid")
            tuner = build_tuner(trainable, param_space, settings, storage, base, max_t, metric)
        with _credentials_withheld_from_trials(storage), _scores_arrive_apart_from_training_reports():
            results = tuner.fit()
        # every trial's step 0, by the same pool: the report's baselines besides the base config's trial
        trial_configs = {}
        for result in results:
            with contextlib.suppress(Exception):  # a trial whose config does not resolve has no row to compare
                trial_configs[_trial_id(result)] = resolved_trial_config(result.config or {}, private, "untrained")
        untrained = score_untrained_encoders(pool, base, trial_configs, plan.data_info, folder, metric)
    finally:
        with contextlib.suppress(Exception):  # the search's own error (if any) is the one to see
            pool_stats = ray.get(pool.stats.remote(), timeout=60)
            log.info(f"[tune] evaluation pool: {pool_stats}")
        stop_pool(pool_name, POOL_NAMESPACE)
    return results, untrained, pool_stats, started


def _trial_id(result) -> str:
    from tune.report import trial_id_of

    return trial_id_of(result)


def _check_storage(storage: str) -> None:
    """A bucket whose endpoint does not answer, or that does not exist, is one line before Ray starts; Tune's
    trials run in other processes, which never see this one's ``memory://``."""
    from infra.storage import StorageError, check_storage

    if storage.startswith("memory://"):
        raise ConfigError(f"tune storage_path {storage}: Tune's trials run in other processes, which cannot see "
                          "this process's memory filesystem; use a local folder or a bucket")
    try:
        check_storage(storage, "tune storage_path")
    except StorageError as e:
        raise ConfigError(str(e)) from None


def _tune_storage(storage: str) -> dict:
    """``RunConfig``'s storage arguments: the path inside this project's storage client (``infra.storage``)."""
    fs, path = arrow_filesystem(storage)
    return {"storage_path": path, "storage_filesystem": fs}



# the names the state file's functions had here before tune.state
_check_restore = check_restore
_write_state = write_state
_read_state = read_state
_holds_tune_experiment = holds_tune_experiment
