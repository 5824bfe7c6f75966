"""Tune's dev scorers: a pool of Ray actors that score every trial's checkpoints with their method's dev metric
while training goes on.

Pieces:

* :class:`DevScorer` — one Ray actor holding the dev data (read once, by ``score.dev_metrics``) that
  scores a checkpoint's ``model/`` folder; its CPU/GPU share is the pool's setting (fractional GPUs
  on a GPU cluster, so several scorers share one).
* :class:`EvalPool` — a named async actor (no resources) in front of the scorers, one per run of a search
  (:func:`search_pool_name`; a live pool's name is never reused): its own queue hands each request to a
  free scorer; a request past its ``timeout_s`` or cancelled is dropped, or its scorer stopped and
  replaced; when a scorer dies it starts a replacement, which reads the dev data again, and scores the
  pending checkpoint on it (``max_attempts`` tries in all).
* :class:`PoolValidation` — the ``fn`` of Ray Train's asynchronous validation
  (``ray.train.v2.api.validation_config.ValidationConfig``): Ray Train calls it in a task of its own
  for every checkpoint reported with ``validation=...``, the score is merged into that checkpoint's
  metrics (checkpoint selection, ``Result.best_checkpoints``), and, under Tune, it is also put on the
  trial's result queue tagged with the step and examples seen it belongs to, so the scheduler sees it.
  A score not given in time is asked again; a checkpoint left unscored fails its trial
  (:func:`fit_failing_on_unscored`, around the trial's training run).

::

    pool = start_pool("sts_spearman", "data/stsb", name="dev-pool", namespace="tune-x", size=2)
    ray.get(pool.score.remote(checkpoint, timeout_s=600))   # {"dev_spearman": 0.81, "scorer": 1, ...}
    stop_pool("dev-pool", "tune-x")
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path

from infra.cache import as_local

from infra.storage import is_uri

log = logging.getLogger(__name__)
RESULT_KEYS = ("scorer", "score_started_at", "score_finished_at", "score_s")


class DevScorer:
    """One scoring actor: a dev set read once; ``score`` scores a checkpoint with its method's dev metric."""

    def __init__(self, metric_name: str, dev_data: str, device: str | None = None):
        from score.dev_metrics import DEV_METRICS

        self.metric = DEV_METRICS[metric_name]
        self.device = device
        self.data = self.metric.read(as_local(dev_data, "data"))
        self.scored = 0
        import score.model  # noqa: F401 - transformers' import (seconds) is paid here, not by the first score
        from infra.logs import quiet_worker

        quiet_worker()

    def ready(self) -> int:
        return os.getpid()

    def score(self, checkpoint) -> dict:
        """``{<metric key>: value, score_started_at, score_finished_at, score_s}`` of ``checkpoint``'s
        ``model/`` (a ``ray.train.Checkpoint``, local or remote, or a local folder path)."""
        from train.saved_models import score_model_dir

        started = time.time()
        if isinstance(checkpoint, (str, Path)):
            value = score_model_dir(self.metric, Path(checkpoint) / "model", self.data, self.device)
        else:
            with checkpoint.as_directory() as folder:
                value = score_model_dir(self.metric, Path(folder) / "model", self.data, self.device)
        self.scored += 1
        finished = time.time()
        return {self.metric.key: value, "score_started_at": started, "score_finished_at": finished,
                "score_s": finished - started}


class ScoreTimeout(TimeoutError):
    """No score within the request's ``timeout_s``: the request was dropped from the pool's queue, or the scorer
    working on it was stopped (and replaced)."""


