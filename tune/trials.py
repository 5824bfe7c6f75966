"""One trial's training config: the search's base config with the trial's sampled values; what the search sets
for every trial (so a sampled value of it is refused, not silently replaced); a trial's budget in examples."""

from __future__ import annotations

from train.config import ConfigError, TrainConfig


def resolved_trial_config(config: dict, private: dict, run_name: str) -> TrainConfig:
    """The training config of one trial (``config``: Tune's, the sampled values; ``private``: what every
    trial of the search shares, given through ``tune.with_parameters`` so that Tune's status lines show
    only the sampled values): the base with the trial's values, reporting every
    ``report_every_examples`` examples and training on at most ``max_examples`` examples in all,
    whatever its batch size."""
    searched_pooling = {"base_pooling": False} if "pooling" in config else {}  # a searched pooling is used as sampled
    cfg = TrainConfig.from_dict({**private["base"], **config, **searched_pooling, "run_name": run_name,
                                 "storage_path": private["storage_path"]}, source="tune trial")
    cfg.checkpoint_every_steps = max(1, private["report_every_examples"] // cfg.batch_size)
    if private.get("max_examples"):
        cfg.max_steps = max(1, private["max_examples"] // cfg.batch_size)
    if private.get("max_failures") is not None:
        cfg.max_failures = private["max_failures"]
    return cfg.validate()


def keys_set_for_every_trial(base: TrainConfig, trial_max_failures: int | None) -> dict[str, str]:
    """The training config keys :func:`resolved_trial_config` sets itself, each with what sets it: a searched
    value of one of them would be reported as sampled while the trial trained with another."""
    keys = {"run_name": "each trial's Train run is named train-<trial id>",
            "storage_path": "each trial's Train run is under the search's folder (trials/)",
            "checkpoint_every_steps": "each trial checkpoints every report_every_examples examples (the tune "
                                      "config's report_every_examples)"}
    if base.max_steps:
        keys["max_steps"] = (f"each trial trains on the base config's {base.max_steps} steps x {base.batch_size} "
                             "examples, whatever its batch size (set the budget with the base config's max_steps)")
    if trial_max_failures is not None:
        keys["max_failures"] = "the tune config's trial_max_failures"
    return keys


def check_searched_keys(base: TrainConfig, search_space: dict, trial_max_failures: int | None) -> None:
    """A searched key the trials would not train with is refused, naming it."""
    set_for_all = keys_set_for_every_trial(base, trial_max_failures)
    for key in search_space:
        if key in set_for_all:
            raise ConfigError(f"search space: {key!r} cannot be searched: {set_for_all[key]}; every trial would "
                              f"train with that value, not the sampled one")
    if "base_pooling" in search_space and "pooling" in search_space:
        raise ConfigError("search space: 'base_pooling' cannot be searched with 'pooling': a searched pooling is "
                          "used as sampled (base_pooling false)")


def trained_examples(cfg: TrainConfig, num_rows: int) -> int:
    """The examples a run of ``cfg`` trains on in all, over ``num_rows`` rows: ``max_steps`` or its epochs of
    whole batches (``train.feeds``: each worker's share of the rows in batches of its share of the batch)."""
    world = max(cfg.max_workers, 1)
    per_epoch = num_rows // cfg.batch_size if cfg.elastic else (num_rows // world) // max(1, cfg.batch_size // world)
    steps = cfg.epochs * per_epoch
    if cfg.max_steps:
        steps = min(steps, cfg.max_steps)
    return steps * cfg.batch_size


def base_values(base: TrainConfig, settings) -> dict:
    """The base config's own values of the searched keys (``settings.search_space``)."""
    return {k: getattr(base, k) for k in settings.search_space}
