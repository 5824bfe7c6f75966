"""The one training loop every method runs in (Ray Train V2 ``train_loop_per_worker``).

Read top to bottom, a worker:

1. takes what the driver decided (``config["inputs"]``, a :class:`LoopInputs`: the ``TrainConfig``,
   the rows of the training set, the sets, the dev metric, where to write);
2. builds encoder + method heads (``Trainee``); restores them from
   ``ray.train.get_checkpoint()`` if there is one, else rank 0 loads
   pretrained heads (e.g. EASE's Wikipedia2Vec vectors);
3. ``prepare_model`` (device + DDP), AdamW (no decay on bias/LayerNorm) with a
   linear warmup/decay schedule; restores optimizer/scheduler/step/epoch;
4. for each epoch iterates its batches (``train.feeds``): its shard of the Ray dataset in batches of
   ``batch_size // world`` (``drop_last=True`` so every worker's all-gather has
   the same shape), optionally regrouped by length (``length_bucketing``); or, in an elastic run
   (``num_workers: [min, max]``), its share of each global batch ``train.global_order`` names,
   whatever the world size (a share that grew as workers went is embedded in GradCache chunks of
   the full-size share); collates (``method.collate``: tokenizes, or cuts Ray Data's pre-tokenized
   arrays to the batch's longest row) and takes a step (``train.step``: plain,
   or GradCache with ``chunk_size``; optional ``torch.autocast``, fp16 with a
   GradScaler; the dropout RNG is reseeded from (seed, rank, step) before every
   step, so a resumed run draws the same masks as an uninterrupted one);
5. every ``checkpoint_every_steps`` steps, at the end of each epoch and at the
   last step: rank 0 writes ``state.pt``, ``metrics.json`` and the model as a SentenceTransformer
   folder (``model/``, with the method's extra heads beside it), scores it on
   ``dev_data`` with the method's dev metric (``score.dev_metrics``: ``dev_spearman``,
   ``dev_auprc``, ...), and every rank calls ``ray.train.report(metrics, checkpoint,
   checkpoint_dir_name="step-0000125")``. Under Tune (``async_validation``) rank 0 does not
   score: the report asks Ray Train's asynchronous validation to, and Tune's evaluation pool
   (``tune.scorers``) scores the checkpoint while training goes on.

Resume (decision): a checkpoint stores the epoch to resume and how many batches
of it were done. A resumed worker restarts that epoch's iterator and discards
(reads without training on) that many batches, so the step count, the LR
schedule and the number of examples seen are exactly those of an
uninterrupted run. With one worker the rows arrive in file order
(``preserve_order``, set by ``train.run``), so a run is deterministic given its
seed and the skipped rows are the same rows; with several workers Ray Data's
streaming split hands blocks to whichever worker asks first, so the skipped
rows are the same *number*, not necessarily the same rows. SimCSE/EASE train
one epoch, where restarting the epoch would repeat everything. The RNG needs no
saving: it is a function of (seed, rank, step).

Elastic runs resume at the next global step (no batch is read to be dropped), and a checkpoint
written at another world size is a resize: rank 0 says so in one line after its first step, puts
``world_size`` in TensorBoard and appends the resize to ``resizes.jsonl`` in the run folder.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from infra.storage import retries as storage_retries
from infra.uris import as_local
from train.batch import collated_ahead, to_device
from train.checkpoints import METRICS_FILE, STATE_FILE, checkpoint_metrics, dir_name, newest_checkpoint, resume_state
from train.config import TrainConfig
from train.dropout_keys import add_row_keys
from train.encoder import Encoder
from train.methods import get_method
from train.methods.tiled import DEFAULT_LOSS_TILE, default_loss_tile
from train.precision import Bf16Weights, resolve_precision
from train.progress import ProgressWriter
from train.saved_models import save_model
from train.step import forward_backward

# rank 0's lines ("[train] step …"): on the worker's stdout, which Ray forwards to the driver (infra.logs)
log = logging.getLogger(__name__)
MODEL_DIR = "model"
# Under Tune a checkpoint's dev score arrives after its report (the evaluation pool's, through Ray Train's
# asynchronous validation, which overwrites the reported value): the report carries the score's key already, at
# this value, below every score, so that Ray's checkpoint ranking (CheckpointConfig.checkpoint_score_attribute)
# never looks for a missing key. Finite: Ray saves its checkpoint list as JSON, where inf and nan become null.
UNSCORED = -sys.float_info.max
_NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")


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
    # {set kind: sets.io.PinnedSet}: the files the driver checked; an elastic run's workers read exactly these
    set_pins: dict | None = None


class Trainee(nn.Module):
    """Encoder + method heads as one module, so DDP sees (and syncs) all trained parameters."""

    def __init__(self, encoder: Encoder, method: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.method = method

    def forward(self, batch: dict):
        return self.method.loss(self.encoder, batch)


class Eta:
    """Elapsed time and the time left, from this run's own steps/s (a resumed run counts from its start)."""

    def __init__(self, start_step: int, total_steps: int):
        self.start_step, self.total_steps, self.t0 = start_step, total_steps, time.perf_counter()

    def line(self, step: int) -> str:
        elapsed = time.perf_counter() - self.t0
        done = step - self.start_step
        left = elapsed / done * (self.total_steps - step) if done > 0 else float("nan")
        return f"elapsed {_clock(elapsed)} eta {_clock(left)}"


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def build_trainee(cfg: TrainConfig, data_info: dict) -> Trainee:
    encoder = Encoder(cfg.model, cfg.pooling, cfg.max_len, cfg.dropout, unpad=cfg.unpad)
    method = get_method(cfg.method)(
        cfg.options, hidden_size=encoder.hidden_size, temperature=cfg.temperature, data_info=data_info
    )
    method.loss_tile = cfg.loss_tile if cfg.loss_tile is not None else DEFAULT_LOSS_TILE  # a worker: by its device
    return Trainee(encoder, method)


