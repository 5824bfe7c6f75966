"""Entry points: ``build_trainer(cfg)`` -> TorchTrainer, ``run(cfg)`` -> TrainOutcome.

A run, top to bottom: the plan (``train.plan``: config, sets and model checked before anything is
allocated; what the run decided, printed and written as ``run_plan.json``), the run key
(``train.run_key``: a rerun resumes only the same training), Ray (``train.ray_env``), the
``TorchTrainer`` and its fit (``train.loop`` on every worker), the finish (``train.finish``: the selected
checkpoint's model, its card, ``train_summary.json``).

Layout of a run (``{storage_path}/{run_name}/``)::

    checkpoint_manager_snapshot.json   Ray Train's; same storage+name => resume
    run_key.json                       what the run trains (train.run_key)
    run_plan.json                      what preflight decided (train.plan)
    step-0000125/                      one folder per report; a rerun resumes from (and the final model is
                                       selected among) the whole ones of this run (train.checkpoints)
        state.pt                       model + heads + optimizer + scheduler + step/epoch
        metrics.json                   the metrics reported with it, and the run's fingerprint
        _files.json                    every file and its size (infra.publish): the folder is whole
        model/                         SentenceTransformer folder (+ method heads)
    model/                             the final model: best (checkpoint_metric) or latest
        modules.json, config.json, model.safetensors, tokenizer..., 1_Pooling/[, 2_Dense/]
        structcse_method.json          method, options, sizes
        structcse_heads.pt             the method's extra parameters (EASE: entity table + projection)
    tensorboard/                       rank 0's event files (train.tracking): tensorboard --logdir
    train_summary.json                 metrics, chosen checkpoint, config
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from infra.storage import arrow_filesystem, is_uri
from train.config import TrainConfig
from train.finish import TrainOutcome, finish
from train.plan import RunPlan, make_plan, print_plan, record_plan
from train.ray_env import ray_for_training

RUN_LEASE = "_lease-run.json"  # held by the driver of the run that trains in the folder


def run(cfg: TrainConfig, callbacks=(), *, resume: bool = False, overwrite: bool = False) -> TrainOutcome:
    """Train (or resume) ``cfg``; write ``{storage}/{name}/model`` and ``train_summary.json``.

    A run folder with checkpoints is resumed only if it trained the same config, sets and base model
    (``train.run_key``); ``overwrite`` removes it first, ``resume`` fails when there is nothing to resume."""
    from train.run_key import check_run_key, run_fingerprint

    started = time.time()
    plan = make_plan(cfg)
    with run_lease(plan.run_folder, f"python -m train --name {cfg.name}"):
        check_run_key(plan.config, plan.run_folder, plan.set_paths, resume=resume, overwrite=overwrite)
        return _run(cfg, plan, callbacks, started, run_fingerprint)


@contextmanager
def run_lease(run_folder: str, command: str):
    """The run folder, this run's alone while it trains: a folder that holds what structcse did not write is
    refused (``infra.owned``), and a second run with the same storage and name refuses in one line naming the
    first (``infra.lease``: ``_lease-run.json`` in the folder, renewed while the driver lives)."""
    from infra.lease import Lease
    from infra.owned import ForeignDestination, bucket_root, check_destination, claim
    from infra.secrets import redact_text

    storage = run_folder.rstrip("/").rsplit("/", 1)[0]
    if bucket_root(storage):
        raise ForeignDestination(f"--storage {redact_text(storage)} is a bucket root: structcse never writes one; "
                                 f"give a folder in it (--storage {redact_text(storage)}/runs)")
    check_destination(run_folder, "run folder")
    with Lease(f"{run_folder.rstrip('/')}/{RUN_LEASE}", "run folder", command) as lease:
        claim(run_folder, command)
        yield lease


def _run(cfg: TrainConfig, plan: RunPlan, callbacks, started: float, run_fingerprint) -> TrainOutcome:
    from train.progress import PROGRESS_FILE, ProgressBar, wants_bar

    print_plan(plan)
    record_plan(plan)
    progress_file = f"{plan.run_folder}/{PROGRESS_FILE}" if wants_bar(run_dir=plan.run_folder) else None
    trainer = build_trainer(cfg, callbacks=callbacks, progress_file=progress_file, plan=plan,
                            fingerprint=run_fingerprint(plan.run_folder))
    bar = ProgressBar(progress_file) if progress_file else None
    try:
        result = trainer.fit()
    except Exception as error:
        from setformat.io import pinned_refusal

        # a set file changed (or removed) under the run: the worker's one line, not Ray's trace
        refusal = pinned_refusal(error, list((plan.set_pins or {}).values()))
        if refusal is None:
            raise
        raise refusal from None
    finally:
        if bar is not None:
            bar.close()
    return finish(plan, result, started)


def read_train_set(path, columns: list[str] | None = None):
    """The set as a Ray Dataset. ``path``: the set as the plan checked it (an ``setformat.io.PinnedSet``): one
    read task per checked file, each reading its file only if it is the one checked (size and ETag /
    generation / mtime; one rewritten since, by a re-ingest into the same folder, stops the run in one line
    naming the set and the job to rerun), through the storage client (``infra.storage``); or a folder or URI,
    pinned here. A ``memory://`` set lives in this process alone: it is read here and handed to Ray whole."""
    import ray.data

    from setformat.io import PinnedSet, pin_set, pinned_dataset, read_pinned

    pinned = path if isinstance(path, PinnedSet) else pin_set(path)
    if pinned.path.startswith("memory://"):
        return ray.data.from_arrow(read_pinned(pinned, columns))
    return pinned_dataset(pinned, columns)  # never empty: the plan checked the set


