"""A run's figures in MLflow, beside its TensorBoard files, when MLflow is there to receive them.

On when the ``mlflow`` package is installed (``pip install mlflow-skinny`` is enough) and
``MLFLOW_TRACKING_URI`` is set in the workers' environment (on a cluster:
``ray job submit --runtime-env-json '{"env_vars": {"MLFLOW_TRACKING_URI": "..."}}'``); the
experiment is ``MLFLOW_EXPERIMENT_NAME`` or ``structcse``. Rank 0 logs the config as parameters (the
secrets redacted, like the run summary) and, at every point TensorBoard gets, the same figures under
the same names (``train/loss``, ``train/lr``, ``dev/dev_spearman`` …; MLflow's step is the
optimizer step). A resumed run continues its MLflow run: its id is kept in the run folder
(``mlflow_run.json``). The tracking URI itself (which may hold credentials) is never written anywhere.
"""

from __future__ import annotations

import json
import logging
import os

from infra.storage import filesystem

log = logging.getLogger(__name__)
RUN_ID_FILE = "mlflow_run.json"


def wanted() -> bool:
    if not os.environ.get("MLFLOW_TRACKING_URI"):
        return False
    try:
        import mlflow  # noqa: F401
    except ImportError:
        log.warning("[train] MLFLOW_TRACKING_URI is set but the mlflow package is not installed here: no MLflow "
                    "logging (pip install mlflow-skinny)")
        return False
    return True


def _params(config: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_params(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = str(value)[:500]  # MLflow's limit on a parameter's value
    return out


class MLflowLog:
    def __init__(self, run_folder: str, run_name: str, config: dict):
        import mlflow

        from infra.secrets import redact

        self.mlflow = mlflow
        mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME", "structcse"))
        id_file = f"{run_folder.rstrip('/')}/{RUN_ID_FILE}"
        fs, local = filesystem(id_file)
        previous = json.loads(fs.cat_file(local)) if fs.exists(local) else None
        if previous:
            self.run = mlflow.start_run(run_id=previous["run_id"])
        else:
            self.run = mlflow.start_run(run_name=run_name)
            mlflow.log_params(_params(redact(config)))
            fs.makedirs(fs._parent(local), exist_ok=True)
            fs.pipe_file(local, json.dumps({"run_id": self.run.info.run_id}).encode())

    def log(self, step: int, values: dict, prefix: str = "train/") -> None:
        numbers = {prefix + k: float(v) for k, v in values.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v}
        if numbers:
            self.mlflow.log_metrics(numbers, step=step)

    def close(self) -> None:
        self.mlflow.end_run()
