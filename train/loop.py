"""The one training loop every method runs in (Ray Train V2 ``train_loop_per_worker``): a recipe that reads top to
bottom, and the parts it names beside it; what a worker reports (lines, checkpoints, ``ray.train.report``) is
``train.reporting``'s.

A worker:

1. takes what the driver decided (``config["inputs"]``, a :class:`LoopInputs`: the ``TrainConfig``, the rows of the
   training set, the sets, the dev metric, where to write) and its place in the world (:func:`join_world`: rank,
   world size, device, its share of the global batch);
2. builds encoder + method heads (:class:`Trainee`) and its batches (:func:`make_feed`, ``train.feeds``): with
   ``feed: stream`` its shard of the Ray dataset in batches of ``batch_size // world`` (``drop_last=True`` so every
   worker's all-gather has the same shape), optionally regrouped by length (``length_bucketing``); with
   ``feed: memory`` (every elastic run, and ``feed: auto`` for a set that fits) its share of each global batch
   ``train.global_order`` names, whatever the world size (a share that grew as workers went is embedded in
   GradCache chunks of the full-size share);
3. restores the model (:func:`restore_model`) from the newer of Ray Train's checkpoint
   (``ray.train.get_checkpoint()``) and the newest whole checkpoint of this run in its folder, which Ray Train may
   not have recorded yet (a worker group lost while reporting; ``train.checkpoints.resume_state``); with neither,
   rank 0 loads pretrained heads (e.g. EASE's Wikipedia2Vec vectors), which DDP broadcasts;
4. puts the model on its device (``prepare_model``: device + DDP; compile; precision, ``train.precision``) and
   makes its optimiser (:func:`make_train_step`): AdamW (no decay on bias/LayerNorm) with a linear warmup/decay
   schedule, fp16's GradScaler; restores their state and where training resumes (:func:`resume_position`);
5. for each epoch (:func:`run_epoch`) iterates its batches, collates each (``method.collate``: tokenizes, or cuts
   Ray Data's pre-tokenized arrays to the batch's longest row) and takes a step (:class:`TrainStep`,
   ``train.step``: plain, or GradCache with ``chunk_size``; optional ``torch.autocast``, fp16 with a GradScaler);
   the RNG is reseeded from (seed, rank, step) before every step, so a resumed run draws the same dropout masks as
   an uninterrupted one; an elastic run's dropout masks are keyed by (seed, step, column, global row) instead
   (``train.dropout_keys``), the same whichever worker holds the row;
6. after each step (``Reporter.step_done``): rank 0 feeds the driver's progress bar (when it draws one), and every
   ``log_every_steps`` steps puts the loss (the mean over every worker) and the learning rates in TensorBoard and,
   without a bar, logs the loss and the ETA in a line;
7. every ``checkpoint_every_steps`` steps, at the end of each epoch and at the last step (``Reporter.report``):
   rank 0 writes ``state.pt``, ``metrics.json`` and the model as a SentenceTransformer folder (``model/``, with the
   method's extra heads beside it), scores it on ``dev_data`` with the method's dev metric (``score.dev_metrics``:
   ``dev_spearman``, ``dev_auprc``, ...), and every rank calls ``ray.train.report(metrics, checkpoint,
   checkpoint_dir_name="step-0000125")``. Under Tune (``async_validation``) rank 0 does not score: the report asks
   Ray Train's asynchronous validation to, and Tune's evaluation pool (``tune.scorers``) scores the checkpoint
   while training goes on. In local mode Ray keeps no checkpoint, so rank 0 publishes it to the run folder itself.

The worker returns the metrics of its last report.

Resume (decision): a checkpoint stores its step, the epoch to resume and how many batches of that epoch were done
(an epoch's last step: the next epoch, none done). A resumed worker starts that epoch at that batch, so the step
count, the LR schedule and the number of examples seen are exactly those of an uninterrupted run, and an
interruption costs only the steps since the checkpoint: SimCSE/EASE train one epoch, where restarting the epoch
would repeat everything. ``feed: memory`` computes the rows of each step (``train.global_order``: a function of
the seed and the step) and reads none of the batches before it, so the rows are exactly those of an uninterrupted
run. ``feed: stream`` restarts the epoch's iterator and discards (reads without training on) the batches done:
with one worker the rows arrive in the same order every time (the set's seeded permutation, or its own order with
``shuffle_buffer: 0``, its blocks in order: ``preserve_order``, set by ``train.run``), so a run is deterministic
given its seed and the skipped rows are the same rows; with several workers Ray Data's streaming split hands
blocks to whichever worker asks first, so the skipped rows are the same *number*, not necessarily the same rows.
The RNG needs no saving: it is a function of (seed, rank, step).

Elastic runs (``num_workers: [min, max]``) take the epoch and batch from the step itself (the global order names
the same rows at a step whatever the world size the checkpoint was written at), and a checkpoint written at another
world size, or a worker group of another size than the last one (``worker_groups.jsonl``, a line per group rank 0
started), is a resize: rank 0 says so in one line after its first step, puts ``world_size`` in TensorBoard and
appends the resize to ``resizes.jsonl`` in the run folder.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from infra.cache import as_local
from train.batch import collated_ahead, to_device
from train.checkpoints import newest_checkpoint, resume_state
from train.config import TrainConfig
from train.dropout_keys import add_row_keys
from train.encoder import Encoder
from train.methods import get_method
from train.methods.tiled import DEFAULT_LOSS_TILE, default_loss_tile
from train.precision import Bf16Weights, resolve_precision
from train.reporting import Meter, Reporter, ReportSettings, record_group
from train.step import forward_backward

# rank 0's start line: on the worker's stdout, which Ray forwards to the driver (infra.logs)
log = logging.getLogger(__name__)
_NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")
_AMP_DTYPES = {"bf16": torch.bfloat16, "bf16_weights": torch.bfloat16, "fp16": torch.float16}  # autocast's


@dataclass(frozen=True)
class LoopInputs:
    """What the driver hands every worker (``train_loop_config={"inputs": LoopInputs(...)}``), as
    ``train.plan`` decided it."""

    config: TrainConfig  # local paths absolute, the pooling the plan chose
    num_rows: int  # rows of the training set
    data_info: dict  # Method.data_info
    set_paths: dict[str, str]  # {set kind: folder}
    run_folder: str  # {storage}/{name}: TensorBoard events (train.tracking)
    dev_metric: Any = None  # the DevMetric rank 0 scores checkpoints with; None: no dev data
    progress_file: str | None = None  # rank 0 feeds the driver's progress bar (train.progress)
    local_checkpoint_root: str | None = None  # local mode: checkpoints are written here, Ray does not copy them
    async_validation: bool = False  # the trainer's ValidationConfig scores checkpoints (Tune's pool), not rank 0
    # train.run_key.run_fingerprint: written into every metrics.json; rank 0 resumes from the newest whole
    # checkpoint that carries it (train.checkpoints.newest_checkpoint)
    run_fingerprint: str | None = None
    # {set kind: setformat.io.PinnedSet}: the files the driver checked; an elastic run's workers read exactly these
    set_pins: dict | None = None


class Trainee(nn.Module):
    """Encoder + method heads as one module, so DDP sees (and syncs) all trained parameters."""

    def __init__(self, encoder: Encoder, method: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.method = method

    def forward(self, batch: dict):
        return self.method.loss(self.encoder, batch)


@dataclass(frozen=True)
class Worker:
    """This worker's place in the world Ray Train started."""

    rank: int
    world: int
    device: torch.device
    local_batch: int  # its share of the global batch: batch_size // world
    chunk_size: int | None  # GradCache's rows per forward; None: one forward for the whole share


