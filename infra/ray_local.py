"""Starting Ray on a laptop without walking into a dead cluster.

``ray.init()`` without an address connects to the cluster named in
``{ray temp dir}/ray_current_cluster``, the file the last ``ray start`` wrote.
A head that died without ``ray stop`` (a reboot, a killed process, an OOM)
leaves the file behind, and every later ``ray.init()`` retries that address
for minutes before failing. :func:`local_init_kwargs` probes the address first
(one TCP connect, ``PROBE_SECONDS``): a live head is joined as Ray would; a
dead one is named in a warning and a fresh local Ray starts instead.

Other Ray instances already running on this machine are named too, before a second one starts
(:func:`other_ray_instances`): with two, Ray's state API cannot tell which is "the" local one (Ray Train's
placement-group cleaner fails with ``ConnectionError: Found multiple active Ray instances``) and runs can
stall. The warning says how to run on one of them (``RAY_ADDRESS=<address>``); never ``ray stop``, which
stops every Ray on the machine, another user's and another run's included.
"""

from __future__ import annotations

import os
import socket
from functools import partial

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
            f"({', '.join(addresses)}); a second local Ray starts beside them. Ray's tools that find \"the\" local "
            "instance by itself (its state API, `ray status`, Ray Train's placement-group cleaner) fail with \"Found "
            "multiple active Ray instances\" (structcse points its own run's state API at the new instance). To run "
            f"on one of them instead, name it: RAY_ADDRESS={first} (or another address above) before the command. "
            "Those instances may be other users' or other runs': leave them running.")


def warn_if_other_ray_instances(log=None, init_kwargs: dict | None = None) -> list[str]:
    """Before ``ray.init(**init_kwargs)`` starts a local Ray: the other Ray instances on this machine, named
    in one warning (:func:`other_instances_message`); [] and nothing said when it joins a cluster instead
    (``RAY_ADDRESS``, an address, a live ``ray start`` head) or none runs."""
    if os.environ.get("RAY_ADDRESS") or not starts_local_ray(init_kwargs):
        return []
    running = other_ray_instances()
    if running:
        (log or partial(print, flush=True))(other_instances_message(running))
    return running


QUIET_SET_ENV = "STRUCTCSE_QUIET_SET"  # the variables infra.logs.setup_logging set (not the user's), by name


def _with_quiet_runtime_env(init_kwargs: dict) -> dict:
    """A quiet run (``infra.logs.setup_logging``) joining a cluster: the cluster's workers do not inherit
    this process's environment, so the variables that quiet them travel in the job's runtime environment.
    Only those setup_logging set (``STRUCTCSE_QUIET_SET``), never one the user or the job's runtime
    environment set: Ray refuses to merge two values of one variable."""
    if os.environ.get("STRUCTCSE_QUIET") != "1":
        return init_kwargs
    names = [n for n in os.environ.get(QUIET_SET_ENV, "").split(",") if n and n in os.environ]
    extra = {n: os.environ[n] for n in names if n != "RAY_COLOR_PREFIX"}  # the driver's own setting
    if not extra:
        return init_kwargs
    runtime_env = dict(init_kwargs.get("runtime_env") or {})
    env_vars = dict(runtime_env.get("env_vars") or {})
    runtime_env["env_vars"] = {**extra, **env_vars}
    return {**init_kwargs, "runtime_env": runtime_env}


def local_init_kwargs(init_kwargs: dict, log=None) -> dict:
    """``init_kwargs`` with ``address="local"`` added when no address is given and the last ``ray start``'s
    cluster is gone, after a warning that names the file (instead of Ray's minutes of retries); a local Ray
    about to start beside other instances is warned about (:func:`warn_if_other_ray_instances`) and its
    processes' state API pointed at it (:func:`_pin_state_api_locally`: sets ``RAY_API_SERVER_ADDRESS`` in
    this process's environment), and a run that joins a cluster takes its quiet settings
    (``infra.logs.setup_logging``) and, beside other instances, its ``RAY_ADDRESS`` along."""
    if init_kwargs.get("address"):
        kwargs = init_kwargs
    else:
        stale = stale_ray_address(init_kwargs.get("_temp_dir"))
        kwargs = _stale_to_local(init_kwargs, stale, log) if stale else init_kwargs
    if os.environ.get("STRUCTCSE_QUIET") == "1" and "logging_level" not in kwargs:
        kwargs = {**kwargs, "logging_level": 30}  # WARNING: a quiet run (infra.logs) without Ray's driver INFO lines
    if starts_local_ray(kwargs):
        if warn_if_other_ray_instances(log, kwargs):
            kwargs = _pin_state_api_locally(kwargs)
    else:
        kwargs = _with_quiet_runtime_env(_pin_state_api_of_joined(kwargs))
    return kwargs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pin_state_api_locally(init_kwargs: dict) -> dict:
    """A local Ray about to start beside other instances: Ray's state API in its processes (Ray Train's
    placement-group cleaner asks it whether the controller lives) finds "the" instance by listing GCS
    processes and fails with several. ``RAY_API_SERVER_ADDRESS``, which that API reads first, names this
    Ray's own dashboard, on a port chosen here; the processes this Ray starts inherit it."""
    if init_kwargs.get("include_dashboard") is False or os.environ.get("RAY_API_SERVER_ADDRESS"):
        return init_kwargs
    port = init_kwargs.get("dashboard_port") or _free_port()
    host = init_kwargs.get("dashboard_host") or "127.0.0.1"
    os.environ["RAY_API_SERVER_ADDRESS"] = f"http://{'127.0.0.1' if host in ('0.0.0.0', 'localhost') else host}:{port}"
    return {**init_kwargs, "dashboard_port": port}


def _pin_state_api_of_joined(init_kwargs: dict) -> dict:
    """Joining a cluster by ``RAY_ADDRESS`` on a machine where several Ray instances run: the job's
    processes get the same ``RAY_ADDRESS`` (they do not inherit this process's environment), so that Ray's
    state API in them (:func:`_pin_state_api_locally`) resolves the cluster they run in."""
    address = os.environ.get("RAY_ADDRESS", "")
    if not address or "://" in address or address == "auto":
        return init_kwargs
    try:
        from infra.ray_compat import find_gcs_addresses

        if len(set(find_gcs_addresses())) < 2:
            return init_kwargs
    except Exception:  # noqa: BLE001 - never fatal
        return init_kwargs
    runtime_env = dict(init_kwargs.get("runtime_env") or {})
    env_vars = dict(runtime_env.get("env_vars") or {})
    env_vars.setdefault("RAY_ADDRESS", address)
    return {**init_kwargs, "runtime_env": {**runtime_env, "env_vars": env_vars}}


def _stale_to_local(init_kwargs: dict, stale: tuple[str, str], log) -> dict:
    address, path = stale
    (log or partial(print, flush=True))(
        f"[structcse] warning: {path} names a Ray cluster at {address} that no longer answers (a `ray start` head "
        f"that ended without `ray stop`): starting a local Ray instead. Deleting {path} removes the stale "
        "address (no Ray runs there); RAY_ADDRESS=HOST:PORT joins a cluster explicitly.")
    return {**init_kwargs, "address": "local"}
