"""Starting Ray on a laptop without walking into a dead cluster.

``ray.init()`` without an address connects to the cluster named in
``{ray temp dir}/ray_current_cluster``, the file the last ``ray start`` wrote.
A head that died without ``ray stop`` (a reboot, a killed process, an OOM)
leaves the file behind, and every later ``ray.init()`` retries that address
for minutes before failing. :func:`local_init_kwargs` probes the address first
(one TCP connect, ``PROBE_SECONDS``): a live head is joined as Ray would; a
dead one is named in a warning and a fresh local Ray starts instead.

Other Ray instances already running on this machine are named before a second one starts
(:func:`other_ray_instances`), with the ``RAY_ADDRESS`` that runs on one of them instead; never ``ray stop``,
which stops every Ray on the machine, another user's and another run's included. Whichever starts first,
this job's processes are told which Ray is theirs through the job's runtime environment
(:func:`job_runtime_env`), so Ray's state API in them never has to guess among several.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger(__name__)
PROBE_SECONDS = 2.0


def stale_ray_address(temp_dir: str | None = None) -> tuple[str, str] | None:
    """(address, file) when the ``ray start`` cluster file names an address nothing listens on; else None."""
    if os.environ.get("RAY_ADDRESS"):
        return None
    from infra.ray_compat import ray_address_file, read_ray_address

    try:
        address = read_ray_address(temp_dir)
    except OSError:
        return None
    if not address:
        return None
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=PROBE_SECONDS):
            return None
    except ValueError:  # not host:port: leave it to Ray's own message
        return None
    except OSError:
        return address, ray_address_file(temp_dir)


def starts_local_ray(init_kwargs: dict | None = None) -> bool:
    """Whether ``ray.init(**init_kwargs)`` from this process (after :func:`local_init_kwargs`) starts a
    new local Ray on this machine, rather than joining a cluster (``RAY_ADDRESS``, an address, or the live
    head of the last ``ray start``). Asks nothing of Ray but its cluster file (and one probe of it)."""
    init_kwargs = init_kwargs or {}
    if os.environ.get("RAY_ADDRESS"):
        return False
    if init_kwargs.get("address"):
        return init_kwargs["address"] == "local"
    from infra.ray_compat import read_ray_address

    try:
        address = read_ray_address(init_kwargs.get("_temp_dir"))
    except OSError:
        return True
    return not address or stale_ray_address(init_kwargs.get("_temp_dir")) is not None


def other_ray_instances() -> list[str]:
    """The GCS addresses of the Ray instances running on this machine (Ray's own way of resolving "the"
    local instance: its GCS processes), sorted; [] when ``RAY_ADDRESS`` names the one to use, or when they
    cannot be listed (the check must never stop a run)."""
    if os.environ.get("RAY_ADDRESS"):
        return []
    try:
        from infra.ray_compat import find_gcs_addresses

        return sorted(set(find_gcs_addresses()))
    except Exception:  # noqa: BLE001 - a Ray internal (infra.ray_compat) or psutil: never fatal
        return []


def other_instances_message(addresses: list[str]) -> str:
    """The warning for :func:`other_ray_instances`: what goes wrong beside them, and how to run on one."""
    first = addresses[0]
    return (f"[structcse] warning: {len(addresses)} other Ray instance(s) already run on this machine "
            f"({', '.join(addresses)}); this run starts its own local Ray beside them (its processes are told which "
            "Ray is theirs). Ray's command-line tools (`ray status`, `ray list`) then need an address. To run on one "
            f"of them instead, name it: RAY_ADDRESS={first} (or another address above) before the command. Those "
            "instances may be other users' or other runs': leave them running.")


def warn_if_other_ray_instances(init_kwargs: dict | None = None) -> list[str]:
    """Before ``ray.init(**init_kwargs)`` starts a local Ray: the other Ray instances on this machine, named
    in one warning (:func:`other_instances_message`); [] and nothing said when it joins a cluster instead
    (``RAY_ADDRESS``, an address, a live ``ray start`` head) or none runs."""
    if os.environ.get("RAY_ADDRESS") or not starts_local_ray(init_kwargs):
        return []
    running = other_ray_instances()
    if running:
        log.warning(other_instances_message(running))
    return running


DASHBOARD_PORT = 8265  # Ray's default: a local Ray's dashboard stays there when the port is free


def job_runtime_env(init_kwargs: dict) -> dict:
    """``init_kwargs`` with the variables every process of this job needs in its runtime environment
    (``ray.init(runtime_env={"env_vars": ...})``: Ray gives them to the job's workers and actors, on this
    machine or a cluster's; this process's own environment is left as it is). A variable the user set,
    here or in ``init_kwargs``'s runtime env, is never added (Ray refuses to merge two values of one):

    * which Ray the job's processes ask about themselves: Ray's state API (Ray Train's placement-group
      cleaner asks it whether the controller lives; Ray Data's hang detector) finds "the" Ray instance by
      listing the GCS processes on the machine when nothing names it, and fails ("Found multiple active Ray
      instances") once another Ray starts on the machine, after ours as well as before. A local Ray: its
      dashboard's address (``RAY_API_SERVER_ADDRESS``, which the state API reads first; the dashboard's port
      is chosen here, Ray's 8265 when free). A cluster joined by address (``RAY_ADDRESS``, ``address=``, or
      the live head of the last ``ray start``): that address (``RAY_ADDRESS``);
    * Ray Train's spot-preemption watcher off (``infra.ray_compat.preemption_watcher_off``): Ray Train
      starts one actor per worker group with ``max_restarts`` and constructor arguments in the object store,
      and Ray logs an ERROR for such an actor on every run; structcse recovers a lost worker by
      ``max_failures`` (docs/logging.md);
    * a quiet run joining a cluster: the variables that quiet it (``infra.logs.quiet_env_for_cluster``; a
      local Ray's processes inherit them from this process).
    """
    from infra.logs import quiet_env_for_cluster
    from infra.ray_compat import preemption_watcher_off

    kwargs = dict(init_kwargs)
    extra = dict(preemption_watcher_off())
    if starts_local_ray(kwargs):
        if kwargs.get("include_dashboard") is not False and not os.environ.get("RAY_API_SERVER_ADDRESS"):
            port = kwargs.get("dashboard_port") or (DASHBOARD_PORT if _port_is_free(DASHBOARD_PORT) else _free_port())
            host = kwargs.get("dashboard_host") or "127.0.0.1"
            kwargs["dashboard_port"] = port
            extra["RAY_API_SERVER_ADDRESS"] = \
                f"http://{'127.0.0.1' if host in ('0.0.0.0', 'localhost') else host}:{port}"
    else:
        address = joined_address(kwargs)
        if address:
            extra["RAY_ADDRESS"] = address
        extra.update({k: v for k, v in quiet_env_for_cluster().items() if k != "RAY_COLOR_PREFIX"})  # the driver's
    runtime_env = dict(kwargs.get("runtime_env") or {})
    env_vars = dict(runtime_env.get("env_vars") or {})
    added = {k: v for k, v in extra.items() if k not in env_vars}
    if added:
        kwargs["runtime_env"] = {**runtime_env, "env_vars": {**added, **env_vars}}
    return kwargs


def joined_address(init_kwargs: dict) -> str | None:
    """The GCS address (host:port) a ``ray.init(**init_kwargs)`` that joins a cluster connects to:
    ``RAY_ADDRESS``, ``address=``, or the last ``ray start``'s cluster file; None for ``auto``, a Ray Client
    address (``ray://``) or none."""
    address = os.environ.get("RAY_ADDRESS") or init_kwargs.get("address")
    if not address:
        from infra.ray_compat import read_ray_address

        try:
            address = read_ray_address(init_kwargs.get("_temp_dir"))
        except OSError:
            return None
    if not address or address in ("auto", "local") or "://" in address:
        return None
    return address


def local_init_kwargs(init_kwargs: dict) -> dict:
    """``init_kwargs`` for ``ray.init``: ``address="local"`` added when no address is given and the last
    ``ray start``'s cluster is gone, after a warning that names the file (instead of Ray's minutes of
    retries); a local Ray about to start beside other instances is warned about
    (:func:`warn_if_other_ray_instances`); a quiet run (``infra.logs``) without Ray's driver INFO lines
    (``logging_level``); the job's runtime environment (:func:`job_runtime_env`)."""
    if init_kwargs.get("address"):
        kwargs = init_kwargs
    else:
        stale = stale_ray_address(init_kwargs.get("_temp_dir"))
        kwargs = _stale_to_local(init_kwargs, stale) if stale else init_kwargs
    if os.environ.get("STRUCTCSE_QUIET") == "1" and "logging_level" not in kwargs:
        kwargs = {**kwargs, "logging_level": 30}  # WARNING: a quiet run (infra.logs) without Ray's driver INFO lines
    if starts_local_ray(kwargs):
        warn_if_other_ray_instances(kwargs)
    return job_runtime_env(kwargs)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _stale_to_local(init_kwargs: dict, stale: tuple[str, str]) -> dict:
    address, path = stale
    log.warning(
        f"[structcse] warning: {path} names a Ray cluster at {address} that no longer answers (a `ray start` head "
        f"that ended without `ray stop`): starting a local Ray instead. Deleting {path} removes the stale "
        "address (no Ray runs there); RAY_ADDRESS=HOST:PORT joins a cluster explicitly.")
    return {**init_kwargs, "address": "local"}


def ensure_ray(**init_kwargs) -> bool:
    """``ray.init(**init_kwargs)`` unless Ray is up: a laptop starts a local Ray (after
    ``local_init_kwargs``, which names other Ray instances on this machine); under
    `ray job submit` this connects to the cluster.
    Returns whether this call started (or joined) a local Ray: one machine, no autoscaler."""
    import ray

    if ray.is_initialized():
        return False
    from infra.logs import quiet_local_ray

    local = not os.environ.get("RAY_ADDRESS") and init_kwargs.get("address") in (None, "local")
    if local:
        quiet_local_ray()  # before the kwargs: a quiet run's ray.init(logging_level=...)
    # names other Ray instances before a second one starts; the job's runtime environment (job_runtime_env)
    init_kwargs = local_init_kwargs(init_kwargs)
    ray.init(**init_kwargs)
    return local