@dataclass
class Position:
    """Where training is: ``step`` optimiser steps done, in ``epoch``, whose batches before ``skip`` were trained
    on before this worker started; ``last_reported``: the step of the last report."""

    step: int = 0
    epoch: int = 0
    skip: int = 0
    last_reported: int = 0


# ----------------------------------------------------------------- the recipe


def train_loop_per_worker(config: dict) -> dict:
    """A worker's training, the module docstring's steps in order; returns the metrics of its last report."""
    worker_started_at = time.time()
    from infra.logs import quiet_worker

    quiet_worker()
    # 1. inputs and world
    inputs: LoopInputs = config["inputs"]
    cfg = inputs.config
    worker = join_world(cfg)
    # 2. the model and its batches
    torch.manual_seed(cfg.seed)  # the heads' fresh initialisation
    trainee = build_trainee(cfg, inputs.data_info).to(getattr(torch, cfg.dtype))
    feed = make_feed(cfg, inputs, worker, trainee)
    total_steps = count_steps(cfg, feed.steps_per_epoch, inputs.num_rows, worker.world)
    feed.stop_at = total_steps
    # 3. restored from the newest checkpoint, or freshly initialised
    state, resumed_from = restore_model(trainee, inputs, worker.rank)
    # 4. on the device; optimiser, schedule and scaler; where training resumes
    train_step = make_train_step(trainee, cfg, worker, total_steps)
    train_step.restore(state)
    at = resume_position(state, cfg, feed.steps_per_epoch)
    # what it reports (6, 7): an elastic run's resize and rows, the start line, its lines and checkpoints
    resize = None
    if cfg.elastic and worker.rank == 0:  # against the last worker group's size, else the checkpoint's
        resize = elastic_resize(state, worker.world, at.step, record_group(inputs.run_folder, worker.world, at.step))
    if resize is not None:
        resize["worker_started_at"] = worker_started_at
    sample_log = None
    if cfg.elastic and cfg.log_sample_ids:  # the rows this worker trains on from here (train.global_order)
        from train.global_order import SampleLog

        sample_log = feed.sample_log = SampleLog(inputs.run_folder, worker.rank, worker.world, at.step)
    if worker.rank == 0:
        log.info(start_line(cfg, worker, feed.steps_per_epoch, total_steps, at, resumed_from if state else None))
    settings = report_settings(inputs, worker, at.step, total_steps, sample_log)  # rank 0 reads the dev data
    meter = Meter(examples_per_step=worker.local_batch * worker.world)
    reporter = Reporter(settings, trainee, train_step.optimizer, train_step.scheduler, train_step.scaler)
    reporter.training_starts(resize)
    # 5-7. the epochs: a step per batch, metered; lines and checkpoints as they fall due
    while at.epoch < cfg.epochs and at.step < total_steps:
        run_epoch(train_step, feed, at, total_steps, meter, reporter)
    # the end
    reporter.close()
    return reporter.last_metrics


