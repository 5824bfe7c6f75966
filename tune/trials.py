"""One trial's training config: the search's base config with the trial's sampled values."""

from __future__ import annotations

from train.config import TrainConfig


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


def base_values(base: TrainConfig, settings) -> dict:
    """The base config's own values of the searched keys (``settings.search_space``)."""
    return {k: getattr(base, k) for k in settings.search_space}