class EvalPool:
    """``size`` :class:`DevScorer` actors behind the pool's own queue: a request goes to a scorer only when that
    scorer is free, so a request given up on (its ``timeout_s`` passed, or cancelled by ``ray.cancel``) never
    waits in a scorer's queue ahead of newer ones: one still queued is dropped; the scorer working on one is
    stopped and replaced (a hung read, a score far too slow), and the replacement takes requests once it has
    read the dev data. A scorer that dies is replaced and the request scored again (``max_attempts`` in all)."""

    def __init__(self, metric_name: str, dev_data: str, size: int, scorer_options: dict, max_attempts: int = 3):
        self.args = (metric_name, dev_data)
        self.scorer_options = scorer_options
        self.max_attempts = max_attempts
        self.scorers = [self._start() for _ in range(size)]
        self.busy = [0] * size
        self.scored = [0] * size
        self.replaced = 0
        self.timed_out = 0  # requests past their timeout_s: dropped from the queue or their scorer stopped
        self.cancelled = 0  # requests cancelled by their caller (ray.cancel) before a score came
        self.retried = 0  # requests that were a caller's second or later attempt at one checkpoint
        self.unscored: list[dict] = []  # checkpoints a caller gave up on after its attempts (PoolValidation)
        self._released = None  # an asyncio.Event set when a scorer becomes free, made in the actor's event loop

    def _start(self):
        import ray

        return ray.remote(DevScorer).options(**self.scorer_options).remote(*self.args)

    def _release(self, i: int) -> None:
        import asyncio

        self.busy[i] = 0
        self._released = self._released or asyncio.Event()
        self._released.set()

    async def _acquire(self, deadline: float | None) -> int:
        """A free scorer's index, marked busy; ``asyncio.TimeoutError`` when none is free by ``deadline``."""
        import asyncio

        self._released = self._released or asyncio.Event()
        while True:
            free = [i for i, busy in enumerate(self.busy) if not busy]
            if free:
                self.busy[free[0]] = 1
                return free[0]
            self._released.clear()
            await asyncio.wait_for(self._released.wait(), _left(deadline))

    async def ready(self) -> list[int]:
        return [await s.ready.remote() for s in self.scorers]

    async def _ready_then_release(self, i: int, scorer) -> None:
        try:
            await scorer.ready.remote()
        except Exception:  # noqa: BLE001 - a replacement that died starting: the next request replaces it again
            pass
        self._release(i)

    def _replace(self, i: int, kill: bool) -> None:
        """Scorer ``i`` out (killed when ``kill``), a new one in; it takes requests once it has read the data."""
        import asyncio

        import ray

        if kill:
            ray.kill(self.scorers[i])
        self.scorers[i] = self._start()
        self.replaced += 1
        self.busy[i] = 1
        asyncio.get_running_loop().create_task(self._ready_then_release(i, self.scorers[i]))

    async def score(self, checkpoint, timeout_s: float | None = None, attempt: int = 1) -> dict:
        """``checkpoint``'s score from the first free scorer; :class:`ScoreTimeout` when none comes within
        ``timeout_s`` of this call (waiting for a scorer included). ``attempt``: the caller's count of tries at
        this checkpoint (counted in :meth:`stats`)."""
        import asyncio
        import time

        from ray.exceptions import RayActorError

        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        if attempt > 1:
            self.retried += 1
        error = None
        for _ in range(self.max_attempts):
            try:
                i = await self._acquire(deadline)
            except asyncio.TimeoutError:
                self.timed_out += 1
                raise ScoreTimeout(f"no scorer was free for {checkpoint} within {timeout_s:g} s") from None
            except asyncio.CancelledError:
                self.cancelled += 1  # still queued: dropped, no scorer ever sees it
                raise
            scorer = self.scorers[i]
            try:
                result = await asyncio.wait_for(asyncio.wrap_future(scorer.score.remote(checkpoint).future()),
                                                _left(deadline))
            except RayActorError as e:  # the scorer died (node lost, OOM): replace it, score again
                error = e
                self._replace(i, kill=False)
                continue
            except asyncio.TimeoutError:
                self.timed_out += 1
                self._replace(i, kill=True)
                raise ScoreTimeout(f"no score of {checkpoint} within {timeout_s:g} s: its scorer was stopped and "
                                   "replaced") from None
            except asyncio.CancelledError:
                self.cancelled += 1
                self._replace(i, kill=True)
                raise
            self._release(i)
            self.scored[i] += 1
            return {**result, "scorer": i}
        raise RuntimeError(f"evaluation pool: {self.max_attempts} scorers died scoring {checkpoint}: {error}")

    def record_unscored(self, trial_id: str | None, step: int | None, error: str) -> None:
        """A caller gave up on a checkpoint (``PoolValidation`` after its attempts): its trial is failed by its
        driver (:func:`fit_failing_on_unscored`), and the search report counts it."""
        self.unscored.append({"trial_id": trial_id, "step": step, "error": error})

    def unscored_of(self, trial_id: str) -> list[dict]:
        return [u for u in self.unscored if u["trial_id"] == trial_id]

    def stats(self) -> dict:
        return {"size": len(self.scorers), "scored": list(self.scored), "busy": list(self.busy),
                "replaced": self.replaced, "timed_out": self.timed_out, "cancelled": self.cancelled,
                "retried": self.retried, "unscored": list(self.unscored)}

    def kill_scorer(self, i: int) -> None:
        """Kill scorer ``i`` (tests: a scorer that dies is replaced and its checkpoint rescored)."""
        import ray

        ray.kill(self.scorers[i])


def _left(deadline: float | None) -> float | None:
    import time

    return None if deadline is None else max(0.0, deadline - time.monotonic())


