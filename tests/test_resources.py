"""A run Ray can never place is refused before it starts (one line: what there is, what was asked, what to
do); with an autoscaler the wait is said once instead."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _cfg(tmp_path, **values):
    from train.config import TrainConfig

    return TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": str(tmp_path), **values})


def _one_line(e) -> str:
    message = str(e.value)
    assert "\n" not in message, message
    return message


def test_use_gpu_on_the_cpu_only_ray_is_refused_in_one_line_naming_0_gpus(ray_session, tmp_path):
    """The check `python -m train` runs once its Ray is up, against the running (CPU-only) Ray: as the Ray
    this process started, and as a joined cluster, whose read-only autoscaler adds no node."""
    from infra.ray_compat import cluster_has_autoscaler
    from train.config import ConfigError
    from train.ray_env import check_cluster_resources

    cpus = ray_session.cluster_resources()["CPU"]
    assert ray_session.cluster_resources().get("GPU", 0) == 0
    cfg = _cfg(tmp_path, use_gpu=True, num_workers=1)
    with pytest.raises(ConfigError) as caught:
        check_cluster_resources(cfg, started_here=True)
    message = _one_line(caught)
    assert f"this machine has {cpus:g} CPUs and 0 GPUs" in message
    assert "1 worker(s) x 1 GPU" in message and "--set use_gpu=false" in message and "cluster with GPUs" in message

    assert cluster_has_autoscaler() is False
    with pytest.raises(ConfigError) as caught:
        check_cluster_resources(cfg.with_overrides(["num_workers=2", "cpus_per_worker=0.5"]))
    assert f"2 worker(s) x 1 GPU, and the cluster has {cpus:g} CPUs and 0 GPUs" in _one_line(caught)

    with pytest.raises(ConfigError, match="local mode"):  # local mode trains on this machine's GPU
        check_cluster_resources(cfg.with_overrides(["num_workers=0"]), started_here=True)
    check_cluster_resources(cfg.with_overrides(["use_gpu=false"]), started_here=True)


def test_more_cpus_per_worker_than_the_machine_has_are_refused_with_the_setting_that_fits(ray_session, tmp_path):
    from train.config import ConfigError
    from train.ray_env import check_cluster_resources

    cpus = ray_session.cluster_resources()["CPU"]
    cfg = _cfg(tmp_path, num_workers=1, cpus_per_worker=cpus + 1)
    with pytest.raises(ConfigError) as caught:
        check_cluster_resources(cfg, started_here=True)
    message = _one_line(caught)
    assert f"cpus_per_worker={cpus + 1:g} asks for more CPUs per worker than this machine has {cpus:g} CPUs" in message
    assert f"--set cpus_per_worker={cpus - 1:g}" in message


def test_a_search_space_with_resources_the_machine_lacks_is_refused_before_the_search(ray_session, tmp_path):
    from train.config import ConfigError
    from tune.search import TuneSettings, check_searched_resources

    cpus = ray_session.cluster_resources()["CPU"]
    base = _cfg(tmp_path, num_workers=1, cpus_per_worker=0.5)
    with pytest.raises(ConfigError) as caught:
        check_searched_resources(base, TuneSettings(search_space={"use_gpu": {"choice": [False, True]}}))
    assert _one_line(caught).startswith("search_space use_gpu: True cannot run here: use_gpu=true asks for")
    with pytest.raises(ConfigError) as caught:
        check_searched_resources(base, TuneSettings(search_space={"num_workers": {"grid": [1, int(cpus) * 4]}}))
    assert f"search_space num_workers: {int(cpus) * 4} cannot run here" in _one_line(caught)
    check_searched_resources(base, TuneSettings(search_space={"num_workers": {"choice": [1, 2]},
                                                              "lr": {"loguniform": [1e-5, 1e-4]}}))


def test_the_resources_before_ray_starts_are_the_ones_ray_starts_with(ray_session):
    """What the check before Ray starts compares with: the session's Ray started with num_cpus=2 on this
    machine; the same request, resolved without starting a Ray, gives the same CPUs and GPUs."""
    from infra.ray_compat import local_node_resources

    started = ray_session.cluster_resources()
    predicted = local_node_resources(num_cpus=started["CPU"])
    assert (predicted["CPU"], predicted["GPU"]) == (started["CPU"], started.get("GPU", 0.0))
    assert local_node_resources()["CPU"] >= 1


def test_with_an_autoscaler_the_wait_is_said_in_one_line(tmp_path, project_log):
    from train.ray_env import check_resources

    check_resources(_cfg(tmp_path, num_workers=2, use_gpu=True), {"CPU": 2.0}, where="the cluster",
                    autoscaled=True)
    assert project_log.lines == ["[train] waiting for 2 worker(s) x 1 CPU + 1 GPU: the autoscaler adds nodes (the "
                                 "cluster has 0 GPUs now)"]
    project_log.clear()
    check_resources(_cfg(tmp_path, num_workers=2, use_gpu=True), {"CPU": 8.0, "GPU": 2.0}, autoscaled=True)
    assert project_log.lines == []  # enough: nothing to wait for
    check_resources(_cfg(tmp_path, num_workers=2, use_gpu=True), {"CPU": 2.0}, where="the cluster",
                    autoscaled=True, quiet=True)
    assert project_log.lines == []  # quiet: another run's check (a Tune search's searched values)


def test_an_autoscaler_is_one_that_names_node_types_from_a_cluster_config(monkeypatch):
    """Ray's read-only autoscaler (a cluster without a config) names each node's type after the node."""
    import infra.ray_compat as ray_compat

    for types, autoscaled in ((None, False), ({}, False), ({"ab12": "node_ab12"}, False),
                              ({"ab12": "node_ab12", "cd34": "gpu-workers"}, True), ({"ab12": "ray.head.default"}, True)):
        monkeypatch.setattr(ray_compat, "autoscaler_node_types", lambda types=types: types)
        assert ray_compat.cluster_has_autoscaler() is autoscaled, types


def test_train_cli_refuses_use_gpu_on_a_cpu_only_machine_at_once_in_one_line(tmp_path):
    """`python -m train ... --set use_gpu=true` on this CPU-only machine: refused before the sets are read
    and before any Ray starts (an empty --data folder is not even looked at)."""
    # a Ray temp dir of its own: a `ray start` cluster live on this machine (named in /tmp/ray) would be joined
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "RAY_TMPDIR": str(tmp_path)}
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "train", "--config", "configs/simcse_unsup.yaml", "--data",
                          str(tmp_path), "--storage", str(tmp_path / "runs"), "--set", "use_gpu=true"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    seconds = time.monotonic() - started
    said = (out.stdout + out.stderr).strip()
    assert out.returncode == 2, said
    assert seconds < 10, f"{seconds:.1f} s"
    assert "Traceback" not in said and len(said.splitlines()) == 1, said
    assert said.startswith("error: use_gpu=true asks for 1 worker(s) x 1 GPU") and " 0 GPUs" in said, said
    assert "--set use_gpu=false" in said
    assert not (tmp_path / "runs").exists()
