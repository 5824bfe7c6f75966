"""Ray Tune over a training config: trials scored by a pool of evaluation actors, ASHA on equal data.

Each trial is a driver function that builds the method's ``TorchTrainer`` (the Train V2 + Tune
pattern) and fits it; ``TuneReportCallback`` forwards rank 0's training reports to Tune. Scoring is
asynchronous: every checkpoint is reported with ``validation=...``, Ray Train's validation task hands
it to the search's evaluation pool (``tune.scorers``: actors holding the dev data, shared by all trials),
and the score reaches Tune tagged with the step and the examples seen it belongs to, while the
trial trains on. The metric is the method's own (``score.dev_metrics``: STS Spearman, RSE's
relational score, GaussCSE's SNLI-dev AUPRC), the one ``python -m train`` selects checkpoints on.

Fair comparison across batch sizes: ASHA's time attribute is ``examples_seen``, a trial reports
every ``report_every_examples`` examples (default: the base config's ``checkpoint_every_steps`` ×
``batch_size``), and a base config capped by ``max_steps`` caps every trial at the same number of
examples (``max_steps`` × base ``batch_size``).

Searchers: ``random`` (Tune's BasicVariantGenerator), ``grid`` (every combination of ``choice`` /
``grid`` values), ``optuna`` (TPE through ``OptunaSearch``; needs ``pip install optuna``). With
``include_base_config`` (default) the base config's own values are the first trial, so a search
never reports a best worse than the config it started from without showing it; the
untrained encoder (every trial's step 0) is scored by the same pool once the trials are
done (``tune.scorers.score_untrained_encoder``), so the report also says whether training
improved on it at all.

Folders: ``{storage}/{name}/`` is Tune's experiment (``Tuner.restore`` continues it when the
command is rerun after an interruption); ``{storage}/{name}/trials/train-<trial id>/`` holds each
trial's Train run; ``tune.report`` writes the results a user reads beside them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ray import tune

from infra.logs import tune_verbosity
from infra.storage import arrow_filesystem
from infra.uris import is_uri, local_path, read_text
from train.config import ConfigError, TrainConfig
from train.ray_env import ray_for_training
from train.run import build_trainer
from tune.report import SearchOutcome, write_search_report
from tune.trials import base_values, resolved_trial_config

# A trial's driver only builds and waits on its TorchTrainer: it reserves no CPU (the Train workers
# and Ray Data's tasks need them), only a little memory, so a bundle exists for Tune to place. On a
# cluster that defines TRAIN_DRIVER (cluster.yaml: the on-demand head), drivers ask for a sliver of
# it, which pins them there: a spot node's loss then costs Train workers (retried), never a driver.
TRIAL_DRIVER_RESOURCES = {"cpu": 0, "memory": 256 * 1024**2}
DRIVER_PIN = "TRAIN_DRIVER"
SEARCHERS = ("random", "grid", "optuna")
SCHEDULERS = ("asha", "fifo")
STATE_FILE = "structcse_search.json"

SAMPLERS = {
    "loguniform": lambda lo, hi: tune.loguniform(lo, hi),
    "uniform": lambda lo, hi: tune.uniform(lo, hi),
    "choice": lambda values: tune.choice(values),
    "grid": lambda values: tune.grid_search(values),
}


@dataclass
class TuneSettings:
    """What a ``configs/tune/*.yaml`` holds (every key optional)."""

    search_space: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {
            "lr": {"choice": [1e-5, 3e-5, 5e-5]},
            "batch_size": {"choice": [64, 128, 256, 512]},
        }
    )
    searcher: str = "random"  # random | grid | optuna
    num_samples: int | None = None  # random/optuna: trials (default 8); grid: runs of the whole grid (default 1)
    max_concurrent_trials: int = 2
    include_base_config: bool = True  # the base config's own values are trial 0 (random, optuna)
    metric: str | None = None  # default: the method's dev metric (dev_spearman, dev_auprc, ...)
    mode: str = "max"
    scheduler: str = "asha"  # asha | fifo (every trial to its end)
    grace_period: int | None = None  # examples before ASHA's first rung; default max_t / reduction_factor^2
    reduction_factor: int = 2
    max_t: int | None = None  # examples; default: what the base config trains on
    report_every_examples: int | None = None  # default: base checkpoint_every_steps x batch_size
    eval_actors: int | None = None  # evaluation pool size; default from the cluster (tune.scorers)
    eval_actor_cpus: float | None = None
    eval_actor_gpus: float | None = None  # fractions share a GPU (0.25: four scorers a GPU)
    trial_max_failures: int | None = None  # Train retries of a trial (spot nodes); default the base config's
    name: str = "tune"
    storage_path: str = "runs"
    seed: int = 0  # sampled trial configs are a function of it


def load_tune_settings(path: str | Path | None, overrides: dict | None = None) -> TuneSettings:
    data = {}
    if path:
        try:
            data = yaml.safe_load(read_text(path, "tune config")) or {}
        except FileNotFoundError as e:
            raise ConfigError(str(e)) from None
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: top level must be a mapping")
    data = {**data, **(overrides or {})}
    valid = {f.name for f in dataclasses.fields(TuneSettings)}
    unknown = sorted(set(data) - valid)
    if unknown:
        raise ConfigError(f"{path}: unknown tune key(s) {unknown}; valid keys: {sorted(valid)}")
    settings = TuneSettings(**data)
    from infra.secrets import SecretInConfigError, check_no_secrets

    try:
        check_no_secrets(dataclasses.asdict(settings), f"{path or 'tune settings'}")
    except SecretInConfigError as e:
        raise ConfigError(str(e)) from None
    validate_settings(settings, path)
    return settings


def validate_settings(settings: TuneSettings, source=None) -> None:
    where = f"{source or 'tune settings'}"
    if settings.searcher not in SEARCHERS:
        raise ConfigError(f"{where}: searcher {settings.searcher!r} is not one of {list(SEARCHERS)}")
    if settings.scheduler not in SCHEDULERS:
        raise ConfigError(f"{where}: scheduler {settings.scheduler!r} is not one of {list(SCHEDULERS)}")
    if settings.mode not in ("max", "min"):
        raise ConfigError(f"{where}: mode must be max or min")
    if settings.num_samples is None:
        settings.num_samples = 1 if settings.searcher == "grid" else 8
    for key in ("num_samples", "max_concurrent_trials", "reduction_factor"):
        if not isinstance(getattr(settings, key), int) or getattr(settings, key) < 1:
            raise ConfigError(f"{where}: {key} must be an integer >= 1, got {getattr(settings, key)!r}")
    for key in ("grace_period", "max_t", "report_every_examples", "eval_actors"):
        value = getattr(settings, key)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ConfigError(f"{where}: {key} must be an integer >= 1 or null, got {value!r}")
    from train.config import RUN_NAME

    if not RUN_NAME.fullmatch(settings.name):
        raise ConfigError(f"{where}: name {settings.name!r} must be letters, digits, '.', '_' or '-'")
    build_search_space(settings.search_space, grid=settings.searcher == "grid")  # fail here, not in a trial


def build_search_space(spec: dict[str, dict[str, Any]], grid: bool = False) -> dict:
    """Tune's param space from ``{key: {sampler: args}}``; each value is checked against the training
    config (a wrong type or a bad value is a ConfigError here, before Ray starts)."""
    valid = {f.name for f in dataclasses.fields(TrainConfig)}
    space = {}
    for key, sampler in (spec or {}).items():
        if key not in valid:
            raise ConfigError(f"search space: {key!r} is not a training config key")
        if not isinstance(sampler, dict) or len(sampler) != 1 or next(iter(sampler)) not in SAMPLERS:
            raise ConfigError(f"search space: {key!r} must be one of {sorted(SAMPLERS)} -> args, got {sampler!r}")
        kind, args = next(iter(sampler.items()))
        if kind in ("loguniform", "uniform"):
            if grid:
                raise ConfigError(f"search space: {key!r} is {kind}; a grid search takes choice/grid lists only")
            pair = isinstance(args, list) and len(args) == 2 and all(_is_number(a) for a in args)
            if not pair or not float(args[0]) < float(args[1]) or (kind == "loguniform" and float(args[0]) <= 0):
                raise ConfigError(f"search space: {key!r}: {kind} takes [low, high] with "
                                  f"{'0 < ' if kind == 'loguniform' else ''}low < high, got {args!r}")
            values = [float(a) for a in args]
        else:
            if not isinstance(args, list) or not args:
                raise ConfigError(f"search space: {key!r}: {kind} takes a non-empty list, got {args!r}")
            values = args
        for value in values:  # each value must make a valid training config value
            try:
                TrainConfig.from_dict({key: value}, source=f"search space {key!r}")
            except ConfigError as e:
                raise ConfigError(str(e)) from None
        if kind in ("loguniform", "uniform"):
            space[key] = SAMPLERS[kind](*values)
        else:
            space[key] = (tune.grid_search(values) if grid else SAMPLERS[kind](values))
    return space


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def grid_size(settings: TuneSettings) -> int:
    sizes = [len(next(iter(s.values()))) for s in settings.search_space.values()]
    return max(1, math.prod(sizes)) * settings.num_samples


# ---------------------------------------------------------------- one trial


def trial_config(config: dict, private: dict) -> TrainConfig:
    """The running trial's training config; its Train run is ``train-<trial id>``, so a restored
    trial resumes its run."""
    return resolved_trial_config(config, private, f"train-{tune.get_context().get_trial_id()}")


def trial_driver(config: dict, private: dict) -> None:
    """One trial: fits its TorchTrainer; its checkpoints are scored by the pool as it trains."""
    from ray.train.v2.api.validation_config import (
        ValidationConfig,
        ValidationTaskConfig,
    )
    from ray.tune.integration.ray_train import TuneReportCallback

    from infra.ray_compat import tune_trial_report_queue
    from tune.scorers import PoolValidation

    from train.loop import UNSCORED

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
    report = TrainingReports()
    # the queue TuneReportCallback puts training reports on: scores join them there, when they are ready
    tune_queue = tune_trial_report_queue()
    validation = ValidationConfig(
        fn=PoolValidation(pool["name"], pool["namespace"], cfg.validation_timeout_s, forward=tune_queue),
        task_config=ValidationTaskConfig(timeout_s=cfg.validation_timeout_s + 60),
        ray_remote_kwargs={"num_cpus": 0, "max_retries": 0},  # the task only waits on the pool
    )
    build_trainer(cfg, callbacks=[report], validation=validation).fit()


# ---------------------------------------------------------------- the search


def build_tuner(trainable, param_space: dict, settings: TuneSettings, storage: str, base: TrainConfig,
                max_t: int, metric: str):
    """The ``Tuner`` of a search: the searcher and scheduler of ``settings``; sampled values are a
    function of ``settings.seed``."""
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler
    from ray.tune.search import ConcurrencyLimiter
    from ray.tune.search.basic_variant import BasicVariantGenerator

    points = [base_values(base, settings)] if settings.include_base_config and settings.searcher != "grid" else []
    if settings.searcher == "optuna":
        try:
            import optuna
            from ray.tune.search.optuna import OptunaSearch
        except ImportError:
            raise ConfigError("searcher optuna needs the optuna package: pip install optuna") from None
        import optuna.samplers

        search_alg = ConcurrencyLimiter(
            OptunaSearch(points_to_evaluate=points or None, sampler=optuna.samplers.TPESampler(seed=settings.seed)),
            max_concurrent=settings.max_concurrent_trials,
        )
    else:
        # what Tune builds when given no search_alg, plus the seed; Tune ignores max_concurrent_trials
        # for a search_alg like this one, so the generator holds it
        search_alg = BasicVariantGenerator(max_concurrent=settings.max_concurrent_trials, random_state=settings.seed,
                                           points_to_evaluate=points or None)
    grace = settings.grace_period or max(1, max_t // settings.reduction_factor**2)
    scheduler = (ASHAScheduler(time_attr="examples_seen", max_t=max_t, grace_period=grace,
                               reduction_factor=settings.reduction_factor)
                 if settings.scheduler == "asha" else FIFOScheduler())
    num_samples = settings.num_samples + (len(points) if settings.searcher == "random" else 0)
    return tune.Tuner(
        trainable,
        param_space=param_space,
        tune_config=tune.TuneConfig(metric=metric, mode=settings.mode, num_samples=num_samples,
                                    search_alg=search_alg, scheduler=scheduler),
        # Tune's status tables (~200 lines a search) and its "Configuration for experiment" box are its progress
        # display: off in a quiet run (a log file; infra.logs.tune_verbosity)
        run_config=tune.RunConfig(name=settings.name, **_tune_storage(storage), verbose=tune_verbosity()),
    )


# Ray Tune copies these from the driver's environment into every trial actor's runtime env
# (ray.tune.execution.class_cache), and Ray's runtime_env_agent.log records runtime envs in clear.
TUNE_PROPAGATED_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN", "AWS_SESSION_TOKEN")


@contextlib.contextmanager
def _credentials_withheld_from_trials(storage: str, log):
    """Keep cloud credentials out of the trials' runtime env (docs/security.md).

    Trials get credentials as every other Ray worker does: from their node's environment (a local Ray
    started by this process inherited it) or instance profile. With local storage the driver needs none
    during the search, so they are removed from this process's environment while it runs and restored
    after; with remote storage the driver itself needs them, so they stay and the leak is said once.
    """
    held = {k: os.environ[k] for k in TUNE_PROPAGATED_CREDENTIALS if k in os.environ}
    if held and is_uri(storage):
        log(f"[tune] warning: Ray Tune copies {', '.join(sorted(held))} from this environment into every trial's "
            "runtime env, which Ray logs in clear (runtime_env_agent.log); on a cluster unset them here and let "
            "the nodes' instance profile supply credentials")
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


def search_fingerprint(base: TrainConfig, settings: TuneSettings) -> str:
    data = {"base": base.to_dict(), "settings": {k: v for k, v in dataclasses.asdict(settings).items()
                                                 if k not in ("max_concurrent_trials",)}}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


RESOURCE_KEYS = ("num_workers", "cpus_per_worker", "use_gpu")


def check_searched_resources(base: TrainConfig, settings: TuneSettings) -> None:
    """A searched value of ``num_workers``, ``cpus_per_worker`` or ``use_gpu`` that a local Ray could never
    place (``train.ray_env``'s check, made with the largest value each sampler can draw) is refused before
    the search starts, naming the key and the value: its trials would otherwise wait forever."""
    import dataclasses

    import ray

    from train.ray_env import check_cluster_resources, check_resources_before_ray

    for key in RESOURCE_KEYS:
        spec = settings.search_space.get(key)
        if not isinstance(spec, dict):
            continue
        values = [v for sampler, args in spec.items()
                  for v in (args if isinstance(args, list) else [args]) if isinstance(v, (bool, int, float))]
        if not values:
            continue
        largest = max(values, key=lambda v: float(v))
        try:
            variant = dataclasses.replace(base, **{key: largest})
            if ray.is_initialized():
                check_cluster_resources(variant, log=lambda *_: None)  # an autoscaler's wait is the base's to say
            else:
                check_resources_before_ray(variant)
        except ConfigError as e:
            raise ConfigError(f"search_space {key}: {largest!r} cannot run here: {e}") from None


def run_search(base: TrainConfig, settings: TuneSettings, log=print) -> SearchOutcome:
    """Run (or continue) the search; write its report; return the best trial's config and metrics."""
    from infra.secrets import SecretInConfigError, check_no_secrets
    from train.config import metric_for
    from train.plan import make_plan

    try:  # Tune saves every trial's config (params.json) before a trial validates it
        check_no_secrets({"base": base.to_dict()}, "tune base config")
    except SecretInConfigError as e:
        raise ConfigError(str(e)) from None
    validate_settings(settings)
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
    num_rows = plan.num_rows
    base_examples = (base.max_steps * base.batch_size if base.max_steps
                     else base.epochs * (num_rows // base.batch_size) * base.batch_size)
    max_t = settings.max_t or base_examples
    report_every = settings.report_every_examples or (base.checkpoint_every_steps * base.batch_size
                                                      if base.checkpoint_every_steps else max_t)
    storage = str(Path(local_path(settings.storage_path)).expanduser().resolve()) if not is_uri(settings.storage_path) \
        else settings.storage_path
    folder = f"{storage.rstrip('/')}/{settings.name}"
    _check_storage(storage)
    restoring = _check_restore(folder, base, settings, log)
    if settings.searcher == "grid":
        log(f"[tune] grid of {grid_size(settings)} trials")
    ray_for_training(base, log)  # a local Ray that can never run the base config's workers: refused here
    import ray

    namespace = f"structcse-tune-{settings.name}"
    pool_name = "eval-pool"
    from tune.scorers import score_untrained_encoder, start_pool, stop_pool

    started = time.time()
    # the handle is held until the search ends: a named actor that is not detached dies with its last handle
    pool = start_pool(dev_metric.name, base.dev_data, name=pool_name, namespace=namespace, size=settings.eval_actors,
                      num_cpus=settings.eval_actor_cpus, num_gpus=settings.eval_actor_gpus)
    resources = dict(TRIAL_DRIVER_RESOURCES)
    if ray.cluster_resources().get(DRIVER_PIN):
        resources[DRIVER_PIN] = 0.01
    private = {  # the same on a restore: the search's base config is checked equal by _check_restore
        "base": base.to_dict(),
        "pool": {"name": pool_name, "namespace": namespace},
        "storage_path": f"{folder}/trials",
        "report_every_examples": report_every,
        "max_examples": base_examples if base.max_steps else None,
        "max_failures": settings.trial_max_failures,
    }
    trainable = tune.with_resources(tune.with_parameters(trial_driver, private=private), resources)
    try:
        if restoring:
            log(f"[tune] continuing the interrupted search in {folder}")
            fs, path = arrow_filesystem(folder)  # the experiment through this project's storage client
            tuner = tune.Tuner.restore(path, trainable, resume_unfinished=True, resume_errored=True,
                                       storage_filesystem=fs)
        else:
            param_space = build_search_space(settings.search_space, grid=settings.searcher == "grid")
            tuner = build_tuner(trainable, param_space, settings, storage, base, max_t, metric)
        with _credentials_withheld_from_trials(storage, log), _scores_arrive_apart_from_training_reports():
            results = tuner.fit()
        # the trials' step 0, by the same pool: the report's baseline besides the base config's trial
        untrained = score_untrained_encoder(pool, base, plan.data_info, folder, metric, log=log)
    finally:
        with contextlib.suppress(Exception):  # the search's own error (if any) is the one to see
            log(f"[tune] evaluation pool: {ray.get(pool.stats.remote(), timeout=60)}")
        stop_pool(pool_name, namespace)
    _write_state(folder, base, settings, done=True)
    outcome = write_search_report(results, base, settings, metric, folder, private, log=log, max_t=max_t,
                                  untrained=untrained)
    log(f"[tune] {len(results)} trials in {time.time() - started:.0f} s; best {metric}="
        f"{outcome.best_metrics.get(metric, float('nan')):.4f} with {outcome.best_config}")
    log(f"[tune] {outcome.baseline_line}")
    return outcome


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


def _check_restore(folder: str, base: TrainConfig, settings: TuneSettings, log) -> bool:
    """True when ``folder`` (a local folder or a URI, read through ``infra.storage``) holds this same search,
    interrupted; a different search there is an error; a finished one is run again from scratch only after
    its folder is removed (by the user)."""
    state = _read_state(folder)
    if state is None:
        if _holds_tune_experiment(folder):
            raise ConfigError(f"{folder} holds a Tune experiment this command did not start; use another --name")
        _write_state(folder, base, settings, done=False)
        return False
    if state.get("fingerprint") != search_fingerprint(base, settings):
        raise ConfigError(f"{folder} holds a search with another base config or settings; use another --name "
                          "(or remove that folder to start over)")
    if state.get("done"):
        raise ConfigError(f"the search in {folder} has finished (its report: {folder}/search_report.md); use another "
                          "--name to run it again")
    return _holds_tune_experiment(folder)


def _tune_storage(storage: str) -> dict:
    """``RunConfig``'s storage arguments: the path inside this project's storage client (``infra.storage``)."""
    fs, path = arrow_filesystem(storage)
    return {"storage_path": path, "storage_filesystem": fs}


def _holds_tune_experiment(folder: str) -> bool:
    """Tune's own restore check (its ``tuner.pkl``), asked through this project's storage client."""
    fs, path = arrow_filesystem(folder)
    return tune.Tuner.can_restore(path, storage_filesystem=fs)


def _read_state(folder: str) -> dict | None:
    """The search's state file in ``folder`` (local or URI), or None when there is none."""
    from infra.storage import filesystem

    fs, path = filesystem(f"{folder.rstrip('/')}/{STATE_FILE}")
    try:
        text = fs.cat_file(path)
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise ConfigError(f"{folder}/{STATE_FILE} is not JSON; remove that folder to start over") from None


def _write_state(folder: str, base: TrainConfig, settings: TuneSettings, done: bool) -> None:
    """The search's fingerprint and whether it finished, written whole (a rename locally, one PUT in a bucket)."""
    from infra.publish import write_text_atomic

    write_text_atomic(f"{folder.rstrip('/')}/{STATE_FILE}", json.dumps(
        {"fingerprint": search_fingerprint(base, settings), "done": done, "name": settings.name}, indent=2))
