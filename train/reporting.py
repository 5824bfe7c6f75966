"""What a training worker (``train.loop``) says about its run, through its :class:`Reporter`: after each step, the
driver's progress bar or a ``[train] step …`` line every ``log_every_steps`` steps and TensorBoard's loss and
learning rates; at each checkpoint, the checkpoint itself (rank 0: ``state.pt``, the model folder, its dev score,
``metrics.json``) and ``ray.train.report`` (every rank); after the first step of a resized elastic run, the
resize (``resizes.jsonl``).

:class:`Meter` keeps the running means those lines and reports carry; :class:`ReportSettings` is what a
:class:`Reporter` is told once.
"""

from __future__ import annotations

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

from infra.storage import retries as storage_retries
from train.checkpoints import METRICS_FILE, STATE_FILE, checkpoint_metrics, dir_name
from train.config import TrainConfig
from train.progress import ProgressWriter
from train.saved_models import save_model

# rank 0's lines ("[train] step …"): on the worker's stdout, which Ray forwards to the driver (infra.logs)
log = logging.getLogger(__name__)
MODEL_DIR = "model"
RESIZES_FILE = "resizes.jsonl"
GROUPS_FILE = "worker_groups.jsonl"  # an elastic run's worker groups as rank 0 started them: world size, step
# Under Tune a checkpoint's dev score arrives after its report (the evaluation pool's, through Ray Train's
# asynchronous validation, which overwrites the reported value): the report carries the score's key already, at
# this value, below every score, so that Ray's checkpoint ranking (CheckpointConfig.checkpoint_score_attribute)
# never looks for a missing key. Finite: Ray saves its checkpoint list as JSON, where inf and nan become null.
UNSCORED = -sys.float_info.max


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


def learning_rates(optimizer, scheduler) -> dict[str, float]:
    """``lr``: the encoder's; ``lr_<name>``: a method's own group at its own rate (RSE's relations, GaussCSE's heads)."""
    out: dict[str, float] = {}
    for group, lr in zip(optimizer.param_groups, scheduler.get_last_lr()):
        out.setdefault("lr" if group.get("name", "encoder") == "encoder" else f"lr_{group['name']}", lr)
    return out


def record_group(run_folder: str | None, world: int, step: int) -> int | None:
    """Rank 0 of an elastic run's new worker group: append ``{world, step, started_at}`` to the run folder's
    ``worker_groups.jsonl``; the world size of the group before it (None for the first)."""
    from infra.appendlog import append_text, read_appended

    if not run_folder:
        return None
    lines = [line for line in read_appended(f"{run_folder}/{GROUPS_FILE}").splitlines() if line.strip()]
    append_text(f"{run_folder}/{GROUPS_FILE}",
                json.dumps({"world": world, "step": step, "started_at": time.time()}) + "\n")
    return json.loads(lines[-1])["world"] if lines else None


def record_resize(run_folder: str, resize: dict, tracking) -> None:
    """Rank 0, after the first step at the new size: one log line, a TensorBoard point (``train/world_size``)
    and a line in ``{run folder}/resizes.jsonl``, with the seconds since the checkpoint it resumed from (the
    work redone, the wait for the lost workers and the restart)."""
    from infra.appendlog import append_text

    now = time.time()
    since = resize.get("checkpoint_reported_at")
    resize = {**resize, "first_step_at": now, "seconds_lost": round(now - since, 2) if since else None}
    log.info(f"[train] resized: {resize['from']} -> {resize['to']} worker(s) at step {resize['step']}, "
             f"{resize['why']}; {resize['seconds_lost']} s since the checkpoint it resumed from")
    tracking.log(resize["step"], {"world_size": resize["to"]})
    append_text(f"{run_folder}/{RESIZES_FILE}", json.dumps(resize) + "\n")


class _NoLog:
    """What ranks other than 0 log to: nothing."""

    def log(self, *args, **kwargs) -> None:
        pass

    report = log

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class ReportSettings:
    """What a :class:`Reporter` is told once: the run, this worker, and where its lines, checkpoints and scores go."""

    cfg: TrainConfig
    rank: int
    world: int
    start_step: int  # the step this worker group started at: the ETA's origin, TensorBoard's first point
    total_steps: int
    run_folder: str | None = None  # rank 0's TensorBoard events (train.tracking) and resizes.jsonl
    progress_file: str | None = None  # rank 0 feeds the driver's progress bar (train.progress) instead of step lines
    dev: tuple | None = None  # (DevMetric, its data): rank 0 scores every checkpoint; None: nobody here scores
    async_validation: bool = False  # each report asks Ray Train's asynchronous validation (Tune's pool) to score it
    pending_score_key: str | None = None  # reported at UNSCORED until the validation's score replaces it
    local_root: str | None = None  # local mode: checkpoints are published here (Ray neither uploads nor keeps them)
    fingerprint: str | None = None  # the run's (train.run_key.run_fingerprint), written into every metrics.json
    sample_log: Any = None  # an elastic run's train.global_order.SampleLog, flushed before every checkpoint


