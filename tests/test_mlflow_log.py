"""MLflow logging: on only with the mlflow package and MLFLOW_TRACKING_URI; the same names as TensorBoard;
a resumed run continues its MLflow run. With mlflow installed this runs against a real file store."""

import importlib.util

import pytest

from train import mlflow_log
from train.tracking import Trackers

HAS_MLFLOW = importlib.util.find_spec("mlflow") is not None


def test_off_without_a_tracking_uri(monkeypatch, capsys):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert not mlflow_log.wanted() and capsys.readouterr().out == ""


@pytest.mark.skipif(HAS_MLFLOW, reason="mlflow is installed here: the next test logs to it")
def test_a_tracking_uri_without_mlflow_says_so_once_and_training_goes_on(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"file://{tmp_path}/mlruns")
    trackers = Trackers(str(tmp_path / "run"), 0, "run", {"lr": 1e-4})
    assert trackers.mlflow is None and "pip install mlflow-skinny" in capsys.readouterr().out
    trackers.report(2, {"loss": 0.5, "lr": 1e-4})
    trackers.close()
    assert list((tmp_path / "run" / "tensorboard").glob("events.*"))


@pytest.mark.skipif(not HAS_MLFLOW, reason="the mlflow package is not installed (pip install mlflow-skinny)")
def test_figures_reach_a_real_mlflow_store_and_a_resume_continues_the_run(monkeypatch, tmp_path):
    import mlflow

    store = f"file://{tmp_path}/mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow 3: the file store is in maintenance mode
    run_folder = str(tmp_path / "run")
    first = Trackers(run_folder, 0, "simcse", {"lr": 1e-4, "ease": {"hard_negative_weight": 0.0}, "token": "x"})
    first.report(2, {"loss": 0.5, "lr": 1e-4, "dev_spearman": 0.7, "loss_ease": 0.1}, "dev_spearman")
    first.close()
    again = Trackers(run_folder, 2, "simcse", {"lr": 1e-4})
    again.log(4, {"loss": 0.25})
    again.close()
    client = mlflow.tracking.MlflowClient(store)
    (run,) = client.search_runs([client.get_experiment_by_name("structcse").experiment_id])
    assert run.data.params["lr"] == "0.0001" and run.data.params["ease.hard_negative_weight"] == "0.0"
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss")] == [(2, 0.5), (4, 0.25)]
    assert run.data.metrics["dev/dev_spearman"] == 0.7 and run.data.metrics["train/loss_ease"] == 0.1
