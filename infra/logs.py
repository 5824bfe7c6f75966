"""What a run prints: the project's own lines
and the warnings that are true, set through each library's own switches (docs/logging.md).

Nothing here replaces ``sys.stdout`` / ``sys.stderr`` or matches text: a run is made quiet by levels
(loggers, ``ray.init(logging_level=...)``, Ray Train's ``LoggingConfig``), by the switches Ray and the other
libraries document (environment variables they read, Ray Data's ``DataContext``, Tune's ``verbose``), and
a warning that is false for this project is fixed where it comes from (``infra.ray_local``: the job's
runtime environment; ``train.loop``: the reports Ray ranks checkpoints by).

Three places, because a local Ray's workers inherit the driver's environment but a cluster's do not:

* ``setup_logging(verbose)``: the top of every entry point's ``main()``. When stdout is not a terminal
  (a log file, CI, ``ray job submit``'s log) and neither ``--verbose`` nor ``STRUCTCSE_LOG=debug`` asks for
  everything, the run is *quiet* (``STRUCTCSE_QUIET=1``, inherited by a local Ray's processes): the
  variables of ``QUIET_ENV_DEFAULTS`` (each a default: one the user set wins) and the loggers of
  ``_apply_quiet_in_process``. A run that joins a cluster takes the variables along in its job's runtime
  environment (``STRUCTCSE_QUIET_SET`` names them; ``infra.ray_local.local_init_kwargs``).
* ``quiet_local_ray()``: the driver, before it starts a local Ray (``train.ray_env.ensure_ray``); the same
  for a process whose ``main()`` is not an entry point (the tests, a notebook).
* ``quiet_worker()``: every Ray Train worker and evaluation actor, first thing.
"""

from __future__ import annotations

import logging
import os
import sys

LOG_ENV = "STRUCTCSE_LOG"  # "debug": every library's lines, as without structcse's settings
QUIET_ENV = "STRUCTCSE_QUIET"  # "1": this run's output is not a terminal (set by setup_logging, inherited)
QUIET_SET_ENV = "STRUCTCSE_QUIET_SET"  # the variables setup_logging set (not the user's), by name
# A quiet run's variables, each one a library documents (docs/logging.md says what each does)
QUIET_ENV_DEFAULTS = {
    "RAY_COLOR_PREFIX": "0",  # Ray: worker lines as "(RayTrainWorker pid=…) …", without colour codes
    "RAY_DEDUP_LOGS": "0",  # Ray: every worker line as printed (dedup appends a coloured "[repeated Nx …]")
    "RAY_AIR_NEW_OUTPUT": "0",  # Tune: the output engine that prints nothing at verbose=0 (tune.search)
    "RAY_DATA_LOG_LEVEL": "WARNING",  # Ray Data: no execution/operator INFO lines, in its actors too
    "RAY_TQDM": "0",  # Ray Data: DataContext.use_ray_tqdm's default, in its actors (the SplitCoordinator)
    "TRANSFORMERS_VERBOSITY": "error",  # transformers: no load report of a pooler the encoder does not use
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # Hugging Face Hub: no download bars
    "TQDM_DISABLE": "1",  # tqdm: no bars (outside a terminal each redraw is a line)
}
# loggers at WARNING in a quiet run (their INFO lines are progress: "Load pretrained …", "Found credentials …")
QUIET_LOGGERS = ("sentence_transformers", "botocore", "aiobotocore", "s3fs", "gcsfs", "fsspec", "urllib3",
                 "ray.data", "ray.train", "ray.tune")
# loggers whose WARNING records are false for every structcse run: raised to ERROR (docs/logging.md). Ray
# Data's ``Dataset._execute`` warns "The Dataset job will hang unless more CPUs are freed up" when no CPU is
# free at one instant; a structcse run keeps CPUs for Ray Data's tasks on purpose (``train.ray_env.
# check_worker_cpus`` refuses one that does not; Tune's trial drivers and evaluation actors reserve none),
# so the CPUs it sees taken are the job's own, and they free up. The module's only other warning is the
# deprecation of a method structcse does not call.
FALSE_WARNING_LOGGERS = ("ray.data.dataset",)
_set_here: dict[str, str] = {}  # the variables setup_logging set (not the user's): what a cluster's workers get


def verbose_requested() -> bool:
    return os.environ.get(LOG_ENV, "").strip().lower() in ("debug", "verbose", "all")


def is_quiet() -> bool:
    return os.environ.get(QUIET_ENV) == "1" and not verbose_requested()


def add_verbose_flag(parser) -> None:
    """``--verbose`` on an entry point's parser (the same as ``STRUCTCSE_LOG=debug``)."""
    parser.add_argument("--verbose", action="store_true",
                        help="print Ray's and the libraries' own lines too (progress, execution INFO); "
                             "the same as STRUCTCSE_LOG=debug")