class Reporter:
    """After each step (:meth:`step_done`): the resize line, progress and loss lines, TensorBoard (rank 0). At
    each checkpoint (:meth:`report`): the checkpoint and its score (rank 0) and ``ray.train.report`` (all ranks).

    ``trainee``, ``optimizer``, ``scheduler``, ``scaler``: what a checkpoint's ``state.pt`` saves."""

    def __init__(self, settings: ReportSettings, trainee, optimizer, scheduler, scaler=None):
        self.settings = s = settings
        self.trainee, self.optimizer, self.scheduler, self.scaler = trainee, optimizer, scheduler, scaler
        self.last_metrics: dict = {}
        self.resize: dict | None = None  # recorded after the first step (training_starts)
        self.tracking = _NoLog()
        if s.rank == 0 and s.run_folder:
            from train.tracking import Trackers

            self.tracking = Trackers(s.run_folder, s.start_step, s.cfg.name, s.cfg.to_dict())
        if s.rank == 0:
            self.tracking.log(s.start_step, {"world_size": s.world})
        self.eta = Eta(s.start_step, s.total_steps)
        # a terminal on the driver: rank 0 feeds its progress bar (train.progress) instead of printing lines
        self.progress = (ProgressWriter(s.progress_file, s.total_steps, s.start_step)
                         if s.rank == 0 and s.progress_file else None)

    def training_starts(self, resize: dict | None) -> None:
        """Model, state and data in hand: what comes next is training. ``resize``: this start's (an elastic run
        resumed at another world size; ``train.loop.elastic_resize``), timed from here and recorded after the
        first step."""
        if resize is not None:
            resize["ready_at"] = time.time()
        self.resize = resize

    def close(self) -> None:
        self.tracking.close()

    def step_done(self, step: int, meter: Meter) -> None:
        """After each step: a resize's record (the first step after one), the progress bar's state, and every
        ``log_every_steps`` the mean loss over every worker (a collective: every rank calls this at every step)
        as a line (when there is no bar) and TensorBoard points with the learning rates."""
        s = self.settings
        if self.resize is not None and s.rank == 0:  # the first step at the new size: what the resize cost
            record_resize(s.run_folder, self.resize, self.tracking)
            self.resize = None
        if self.progress is not None:
            self.progress.write(step, meter.peek)
        if s.cfg.log_every_steps and step % s.cfg.log_every_steps == 0:
            loss = meter.global_mean()  # every rank: the mean over all workers' losses
            if s.rank == 0:
                if self.progress is None:
                    log.info(f"[train] step {step}/{s.total_steps} ({100 * step / s.total_steps:.0f}%) loss "
                             f"{loss:.5g} {self.eta.line(step)}")
                self.tracking.log(step, {"loss": loss, **learning_rates(self.optimizer, self.scheduler)})

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

        local_root = self.settings.local_root
        if local_root:
            from infra.storage import arrow_filesystem

            from infra.publish import resolve

            target = resolve(publish_folder(staged, f"{local_root.rstrip('/')}/{dir_name(step)}"))
            filesystem, path = arrow_filesystem(target)
            return ray.train.Checkpoint(path=path, filesystem=filesystem)
        seal(staged)
        return ray.train.Checkpoint.from_directory(staged)

    def report(self, step: int, epoch: int, resume: tuple[int, int], meter: Meter) -> None:
        """The checkpoint at ``step``: ``resume`` is (the epoch to resume, the batches of it done)."""
        import ray.train

        s = self.settings
        metrics = {
            **meter.summary(),
            "step": step,
            "examples_seen": step * s.cfg.batch_size,  # Tune's ASHA time attribute: rungs at equal data
            "epoch": epoch,
            **learning_rates(self.optimizer, self.scheduler),
            "start_step": s.start_step,
            "world_size": s.world,
            "reported_at": time.time(),
            "storage_retries": storage_retries(),  # this worker's, so far: a throttled store is said in the summary
        }
        if s.sample_log is not None:  # before the checkpoint: a checkpoint in storage has its steps' rows logged
            s.sample_log.flush()
        with self._staging(step) as tmp:
            checkpoint = self._checkpoint(tmp, step, epoch, resume, metrics) if s.rank == 0 else None
            validation = False
            if s.async_validation:  # the pool scores this checkpoint while training goes on
                from ray.train.v2.api.validation_config import ValidationTaskConfig

                validation = ValidationTaskConfig(fn_kwargs={"step": step, "examples_seen": metrics["examples_seen"]})
            reported = {**metrics, s.pending_score_key: UNSCORED} if validation and s.pending_score_key else metrics
            ray.train.report(reported, checkpoint=checkpoint, checkpoint_dir_name=dir_name(step),
                             validation=validation)
        self.last_metrics = metrics
        meter.reset()

    def _checkpoint(self, tmp: str, step: int, epoch: int, resume: tuple[int, int], metrics: dict):
        """Rank 0: the checkpoint written into ``tmp`` (``state.pt``, the model folder, ``metrics.json``) and
        scored (its dev score added to ``metrics``), TensorBoard's points, the report's line; the checkpoint
        to report (:meth:`_kept`)."""
        s = self.settings
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
                "world_size": s.world,
                "reported_at": metrics["reported_at"],
                "config": s.cfg.to_dict(),
            },
            Path(tmp) / STATE_FILE,
        )
        model_dir = Path(tmp) / MODEL_DIR
        save_model(self.trainee.encoder, self.trainee.method, model_dir)
        if s.dev is not None:
            from train.saved_models import score_model_dir

            metric, data = s.dev
            metrics[metric.key] = score_model_dir(metric, model_dir, data)
        (Path(tmp) / METRICS_FILE).write_text(
            json.dumps(checkpoint_metrics(metrics, s.fingerprint), indent=2, default=str))
        self.tracking.report(step, metrics, s.dev[0].key if s.dev is not None else None)
        checkpoint = self._kept(tmp, step)
        extra = f" {s.dev[0].key} {metrics[s.dev[0].key]:.4f}" if s.dev is not None else ""
        log.info(f"[train] step {step} epoch {epoch} loss {metrics['loss']:.5g} "
                 f"{metrics['examples_per_s']:.1f} examples/s{extra}")
        return checkpoint
