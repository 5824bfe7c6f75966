"""Ray Tune over a training config: ASHA on the dev score of an evaluation actor.

Each trial is a driver function that builds the method's ``TorchTrainer`` (the
recommended Train V2 + Tune pattern) and fits it; ``TuneReportCallback``
forwards rank 0's reports to Tune. Before each report the training loop asks
the evaluation actor (one Ray actor holding the dev set) to score the
checkpoint's model; that score (``dev_spearman``) is what ASHA compares.

Train runs are named ``train-<trial id>`` so a restored trial resumes its run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ray import tune

from eval.evaluator import start_evaluator, stop_evaluator
from train.config import ConfigError, TrainConfig
from train.run import build_trainer, ensure_ray

# A trial's driver only builds and waits on its TorchTrainer: it reserves no
# CPU (the Train workers and Ray Data's tasks need them), only a little memory,
# so a bundle exists for Tune to place.
TRIAL_DRIVER_RESOURCES = {"cpu": 0, "memory": 256 * 1024**2}

SAMPLERS = {
    "loguniform": lambda lo, hi: tune.loguniform(lo, hi),
    "uniform": lambda lo, hi: tune.uniform(lo, hi),
    "choice": lambda values: tune.choice(values),
    "grid": lambda values: tune.grid_search(values),
}


@dataclass
class TuneSettings:
    """What ``configs/tune.yaml`` holds."""

    search_space: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {
            "lr": {"loguniform": [1e-5, 1e-3]},
            "batch_size": {"choice": [32, 64, 128]},
            "temperature": {"loguniform": [0.02, 0.2]},
        }
    )
    num_samples: int = 8
    max_concurrent_trials: int = 2
    metric: str = "dev_spearman"
    mode: str = "max"
    grace_period: int = 1
    reduction_factor: int = 2
    max_t: int = 100
    dev_split: str = "dev"
    name: str = "tune"
    storage_path: str = "runs"
    seed: int = 0


def load_tune_settings(path: str | Path | None, overrides: dict | None = None) -> TuneSettings:
    data = yaml.safe_load(Path(path).read_text()) if path else {}
    data = {**(data or {}), **(overrides or {})}
    valid = {f.name for f in dataclasses.fields(TuneSettings)}
    unknown = sorted(set(data) - valid)
    if unknown:
        raise ConfigError(f"{path}: unknown tune key(s) {unknown}; valid keys: {sorted(valid)}")
    settings = TuneSettings(**data)
    from ingest.secrets import SecretInConfigError, check_no_secrets

    try:
        check_no_secrets(dataclasses.asdict(settings), f"{path or 'tune settings'}")
    except SecretInConfigError as e:
        raise ConfigError(str(e)) from None
    build_search_space(settings.search_space)  # fail here, not inside a trial
    return settings


def build_search_space(spec: dict[str, dict[str, Any]]) -> dict:
    valid = {f.name for f in dataclasses.fields(TrainConfig)}
    space = {}
    for key, sampler in spec.items():
        if key not in valid:
            raise ConfigError(f"search space: {key!r} is not a training config key")
        if not isinstance(sampler, dict) or len(sampler) != 1 or next(iter(sampler)) not in SAMPLERS:
            raise ConfigError(f"search space: {key!r} must be one of {sorted(SAMPLERS)} -> args, got {sampler!r}")
        kind, args = next(iter(sampler.items()))
        space[key] = SAMPLERS[kind](*args) if kind in ("loguniform", "uniform") else SAMPLERS[kind](args)
    return space


def trial_driver(config: dict) -> None:
    """One trial: the base training config with the trial's sampled values."""
    from ray.tune.integration.ray_train import TuneReportCallback

    sampled = {k: v for k, v in config.items() if k not in ("base", "evaluator", "storage_path")}
    cfg = TrainConfig.from_dict(
        {
            **config["base"],
            **sampled,
            "run_name": f"train-{tune.get_context().get_trial_id()}",
            "storage_path": config["storage_path"],
            "evaluator": config["evaluator"]["name"],
            "evaluator_namespace": config["evaluator"]["namespace"],
        },
        source="tune trial",
    ).validate()

    build_trainer(cfg, callbacks=[TuneReportCallback()]).fit()


def build_tuner(trainable, param_space: dict, settings: TuneSettings, storage: str):
    """The ``Tuner`` of a search: ASHA over ``settings``' rungs; the trials' values are
    sampled from ``settings.seed``, so the same seed runs the same trial configs."""
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.basic_variant import BasicVariantGenerator

    return tune.Tuner(
        trainable,
        param_space=param_space,
        tune_config=tune.TuneConfig(
            metric=settings.metric,
            mode=settings.mode,
            num_samples=settings.num_samples,
            # what Tune builds when given no search_alg (null: no limit), plus the seed; Tune ignores
            # max_concurrent_trials for a search_alg like this one, so the generator holds it
            search_alg=BasicVariantGenerator(max_concurrent=settings.max_concurrent_trials or 0,
                                             random_state=settings.seed),
            scheduler=ASHAScheduler(
                time_attr="training_iteration",
                max_t=settings.max_t,
                grace_period=settings.grace_period,
                reduction_factor=settings.reduction_factor,
            ),
        ),
        run_config=tune.RunConfig(name=settings.name, storage_path=storage),
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
    if held and "://" in storage:
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


def run_search(base: TrainConfig, settings: TuneSettings, dev_sts: str, log=print):
    """Run the search; returns ``(best_config, best_metrics, result_grid)``."""
    from ingest.secrets import SecretInConfigError, check_no_secrets

    try:  # Tune saves every trial's config (params.json) before a trial validates it
        check_no_secrets({"base": base.to_dict(), "dev_sts": dev_sts}, "tune base config")
    except SecretInConfigError as e:
        raise ConfigError(str(e)) from None
    ensure_ray(log)
    storage = str(Path(settings.storage_path).resolve()) if "://" not in settings.storage_path else settings.storage_path
    namespace = f"structcse-tune-{settings.name}"
    evaluator_name = "sts-evaluator"
    start_evaluator(dev_sts, settings.dev_split, name=evaluator_name, namespace=namespace)
    started = time.time()
    try:
        tuner = build_tuner(
            tune.with_resources(trial_driver, TRIAL_DRIVER_RESOURCES),
            {
                **build_search_space(settings.search_space),
                "base": base.to_dict(),
                "evaluator": {"name": evaluator_name, "namespace": namespace},
                "storage_path": f"{storage}/{settings.name}/trials",
            },
            settings,
            storage,
        )
        with _credentials_withheld_from_trials(storage, log):
            results = tuner.fit()
    finally:
        stop_evaluator(evaluator_name, namespace)
    best = results.get_best_result(metric=settings.metric, mode=settings.mode)
    best_config = {k: v for k, v in best.config.items() if k in settings.search_space}
    log(f"[tune] {len(results)} trials in {time.time() - started:.0f} s; "
        f"best {settings.metric}={best.metrics.get(settings.metric):.4f} with {best_config}")
    return best_config, best.metrics, results
