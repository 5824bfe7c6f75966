"""The Ray a run trains on: started (a laptop) or joined (``ray job submit``, ``RAY_ADDRESS``), and the
host checks that keep a local run from stalling."""

from __future__ import annotations

import logging

from infra.ray_local import ensure_ray
from train.config import ConfigError, TrainConfig

log = logging.getLogger(__name__)


def ray_for_training(cfg: TrainConfig) -> None:
    """Ray up for a training run (``ensure_ray``); when this call brought it up, the run's workers are
    checked against the cluster (``check_cluster_resources``). A Ray the caller brought up (the demo, a
    Tune trial, the tests) is the caller's to check."""
    import ray

    from infra.ray_local import starts_local_ray

    if ray.is_initialized():
        return
    started_here = starts_local_ray()  # not a `ray start` head that ensure_ray joins: that one may autoscale
    ensure_ray()
    check_cluster_resources(cfg, started_here=started_here)


def check_resources_before_ray(cfg: TrainConfig, init_kwargs: dict | None = None) -> None:
    """When this process would start its own local Ray (``infra.ray_local.starts_local_ray``), the run's
    workers checked against the resources that Ray will have (``check_resources``), found without
    starting it (``infra.ray_compat.local_node_resources``): a run that could never start is refused in
    milliseconds, before its sets and model are read. A Ray already up, or a cluster to join, is
    checked once connected (``ray_for_training``)."""
    import ray

    from infra.ray_local import starts_local_ray

    init_kwargs = init_kwargs or {}
    if ray.is_initialized() or not starts_local_ray(init_kwargs):
        return
    from infra.ray_compat import local_node_resources

    check_resources(cfg, local_node_resources(init_kwargs.get("num_cpus"), init_kwargs.get("num_gpus")),
                    where="this machine")


def check_cluster_resources(cfg: TrainConfig, *, started_here: bool = False, quiet: bool = False) -> None:
    """The run's workers checked against the connected Ray's ``ray.cluster_resources()``
    (``check_resources``). A Ray this process started (``started_here``) is this machine, with no
    autoscaler; a joined cluster has one only if its autoscaler reports itself with a cluster config
    (``infra.ray_compat.cluster_has_autoscaler``), and there a shortage is waited for, not refused.
    ``quiet``: the wait and an autoscaler that does not answer are not said (a check of another run's)."""
    import ray

    from infra.ray_compat import RayInternalMissing, cluster_has_autoscaler

    try:
        autoscaled = not started_here and cluster_has_autoscaler()
    except RayInternalMissing:
        raise
    except Exception as e:  # the cluster did not answer: the run goes on, placed by Ray alone
        if not quiet:
            log.warning(f"[train] warning: cannot tell whether the cluster has an autoscaler "
                        f"({type(e).__name__}: {e}); its resources are not checked")
        return
    check_resources(cfg, ray.cluster_resources(), where="this machine" if started_here else "the cluster",
                    autoscaled=autoscaled, quiet=quiet)