def build_trainer(cfg: TrainConfig, callbacks=(), run_config=None, validation=None, progress_file: str | None = None,
                  plan: RunPlan | None = None, fingerprint: str | None = None):
    """A ``TorchTrainer`` for ``cfg`` (planned first: ``train.plan``).

    ``callbacks`` are Ray Train ``UserCallback``s (e.g. tune's
    ``TuneReportCallback``); ``run_config`` replaces the one built from ``cfg``;
    ``validation``: a ``ValidationConfig`` that scores the reported checkpoints
    asynchronously (tune's evaluation pool) instead of rank 0 in the loop;
    ``progress_file``: where rank 0 writes its progress for the driver's bar (``train.progress``);
    ``plan``: ``make_plan(cfg)``, when the caller has made (and recorded) it;
    ``fingerprint``: the run's (``train.run_key.run_fingerprint``, once ``check_run_key`` has passed): its
    checkpoints carry it, and the newest whole one is what the run resumes from (``train.checkpoints``).
    """
    if plan is None:
        plan = make_plan(cfg)
        print_plan(plan)
        record_plan(plan)
    if not is_uri(plan.run_folder):  # remote run folders are checked by the workers as they load
        from train.checkpoints import STATE_FILE
        from train.state_files import check_local_checkpoints

        check_local_checkpoints(plan.run_folder, STATE_FILE)
    ray_for_training(plan.config)
    from ray.train import ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    from train.loop import train_loop_per_worker

    datasets, data_config = train_datasets(plan)
    if plan.num_workers == 0:
        validation = None  # local mode runs no validation tasks: rank 0 scores in the loop
    inputs = loop_inputs(plan, progress_file, async_validation=validation is not None, fingerprint=fingerprint)
    if run_config is None:
        run_config = make_run_config(plan, callbacks)
    set_start_timeout(plan.worker_config)
    return TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"inputs": inputs},
        scaling_config=ScalingConfig(**worker_scaling(plan)),
        torch_config=TorchConfig(backend=None if plan.worker_config.use_gpu else "gloo"),
        run_config=run_config,
        datasets=datasets,
        dataset_config=data_config,
        validation_config=validation,
    )