def train_loop_per_worker(config: dict) -> dict:
    worker_started_at = time.time()
    import ray.train
    import ray.train.torch

    # 1. config and world -------------------------------------------------
    from infra.logs import quiet_worker

    quiet_worker()
    inputs: LoopInputs = config["inputs"]
    cfg, num_rows = inputs.config, inputs.num_rows
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    device = ray.train.torch.get_device()
    local_bs = cfg.batch_size // world
    # an elastic run's share of the global batch grows as workers go: GradCache keeps each forward to
    # the share at full size (the loss and its gradient are the same either way)
    chunk_size = cfg.chunk_size or (cfg.batch_size // cfg.max_workers if cfg.elastic else None)

    # 2. model, restored or freshly initialised; the worker's batches ----------------------------
    torch.manual_seed(cfg.seed)
    trainee = build_trainee(cfg, inputs.data_info)
    dtype = getattr(torch, cfg.dtype)
    trainee.to(dtype)
    feed = make_feed(cfg, inputs, rank, world, trainee)
    steps_per_epoch = feed.steps_per_epoch
    if steps_per_epoch < 1:
        raise ValueError(f"{num_rows} rows give no full batch of {cfg.batch_size} over {world} workers")
    total_steps = cfg.epochs * steps_per_epoch
    if cfg.max_steps:
        total_steps = min(total_steps, cfg.max_steps)
    feed.stop_at = total_steps
    # the newest whole checkpoint in storage, which Ray Train may not have recorded yet (a worker group lost
    # while reporting): rank 0 looks, every rank resumes from what it found
    newest = agreed(newest_checkpoint(inputs.run_folder, inputs.run_fingerprint) if rank == 0 and inputs.run_folder
                    else None)
    state, resumed_from = resume_state(ray.train.get_checkpoint(), newest.path if newest else None)
    if state:
        trainee.load_state_dict(state["model"])
    elif rank == 0:
        trainee.method.init_pretrained(inputs.set_paths)  # DDP broadcasts rank 0's parameters
    model = ray.train.torch.prepare_model(trainee)
    if cfg.compile:  # compiles the stock forward, so the unpadded path is off
        trainee.encoder.unpad = False
        trainee.encoder.model.compile(dynamic=True)
    trainee.encoder.compile_layers = cfg.compile_layers and trainee.encoder.unpad
    # bf16 copies of the encoder's weights, made once per step (train.precision); heads and loss under autocast
    precision = resolve_precision(cfg.mixed_precision, device, cfg.dtype)
    if cfg.loss_tile is None:
        trainee.method.loss_tile = default_loss_tile(device)
    bf16_weights = Bf16Weights(trainee.encoder) if precision == "bf16_weights" else None

    # 3. optimizer, schedule, progress --------------------------------------
    from transformers import get_linear_schedule_with_warmup

    # fused: one kernel for all parameters (on CPU 7x faster than the per-tensor loop: 0.04 s vs 0.28 s
    # a step for MiniLM's 22M parameters, 15% of its whole step at batch 32)
    optimizer = torch.optim.AdamW(param_groups(trainee, cfg.weight_decay, cfg.lr), lr=cfg.lr,
                                  fused=device.type in ("cpu", "cuda"))
    scheduler = get_linear_schedule_with_warmup(optimizer, cfg.warmup_steps, total_steps)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    amp_dtype = {"bf16": torch.bfloat16, "bf16_weights": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def autocast():
        if amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=amp_dtype)

    step, epoch, skip = 0, 0, 0
    if state:
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if scaler is not None and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        step, epoch, skip = state["step"], state["resume_epoch"], state["resume_skip"]
        if cfg.elastic:  # the next global step, whatever the world size the checkpoint was written at
            epoch, skip = divmod(step, steps_per_epoch)
    start_step = step
    resize = elastic_resize(state, world, step) if cfg.elastic else None
    if resize is not None:
        resize["worker_started_at"] = worker_started_at
    sample_log = None
    if cfg.elastic and cfg.log_sample_ids:  # the rows this worker trains on from here (train.global_order)
        from train.global_order import SampleLog

        sample_log = feed.sample_log = SampleLog(inputs.run_folder, rank, world, start_step)
    if rank == 0:
        position = f"from its batch {skip}" if cfg.elastic else f"skipping {skip} batches"
        where = f"resumed at step {step} (epoch {epoch}, {position}) from {resumed_from}" if state else "fresh start"
        log.info(
            f"[train] {cfg.method} on {world} worker(s): global batch {cfg.batch_size} ({local_bs}/worker), "
            f"{steps_per_epoch} steps/epoch, {total_steps} steps in all, {torch.get_num_threads()} torch threads; {where}"
        )
    dev = None
    if inputs.dev_metric is not None and rank == 0 and not inputs.async_validation:  # else Tune's pool scores
        dev = (inputs.dev_metric, inputs.dev_metric.read(as_local(cfg.dev_data, "data")))
    meter = Meter(examples_per_step=local_bs * world)
    reporter = Reporter(
        cfg,
        rank,
        world,
        trainee,
        optimizer,
        scheduler,
        scaler,
        dev,
        start_step,
        local_root=inputs.local_checkpoint_root,
        async_validation=inputs.async_validation,
        run_folder=inputs.run_folder,
        sample_log=sample_log,
        fingerprint=inputs.run_fingerprint,
        pending_score_key=inputs.dev_metric.key if inputs.async_validation and inputs.dev_metric is not None else None,
    )
    if rank == 0:
        reporter.tracking.log(step, {"world_size": world})

    # 4. the loop -----------------------------------------------------------
    last_reported = step
    eta = Eta(start_step, total_steps)
    # a terminal on the driver: rank 0 feeds its progress bar (train.progress) instead of printing lines
    progress = (ProgressWriter(inputs.progress_file, total_steps, step)
                if rank == 0 and inputs.progress_file else None)
    if resize is not None:  # model, state and data in hand: what comes next is training
        resize["ready_at"] = time.time()
    while epoch < cfg.epochs and step < total_steps:
        done = skip
        batches = meter.timed(feed.epoch(epoch, skip))
        collate = functools.partial(trainee.method.collate, encoder=trainee.encoder)
        # on a GPU the next batch is tokenized while this one's kernels run; an elastic feed records the rows
        # of each step as it yields them, so it is read one step at a time
        collated = (collated_ahead(batches, collate) if device.type == "cuda" and not cfg.elastic
                    else ((batch, collate(batch)) for batch in batches))
        for i, (_, collated_batch) in enumerate(collated, start=skip):
            if step >= total_steps:
                break
            tensors = to_device(collated_batch, device)
            if dtype != torch.float32:
                tensors = cast_floats(tensors, dtype)
            if cfg.elastic:  # dropout masks: f(seed, step, column, global row), whichever worker has the row
                tensors = add_row_keys(tensors, cfg.seed, step, first_row=rank * local_bs)
            torch.manual_seed(cfg.seed + 7919 * rank + 104729 * step)  # other draws: f(seed, rank, step)
            loss, parts = forward_backward(
                model,
                trainee,
                tensors,
                chunk_size=chunk_size,
                backward_scale=scaler.scale if scaler is not None else (lambda x: x),
                autocast=autocast,
                bf16_weights=bf16_weights,
            )
            if scaler is not None:
                scaler.unscale_(optimizer)
            if cfg.max_grad_norm > 0:  # the norm before clipping: a device tensor, read at the next report
                parts = {**parts, "grad_norm": torch.nn.utils.clip_grad_norm_(trainee.parameters(), cfg.max_grad_norm)}
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step, done = step + 1, i + 1
            meter.add(loss.detach(), parts)
            if resize is not None and rank == 0:  # the first step at the new size: what the resize cost
                record_resize(inputs.run_folder, resize, reporter.tracking)
                resize = None
            if progress is not None:
                progress.write(step, meter.peek)
            if cfg.log_every_steps and step % cfg.log_every_steps == 0:
                loss = meter.global_mean()  # every rank: the mean over all workers' losses
                if rank == 0:
                    if progress is None:
                        log.info(f"[train] step {step}/{total_steps} ({100 * step / total_steps:.0f}%) loss "
                                 f"{loss:.5g} {eta.line(step)}")
                    reporter.tracking.log(step, {"loss": loss, **learning_rates(optimizer, scheduler)})
            if (cfg.checkpoint_every_steps and step % cfg.checkpoint_every_steps == 0) or step >= total_steps:
                resume = (epoch + 1, 0) if done >= steps_per_epoch else (epoch, done)
                reporter.report(step, epoch, resume, meter)
                last_reported = step
        if step != last_reported:  # end of epoch
            reporter.report(step, epoch, (epoch + 1, 0), meter)
            last_reported = step
        epoch, skip = epoch + 1, 0
    reporter.close()
    return reporter.last_metrics


# ----------------------------------------------------------------- helpers


def make_feed(cfg: TrainConfig, inputs: LoopInputs, rank: int, world: int, trainee: Trainee):
    """The worker's batches (``train.feeds``): its Ray Data shard (``feed: stream``), or its share of each global
    batch from the set it holds itself (``feed: memory``, every elastic run)."""
    import ray.train

    from train.feeds import GlobalFeed, StreamFeed

    if cfg.feed == "stream":
        columns = trainee.method.tokenized_columns(cfg.options)
        return StreamFeed(cfg, ray.train.get_dataset_shard("train"), inputs.num_rows, rank, world,
                          columns[0] if columns else None)
    method = get_method(cfg.method)
    return GlobalFeed(cfg, (inputs.set_pins or {}).get(method.train_set) or inputs.set_paths[method.train_set],
                      list(method.sets[method.train_set]), inputs.num_rows, rank, world)


def agreed(value):
    """Rank 0's ``value`` on every rank (one broadcast; the value itself where there is one process)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def elastic_resize(state: dict | None, world: int, step: int) -> dict | None:
    """A resize when the checkpoint this elastic run resumes from was written at another world size: its
    step, the sizes and why (Ray Train restarts the worker group at the size the cluster can hold)."""
    before = (state or {}).get("world_size")
    if before is None or before == world:
        return None
    why = ("fewer workers could be placed (a node was lost)" if world < before
           else "more workers could be placed (capacity returned)")
    return {"step": step, "from": before, "to": world, "why": why, "checkpoint_reported_at": state.get("reported_at")}


RESIZES_FILE = "resizes.jsonl"


def cast_floats(batch: dict, dtype: torch.dtype) -> dict:
    """The batch's floating tensors (e.g. RSE's row weights) in ``dtype``; ids and masks as they are."""
    return {k: cast_floats(v, dtype) if isinstance(v, dict) else v.to(dtype) if v.is_floating_point() else v
            for k, v in batch.items()}


def record_resize(run_folder: str, resize: dict, tracking) -> None:
    """Rank 0, after the first step at the new size: one log line, a TensorBoard point (``train/world_size``)
    and a line in ``{run folder}/resizes.jsonl``, with the seconds since the checkpoint it resumed from (the
    work redone, the wait for the lost workers and the restart)."""
    from infra.uris import append_text

    now = time.time()
    since = resize.get("checkpoint_reported_at")
    resize = {**resize, "first_step_at": now, "seconds_lost": round(now - since, 2) if since else None}
    log.info(f"[train] resized: {resize['from']} -> {resize['to']} worker(s) at step {resize['step']}, "
             f"{resize['why']}; {resize['seconds_lost']} s since the checkpoint it resumed from")
    tracking.log(resize["step"], {"world_size": resize["to"]})
    append_text(f"{run_folder}/{RESIZES_FILE}", json.dumps(resize) + "\n")


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


def learning_rates(optimizer, scheduler) -> dict[str, float]:
    """``lr``: the encoder's; ``lr_<name>``: a method's own group at its own rate (RSE's relations, GaussCSE's heads)."""
    out: dict[str, float] = {}
    for group, lr in zip(optimizer.param_groups, scheduler.get_last_lr()):
        out.setdefault("lr" if group.get("name", "encoder") == "encoder" else f"lr_{group['name']}", lr)
    return out


class Meter:
    """Running means of the loss (and the method's parts) and examples/s since the last report.

    Sums stay on the device (no per-step synchronisation); reading them (``peek``, ``summary``)
    raises FloatingPointError when the loss became inf/nan since the last reset."""

    def __init__(self, examples_per_step: int):
        self.examples_per_step = examples_per_step
        self.reset()

    def reset(self) -> None:
        self.n, self.loss, self.parts, self.t0 = 0, 0.0, {}, time.perf_counter()
        self.data_wait = 0.0

    def timed(self, batches):
        """``batches``, adding the time spent waiting for each to ``data_wait`` (an input-bound run
        shows it as ``data_wait_frac`` near 1)."""
        it = iter(batches)
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                return
            self.data_wait += time.perf_counter() - t0
            yield batch

    def add(self, loss, parts: dict) -> None:
        self.n += 1
        self.loss = self.loss + loss
        for k, v in parts.items():
            self.parts[k] = self.parts.get(k, 0.0) + v

    def peek(self) -> float:
        mean = float(self.loss) / max(self.n, 1)
        if not math.isfinite(mean):
            raise FloatingPointError(f"loss is {mean} (mean of the last {self.n} steps)")
        return mean

    def global_mean(self) -> float:
        """``peek`` over every worker: the mean of all workers' losses since the last reset (one all-reduce;
        every rank calls it at the same step)."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return self.peek()
        local = self.loss.detach() if torch.is_tensor(self.loss) else torch.tensor(float(self.loss))
        total = local.to(torch.float64).reshape(1).clone()
        if dist.get_backend() == "nccl" and total.device.type != "cuda":
            total = total.cuda()
        dist.all_reduce(total)
        mean = float(total) / max(self.n, 1) / dist.get_world_size()
        if not math.isfinite(mean):
            raise FloatingPointError(f"loss is {mean} (mean of the last {self.n} steps over every worker)")
        return mean

    def summary(self) -> dict:
        dt = max(time.perf_counter() - self.t0, 1e-9)
        out = {
            "loss": self.global_mean() if self.n else math.nan,
            "examples_per_s": self.n * self.examples_per_step / dt,
            "data_wait_frac": min(self.data_wait / dt, 1.0),
        }
        out.update({k: float(v) / max(self.n, 1) for k, v in self.parts.items()})
        return out


