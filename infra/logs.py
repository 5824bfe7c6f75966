"""What a run prints: the project's own lines
and the warnings that are true, set through each library's own switches (docs/logging.md).

Nothing here replaces ``sys.stdout`` / ``sys.stderr`` or matches text: a run is made quiet by levels
(loggers, ``ray.init(logging_level=...)``, Ray Train's ``LoggingConfig``), by the switches Ray and the other
libraries document (environment variables they read, Ray Data's ``DataContext``, Tune's ``verbose``), and
a warning that is false for this project is fixed where it comes from (``infra.ray_local``: the job's
runtime environment; ``train.reporting``: the reports Ray ranks checkpoints by).

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

The project's own lines (``[ingest] …``, ``[train] …``, ``[tune] …``) are ``logging`` records of a logger per
module (``log = logging.getLogger(__name__)``: ``ingest.pipeline``, ``train.loop``, …). ``project_lines()``
gives the project's package loggers (``PROJECT_PACKAGES``) their one handler, ``ProjectLines``: INFO and above,
the message alone, on the ``sys.stdout`` of the moment (pytest's capture, ``redirect_stdout``, a Ray worker's
stdout, which Ray forwards to the driver), not propagated to the root logger (whose level a quiet worker
raises, and whose handlers would print each line a second time). It runs when this module is imported (every
product package imports it), and again in the three places above (idempotent). A library user silences the
lines with ``logging.getLogger("ingest").setLevel(logging.WARNING)`` (docs/logging.md).
"""

from __future__ import annotations

import contextlib
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
# the packages whose loggers print the project's lines (ProjectLines): every module's logger is one's child
PROJECT_PACKAGES = ("ingest", "train", "eval", "score", "tune", "infra", "structcse")


class ProjectLines(logging.Handler):
    """The project's lines: each record's message alone (no level, no logger name), one line, written to
    ``sys.stdout`` as it is when the record is logged (not as it was when the handler was made: pytest's
    ``capsys``/``capfd``, ``contextlib.redirect_stdout``, a notebook's cell output and a Ray worker's
    redirected stdout all get the line), ``sys.stderr`` inside :func:`lines_on_stderr`."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.setFormatter(logging.Formatter("%(message)s"))
        self.stream_name = "stdout"  # the attribute of ``sys`` written to, looked up at each line
        self.structcse_lines = True  # how project_lines finds it again (also after this module is reloaded)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            stream = getattr(sys, self.stream_name)
            stream.write(line + "\n")
            stream.flush()
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - as logging.StreamHandler: a line not written is reported, not raised
            self.handleError(record)


_lines = ProjectLines()  # the one handler of every package logger in this process


def project_lines() -> None:
    """The project's package loggers (``PROJECT_PACKAGES``) print their lines: the one ``ProjectLines``
    handler on each, INFO unless a level was set on it already (a user's, which a later call leaves as it
    is), not propagated to the root logger. Idempotent: called when this module is imported and by
    ``setup_logging``, ``quiet_local_ray`` and ``quiet_worker``."""
    for name in PROJECT_PACKAGES:
        logger = logging.getLogger(name)
        if not any(getattr(h, "structcse_lines", False) for h in logger.handlers):
            logger.addHandler(_lines)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
        logger.propagate = False


@contextlib.contextmanager
def lines_on_stderr():
    """The project's lines on ``sys.stderr`` while the block runs: for a command whose stdout is its result
    (``python -m eval report`` prints the report and one JSON line there)."""
    project_lines()
    handlers = {id(h): h for name in PROJECT_PACKAGES for h in logging.getLogger(name).handlers
                if getattr(h, "structcse_lines", False)}.values()
    before = [(h, h.stream_name) for h in handlers]
    for h in handlers:
        h.stream_name = "stderr"
    try:
        yield
    finally:
        for h, stream_name in before:
            h.stream_name = stream_name


@contextlib.contextmanager
def lines_muted(*names: str):
    """The INFO lines of the loggers ``names`` (``"eval"``: every module of the package) not printed while the
    block runs; their warnings and errors still are. Each logger's level is restored after it."""
    loggers = [logging.getLogger(name) for name in names]
    before = [(logger, logger.level) for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for logger, level in before:
            logger.setLevel(level)


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
    project_lines()
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
    project_lines()
    if verbose_requested():
        return
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if not _isatty(sys.stdout) or os.environ.get(QUIET_ENV) == "1":
        setup_logging()


def quiet_worker() -> None:
    """A Ray Train worker or evaluation actor, first thing: transformers and sentence-transformers at
    WARNING (Ray Train sets the root logger to INFO on its workers, so each save printed "Saving model to
    ..."), Hugging Face bars off; in a quiet run also the root logger at WARNING and the loggers of
    ``_apply_quiet_in_process``. Nothing with STRUCTCSE_LOG=debug. The project's own loggers print their
    lines in every case (``project_lines``: their level is their own, not the root's)."""
    project_lines()
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


project_lines()  # on import: a library user (a notebook, the tests) gets the lines a command prints