def train_datasets(plan: RunPlan):
    """(``datasets``, ``dataset_config``) of the trainer: with ``feed: stream`` the training set as a Ray Dataset
    (drawn from the whole set, pre-tokenized if asked) and the execution options Ray Train copies per shard;
    (None, None) when the workers hold the set themselves (``train.feeds.GlobalFeed``)."""
    from ray.train import DataConfig

    from train.feeds import drawn_from_whole_set

    config, method = plan.worker_config, plan.method  # the workers' config: local paths absolute
    if config.feed != "stream":
        return None, None
    ds = read_train_set(plan.set_pins.get(method.train_set) or plan.set_paths[method.train_set],
                        list(method.sets[method.train_set]))
    ds = drawn_from_whole_set(ds, config)
    if config.pretokenize:
        from train.batch import pretokenize

        ds = pretokenize(ds, config.model, config.max_len, list(method.tokenized_columns(config.options)))
    # blocks in file order, not in the order their read tasks finish: a one-worker run (and local
    # mode, which iterates ds itself) sees the same rows in the same order every time; with several
    # workers the streaming split hands blocks to whichever worker asks first
    ds.context.execution_options.preserve_order = True
    return {"train": ds}, DataConfig(execution_options=ds.context.execution_options)  # Train copies them per shard


def loop_inputs(plan: RunPlan, progress_file: str | None, async_validation: bool, fingerprint: str | None):
    """What every worker is handed (``train.loop.LoopInputs``)."""
    from train.loop import LoopInputs

    local_mode = plan.num_workers == 0
    return LoopInputs(
        config=plan.worker_config,
        num_rows=plan.num_rows,
        data_info=plan.data_info,
        set_paths=plan.set_paths,
        run_folder=plan.run_folder,
        dev_metric=plan.dev_metric,
        progress_file=progress_file,
        # local mode: Ray leaves checkpoints where they are written (a bucket's: uploaded by the loop)
        local_checkpoint_root=plan.run_folder if local_mode else None,
        async_validation=async_validation,
        run_fingerprint=fingerprint,
        set_pins=plan.set_pins,
    )


def make_run_config(plan: RunPlan, callbacks=()):
    """Ray Train's ``RunConfig`` for the plan: the run's name and storage, the checkpoints kept and what ranks
    them, the restarts allowed, ``callbacks``, a quiet run's logging."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig

    from infra.logs import train_logging_config

    config = plan.worker_config
    storage_filesystem, storage_path = arrow_filesystem(plan.storage_path)  # the one storage client
    return RunConfig(
        name=config.name,
        storage_path=storage_path,
        storage_filesystem=storage_filesystem,
        checkpoint_config=CheckpointConfig(
            num_to_keep=config.keep_checkpoints,
            checkpoint_score_attribute=plan.checkpoint_metric,
            checkpoint_score_order="max",
        ),
        failure_config=FailureConfig(max_failures=config.max_failures),
        callbacks=list(callbacks) or None,
        logging_config=train_logging_config(),  # a quiet run (infra.logs): no per-report INFO lines
    )


def set_start_timeout(config: TrainConfig) -> None:
    """Ray Train's wait for a worker group to start: ``worker_start_timeout_s``, an elastic run's
    :data:`ELASTIC_START_TIMEOUT_S` by default, else Ray's own."""
    start_timeout = config.worker_start_timeout_s
    if start_timeout is None and config.elastic:
        start_timeout = ELASTIC_START_TIMEOUT_S
    if start_timeout is not None:
        from infra.ray_compat import set_worker_group_start_timeout

        set_worker_group_start_timeout(start_timeout)


def worker_scaling(plan: RunPlan) -> dict:
    """``ScalingConfig``'s arguments: the workers (an elastic run's range, and how often it looks for capacity to
    grow into) and each one's resources."""
    config = plan.worker_config
    scaling = {"num_workers": plan.num_workers, "use_gpu": plan.gpus_per_worker > 0}
    if config.elastic:
        scaling.update(num_workers=(config.min_workers, config.max_workers),
                       elastic_resize_monitor_interval_s=config.resize_check_s)
    if plan.cpus_per_worker is not None and plan.num_workers > 0:
        scaling["resources_per_worker"] = {"CPU": plan.cpus_per_worker,
                                           **({"GPU": plan.gpus_per_worker} if plan.gpus_per_worker else {})}
    return scaling


# an elastic run's wait for a worker group to start, per try: after a lost node Ray Train first asks for the old
# size until Ray's health checks mark the node dead (bench/elastic.py: two 10 s tries before it went on with 1
# worker); Ray's own default, 60 s, is for cold starts (container images, runtime environments)
ELASTIC_START_TIMEOUT_S = 30.0