# ----------------------------------------------------------------- setup


def join_world(cfg: TrainConfig) -> Worker:
    """This worker's rank, world size and device as Ray Train started it, and its share of the global batch."""
    import ray.train
    import ray.train.torch

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    # an elastic run's share of the global batch grows as workers go: GradCache keeps each forward to
    # the share at full size (the loss and its gradient are the same either way)
    chunk_size = cfg.chunk_size or (cfg.batch_size // cfg.max_workers if cfg.elastic else None)
    return Worker(rank, world, ray.train.torch.get_device(), cfg.batch_size // world, chunk_size)


def build_trainee(cfg: TrainConfig, data_info: dict) -> Trainee:
    encoder = Encoder(cfg.model, cfg.pooling, cfg.max_len, cfg.dropout, unpad=cfg.unpad)
    method = get_method(cfg.method)(
        cfg.options, hidden_size=encoder.hidden_size, temperature=cfg.temperature, data_info=data_info
    )
    method.loss_tile = cfg.loss_tile if cfg.loss_tile is not None else DEFAULT_LOSS_TILE  # a worker: by its device
    return Trainee(encoder, method)


def make_feed(cfg: TrainConfig, inputs: LoopInputs, worker: Worker, trainee: Trainee):
    """The worker's batches (``train.feeds``): its Ray Data shard (``feed: stream``), or its share of each global
    batch from the set it holds itself (``feed: memory``, every elastic run)."""
    import ray.train

    from train.feeds import GlobalFeed, StreamFeed

    if cfg.feed == "stream":
        columns = trainee.method.tokenized_columns(cfg.options)
        return StreamFeed(cfg, ray.train.get_dataset_shard("train"), inputs.num_rows, worker.rank, worker.world,
                          columns[0] if columns else None)
    method = get_method(cfg.method)
    return GlobalFeed(cfg, (inputs.set_pins or {}).get(method.train_set) or inputs.set_paths[method.train_set],
                      list(method.sets[method.train_set]), inputs.num_rows, worker.rank, worker.world)


def count_steps(cfg: TrainConfig, steps_per_epoch: int, num_rows: int, world: int) -> int:
    """The run's optimiser steps: ``epochs`` of ``steps_per_epoch``, at most ``max_steps``."""
    if steps_per_epoch < 1:
        raise ValueError(f"{num_rows} rows give no full batch of {cfg.batch_size} over {world} workers")
    total_steps = cfg.epochs * steps_per_epoch
    return min(total_steps, cfg.max_steps) if cfg.max_steps else total_steps


def restore_model(trainee: Trainee, inputs: LoopInputs, rank: int) -> tuple[dict | None, str | None]:
    """(the checkpoint's state, where it came from), the model loaded from it: the newer of Ray Train's checkpoint
    and the newest whole checkpoint of this run in storage (rank 0 looks, every rank resumes from what it found).
    None, None: a fresh start, where rank 0 loads the method's pretrained heads."""
    import ray.train

    newest = agreed(newest_checkpoint(inputs.run_folder, inputs.run_fingerprint) if rank == 0 and inputs.run_folder
                    else None)
    state, resumed_from = resume_state(ray.train.get_checkpoint(), newest.path if newest else None)
    if state:
        trainee.load_state_dict(state["model"])
    elif rank == 0:
        trainee.method.init_pretrained(inputs.set_paths)  # DDP broadcasts rank 0's parameters
    return state, resumed_from


def agreed(value):
    """Rank 0's ``value`` on every rank (one broadcast; the value itself where there is one process)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def on_device(trainee: Trainee, cfg: TrainConfig, device: torch.device) -> tuple[nn.Module, str, Bf16Weights | None]:
    """``trainee`` as Ray Train prepares it (device + DDP), compiled if asked: (the model to run forwards through,
    the precision resolved for ``device``, the bf16 weight copies ``bf16_weights`` trains with)."""
    import ray.train.torch

    model = ray.train.torch.prepare_model(trainee)
    if cfg.compile:  # compiles the stock forward, so the unpadded path is off
        trainee.encoder.unpad = False
        trainee.encoder.model.compile(dynamic=True)
    trainee.encoder.compile_layers = cfg.compile_layers and trainee.encoder.unpad
    # bf16 copies of the encoder's weights, made once per step (train.precision); heads and loss under autocast
    precision = resolve_precision(cfg.mixed_precision, device, cfg.dtype)
    if cfg.loss_tile is None:
        trainee.method.loss_tile = default_loss_tile(device)
    return model, precision, Bf16Weights(trainee.encoder) if precision == "bf16_weights" else None


def make_train_step(trainee: Trainee, cfg: TrainConfig, worker: Worker, total_steps: int) -> TrainStep:
    """The model on its device (:func:`on_device`) and its optimiser: AdamW over :func:`param_groups`, the linear
    warmup/decay schedule over ``total_steps``, fp16's GradScaler."""
    from transformers import get_linear_schedule_with_warmup

    model, precision, bf16_weights = on_device(trainee, cfg, worker.device)
    # fused: one kernel for all parameters (on CPU 7x faster than the per-tensor loop: 0.04 s vs 0.28 s
    # a step for MiniLM's 22M parameters, 15% of its whole step at batch 32)
    optimizer = torch.optim.AdamW(param_groups(trainee, cfg.weight_decay, cfg.lr), lr=cfg.lr,
                                  fused=worker.device.type in ("cpu", "cuda"))
    return TrainStep(cfg, worker, trainee, model, optimizer,
                     scheduler=get_linear_schedule_with_warmup(optimizer, cfg.warmup_steps, total_steps),
                     scaler=torch.amp.GradScaler("cuda") if precision == "fp16" else None,
                     amp_dtype=_AMP_DTYPES.get(precision), bf16_weights=bf16_weights)


def param_groups(trainee: Trainee, weight_decay: float, lr: float) -> list[dict]:
    """The method's own groups (e.g. RSE's relation table at its lr), then decay / no decay
    (biases and LayerNorm weights, matched by name suffix) for every other parameter."""
    special = [{"name": trainee.method.name, **g} for g in trainee.method.optimizer_groups(lr)]
    taken = {id(p) for g in special for p in g["params"]}
    decay, no_decay = [], []
    for name, p in trainee.named_parameters():
        if p.requires_grad and id(p) not in taken:
            (no_decay if any(name.endswith(k) for k in _NO_DECAY) else decay).append(p)
    return [*special, {"name": "encoder", "params": decay, "weight_decay": weight_decay},
            {"name": "encoder", "params": no_decay, "weight_decay": 0.0}]


def resume_position(state: dict | None, cfg: TrainConfig, steps_per_epoch: int) -> Position:
    """Where training goes on from a checkpoint's ``state`` (the epoch and batch it stored; an elastic run's from
    its step), or the start."""
    if not state:
        return Position()
    step, epoch, skip = state["step"], state["resume_epoch"], state["resume_skip"]
    if cfg.elastic:  # the next global step, whatever the world size the checkpoint was written at
        epoch, skip = divmod(step, steps_per_epoch)
    return Position(step, epoch, skip, last_reported=step)


def elastic_resize(state: dict | None, world: int, step: int, last_group: int | None = None) -> dict | None:
    """A resize when this worker group's size differs from the last group's (``last_group``:
    ``train.reporting.record_group``) or, with no group recorded, from the world size the checkpoint it resumes
    from was written at: its step, the sizes and why (Ray Train restarts the worker group at the size the
    cluster can hold). The last group counts first: a group replaced before its first checkpoint (a node back
    while it ran) was still a size the run trained at."""
    before = last_group if last_group is not None else (state or {}).get("world_size")
    if before is None or before == world:
        return None
    why = ("fewer workers could be placed (a node was lost)" if world < before
           else "more workers could be placed (capacity returned)")
    return {"step": step, "from": before, "to": world, "why": why, "checkpoint_reported_at": state.get("reported_at")}


def start_line(cfg: TrainConfig, worker: Worker, steps_per_epoch: int, total_steps: int, at: Position,
               resumed_from: str | None) -> str:
    """Rank 0's first line: the run's shape and where it starts (``resumed_from``: None for a fresh start)."""
    position = f"from its batch {at.skip}" if cfg.elastic else f"skipping {at.skip} batches"
    where = (f"resumed at step {at.step} (epoch {at.epoch}, {position}) from {resumed_from}"
             if resumed_from is not None else "fresh start")
    return (f"[train] {cfg.method} on {worker.world} worker(s): global batch {cfg.batch_size} "
            f"({worker.local_batch}/worker), {steps_per_epoch} steps/epoch, {total_steps} steps in all, "
            f"{torch.get_num_threads()} torch threads; {where}")


def report_settings(inputs: LoopInputs, worker: Worker, start_step: int, total_steps: int,
                    sample_log) -> ReportSettings:
    """The :class:`ReportSettings` of this worker; rank 0 reads the dev data it scores checkpoints on, unless
    Tune's pool scores them (``async_validation``)."""
    cfg, metric = inputs.config, inputs.dev_metric
    dev = None
    if metric is not None and worker.rank == 0 and not inputs.async_validation:
        dev = (metric, metric.read(as_local(cfg.dev_data, "data")))
    return ReportSettings(
        cfg=cfg, rank=worker.rank, world=worker.world, start_step=start_step, total_steps=total_steps,
        run_folder=inputs.run_folder, progress_file=inputs.progress_file, dev=dev,
        async_validation=inputs.async_validation,
        pending_score_key=metric.key if inputs.async_validation and metric is not None else None,
        local_root=inputs.local_checkpoint_root, fingerprint=inputs.run_fingerprint, sample_log=sample_log)


# ----------------------------------------------------------------- the epochs


@dataclass
class TrainStep:
    """One optimiser step (called with a collated batch and its global step) and everything it needs: the model as
    DDP wraps it, AdamW, its schedule, fp16's GradScaler, the precision."""

    cfg: TrainConfig
    worker: Worker
    trainee: Trainee
    model: nn.Module  # ``trainee`` as ``prepare_model`` wrapped it: what the forwards run through
    optimizer: torch.optim.Optimizer
    scheduler: Any
    scaler: torch.amp.GradScaler | None = None  # fp16's
    amp_dtype: torch.dtype | None = None  # autocast's; None: no autocast
    bf16_weights: Bf16Weights | None = None

    def restore(self, state: dict | None) -> None:
        """The optimiser's, the schedule's and the scaler's state from a checkpoint's ``state`` (None: a fresh start)."""
        if not state:
            return
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])

    def autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.worker.device.type, dtype=self.amp_dtype)

    def __call__(self, collated: dict, step: int) -> tuple[torch.Tensor, dict]:
        """(loss, the method's parts and ``grad_norm``), after the step on ``collated``, the batch of ``step``."""
        cfg, worker, optimizer, scaler = self.cfg, self.worker, self.optimizer, self.scaler
        tensors = to_device(collated, worker.device)
        dtype = getattr(torch, cfg.dtype)
        if dtype != torch.float32:
            tensors = cast_floats(tensors, dtype)
        if cfg.elastic:  # dropout masks: f(seed, step, column, global row), whichever worker has the row
            tensors = add_row_keys(tensors, cfg.seed, step, first_row=worker.rank * worker.local_batch)
        torch.manual_seed(cfg.seed + 7919 * worker.rank + 104729 * step)  # other draws: f(seed, rank, step)
        loss, parts = forward_backward(self.model, self.trainee, tensors, chunk_size=worker.chunk_size,
                                       backward_scale=scaler.scale if scaler is not None else (lambda x: x),
                                       autocast=self.autocast, bf16_weights=self.bf16_weights)
        if scaler is not None:
            scaler.unscale_(optimizer)
        if cfg.max_grad_norm > 0:  # the norm before clipping: a device tensor, read at the next report
            parts = {**parts, "grad_norm": torch.nn.utils.clip_grad_norm_(self.trainee.parameters(), cfg.max_grad_norm)}
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        self.scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return loss, parts


