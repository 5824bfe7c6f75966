"""Starting Ray on a laptop without walking into a dead cluster.

``ray.init()`` without an address connects to the cluster named in
``{ray temp dir}/ray_current_cluster``, the file the last ``ray start`` wrote.
A head that died without ``ray stop`` (a reboot, a killed process, an OOM)
leaves the file behind, and every later ``ray.init()`` retries that address
for minutes before failing. :func:`local_init_kwargs` probes the address first
(one TCP connect, ``PROBE_SECONDS``): a live head is joined as Ray would; a
dead one is named in a warning and a fresh local Ray starts instead.
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


def local_init_kwargs(init_kwargs: dict, log=None) -> dict:
    """``init_kwargs`` with ``address="local"`` added when no address is given and the last ``ray start``'s
    cluster is gone, after a warning that names the file (instead of Ray's minutes of retries)."""
    if init_kwargs.get("address"):
        return init_kwargs
    stale = stale_ray_address(init_kwargs.get("_temp_dir"))
    if not stale:
        return init_kwargs
    address, path = stale
    (log or partial(print, flush=True))(
        f"[structcse] warning: {path} names a Ray cluster at {address} that no longer answers (a `ray start` head "
        "that ended without `ray stop`): starting a local Ray instead. `ray stop` (or deleting the file) removes "
        "the stale address; RAY_ADDRESS=HOST:PORT joins a cluster explicitly.")
    return {**init_kwargs, "address": "local"}
