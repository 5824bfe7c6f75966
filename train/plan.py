"""Preflight: everything a run decides before anything is allocated, as one frozen :class:`RunPlan`.

``make_plan(cfg)`` validates the config, finds and checks every set the method reads against
``setformat.schemas`` (a missing column is a SchemaError naming set and column), loads the model's
config (a bad path or name is a ConfigError), counts the training rows, and decides:

* the pooling the run trains with: a sentence-transformers base (all-MiniLM-L6-v2: mean) keeps its own
  unless ``base_pooling`` is false (``--set pooling=...`` sets it false), and the plan says why; the
  caller's config is never changed;
* the dev metric and what the final checkpoint is selected by;
* the workers and their resources (refused at once when the local Ray this process would start can never
  run them: ``train.ray_env.check_resources_before_ray``), the storage and run folder;
* the config the workers read: local paths absolute (Ray workers and Tune trials do not share the
  driver's working directory).

``print_plan`` shows the decisions in a few ``[train]`` lines; ``record_plan`` writes them as
``run_plan.json`` in the run folder (secrets redacted, as every file written there).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.storage import arrow_filesystem, filesystem
from infra.cache import as_local
from infra.storage import is_uri, local_path
from setformat.io import pin_set, write_json
from train.config import ConfigError, TrainConfig, metric_for
from train.feeds import resolve_feed
from train.methods import get_method

log = logging.getLogger(__name__)
PLAN_FILE = "run_plan.json"


@dataclass(frozen=True)
class RunPlan:
    config: TrainConfig  # what the run trains: the caller's config with the pooling decided here
    worker_config: TrainConfig  # the same with local paths absolute: what the workers (and Tune trials) read
    method: Any  # the Method class
    set_paths: dict[str, str]  # {set kind: absolute folder}; a URI as given
    num_rows: int  # rows of the training set
    data_info: dict  # Method.data_info: small facts the workers need
    pooling_reason: str  # why the run trains with config.pooling
    feed_reason: str  # why its batches come from config.feed (train.feeds.resolve_feed)
    dev_metric: Any  # the DevMetric checkpoints are scored with (score.dev_metrics); None without dev data
    checkpoint_metric: str | None  # what the final checkpoint is selected by (max); None: the latest
    num_workers: int  # 0: Ray Train's local mode, in the driver; an elastic run's most
    cpus_per_worker: float | None  # None: Ray's default (1)
    gpus_per_worker: int
    storage_path: str  # absolute, or a URI
    run_folder: str  # {storage_path}/{run name}
    # {set kind: setformat.io.PinnedSet}: the files each set was checked with (names, sizes, ETag / generation /
    # mtime); Ray Data and the workers read exactly these, and stop in one line at one that changed since
    set_pins: dict = field(default_factory=dict)

    @property
    def pooling(self) -> str:
        return self.config.pooling

    @property
    def elastic(self) -> bool:
        return self.config.elastic

    @property
    def train_set(self) -> str:
        return self.method.train_set

    def lines(self) -> list[str]:
        """What preflight decided, as the few lines a run prints before it starts."""
        if self.num_workers:
            cpus = f"{self.cpus_per_worker:g}" if self.cpus_per_worker is not None else "1"
            gpus = f" + {self.gpus_per_worker} GPU" if self.gpus_per_worker else ""
            count = (f"{self.config.min_workers} to {self.num_workers} worker(s) (elastic: the same rows at every "
                     "global step at any size)") if self.elastic else f"{self.num_workers} worker(s)"
            where = f"on {count}, {cpus} CPU{gpus} each"
        else:
            where = "in local mode (in this process)"
        sets = ", ".join(f"{kind} {path}" for kind, path in self.set_paths.items())
        if self.checkpoint_metric and self.dev_metric is not None and self.checkpoint_metric == self.dev_metric.key:
            selection = f"best {self.checkpoint_metric} ({self.dev_metric.name} on {self.worker_config.dev_data})"
        elif self.checkpoint_metric:
            selection = f"best {self.checkpoint_metric}"
        else:
            selection = "the latest checkpoint (no dev data)"
        return [
            f"[train] plan: {self.config.method} {where}; {self.num_rows} rows of {self.train_set}",
            f"[train]   sets: {sets}",
            f"[train]   pooling: {self.pooling}, {self.pooling_reason}",
            f"[train]   feed: {self.config.feed}, {self.feed_reason}",
            f"[train]   selected by: {selection}",
            f"[train]   run folder: {self.run_folder} ({PLAN_FILE})",
        ]

    def record(self) -> dict:
        """The plan as JSON (``run_plan.json``)."""
        metric = self.dev_metric
        record = {
            "method": self.config.method,
            "model": self.worker_config.model,
            "pooling": {"used": self.pooling, "why": self.pooling_reason},
            "feed": {"used": self.config.feed, "why": self.feed_reason},
            "sets": dict(self.set_paths),
            "train_set": self.train_set,
            "train_rows": self.num_rows,
            "data_info": self.data_info,
            "dev_metric": None if metric is None else {"name": metric.name, "key": metric.key, "mode": metric.mode,
                                                        "data": self.worker_config.dev_data},
            "selected_by": self.checkpoint_metric or "latest",
            "resources": {"num_workers": self.config.num_workers, "cpus_per_worker": self.cpus_per_worker,
                          "gpus_per_worker": self.gpus_per_worker},
            "storage_path": self.storage_path,
            "run_folder": self.run_folder,
        }
        return json.loads(json.dumps(record, default=str))


def check_storage_before_ray(cfg: TrainConfig) -> None:
    """Every bucket the run reads or writes answers and exists (``infra.storage.check_storage``): a
    ``ConfigError`` in one line naming the flag, the endpoint or the bucket, within seconds."""
    from infra.storage import StorageError, check_storage

    for path, what in ((cfg.data, "--data"), (cfg.storage_path, "--storage"), (cfg.model, "--model"),
                       (cfg.dev_data, "dev_data")):
        if path and is_uri(path):
            try:
                check_storage(path, what)
            except StorageError as e:
                raise ConfigError(str(e)) from None


def make_plan(cfg: TrainConfig) -> RunPlan:
    """Validate ``cfg``, its sets and its model before any allocation; decide what the run does."""
    from train.ray_env import check_resources_before_ray

    cfg.validate()
    method = get_method(cfg.method)
    check_resources_before_ray(cfg)  # milliseconds: a local Ray that could never run the workers
    check_storage_before_ray(cfg)
    check_data_exists(cfg, method)
    set_paths = resolve_sets(cfg.data, method)
    set_pins = {kind: pin_set(set_paths[kind], kind, required=columns) for kind, columns in method.sets.items()}
    check_model_config(cfg.model)
    pooling, pooling_reason = decide_pooling(cfg)
    feed, feed_reason = resolve_feed(cfg, set_pins[method.train_set])
    config = dataclasses.replace(cfg, pooling=pooling, feed=feed)
    num_rows = set_pins[method.train_set].rows  # the checked files' footers
    check_full_batch(cfg, method, set_paths, num_rows)
    dev_metric = available_dev_metric(cfg)
    storage = storage_root(cfg.storage_path)
    return RunPlan(
        config=config,
        worker_config=dataclasses.replace(absolute_paths(config), model=pinned_model(cfg.model)),
        method=method,
        set_paths=set_paths,
        num_rows=num_rows,
        data_info=method.data_info(config, set_paths),
        pooling_reason=pooling_reason,
        feed_reason=feed_reason,
        dev_metric=dev_metric,
        checkpoint_metric=cfg.checkpoint_metric or (dev_metric.key if dev_metric is not None else None),
        num_workers=cfg.max_workers,
        cpus_per_worker=cfg.cpus_per_worker,
        gpus_per_worker=1 if cfg.use_gpu else 0,
        storage_path=storage,
        run_folder=f"{storage.rstrip('/')}/{cfg.name}",
        set_pins=set_pins,
    )


def check_data_exists(cfg: TrainConfig, method) -> None:
    """A local ``--data`` that does not exist: a ConfigError saying what the folder should hold."""
    if not is_uri(cfg.data) and not Path(local_path(cfg.data)).expanduser().exists():
        from infra.preflight import missing_path

        raise ConfigError(missing_path(cfg.data, "data folder", "an ingest output folder holding "
                                       + ", ".join(f"{kind}/" for kind in method.sets)
                                       + f", or the {method.train_set} set folder itself: *.parquet files and "
                                       "_manifest.json"))


def check_model_config(model: str) -> None:
    """The model's config loads (a hub name: the hub answers first, :func:`check_hub_reachable`); else a
    ConfigError naming the model."""
    check_hub_reachable(model)
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(as_local(model))
    except Exception as e:
        raise ConfigError(f"model {model!r}: cannot load its config ({type(e).__name__}: {e})") from e


def check_full_batch(cfg: TrainConfig, method, set_paths: dict[str, str], num_rows: int) -> None:
    """The training set fills one global batch at the run's most workers; else a ConfigError."""
    world = max(cfg.max_workers, 1)
    if (num_rows // world) // (cfg.batch_size // world) < 1:
        raise ConfigError(
            f"set {method.train_set!r} at {set_paths[method.train_set]} has {num_rows} rows: "
            f"not one full global batch of {cfg.batch_size}"
        )


def available_dev_metric(cfg: TrainConfig):
    """The dev metric checkpoints are scored with (None without ``dev_data``), its data readable now (a hub name:
    the cache, STRUCTCSE_HUB_COPIES or the hub), before Ray starts."""
    dev_metric = metric_for(cfg) if cfg.dev_data else None
    if dev_metric is not None:
        from infra.hub_data import HubDataUnavailable

        try:
            dev_metric.check_available(cfg.dev_data)
        except HubDataUnavailable as e:
            raise ConfigError(f"dev_data {cfg.dev_data!r}: {e}") from None
    return dev_metric


def storage_root(storage_path: str) -> str:
    """``storage_path`` absolute (``~`` expanded), or the URI as given."""
    return storage_path if is_uri(storage_path) else str(Path(local_path(storage_path)).expanduser().resolve())


def print_plan(plan: RunPlan) -> None:
    """The plan's lines (``RunPlan.lines``), secrets redacted, as this module's log lines."""
    from infra.secrets import redact_text

    for line in plan.lines():
        log.info(redact_text(line))


def record_plan(plan: RunPlan) -> str:
    """Write ``run_plan.json`` into the run folder (``write_json`` redacts secrets); returns its path."""
    path = f"{plan.run_folder}/{PLAN_FILE}"
    write_json(plan.record(), path)
    return path


def _file_rows(path: str) -> int:
    """The rows of one parquet file, from its footer, read through the storage client (``infra.storage``)."""
    import pyarrow.parquet as pq

    arrow_fs, inner = arrow_filesystem(path)
    return pq.read_metadata(inner, filesystem=arrow_fs).num_rows


def resolve_sets(data: str, method) -> dict[str, str]:
    """{set kind: folder} for every set ``method`` reads.

    ``data`` is an ingest output folder (``data/<kind>/``) or a set folder itself: then it is the
    method's training set and its siblings (``data/../<kind>``) are the other sets. A local folder comes
    back absolute; a URI (``s3://...``) is joined as a string.
    """
    fs, _ = filesystem(data)
    root = data.rstrip("/") if is_uri(data) else str(Path(local_path(data)).expanduser().resolve())
    is_set = fs.isdir(root) and bool(fs.glob(f"{root}/*.parquet"))
    out = {}
    for kind in method.sets:
        if fs.isdir(f"{root}/{kind}"):
            out[kind] = f"{root}/{kind}"
        elif kind == method.train_set and (is_set or fs.isfile(root)):
            out[kind] = root
        else:
            out[kind] = f"{root.rsplit('/', 1)[0]}/{kind}" if is_set else f"{root}/{kind}"
    return out


def decide_pooling(cfg: TrainConfig) -> tuple[str, str]:
    """(pooling, why): a sentence-transformers base trains with its own pooling unless ``base_pooling``
    is false: the config's pooling is the method paper's for BERT, and swapping a tuned model's pooling
    costs quality (measured: SimCSE-sup's cls on all-MiniLM-L6-v2, 4.2 STS-B points below mean over the
    same 200 steps)."""
    if not cfg.base_pooling:
        return cfg.pooling, "the config's (base_pooling is false)"
    from train.encoder import base_pooling

    own = base_pooling(cfg.model)  # a modules.json or Pooling config it cannot read: a ConfigError naming the model
    name = Path(cfg.model).name or cfg.model
    if not own:
        return cfg.pooling, f"the config's ({name} has no sentence-transformers pooling of its own)"
    if own == cfg.pooling:
        return own, f"the config's, and {name}'s own"
    return own, (f"{name}'s own (the config's {cfg.pooling} is the paper's for a plain encoder: "
                 f"--set pooling={cfg.pooling} to train with it)")


def pinned_model(model: str) -> str:
    """What the workers load: for a model folder in a bucket, the version its pointer names now (resolved once
    here, so a republication while the workers start cannot hand them two versions, or fail them); a local
    folder or a hub name as given (made absolute by :func:`absolute_paths`)."""
    if not is_uri(model):
        return absolute_paths_value(model)
    from infra.publish import IncompleteError, check_complete

    try:
        return check_complete(model, "model folder")
    except (IncompleteError, FileNotFoundError) as e:
        raise ConfigError(str(e)) from None


def absolute_paths_value(value):
    if isinstance(value, str) and value and not is_uri(value) and Path(local_path(value)).expanduser().exists():
        return str(Path(local_path(value)).expanduser().resolve())
    return value


def absolute_paths(cfg: TrainConfig) -> TrainConfig:
    """A copy of ``cfg`` whose local paths (model folder, data, dev_data, method options that name
    existing files) are absolute: Ray workers do not share the driver's working directory."""

    fix = absolute_paths_value
    options = {name: dataclasses.replace(opts, **{f.name: fix(getattr(opts, f.name)) for f in dataclasses.fields(opts)})
               for name, opts in cfg.method_options.items()}
    # run_name pinned to the name made from the model as given: a resolved symlink would name another folder
    return dataclasses.replace(cfg, model=fix(cfg.model), data=fix(cfg.data), dev_data=fix(cfg.dev_data),
                               method_options=options, run_name=cfg.name)


def check_hub_reachable(model: str, timeout_s: float = 3.0) -> None:
    """A model that is neither a local folder nor in the Hugging Face cache comes from the hub: when the
    hub cannot be reached (an offline machine, HF_HUB_OFFLINE=1), a ConfigError at once that says to
    pass a local path, instead of the hub client's retries (25 s) and a long traceback
    (``infra.preflight.check_model_name``, which ``python -m eval`` calls too)."""
    from infra.preflight import ModelNotAvailable, check_model_name

    try:
        check_model_name(model, fix="pass a local folder with --model /path/to/model (or --set model=...)",
                         timeout_s=timeout_s)
    except ModelNotAvailable as e:
        raise ConfigError(str(e)) from None
