"""What a run prints (``train.logs`` re-exports this module for the training code): the project's own lines and the warnings that are true, not every library's progress
bars, load reports and per-step INFO lines.

Three places, because a local Ray's workers inherit the driver's environment but a cluster's do not:

* ``setup_logging(verbose)``: the top of every entry point's ``main()`` (``python -m ingest``, ``train``,
  ``eval``, ``tune``, ``ingest.pairs``/``dsbats``/``aspects``, ``structcse``). When stdout is not a
  terminal (a log file, CI, ``ray job submit``'s log) and neither ``--verbose`` nor
  ``STRUCTCSE_LOG=debug`` asks for everything, the run is *quiet* (``STRUCTCSE_QUIET=1``, inherited by
  a local Ray's processes):

  - ``RAY_DATA_LOG_LEVEL=WARNING`` (and the ``ray.data`` logger, if already imported): no Ray Data
    execution lines (``streaming_executor ... execution finished``, ``logging_progress.py``'s operator
    lines), in the driver and in Ray Data's actors (the SplitCoordinator that feeds Ray Train);
  - the driver's ``ray`` logger at WARNING (``ray.init(logging_level=...)``, added by
    ``infra.ray_local.local_init_kwargs``): no "Started a local Ray instance" INFO line;
  - ``RAY_COLOR_PREFIX=0``: Ray forwards worker lines as ``(RayTrainWorker pid=…)`` without colour codes;
    sys.stdout / sys.stderr strip any other ANSI sequence (a library's colours, a bar's cursor moves) and
    drop lines that are not true of the run (``_DROPPED_LINES``: the raylet's "N worker processes have
    been started" heuristic, the GCS failing to kill an actor that already exited, Ray Data's ListFiles
    completion-signaler traceback of a finished listing);
  - ``TRANSFORMERS_VERBOSITY=error``, ``HF_HUB_DISABLE_PROGRESS_BARS=1``, ``TQDM_DISABLE=1`` (no bars:
    each redraw was a line; no load report of a pooler the encoder does not use: transformers logs it as
    a warning). Ray Data's own bars stay on: outside a terminal it logs progress at INFO instead of drawing
    (hidden by the level above), where ``RAY_DATA_DISABLE_PROGRESS_BARS=1`` would print a warning saying
    the bars are off in every process that runs a dataset; ``RAY_TQDM=0``: Ray Data's actors (the
    SplitCoordinator) log progress the same way instead of sending Ray's distributed tqdm bars, which the
    driver draws whatever its stdout;
  - Ray Train's INFO lines ("Reporting training result …", "Checkpoint successfully created …"): off on
    the controller (``train_logging_config()``: RunConfig's ``LoggingConfig(log_level="WARNING")``) and
    on the workers (``quiet_worker``);
  - Ray Data's "The Dataset job will hang unless more CPUs are freed" warning: dropped when the run keeps
    CPUs for Ray Data's tasks (``check_worker_cpus`` refuses a run that does not), as every structcse
    run does (the warning looks at the CPUs free at one instant, while the reserved ones are busy).

  Each variable is a ``setdefault``: one the user set wins. ``ray job submit``: the job's workers get the
  same variables through the job's runtime environment (``STRUCTCSE_QUIET_SET`` names them;
  ``infra.ray_local.local_init_kwargs`` adds them when it joins a cluster).
* ``quiet_local_ray()``: the driver, before it starts a local Ray (``train.ray_env.ensure_ray``); the same
  settings for a process whose ``main()`` is not one of the above (the tests, a notebook).
* ``quiet_worker()``: every Ray Train worker and evaluation actor, wherever it runs: transformers and
  sentence-transformers (Ray Train sets the root logger to INFO on its workers, so each save printed
  "Saving model to ..."), Hugging Face bars, and in a quiet run Ray Train's per-report INFO lines.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading

LOG_ENV = "STRUCTCSE_LOG"  # "debug": every library's lines, as without structcse's settings
QUIET_ENV = "STRUCTCSE_QUIET"  # "1": this run's output is not a terminal (set by setup_logging, inherited)
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# lines that say nothing true about a structcse run (each is explained where it is matched)
_DROPPED_LINES = (
    # the raylet's heuristic: a run's Train workers, SplitCoordinator and evaluation actors are expected
    re.compile(r"^\(raylet[^)]*\).*worker processes have been started on node"),
    # the GCS killing, at a run's end, an actor whose process has already exited
    re.compile(r"^\(pid=gcs_server\).*Failed to kill actor \w+, return status: Invalid: KillActor RPC failed"),
)
# Ray Data's ListFiles task: its thread pool's completion-signaler thread puts its end markers after the
# pool was interrupted (the listing was done) and dies with InterruptedError, a traceback of a finished
# task (ray/data/_internal/dynamic_work_queue.py): dropped, header to InterruptedError, in a quiet run
_DROPPED_TRACEBACK = re.compile(r"^(\([^)]*pid=\d+[^)]*\) )Exception in thread pool-\d+/completion-signaler:$")
_TRACEBACK_LINE = re.compile(r"^(Traceback \(most recent call last\):|  .*|InterruptedError)$")
QUIET_ENV_DEFAULTS = {
    "RAY_DATA_LOG_LEVEL": "WARNING",
    "RAY_COLOR_PREFIX": "0",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TQDM_DISABLE": "1",
    "RAY_TQDM": "0",
}
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
    calls other mains in its process); returns whether the run is quiet."""
    if verbose:
        os.environ[LOG_ENV] = "debug"  # inherited: a local Ray's workers print everything too
    if verbose_requested():
        os.environ[QUIET_ENV] = "0"
        return False
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # the load report of an unused pooler, always
    if os.environ.get(QUIET_ENV) != "1" and (os.environ.get(QUIET_ENV) == "0" or _isatty(sys.stdout)
                                             or sys.stdout is not sys.__stdout__):
        # a terminal; or a host that took stdout over (pytest's capture, a notebook, redirect_stdout) calling
        # main() in its own process: its environment, streams and loggers are left as they are
        _hf_quiet(bars=False)
        return False
    os.environ[QUIET_ENV] = "1"
    for name, value in QUIET_ENV_DEFAULTS.items():
        if name not in os.environ:
            os.environ[name] = _set_here[name] = value
    _set_here[QUIET_ENV] = "1"
    os.environ["STRUCTCSE_QUIET_SET"] = ",".join(sorted(_set_here))  # infra.ray_local: what a cluster's workers get
    _apply_quiet_in_process()
    cleaned = {}
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, CleanStream) and not _isatty(stream):
            cleaned[id(stream)] = CleanStream(stream)
            setattr(sys, name, cleaned[id(stream)])
    # handlers made before (Ray's own, at `import ray`) hold the raw stream: they write through the clean one
    loggers = [logging.getLogger()] + [logging.getLogger(n) for n in list(logging.Logger.manager.loggerDict)]
    for logger in loggers:
        for handler in getattr(logger, "handlers", ()):
            if isinstance(handler, logging.StreamHandler) and id(handler.stream) in cleaned:
                handler.setStream(cleaned[id(handler.stream)])
    return True