def check_resources(cfg: TrainConfig, resources: dict, *, where: str = "this machine", autoscaled: bool = False,
                    quiet: bool = False) -> None:
    """A run whose workers a Ray without an autoscaler can never place waits for them forever: a
    one-line ConfigError before the run starts, saying what ``where`` has (``resources``: Ray's CPU and
    GPU counts), what the config asks and what to do. Refused: GPUs (``use_gpu``) beyond the GPUs there;
    more CPUs per worker than there are; an elastic minimum (``num_workers: [min, max]``) whose workers do not
    fit (Ray Train would wait for them, saying so only at INFO); workers that leave Ray Data no CPU
    (``check_worker_cpus``). Local mode (``num_workers`` 0) runs in the driver: only its GPU is checked, on
    this machine. With an autoscaler (``autoscaled``) the wait is the way to get nodes: one line says what is
    awaited (unless ``quiet``)."""
    cpus, gpus = float(resources.get("CPU", 0.0)), float(resources.get("GPU", 0.0))
    has = f"{where} has {cpus:g} CPUs and {gpus:g} GPUs"
    workers = cfg.min_workers  # an elastic run starts with min
    per_worker = cfg.cpus_per_worker if cfg.cpus_per_worker is not None else 1.0
    if workers < 1:
        if cfg.use_gpu and gpus < 1 and where == "this machine" and not autoscaled:
            raise ConfigError(f"use_gpu=true in local mode (num_workers=0) trains on this machine's GPU, and {has}: "
                              "use --set use_gpu=false, or a machine with a GPU")
        return
    short_gpus = cfg.use_gpu and workers > gpus
    short_cpus = workers * per_worker > cpus
    if autoscaled:
        short_gpus, short_cpus = cfg.use_gpu and cfg.max_workers > gpus, cfg.max_workers * per_worker > cpus
        workers = f"{cfg.min_workers}-{cfg.max_workers}" if cfg.elastic else workers
        if (short_gpus or short_cpus) and not quiet:
            asked = f"{per_worker:g} CPU" + (" + 1 GPU" if cfg.use_gpu else "")
            now = f"{gpus:g} GPUs" if short_gpus else f"{cpus:g} CPUs"
            log.info(f"[train] waiting for {workers} worker(s) x {asked}: the autoscaler adds nodes (the cluster has "
                     f"{now} now)")
        return
    wait = "no autoscaler adds any, so the run would wait forever"
    if short_gpus:
        raise ConfigError(f"use_gpu=true asks for {workers} worker(s) x 1 GPU, and {has} ({wait}): use --set "
                          "use_gpu=false, or a cluster with GPUs")
    if per_worker > cpus:
        fits = (cpus - 1) / workers
        fix = f"--set cpus_per_worker={fits:g}" if fits > 0 else "--num-workers 0"
        raise ConfigError(f"cpus_per_worker={per_worker:g} asks for more CPUs per worker than {has} ({wait}): use "
                          f"{fix}, or a cluster with more CPUs")
    if cfg.elastic and short_cpus:
        fits = int(cpus // per_worker)  # >= 1: more CPUs per worker than there are was refused above
        raise ConfigError(
            f"num_workers={cfg.min_workers}-{cfg.max_workers} (elastic) starts once its minimum of {cfg.min_workers} "
            f"worker(s) x {per_worker:g} CPU ({cfg.min_workers * per_worker:g} CPUs) can be placed, and {has} ({wait}): "
            f"use --num-workers {fits}-{cfg.max_workers}, a smaller cpus_per_worker, or a cluster with more CPUs")
    check_worker_cpus(cfg, cpus, where)


def check_worker_cpus(cfg: TrainConfig, machine_cpus: float, where: str = "this machine") -> None:
    """On one machine without an autoscaler, the workers must leave a CPU to Ray Data's read tasks,
    else the run waits for one forever: a ConfigError with the setting that fits. (An elastic run does not
    stream through Ray Data: its workers read the set themselves.)"""
    if cfg.elastic or cfg.num_workers < 1:
        return
    per_worker = cfg.cpus_per_worker if cfg.cpus_per_worker is not None else 1.0
    if cfg.num_workers * per_worker > machine_cpus - 1:
        fits = (machine_cpus - 1) / cfg.num_workers
        fix = (f"--set cpus_per_worker={fits:g}" if fits > 0 else f"--num-workers {max(int(machine_cpus) - 1, 0)}")
        raise ConfigError(
            f"{cfg.num_workers} worker(s) x {per_worker:g} CPU take {cfg.num_workers * per_worker:g} of {where}'s "
            f"{machine_cpus:g} CPUs, leaving Ray Data less than the 1 CPU its read tasks need (the run would wait "
            f"forever): use {fix}, fewer workers, or a cluster")
