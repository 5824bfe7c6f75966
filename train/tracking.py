"""TensorBoard event files of a run, written by rank 0 into ``{storage}/{run_name}/tensorboard/``.

``tensorboard --logdir runs/`` then shows every run under ``runs/`` side by side:

=========================  =====================================================
tag                        value
=========================  =====================================================
``train/loss``             mean loss since the previous point (and each loss part
                           of the method, e.g. ``train/loss_ease``)
``train/lr``               learning rate of the encoder's parameter group
``train/examples_per_s``   training throughput since the previous report
``train/data_wait_frac``   share of that time spent waiting for Ray Data
``train/grad_norm``        mean total gradient norm (before clipping)
``dev/<metric>``           the method's dev metric (``dev_spearman``, ``dev_auprc``,
                           ...) when the loop scores it (``dev_data`` set; under
                           Tune the evaluation pool scores, and Tune's own
                           TensorBoard files in the search folder hold it)
=========================  =====================================================

Points: at every report (``checkpoint_every_steps``) and every ``log_every_steps``
(loss and lr only). A resumed run appends to the same folder and drops the points
the interrupted run wrote after its last checkpoint (``purge_step``), so the curves
show the steps that count once. With remote storage (``s3://…``) the files are
written to a local folder and copied into the run folder at every report.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from infra.storage import is_uri

TENSORBOARD_DIR = "tensorboard"
REPORTED = ("loss", "lr", "examples_per_s", "data_wait_frac")


def report_to(log, step: int, metrics: dict, dev_key: str | None) -> None:
    """The figures of a report, as ``log.log(step, values, prefix)`` calls (TensorBoard's and MLflow's)."""
    train = {k: metrics[k] for k in REPORTED if k in metrics}
    train.update({k: v for k, v in metrics.items() if k.startswith("loss_") or k == "grad_norm"})
    log.log(step, train)
    if dev_key and dev_key in metrics:
        log.log(step, {dev_key: metrics[dev_key]}, prefix="dev/")


class Trackers:
    """Rank 0's trackers: TensorBoard always, MLflow when installed and ``MLFLOW_TRACKING_URI`` is set."""

    def __init__(self, run_folder: str, start_step: int, run_name: str, config: dict):
        from train import mlflow_log

        self.tensorboard = TensorBoardLog(run_folder, start_step)
        self.mlflow = mlflow_log.MLflowLog(run_folder, run_name, config) if mlflow_log.wanted() else None

    def log(self, step: int, values: dict, prefix: str = "train/") -> None:
        self.tensorboard.log(step, values, prefix)
        if self.mlflow is not None:
            self.mlflow.log(step, values, prefix)

    def report(self, step: int, metrics: dict, dev_key: str | None = None) -> None:
        self.tensorboard.report(step, metrics, dev_key)
        if self.mlflow is not None:
            report_to(self.mlflow, step, metrics, dev_key)

    def close(self) -> None:
        self.tensorboard.close()
        if self.mlflow is not None:
            self.mlflow.close()


class TensorBoardLog:
    def __init__(self, run_folder: str, start_step: int = 0):
        from torch.utils.tensorboard import SummaryWriter

        self.remote = f"{run_folder.rstrip('/')}/{TENSORBOARD_DIR}" if is_uri(run_folder) else None
        self.local = (Path(tempfile.mkdtemp(prefix="structcse-tb-")) if self.remote
                      else Path(run_folder) / TENSORBOARD_DIR)
        if self.remote:  # a staging folder of structcse's own: marked, so that close may remove it
            from infra.owned import claim

            claim(str(self.local), "tensorboard staging")
        # events after the checkpoint resumed from (start_step) were the interrupted run's: dropped
        self.writer = SummaryWriter(str(self.local), purge_step=start_step + 1 if start_step else None, flush_secs=30)

    def log(self, step: int, values: dict, prefix: str = "train/") -> None:
        for key, value in values.items():
            if isinstance(value, (int, float)) and value == value:  # numbers, not NaN
                self.writer.add_scalar(prefix + key, float(value), step)

    def report(self, step: int, metrics: dict, dev_key: str | None = None) -> None:
        """The metrics of a report: the training figures, the method's loss parts, the dev metric."""
        report_to(self, step, metrics, dev_key)
        self.writer.flush()
        if self.remote:  # each event file uploaded whole, through the storage client
            from infra.publish import put_files

            put_files(self.local, self.remote)

    def close(self) -> None:
        self.writer.close()
        if self.remote:
            from infra.owned import remove_owned

            remove_owned(str(self.local), "tensorboard staging")
