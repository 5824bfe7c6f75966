"""Every Ray internal the project uses, in one place.

Ray's private modules (``ray._private``, ``ray.*._internal``), its undocumented helpers and the
environment variables only its own code documents change between minor versions without notice. The
project reaches them only through the small functions below, each saying what it is for and which
internal it uses; ``INTERNALS`` lists them all, and ``tests/test_ray_compat.py`` checks every one
against the installed Ray (and that no other module of the project names one). When an upgraded Ray
lacks one, the function that needs it raises :class:`RayInternalMissing` naming the internal, the Ray
versions the project is tested with (pyproject.toml pins them) and the feature that needs it.

Ray is imported inside the functions: ``import infra.ray_compat`` does not import Ray. This module
imports nothing of the project's other packages (``infra`` is the bottom layer).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
from dataclasses import dataclass

TESTED_RAY = ">=2.60,<2.61"  # pyproject.toml's pin: the Ray these internals are checked against


@dataclass(frozen=True)
class Internal:
    key: str  # what the functions below look it up by
    module: str
    attribute: str  # dotted inside the module: "Class.method"
    feature: str  # what of the project needs it
    env_var: str | None = None  # for a variable Ray reads: its name, which the attribute holds (or contains)

    @property
    def name(self) -> str:
        return f"{self.module}.{self.attribute}"


INTERNALS: tuple[Internal, ...] = (
    Internal("gcs_addresses", "ray._private.services", "find_gcs_addresses",
             "the warning about other Ray instances on this machine (infra.ray_local.warn_if_other_ray_instances)"),
    Internal("read_ray_address", "ray._private.utils", "read_ray_address",
             "finding the `ray start` cluster a plain ray.init() would join (infra.ray_local)"),
    Internal("ray_address_file", "ray._private.utils", "get_ray_address_file",
             "naming the stale `ray start` cluster file in its warning (infra.ray_local)"),
    Internal("local_resources", "ray._private.resource_and_label_spec", "ResourceAndLabelSpec",
             "the resource check before a local Ray starts (train.ray_env.check_resources_before_ray)"),
    Internal("autoscaler_is_v2", "ray.autoscaler.v2.utils", "is_autoscaler_v2",
             "telling a cluster with an autoscaler from one without (train.ray_env.check_cluster_resources)"),
    Internal("cluster_status", "ray.autoscaler.v2.sdk", "get_cluster_status",
             "telling a cluster with an autoscaler from one without (train.ray_env.check_cluster_resources)"),
    Internal("kv_get", "ray.experimental.internal_kv", "_internal_kv_get",
             "telling a cluster with an autoscaler from one without (train.ray_env.check_cluster_resources)"),
    Internal("autoscaling_status_key", "ray._private.ray_constants", "DEBUG_AUTOSCALING_STATUS",
             "telling a cluster with an autoscaler from one without (train.ray_env.check_cluster_resources)"),
    Internal("readonly_node_type", "ray.autoscaler._private.util", "format_readonly_node_type",
             "telling a cluster with an autoscaler from one without (train.ray_env.check_cluster_resources)"),
    Internal("train_session", "ray.train._internal.session", "get_session",
             "a Tune trial's scores joining its training reports (tune.search.trial_driver)"),
    Internal("inter_actor_queue", "ray.train._internal.session", "_TrainSession._get_or_create_inter_actor_queue",
             "a Tune trial's scores joining its training reports (tune.search.trial_driver)"),
    Internal("strict_metric_checking", "ray.tune.constants", "TUNE_ENV_VARS",
             "a Tune search whose training reports come without the metric (tune.search.run_search)",
             env_var="TUNE_DISABLE_STRICT_METRIC_CHECKING"),
    Internal("preemption_watcher", "ray.train.v2._internal.constants", "ENABLE_PREEMPTION_WATCHER_ENV_VAR",
             "Ray Train runs without its spot-preemption watcher (infra.ray_local.job_runtime_env)",
             env_var="RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"),
    Internal("worker_group_start_timeout", "ray.train.v2._internal.constants", "ENV_VARS_TO_PROPAGATE",
             "worker_start_timeout_s: how long an elastic run waits for lost workers (train.run.build_trainer)",
             env_var="RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"),
)


class RayInternalMissing(RuntimeError):
    """The installed Ray lacks an internal the project uses (a Ray outside the tested versions)."""

    def __init__(self, internal: Internal, detail: str = ""):
        self.internal = internal
        try:
            import ray

            installed = f"Ray {ray.__version__}"
        except Exception:  # noqa: BLE001 - the message must come out whatever is wrong with Ray
            installed = "the installed Ray"
        what = f"{internal.name}" + (f" (the variable {internal.env_var})" if internal.env_var else "")
        super().__init__(
            f"{installed} lacks {what}{detail}, a Ray internal structcse uses for {internal.feature}; structcse "
            f"is tested with ray{TESTED_RAY} (pyproject.toml): install that (pip install 'ray{TESTED_RAY}'), "
            "or adapt infra/ray_compat.py to this Ray")


def internal(key: str):
    """The object ``INTERNALS[key]`` names, imported now; RayInternalMissing when this Ray lacks it."""
    entry = next(i for i in INTERNALS if i.key == key)
    try:
        obj = importlib.import_module(entry.module)
        for part in entry.attribute.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise RayInternalMissing(entry, f" ({type(e).__name__}: {e})") from None
    if entry.env_var is not None and not (obj == entry.env_var or (not isinstance(obj, str) and entry.env_var in obj)):
        raise RayInternalMissing(entry, f" ({entry.attribute} no longer names {entry.env_var})")
    return obj


def _env_var(key: str) -> str:
    return next(i for i in INTERNALS if i.key == key).env_var


# ---------------------------------------------------------------- local Ray instances


def find_gcs_addresses() -> list[str]:
    """The GCS addresses of the Ray instances running on this machine (Ray's own way of resolving "the"
    local instance, by listing GCS processes). Uses ``ray._private.services.find_gcs_addresses``."""
    return list(internal("gcs_addresses")())


def read_ray_address(temp_dir: str | None = None) -> str | None:
    """The address in ``{ray temp dir}/ray_current_cluster``: the cluster the last ``ray start`` wrote,
    which a plain ``ray.init()`` joins. Uses ``ray._private.utils.read_ray_address``."""
    return internal("read_ray_address")(temp_dir)


def ray_address_file(temp_dir: str | None = None) -> str:
    """The path of that ``ray_current_cluster`` file. Uses ``ray._private.utils.get_ray_address_file``."""
    return internal("ray_address_file")(temp_dir)


def local_node_resources(num_cpus: float | None = None, num_gpus: float | None = None) -> dict[str, float]:
    """The resources a local Ray started now by ``ray.init(num_cpus=..., num_gpus=...)`` would have
    (``{"CPU": ..., "GPU": ..., ...}``), found the way Ray finds them (CPUs as the container allows,
    GPUs as CUDA_VISIBLE_DEVICES and the driver show them) without starting it: milliseconds. Uses
    ``ray._private.resource_and_label_spec.ResourceAndLabelSpec``."""
    spec = internal("local_resources")(num_cpus=num_cpus, num_gpus=num_gpus)
    resolved = spec.resolve(is_head=True, node_ip_address="127.0.0.1")
    return {"CPU": float(resolved.num_cpus or 0), "GPU": float(resolved.num_gpus or 0),
            **{k: float(v) for k, v in (resolved.resources or {}).items()}}


# ---------------------------------------------------------------- the cluster's autoscaler


def autoscaler_node_types() -> dict[str, str] | None:
    """``{node id: node type}`` as the connected cluster's autoscaler reports them; None when no
    autoscaler has reported (Ray must be initialized).

    Autoscaler v1 (Ray's default) writes its report as JSON into the GCS's key-value store
    (``ray._private.ray_constants.DEBUG_AUTOSCALING_STATUS``, read with
    ``ray.experimental.internal_kv._internal_kv_get``); autoscaler v2 (the GCS says which:
    ``ray.autoscaler.v2.utils.is_autoscaler_v2``) reports its state to the GCS, read with
    ``ray.autoscaler.v2.sdk.get_cluster_status``."""
    if internal("autoscaler_is_v2")(fetch_from_server=True):
        import ray

        status = internal("cluster_status")(ray.get_runtime_context().gcs_address)
        if str(getattr(status.stats, "autoscaler_version", "0") or "0") == "0":  # the autoscaler never reported
            return None
        return {n.node_id: n.ray_node_type_name for n in [*status.active_nodes, *status.idle_nodes]}
    raw = internal("kv_get")(internal("autoscaling_status_key"))
    if not raw:
        return None
    report = json.loads(raw).get("autoscaler_report") or {}
    return dict(report.get("node_type_mapping") or {})


def cluster_has_autoscaler() -> bool:
    """Whether the connected cluster has an autoscaler that can add nodes (Ray must be initialized).

    The rule: a cluster has one only if its autoscaler reports itself (``autoscaler_node_types``) and
    names a node type from a cluster config (``ray up``'s, KubeRay's worker groups, the fake multi-node
    provider's). Every Ray head runs Ray's monitor; without a cluster config (``ray.init()``, a manual
    ``ray start``, KubeRay without autoscaling) it is the read-only autoscaler, which adds nothing and
    names each node's type after the node (``ray.autoscaler._private.util.format_readonly_node_type``:
    ``node_<node id>``). A cluster whose autoscaler has not reported yet counts as one without."""
    types = autoscaler_node_types()
    if not types:
        return False
    readonly = internal("readonly_node_type")
    return any(node_type != readonly(node_id) for node_id, node_type in types.items())


# ---------------------------------------------------------------- Ray Train and Tune


def preemption_watcher_off() -> dict[str, str]:
    """``{variable: "0"}`` that turns Ray Train's spot-preemption watcher off, for the job's runtime
    environment (``infra.ray_local.job_runtime_env``); {} when the user set the variable (theirs counts: Ray
    Train passes it on from the driver's environment). The watcher is an actor Ray Train starts per worker
    group with ``max_restarts`` and constructor arguments in the object store, which Ray's core worker logs
    as an ERROR on every run; structcse recovers lost workers by ``max_failures``. The variable is Ray Train's
    ``ray.train.v2._internal.constants.ENABLE_PREEMPTION_WATCHER_ENV_VAR``; it is named without importing
    Ray Train (a second of imports), so only the test checks its name."""
    name = _env_var("preemption_watcher")
    return {} if name in os.environ else {name: "0"}


def tune_trial_report_queue():
    """The queue a Tune trial's ``TuneReportCallback`` puts training reports on, so that other results
    (the pool's scores) reach Tune through the same queue. Uses ``ray.train._internal.session.get_session``
    and its session's ``_get_or_create_inter_actor_queue``; call it inside a Tune trial."""
    session = internal("train_session")()
    internal("inter_actor_queue")  # the method: its absence named, not an AttributeError
    return session._get_or_create_inter_actor_queue()


@contextlib.contextmanager
def tune_metric_checking_off():
    """While the block runs, Tune does not require every result to hold the search's metric (this
    process's Tune controller reads ``TUNE_DISABLE_STRICT_METRIC_CHECKING``, listed in
    ``ray.tune.constants.TUNE_ENV_VARS``); the variable's value before is restored after."""
    internal("strict_metric_checking")  # Tune still reads the variable
    key = _env_var("strict_metric_checking")
    before = os.environ.get(key)
    os.environ[key] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def set_worker_group_start_timeout(seconds: float) -> None:
    """Ray Train's wait for a worker group to start (its controller reads
    ``RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S``, which the trainer passes on from this process's environment)."""
    internal("worker_group_start_timeout")  # Ray Train still propagates the variable
    os.environ[_env_var("worker_group_start_timeout")] = f"{seconds:g}"