def train_logging_config():
    """Ray Train's ``LoggingConfig`` for a run's RunConfig: WARNING in a quiet run (the controller's
    per-report INFO lines off), else None (Ray's default, INFO)."""
    if not is_quiet():
        return None
    from ray.train import LoggingConfig

    return LoggingConfig(log_level="WARNING")


def quiet_local_ray() -> None:
    """Before this process starts a local Ray: when stdout is not a terminal, ``setup_logging``'s settings
    (its workers inherit them)."""
    if verbose_requested():
        return
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if not sys.stdout.isatty() or os.environ.get(QUIET_ENV) == "1":
        setup_logging()


def quiet_worker() -> None:
    """A Ray Train worker or evaluation actor, first thing: libraries' INFO lines and bars off (module
    docstring); in a quiet run also Ray Train's and Ray Data's INFO lines. Nothing with STRUCTCSE_LOG=debug."""
    if verbose_requested():
        return
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)
    _storage_quiet()
    _hf_quiet(bars=os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS", "1") == "1", imported_only=False)
    if is_quiet():
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


class _FalseHangWarning(logging.Filter):
    """Ray Data's "The Dataset job will hang unless more CPUs are freed up" looks at the CPUs free at one
    instant. A structcse run keeps CPUs for Ray Data's tasks on purpose (``train.ray_env.check_worker_cpus``
    refuses a run that leaves none; the Tune trial drivers and evaluation actors reserve no CPU), so when
    it fires here the reserved CPUs are busy with the job's own tasks and free up: the job does not hang."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "will hang unless more CPUs" not in record.getMessage()


class _ReportsWithoutScore(logging.Filter):
    """Ray's checkpoint manager logs an ERROR, "Result dict has no key: dev_spearman", for every training
    report of a trial: the dev score arrives apart from the training reports (``tune.search``'s evaluation
    pool), so those reports have none by design; the checkpoint is ranked when its score comes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Result dict has no key:")


class _RayInfoOff(logging.Filter):
    """Ray Train's per-report line "Reporting training result N ..." comes from a logger named after its
    source file (not under ``ray.train``): INFO records of Ray's own files are dropped on the worker's
    handlers; the project's lines (print, its loggers) pass."""

    def __init__(self):
        super().__init__()
        import ray

        self.ray_dir = os.path.dirname(ray.__file__) + os.sep

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not str(record.pathname).startswith(self.ray_dir)


def _storage_quiet() -> None:
    """The storage clients' INFO lines ("Found credentials in environment variables", per process)."""
    for name in ("botocore", "aiobotocore", "s3fs", "gcsfs", "fsspec", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _apply_quiet_in_process() -> None:
    """The quiet settings for loggers already configured in this process (modules imported before
    the variables were set; a Ray Train worker whose loggers Ray configured at its start)."""
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)  # "Load pretrained ..." at INFO
    _storage_quiet()
    for name in ("ray.data", "ray.train", "ray.tune"):
        if name == "ray.data" and "ray.data" not in sys.modules:
            continue
        logging.getLogger(name).setLevel(logging.WARNING)
    from infra.ray_compat import checkpoint_manager_logger

    scoreless = checkpoint_manager_logger()
    if not any(isinstance(f, _ReportsWithoutScore) for f in scoreless.filters):
        scoreless.addFilter(_ReportsWithoutScore())
    hang = logging.getLogger("ray.data.dataset")
    if not any(isinstance(f, _FalseHangWarning) for f in hang.filters):
        hang.addFilter(_FalseHangWarning())
    if "ray" in sys.modules:
        root = logging.getLogger()
        for handler in root.handlers:
            if not any(isinstance(f, _RayInfoOff) for f in handler.filters):
                handler.addFilter(_RayInfoOff())
    if "ray.data" in sys.modules:
        import ray.data

        # Ray Data's actors (the SplitCoordinator feeding Ray Train) draw Ray's distributed tqdm, which the
        # driver redraws as lines whatever its stdout; without it they log progress at INFO (hidden above).
        # The driver's DataContext travels with its datasets, so its default (RAY_TQDM, read at import) counts.
        ray.data.DataContext.get_current().use_ray_tqdm = False
    _hf_quiet(bars=True)


class CleanStream:
    """sys.stdout / sys.stderr of a quiet run: every line without ANSI escape sequences (Ray's coloured
    ``(RayTrainWorker pid=…)`` prefixes when ``RAY_COLOR_PREFIX`` is set otherwise, a library's colours),
    and without the lines in ``_DROPPED_LINES``. Whole lines are written; ``flush`` writes a partial one."""

    def __init__(self, stream):
        self._stream = stream
        self._pending = ""
        self._skipping: set[str] = set()  # worker prefixes inside a _DROPPED_TRACEBACK
        self._lock = threading.Lock()  # Ray's log thread prints workers' lines while the main thread prints

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            if "\n" in self._pending:
                *lines, self._pending = self._pending.split("\n")
                kept = [clean for clean in (ANSI.sub("", line).replace("\r", "") for line in lines)
                        if self._keep(clean)]
                if kept:
                    self._stream.write("\n".join(kept) + "\n")
        return len(text)

    def _keep(self, line: str) -> bool:
        if any(p.search(line) for p in _DROPPED_LINES):
            return False
        header = _DROPPED_TRACEBACK.match(line)
        if header:
            self._skipping.add(header.group(1))
            return False
        for prefix in [p for p in self._skipping if line.startswith(p)]:
            rest = line[len(prefix):]
            if _TRACEBACK_LINE.match(rest):
                if rest == "InterruptedError":
                    self._skipping.discard(prefix)
                return False
            self._skipping.discard(prefix)  # not that traceback after all: from here on, lines as they come
        return True

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self._stream.write(ANSI.sub("", self._pending))
                self._pending = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name):
        return getattr(self._stream, name)
