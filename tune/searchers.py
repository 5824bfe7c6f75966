"""The search algorithm and scheduler of a search, built for trials whose scores arrive apart from their
training reports.

* :class:`RunVariantGenerator` — ``random`` and ``grid``: Tune's ``BasicVariantGenerator`` with the seed; the
  number of trials at once is this run's (``max_concurrent_trials``), also when a search is continued (Tune
  restores the generator of the first run, with that run's value).
* :class:`BestScoreOptunaSearch` — ``optuna``: TPE, told each trial's best score when the trial ends (not its
  last result, which may be a training report without a score); results without the score are passed over.
  Behind :class:`RunConcurrencyLimiter` (this run's ``max_concurrent_trials`` too).
* :class:`BaseConfigExemptASHA` — ASHA on examples seen, except the base config's own trial, which trains to its
  full budget: the reference every trial is compared with is never cut short.
"""

from __future__ import annotations

import contextlib
import math

from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.basic_variant import BasicVariantGenerator
from ray.tune.search.optuna import OptunaSearch

from train.config import ConfigError


class _ThisRun:
    """The running command's ``max_concurrent_trials``, while a search algorithm saved by an earlier run of the
    search is read back (:func:`trials_at_once`)."""

    max_concurrent: int | None = None


@contextlib.contextmanager
def trials_at_once(max_concurrent: int):
    """Within the block, a :class:`RunVariantGenerator` or :class:`RunConcurrencyLimiter` read back from a
    search's first run (Tune's ``tuner.pkl``, then its saved searcher state) runs ``max_concurrent`` trials at
    once, this run's value, not the first run's."""
    _ThisRun.max_concurrent = max_concurrent
    try:
        yield
    finally:
        _ThisRun.max_concurrent = None


class _RunsOwnConcurrency:
    """``max_concurrent`` is the running command's: kept when a saved state is set, taken from
    :func:`trials_at_once` when the object itself is read back."""

    def __setstate__(self, state):
        self.__dict__.update(state)
        if _ThisRun.max_concurrent is not None:
            self.max_concurrent = _ThisRun.max_concurrent

    def set_state(self, state):
        run_value = self.max_concurrent
        super().set_state(state)
        self.max_concurrent = run_value


class RunVariantGenerator(_RunsOwnConcurrency, BasicVariantGenerator):
    """``BasicVariantGenerator`` whose ``max_concurrent`` is the running command's."""


class RunConcurrencyLimiter(_RunsOwnConcurrency, ConcurrencyLimiter):
    """``ConcurrencyLimiter`` whose ``max_concurrent`` is the running command's."""


class BestScoreOptunaSearch(OptunaSearch):
    """Optuna's TPE over trials whose score comes in results of its own: a result without the metric (a training
    report) is passed over, and a trial's best score, not its last result, is what Optuna is told at its end."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._best_scores: dict[str, float] = {}

    def on_trial_result(self, trial_id: str, result: dict):
        value = result.get(self.metric)
        if not isinstance(value, (int, float)) or math.isnan(value):
            return
        best = self._best_scores.get(trial_id)
        if best is None or (value > best if self.mode == "max" else value < best):
            self._best_scores[trial_id] = value
        super().on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False):
        best = self._best_scores.pop(trial_id, None)
        told = {k: v for k, v in (result or {}).items() if k != self.metric}
        if best is not None:
            told[self.metric] = best
        super().on_trial_complete(trial_id, told or None, error)


class BaseConfigExemptASHA(ASHAScheduler):
    """ASHA, except for trials whose searched values are the base config's (``base_point``): their scores count
    in the rungs, but they are never stopped before their budget."""

    def __init__(self, base_point: dict | None, **kwargs):
        super().__init__(**kwargs)
        self.base_point = base_point

    def is_base_config(self, trial) -> bool:
        config = trial.config or {}
        return self.base_point is not None and all(k in config and config[k] == v for k, v in self.base_point.items())

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        action = super().on_trial_result(tune_controller, trial, result)
        reached_max_t = result.get(self._time_attr, 0) >= self._max_t
        if action == TrialScheduler.STOP and not reached_max_t and self.is_base_config(trial):
            self._num_stopped -= 1
            return TrialScheduler.CONTINUE
        return action


def check_optuna(settings) -> None:
    """``searcher: optuna`` needs the optuna package and a space Optuna can sample (no grid)."""
    if settings.searcher != "optuna":
        return
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise ConfigError("searcher optuna needs the optuna package: pip install 'structcse[tune]'") from None
    grids = [k for k, spec in settings.search_space.items() if next(iter(spec)) == "grid"]
    if grids:
        raise ConfigError(f"searcher optuna samples its values: search space {grids[0]!r} is a grid; use choice")


def build_search_alg(settings, base_point: dict | None):
    """The searcher of ``settings`` (``base_point``: the base config's values, tried first, or None); sampled
    values are a function of ``settings.seed``."""
    points = [base_point] if base_point is not None else None
    if settings.searcher == "optuna":
        check_optuna(settings)
        import optuna.samplers

        return RunConcurrencyLimiter(
            BestScoreOptunaSearch(points_to_evaluate=points, sampler=optuna.samplers.TPESampler(seed=settings.seed)),
            max_concurrent=settings.max_concurrent_trials,
        )
    # what Tune builds when given no search_alg, plus the seed; Tune ignores max_concurrent_trials for a
    # search_alg like this one, so the generator holds it
    return RunVariantGenerator(max_concurrent=settings.max_concurrent_trials, random_state=settings.seed,
                               points_to_evaluate=points)


def build_scheduler(settings, max_t: int, base_point: dict | None):
    """ASHA on ``examples_seen`` up to ``max_t`` (the base config exempt), or FIFO."""
    if settings.scheduler != "asha":
        return FIFOScheduler()
    grace = settings.grace_period or max(1, max_t // settings.reduction_factor**2)
    return BaseConfigExemptASHA(base_point, time_attr="examples_seen", max_t=max_t, grace_period=grace,
                                reduction_factor=settings.reduction_factor)
