"""What a run prints: ``infra.logs`` (the bottom layer, so that every stage's entry point can call
``setup_logging``); re-exported here for the training code and its workers."""

from infra.logs import (  # noqa: F401
    LOG_ENV,
    QUIET_ENV,
    add_verbose_flag,
    is_quiet,
    quiet_local_ray,
    quiet_worker,
    setup_logging,
    setup_logging_from_argv,
    train_logging_config,
    tune_verbosity,
    verbose_requested,
)