class _NoLog:
    """What ranks other than 0 log to: nothing."""

    def log(self, *args, **kwargs) -> None:
        pass

    report = log

    def close(self) -> None:
        pass


class Reporter:
    """Checkpoint (rank 0) + score + TensorBoard (rank 0) + ``ray.train.report`` (all ranks)."""

    def __init__(self, cfg, rank, world, trainee, optimizer, scheduler, scaler, dev, start_step, local_root=None,
                 async_validation=False, run_folder=None, sample_log=None, fingerprint=None, pending_score_key=None):
        self.cfg, self.rank, self.world, self.trainee = cfg, rank, world, trainee
        self.pending_score_key = pending_score_key  # reported at UNSCORED until the validation's score replaces it
        self.sample_log, self.fingerprint = sample_log, fingerprint
        self.local_root, self.async_validation = local_root, async_validation
        self.optimizer, self.scheduler, self.scaler = optimizer, scheduler, scaler
        self.dev, self.start_step = dev, start_step
        self.last_metrics: dict = {}
        self.tracking = _NoLog()
        if rank == 0 and run_folder:
            from train.tracking import Trackers

            self.tracking = Trackers(run_folder, start_step, cfg.name, cfg.to_dict())

    def close(self) -> None:
        self.tracking.close()

    def _staging(self, step: int):
        """Where rank 0 writes the checkpoint before it is published: a temporary folder. Ray Train uploads it
        to storage; in local mode (``local_root``: Ray keeps a local-mode checkpoint where it is) :meth:`_kept`
        publishes it to ``{run folder}/step-…``."""
        return tempfile.TemporaryDirectory(prefix="structcse-ckpt-")

    def _kept(self, staged: str, step: int):
        """The reported checkpoint, sealed (``_files.json``: a copy of it is checked whole before it is read).
        Local mode: Ray Train neither uploads nor keeps a local-mode checkpoint, so the staged folder is
        published to ``{run folder}/step-…`` here, whole or not at all (``infra.publish``), and that is what
        is reported."""
        import ray.train

        from infra.publish import publish_folder, seal

        if self.local_root:
            from infra.storage import arrow_filesystem

            from infra.publish import resolve

            target = resolve(publish_folder(staged, f"{self.local_root.rstrip('/')}/{dir_name(step)}"))
            filesystem, path = arrow_filesystem(target)
            return ray.train.Checkpoint(path=path, filesystem=filesystem)
        seal(staged)
        return ray.train.Checkpoint.from_directory(staged)

    def report(self, step: int, epoch: int, resume: tuple[int, int], meter: Meter) -> None:
        import ray.train

        metrics = {
            **meter.summary(),
            "step": step,
            "examples_seen": step * self.cfg.batch_size,  # Tune's ASHA time attribute: rungs at equal data
            "epoch": epoch,
            **learning_rates(self.optimizer, self.scheduler),
            "start_step": self.start_step,
            "world_size": self.world,
            "reported_at": time.time(),
            "storage_retries": storage_retries(),  # this worker's, so far: a throttled store is said in the summary
        }
        if self.sample_log is not None:  # before the checkpoint: a checkpoint in storage has its steps' rows logged
            self.sample_log.flush()
        with self._staging(step) as tmp:
            checkpoint = None
            if self.rank == 0:
                torch.save(
                    {
                        "model": self.trainee.state_dict(),
                        "optimizer": self.optimizer.state_dict(),
                        "scheduler": self.scheduler.state_dict(),
                        "scaler": self.scaler.state_dict() if self.scaler is not None else None,
                        "step": step,
                        "epoch": epoch,
                        "resume_epoch": resume[0],
                        "resume_skip": resume[1],
                        "world_size": self.world,
                        "reported_at": metrics["reported_at"],
                        "config": self.cfg.to_dict(),
                    },
                    Path(tmp) / STATE_FILE,
                )
                model_dir = Path(tmp) / MODEL_DIR
                save_model(self.trainee.encoder, self.trainee.method, model_dir)
                if self.dev is not None:
                    from train.saved_models import score_model_dir

                    metric, data = self.dev
                    metrics[metric.key] = score_model_dir(metric, model_dir, data)
                (Path(tmp) / METRICS_FILE).write_text(
                    json.dumps(checkpoint_metrics(metrics, self.fingerprint), indent=2, default=str))
                self.tracking.report(step, metrics, self.dev[0].key if self.dev is not None else None)
                checkpoint = self._kept(tmp, step)
                extra = f" {self.dev[0].key} {metrics[self.dev[0].key]:.4f}" if self.dev is not None else ""
                log.info(f"[train] step {step} epoch {epoch} loss {metrics['loss']:.5g} "
                         f"{metrics['examples_per_s']:.1f} examples/s{extra}")
            validation = False
            if self.async_validation:  # the pool scores this checkpoint while training goes on
                from ray.train.v2.api.validation_config import ValidationTaskConfig

                validation = ValidationTaskConfig(fn_kwargs={"step": step, "examples_seen": metrics["examples_seen"]})
            reported = {**metrics, self.pending_score_key: UNSCORED} if validation and self.pending_score_key else metrics
            ray.train.report(reported, checkpoint=checkpoint, checkpoint_dir_name=dir_name(step),
                             validation=validation)
        self.last_metrics = metrics
        meter.reset()