def setup_logging_from_argv(argv=None) -> bool:
    """``setup_logging`` for an entry point's ``main(argv)``, before its arguments are parsed (so that a
    module the parser imports is already quiet): ``--verbose`` anywhere in ``argv`` (``sys.argv[1:]`` when
    None; the parser declares the flag with ``add_verbose_flag``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    return setup_logging(verbose="--verbose" in argv[:argv.index("--")] if "--" in argv else "--verbose" in argv)


def setup_logging(verbose: bool = False) -> bool:
    """The top of an entry point's ``main()``: quiet when the process's own stdout is not a terminal
    (module docstring), everything with ``verbose`` or ``STRUCTCSE_LOG=debug``. Idempotent (the demo
    calls other mains in its process); returns whether the run is quiet. The streams are left as they are."""
    if verbose:
        os.environ[LOG_ENV] = "debug"  # inherited: a local Ray's workers print everything too
    if verbose_requested():
        os.environ[QUIET_ENV] = "0"
        return False
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # the load report of an unused pooler, always
    if os.environ.get(QUIET_ENV) != "1" and (os.environ.get(QUIET_ENV) == "0" or _isatty(sys.stdout)
                                             or sys.stdout is not sys.__stdout__):
        # a terminal; or a host that took stdout over (pytest's capture, a notebook, redirect_stdout) calling
        # main() in its own process: its environment and loggers are left as they are
        _hf_quiet(bars=False)
        return False
    os.environ[QUIET_ENV] = "1"
    for name, value in QUIET_ENV_DEFAULTS.items():
        if name not in os.environ:
            os.environ[name] = _set_here[name] = value
    _set_here[QUIET_ENV] = "1"
    os.environ[QUIET_SET_ENV] = ",".join(sorted(_set_here))  # infra.ray_local: what a cluster's workers get
    _apply_quiet_in_process()
    return True


def quiet_env_for_cluster() -> dict[str, str]:
    """The variables this process's ``setup_logging`` set (never one the user set: Ray refuses to merge two
    values of one variable), for the runtime environment of a job that joins a cluster, whose workers do
    not inherit this process's environment. {} outside a quiet run."""
    if not is_quiet():
        return {}
    names = [n for n in os.environ.get(QUIET_SET_ENV, "").split(",") if n and n in os.environ]
    return {n: os.environ[n] for n in names}


def train_logging_config():
    """Ray Train's ``LoggingConfig`` for a run's RunConfig: WARNING in a quiet run (the controller's and the
    workers' per-report INFO lines, "Reporting training result …", off), else None (Ray's default, INFO)."""
    if not is_quiet():
        return None
    from ray.train import LoggingConfig

    return LoggingConfig(log_level="WARNING")


def tune_verbosity() -> int | None:
    """Tune's ``RunConfig(verbose=...)``: 0 in a quiet run (no status tables, no "Configuration for
    experiment" box: with ``RAY_AIR_NEW_OUTPUT=0``, which the new output engine would print at every
    verbosity), else None (Tune's default)."""
    return 0 if is_quiet() else None


def quiet_local_ray() -> None:
    """Before this process starts a local Ray: when stdout is not a terminal, ``setup_logging``'s settings
    (its workers inherit them)."""
    if verbose_requested():
        return
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if not _isatty(sys.stdout) or os.environ.get(QUIET_ENV) == "1":
        setup_logging()


def quiet_worker() -> None:
    """A Ray Train worker or evaluation actor, first thing: transformers and sentence-transformers at
    WARNING (Ray Train sets the root logger to INFO on its workers, so each save printed "Saving model to
    ..."), Hugging Face bars off; in a quiet run also the root logger at WARNING and the loggers of
    ``_apply_quiet_in_process``. Nothing with STRUCTCSE_LOG=debug."""
    if verbose_requested():
        return
    for name in QUIET_LOGGERS[:7]:  # the libraries' own (not Ray's): in every run
        logging.getLogger(name).setLevel(logging.WARNING)
    _hf_quiet(bars=os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS", "1") == "1", imported_only=False)
    if is_quiet():
        # Ray Train sets a worker's root logger to INFO, and LoggingConfig's level reaches only loggers named
        # ray.train.*: its per-report line ("Reporting training result …") comes from a logger named after
        # its source file, under the root. A quiet worker's root logger is at WARNING.
        logging.getLogger().setLevel(logging.WARNING)
        _apply_quiet_in_process()


# ------------------------------------------------------------------------------------------ internals


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _hf_quiet(bars: bool, imported_only: bool = True) -> None:
    """transformers: errors only (unless TRANSFORMERS_VERBOSITY says otherwise); its and the Hub's bars
    off with ``bars`` ("Loading weights: 100%|…" is a bar: a line per redraw outside a terminal). The
    variables are read when transformers is imported: a module imported before main() is set here."""
    if imported_only and "transformers" not in sys.modules:
        return
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    if os.environ.get("TRANSFORMERS_VERBOSITY", "error") == "error":
        hf_logging.set_verbosity_error()
    if bars:
        hf_logging.disable_progress_bar()
        try:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
        except ImportError:
            pass


def _apply_quiet_in_process() -> None:
    """A quiet run's loggers and Ray Data context in this process (modules imported before the variables
    were set; a Ray Train worker whose loggers Ray configured at its start): levels by logger name only."""
    for name in QUIET_LOGGERS:
        if name == "ray.data" and "ray.data" not in sys.modules:
            continue  # Ray Data configures its logger at import (RAY_DATA_LOG_LEVEL): not imported here
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in FALSE_WARNING_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    if "ray.data" in sys.modules:
        import ray.data

        # Ray's distributed tqdm (drawn by the driver whatever its stdout) off: outside a terminal Ray Data
        # logs progress at INFO instead, hidden by the level above. The driver's DataContext travels with its
        # datasets; RAY_TQDM (above) is the default of the ones Ray Data's actors make.
        ray.data.DataContext.get_current().use_ray_tqdm = False
    _hf_quiet(bars=True)
