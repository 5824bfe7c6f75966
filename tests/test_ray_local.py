"""A dead `ray start` head named in ray_current_cluster: probed in seconds, a local Ray started instead."""

import socket
import time

import pytest


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_args(kwargs: dict) -> dict:
    """What local_init_kwargs asks of ray.init, less what it adds for the job's processes (the runtime env
    naming this job's Ray, the dashboard port it names; tests/test_quiet_logs.py checks those)."""
    return {k: v for k, v in kwargs.items() if k not in ("runtime_env", "dashboard_port")}


@pytest.fixture
def cluster_file(tmp_path, monkeypatch):
    import infra.ray_compat

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    # no other Ray instance on this machine (tests/test_quiet_logs.py has the warning when there are)
    monkeypatch.setattr(infra.ray_compat, "find_gcs_addresses", lambda: [])
    return tmp_path / "ray_current_cluster"


def test_a_dead_head_is_named_and_a_local_ray_is_asked_for(cluster_file, project_log):
    from ray._private.services import get_ray_address_from_environment

    from infra.ray_local import local_init_kwargs

    address = f"127.0.0.1:{closed_port()}"
    cluster_file.write_text(address)
    # what plain ray.init() would connect to (and retry for minutes)
    assert get_ray_address_from_environment(None, str(cluster_file.parent)) == address
    started = time.monotonic()
    kwargs = local_init_kwargs({"num_cpus": 2, "_temp_dir": str(cluster_file.parent)})
    assert time.monotonic() - started < 5
    said = project_log.lines
    assert ray_args(kwargs) == {"num_cpus": 2, "_temp_dir": str(cluster_file.parent), "address": "local"}
    assert len(said) == 1 and address in said[0] and str(cluster_file) in said[0]
    assert "RAY_ADDRESS=" in said[0] and "`ray stop` (" not in said[0]  # deleting the file, not stopping every Ray


def test_a_live_head_an_explicit_address_or_no_file_is_left_to_ray(cluster_file, monkeypatch, project_log):
    from infra.ray_local import local_init_kwargs

    temp = {"_temp_dir": str(cluster_file.parent)}
    assert ray_args(local_init_kwargs(temp)) == temp  # no file
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        live = f"127.0.0.1:{listener.getsockname()[1]}"
        cluster_file.write_text(live)
        kwargs = local_init_kwargs(temp)
        assert ray_args(kwargs) == temp  # a head answers: ray.init() joins it; its processes are told which
        assert kwargs["runtime_env"]["env_vars"]["RAY_ADDRESS"] == live
    cluster_file.write_text(f"127.0.0.1:{closed_port()}")
    assert ray_args(local_init_kwargs({**temp, "address": "auto"})) == {**temp, "address": "auto"}
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert ray_args(local_init_kwargs(temp)) == temp
    assert project_log.lines == []