def default_pool_size_and_resources(resources: dict) -> tuple[int, dict]:
    """(pool size, ``ray.remote`` options of each scorer) from ``ray.cluster_resources()``.

    GPU cluster: one scorer per 4 GPUs (at least 1), each a quarter GPU and 1 CPU, so scoring never
    takes a training GPU whole. CPU cluster of 8+ CPUs: 2 scorers of 1 CPU. Smaller (a laptop): 1
    scorer that reserves no CPU, so it never keeps a Train worker or Ray Data's read tasks from their
    cores (it shares them, as any process would)."""
    gpus, cpus = resources.get("GPU", 0), resources.get("CPU", 0)
    if gpus:
        return max(1, int(gpus // 4)), {"num_cpus": 1, "num_gpus": 0.25}
    if cpus >= 8:
        return 2, {"num_cpus": 1}
    return 1, {"num_cpus": 0}


POOL_NAMESPACE = "structcse-tune"  # every search's pool is here, each under a name of its own


def search_pool_name(folder: str, run_id: str) -> str:
    """The evaluation pool of one run of the search in ``folder``: named by the folder (storage and name) and the
    run, so no two searches, nor two runs of one, ever share a pool."""
    import hashlib

    return f"eval-pool-{hashlib.sha256(folder.rstrip('/').encode()).hexdigest()[:12]}-{run_id}"


def start_search_pool(folder: str, metric_name: str, dev_data: str, settings) -> tuple:
    """(handle, name) of a new evaluation pool for one run of the search in ``folder`` (:func:`search_pool_name`),
    sized by ``settings`` (``eval_actors``, ``eval_actor_cpus``, ``eval_actor_gpus``). The handle is to be held
    until the search ends: a named actor that is not detached dies with its last handle."""
    import uuid

    name = search_pool_name(folder, uuid.uuid4().hex[:8])
    pool = start_pool(metric_name, dev_data, name=name, namespace=POOL_NAMESPACE, size=settings.eval_actors,
                      num_cpus=settings.eval_actor_cpus, num_gpus=settings.eval_actor_gpus)
    return pool, name


class PoolNameTaken(RuntimeError):
    """An evaluation pool of that name is alive: it belongs to another search."""


def start_pool(metric_name: str, dev_data: str | Path, name: str, namespace: str, size: int | None = None,
               num_cpus: float | None = None, num_gpus: float | None = None, timeout_s: float = 600):
    """Start the pool and its scorers; waits until every scorer has read the data. A live pool of the same
    name is never reused (it may hold another dev set): :class:`PoolNameTaken`.

    ``size``/``num_cpus``/``num_gpus`` default to :func:`default_pool_size_and_resources`. A local
    ``dev_data`` is made absolute (the actors run elsewhere); on a cluster it must be a path every
    node can read.
    """
    import ray

    local = Path(dev_data).expanduser()
    dev_data = str(local.resolve()) if not is_uri(dev_data) and local.exists() else str(dev_data)
    default_size, options = default_pool_size_and_resources(ray.cluster_resources())
    if num_cpus is not None:
        options["num_cpus"] = num_cpus
    if num_gpus is not None:
        options["num_gpus"] = num_gpus
    if not options.get("num_gpus"):
        options.pop("num_gpus", None)
    try:
        pool = ray.remote(EvalPool).options(
            name=name, namespace=namespace, num_cpus=0, max_concurrency=1000,
        ).remote(metric_name, dev_data, size or default_size, options)
    except ValueError as e:  # Ray's "the name is already taken"
        raise PoolNameTaken(f"an evaluation pool {namespace}/{name} is alive already (another search's): not "
                            f"reused ({e})") from None
    ray.get(pool.ready.remote(), timeout=timeout_s)  # reading a dev set takes seconds; a hang must not be silent
    return pool


def stop_pool(name: str, namespace: str, timeout_s: float = 60.0) -> bool:
    """Kill the pool and its scorers and wait until its name is free; False when there was none."""
    import ray

    try:
        pool = ray.get_actor(name, namespace=namespace)
    except ValueError:
        return False
    ray.kill(pool)  # its scorers are owned by it and die with it
    # ray.kill returns before the actor is gone; until then its name still resolves
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name, namespace=namespace)
        except ValueError:
            return True
        time.sleep(0.1)
    raise TimeoutError(f"the evaluation pool {namespace}/{name} was killed but still had its name after {timeout_s:.0f} s")


# a pool that answers nothing at all (its actor stalled): the caller's own bound, past the pool's timeout_s
CALLER_SLACK_S = 30.0


class PoolValidation:
    """Ray Train's validation ``fn``: score a reported checkpoint on the pool, ``attempts`` tries of ``timeout_s``.

    A try the pool does not answer in time is given up on: the pool drops or stops it (its own ``timeout_s``), and
    the request is cancelled (``ray.cancel``) if even the pool did not answer. After ``attempts`` tries the
    checkpoint is recorded unscored at the pool, which fails its trial (:func:`fit_failing_on_unscored`), and
    the validation fails (Ray Train marks it ``VALIDATION_FAILED``).

    ``forward``: a ``ray.util.queue.Queue`` (Tune's per-trial result queue, the one
    ``TuneReportCallback`` uses) that also gets the score, tagged with ``step`` and ``examples_seen``
    (the reporting step's, passed by the training loop as ``ValidationTaskConfig.fn_kwargs``).
    """

    def __init__(self, pool_name: str, namespace: str, timeout_s: float, forward=None, trial_id: str | None = None,
                 attempts: int = 1):
        self.pool_name, self.namespace, self.timeout_s, self.forward = pool_name, namespace, timeout_s, forward
        self.trial_id, self.attempts = trial_id, attempts

    def task_timeout_s(self) -> float:
        """A bound on one call of this validation, every try included (Ray Train's ``ValidationTaskConfig``)."""
        return self.attempts * (self.timeout_s + CALLER_SLACK_S) + 60

    def __call__(self, checkpoint, step: int | None = None, examples_seen: int | None = None) -> dict:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        pool = ray.get_actor(self.pool_name, namespace=self.namespace)
        where = getattr(checkpoint, "path", checkpoint)
        errors = []
        for attempt in range(1, self.attempts + 1):
            request = pool.score.remote(checkpoint, timeout_s=self.timeout_s, attempt=attempt)
            try:
                result = ray.get(request, timeout=self.timeout_s + CALLER_SLACK_S)
                break
            except GetTimeoutError:
                ray.cancel(request)
                errors.append(f"the pool did not answer within {self.timeout_s + CALLER_SLACK_S:g} s")
            except RayActorError:
                raise RuntimeError(f"evaluation pool {self.pool_name!r} is gone: checkpoint {where} was not "
                                   "scored") from None
            except RayTaskError as e:
                errors.append(str(e.cause) if getattr(e, "cause", None) is not None else str(e).splitlines()[-1])
        else:
            error = (f"checkpoint {where} (step {step}) was not scored in {self.attempts} attempt(s) of "
                     f"{self.timeout_s:g} s (validation_timeout_s): {errors[-1]}")
            with contextlib.suppress(Exception):  # a pool gone by now fails the trial anyway
                ray.get(pool.record_unscored.remote(self.trial_id, step, error), timeout=CALLER_SLACK_S)
            raise TimeoutError(error)
        scores = {"validated_step": step, **result}
        if self.forward is not None:
            try:  # the queue holds one item; the trial's driver takes it within a second
                self.forward.put({**scores, "step": step, "examples_seen": examples_seen}, timeout=self.timeout_s)
            except Exception as e:  # noqa: BLE001 - the trial was stopped (its queue is gone): the score still counts
                log.warning(f"[eval-pool] score of step {step} not forwarded to Tune: {type(e).__name__}: {e}")
        return scores


class UnscoredCheckpoint(RuntimeError):
    """A checkpoint of this trial will never be scored: the trial fails."""


def fit_failing_on_unscored(fit, pool_name: str, namespace: str, trial_id: str, poll_s: float = 2.0):
    """``fit()`` (a trial's training run) in a thread of its own, its result returned, its error raised; while it
    runs, the pool is asked every ``poll_s`` whether a checkpoint of ``trial_id`` was given up on
    (:class:`PoolValidation`): then :class:`UnscoredCheckpoint` is raised at once, which fails the trial (Tune
    stops its actor, and the training run with it). A pool that is gone fails the trial too."""
    import threading

    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    done, outcome = threading.Event(), {}

    def run():
        try:
            outcome["result"] = fit()
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            outcome["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, name=f"fit-{trial_id}", daemon=True).start()
    while not done.wait(poll_s):
        try:
            pool = ray.get_actor(pool_name, namespace=namespace)
            unscored = ray.get(pool.unscored_of.remote(trial_id), timeout=30)
        except GetTimeoutError:
            continue  # a busy pool answers later
        except (ValueError, RayActorError):
            raise UnscoredCheckpoint(f"the search's evaluation pool {namespace}/{pool_name} is gone: no checkpoint of "
                                     "this trial can be scored") from None
        if unscored:
            raise UnscoredCheckpoint(unscored[0]["error"])
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


# the untrained encoders' scoring lives in tune.untrained; these names are also read from here
from tune.state import content_fingerprint  # noqa: E402,F401
from tune.untrained import (  # noqa: E402,F401
    UNTRAINED_CONFIG_KEYS,
    UNTRAINED_DIR,
    UNTRAINED_SCORE,
    score_untrained_encoder,
    score_untrained_encoders,
    untrained_key,
    untrained_key_parts,
)
