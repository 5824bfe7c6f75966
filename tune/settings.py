"""What a search is asked to do (``configs/tune/*.yaml``): :class:`TuneSettings`, read and checked before Ray
starts; the search space Tune samples; what a search refuses given its base config (a searched key every trial
would override, an ASHA that could stop nothing)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray import tune

from train.config import ConfigError, TrainConfig, read_yaml_mapping

SEARCHERS = ("random", "grid", "optuna")
SCHEDULERS = ("asha", "fifo")

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
    # a score not given within the training config's validation_timeout_s is cancelled and asked again, up to
    # this many times in all; then the trial fails (tune.scorers.PoolValidation)
    validation_attempts: int = 2
    name: str = "tune"
    storage_path: str = "runs"
    seed: int = 0  # sampled trial configs are a function of it


def load_tune_settings(path: str | Path | None, overrides: dict | None = None) -> TuneSettings:
    data = read_yaml_mapping(path, "tune config") if path else {}
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
    for key, choices in (("searcher", SEARCHERS), ("scheduler", SCHEDULERS)):
        if getattr(settings, key) not in choices:
            raise ConfigError(f"{where}: {key} {getattr(settings, key)!r} is not one of {list(choices)}")
    if settings.mode not in ("max", "min"):
        raise ConfigError(f"{where}: mode must be max or min")
    if settings.num_samples is None:
        settings.num_samples = 1 if settings.searcher == "grid" else 8
    for key in ("num_samples", "max_concurrent_trials", "reduction_factor", "validation_attempts"):
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


def check_settings_against_base(settings: TuneSettings, base: TrainConfig, max_t: int) -> None:
    """What a search refuses once its base config and budget (``max_t`` examples) are known, before anything
    is written: a searched key every trial would train without (``tune.trials.check_searched_keys``) and an
    ASHA whose first rung is at or past the end, which could stop no trial."""
    from tune.trials import check_searched_keys

    check_searched_keys(base, settings.search_space, settings.trial_max_failures)
    if settings.scheduler == "asha" and settings.grace_period is not None and settings.grace_period >= max_t:
        raise ConfigError(f"grace_period {settings.grace_period} >= max_t {max_t} examples: ASHA's first rung would "
                          "be at the end of every trial, so it could stop none; lower grace_period or use "
                          "scheduler fifo")


RESOURCE_KEYS = ("num_workers", "cpus_per_worker", "use_gpu")


def searched_values(settings: TuneSettings, key: str) -> list:
    """The values ``search_space[key]`` names (its choices, grid or bounds); [] when it is not searched."""
    spec = settings.search_space.get(key)
    if not isinstance(spec, dict):
        return []
    return [v for args in spec.values() for v in (args if isinstance(args, list) else [args])]


def check_searched_resources(base: TrainConfig, settings: TuneSettings) -> None:
    """A searched value of ``num_workers``, ``cpus_per_worker`` or ``use_gpu`` that a local Ray could never
    place (``train.ray_env``'s check, made with the largest value each sampler can draw) is refused before
    the search starts, naming the key and the value: its trials would otherwise wait forever."""
    import ray

    from train.ray_env import check_cluster_resources, check_resources_before_ray

    for key in RESOURCE_KEYS:
        values = [v for v in searched_values(settings, key) if isinstance(v, (bool, int, float))]
        if not values:
            continue
        largest = max(values, key=lambda v: float(v))
        try:
            variant = dataclasses.replace(base, **{key: largest})
            if ray.is_initialized():
                check_cluster_resources(variant, quiet=True)  # an autoscaler's wait is the base's to say
            else:
                check_resources_before_ray(variant)
        except ConfigError as e:
            raise ConfigError(f"search_space {key}: {largest!r} cannot run here: {e}") from None