def cast_floats(batch: dict, dtype: torch.dtype) -> dict:
    """The batch's floating tensors (e.g. RSE's row weights) in ``dtype``; ids and masks as they are."""
    return {k: cast_floats(v, dtype) if isinstance(v, dict) else v.to(dtype) if v.is_floating_point() else v
            for k, v in batch.items()}


def run_epoch(train_step: TrainStep, feed, at: Position, total_steps: int, meter: Meter, reporter: Reporter) -> None:
    """The epoch ``at.epoch`` from its batch ``at.skip`` to its end or the run's last step: a step per batch,
    metered; after each the reporter's lines, and a report every ``checkpoint_every_steps`` and at the last step;
    a report at the epoch's end unless its last step had one. ``at`` then points at the next epoch's start."""
    cfg, trainee, epoch = train_step.cfg, train_step.trainee, at.epoch
    batches = meter.timed(feed.epoch(epoch, at.skip))
    collate = functools.partial(trainee.method.collate, encoder=trainee.encoder)
    # on a GPU the next batch is tokenized while this one's kernels run; an elastic feed records the rows
    # of each step as it yields them, so it is read one step at a time
    collated = (collated_ahead(batches, collate) if train_step.worker.device.type == "cuda" and not cfg.elastic
                else ((batch, collate(batch)) for batch in batches))
    for i, (_, collated_batch) in enumerate(collated, start=at.skip):
        if at.step >= total_steps:
            break
        loss, parts = train_step(collated_batch, at.step)
        at.step += 1
        meter.add(loss.detach(), parts)
        reporter.step_done(at.step, meter)
        if (cfg.checkpoint_every_steps and at.step % cfg.checkpoint_every_steps == 0) or at.step >= total_steps:
            done = i + 1  # batches of this epoch trained on
            resume = (epoch + 1, 0) if done >= feed.steps_per_epoch else (epoch, done)
            reporter.report(at.step, epoch, resume, meter)
            at.last_reported = at.step
    if at.step != at.last_reported:  # end of epoch
        reporter.report(at.step, epoch, (epoch + 1, 0), meter)
        at.last_reported = at.step
    at.epoch, at.skip = epoch + 1, 0
