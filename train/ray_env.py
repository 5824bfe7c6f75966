"""The Ray a run trains on: started (a laptop) or joined (``ray job submit``, ``RAY_ADDRESS``), and the
host checks that keep a local run from stalling."""

from __future__ import annotations

import os
from functools import partial

from train.config import ConfigError, TrainConfig


def ensure_ray(log=None, **init_kwargs) -> bool:
    """``ray.init(**init_kwargs)`` unless Ray is up: a laptop starts a local Ray (after
    `warn_if_other_ray_instances`); under `ray job submit` this connects to the cluster.
    Returns whether this call started (or joined) a local Ray: one machine, no autoscaler."""
    import ray

    if ray.is_initialized():
        return False
    warn_if_other_ray_instances(log)
    from infra.ray_local import local_init_kwargs

    init_kwargs = local_init_kwargs(init_kwargs, log)
    local = not os.environ.get("RAY_ADDRESS") and init_kwargs.get("address") in (None, "local")
    if local:
        from train.logs import quiet_local_ray

        quiet_local_ray()
        _quiet_preemption_watcher()
    ray.init(**init_kwargs)
    return local


def ray_for_training(cfg: TrainConfig) -> None:
    """Ray up for a training run (``ensure_ray``); a local Ray started here must have room for the
    run's workers and Ray Data's reads (``check_worker_cpus``)."""
    if ensure_ray():
        import ray

        check_worker_cpus(cfg, ray.cluster_resources().get("CPU", 0.0))


def check_worker_cpus(cfg: TrainConfig, machine_cpus: float) -> None:
    """On one machine without an autoscaler, the workers must leave a CPU to Ray Data's read tasks,
    else the run waits for one forever: a ConfigError with the setting that fits."""
    if cfg.num_workers < 1:
        return
    per_worker = cfg.cpus_per_worker if cfg.cpus_per_worker is not None else 1.0
    if cfg.num_workers * per_worker > machine_cpus - 1:
        fits = (machine_cpus - 1) / cfg.num_workers
        fix = (f"--set cpus_per_worker={fits:g}" if fits > 0 else f"--num-workers {max(int(machine_cpus) - 1, 0)}")
        raise ConfigError(
            f"{cfg.num_workers} worker(s) x {per_worker:g} CPU take {cfg.num_workers * per_worker:g} of this machine's "
            f"{machine_cpus:g} CPUs, leaving Ray Data less than the 1 CPU its read tasks need (the run would wait "
            f"forever): use {fix}, fewer workers, or a cluster")


def _quiet_preemption_watcher() -> None:
    """Ray Train's spot-preemption watcher logs a red core_worker error on every run; a local Ray has no
    spot node to watch, so it is off there unless the user sets RAY_TRAIN_ENABLE_PREEMPTION_WATCHER."""
    os.environ.setdefault("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", "0")


def warn_if_other_ray_instances(log=None) -> list[str]:
    """Warn, before ``ray.init()`` starts a local Ray, when other Ray instances run on this
    machine and ``RAY_ADDRESS`` does not name one; returns their GCS addresses.

    Ray's state API resolves "the" local instance by listing GCS processes, and with two it
    fails ("Found multiple active Ray instances"). Ray Train's placement-group cleaner polls
    it, so its actors die; a trial Tune stops early then keeps its placement group, and the
    next trials wait for CPUs that never come (the demo beside a second instance stalled
    this way for 5+ minutes in its Tune step)."""
    if os.environ.get("RAY_ADDRESS"):
        return []
    try:
        from ray._private.services import find_gcs_addresses

        running = sorted(find_gcs_addresses())
    except Exception:  # a private helper: never let the check itself stop a run
        return []
    if running:
        message = (f"[structcse] warning: other Ray instance(s) run on this machine ({', '.join(running)}). A second "
                   "local Ray beside them breaks Ray's state API (Ray Train's placement-group cleaner dies) and "
                   "runs can stall: stop them (`ray stop`), or set RAY_ADDRESS to run on one of them.")
        (log or partial(print, flush=True))(message)
    return running
