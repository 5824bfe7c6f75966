"""Issue 39 (part 4): outside a terminal a run prints the project's own lines and the warnings that are
true: no ANSI escapes, no Ray Data execution/operator INFO lines, no Ray Train per-report lines, no
progress bars or load reports, no tracebacks (``infra/logs.py``); ``--verbose`` / ``STRUCTCSE_LOG=debug``
bring Ray's lines back. Other Ray instances are named before a second local Ray starts, with the
``RAY_ADDRESS`` that runs on one of them (``infra/ray_local.py``), never ``ray stop``."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

RAY_NOISE = ("logging_progress", "streaming_executor", "execution finished", "Reporting training result",
             "Checkpoint successfully created", "Loading weights", "LOAD REPORT", "worker processes have been started",
             "will hang unless more CPUs")


def cli_env(ray_session, **extra) -> dict:
    """The environment the suite's subprocess CLIs get: the session's own Ray (never another instance on
    this machine, nor a second local Ray beside the session's), offline Hugging Face."""
    from infra.logs import QUIET_ENV_DEFAULTS

    env = {k: v for k, v in os.environ.items() if not k.startswith("STRUCTCSE_") and k not in QUIET_ENV_DEFAULTS}
    env.update(RAY_ADDRESS=ray_session.get_runtime_context().gcs_address, HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", **extra)
    return env


def run_cli(args: list[str], env: dict, timeout: int = 240) -> str:
    """stdout and stderr, both pipes (not a terminal), as one text."""
    done = subprocess.run([sys.executable, "-m", *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=timeout)
    said = done.stdout.decode("utf-8", "replace")
    assert done.returncode == 0, said[-4000:]
    return said


def assert_quiet(said: str) -> None:
    assert "\x1b[" not in said, [line for line in said.splitlines() if "\x1b[" in line][:5]
    assert "Traceback" not in said, said[-4000:]
    loud = [line for line in said.splitlines() if any(noise in line for noise in RAY_NOISE)]
    assert loud == [], loud[:10]


def test_ingest_to_a_pipe_prints_its_own_lines_only(demo_world, ray_session, tmp_path):
    from structcse.demo import ENTITY_LINK_THRESHOLD

    def args(out):
        return ["ingest", "--wikipedia", str(demo_world.wikipedia_dump), "--wikidata", str(demo_world.wikidata_dump),
                "--out", str(tmp_path / out), "--shard-bytes", "1", "--entity-link-threshold", str(ENTITY_LINK_THRESHOLD)]

    said = run_cli(args("sets"), cli_env(ray_session))
    assert_quiet(said)
    ours = [line for line in said.splitlines() if line.startswith("[ingest]")]
    assert len(ours) >= 4 and any(line.startswith("[ingest] wrote ") for line in ours), said
    assert len(said.splitlines()) <= len(ours) + 3, said  # Ray's token-auth notice at most, besides ours
    # --verbose bringing Ray's lines back: test_setup_logging_quiet_outside_a_terminal_and_loud_when_asked


def test_train_to_a_pipe_prints_its_own_lines_only(demo_sets, demo_tiny_bert, ray_session, tmp_path):
    args = ["train", "--config", "configs/simcse_unsup.yaml", "--data", str(demo_sets[0]), "--model",
            str(demo_tiny_bert), "--storage", str(tmp_path / "runs"), "--name", "quiet", "--max-steps", "4",
            "--set", "batch_size=8", "--set", "max_len=32", "--set", "checkpoint_every_steps=2",
            "--set", "log_every_steps=2", "--set", "cpus_per_worker=0.5", "--set", "pooling=mean"]
    said = run_cli(args, cli_env(ray_session), timeout=300)
    assert_quiet(said)
    assert "[train] plan:" in said and "[train] step " in said, said[-3000:]
    assert '"model_path"' in said


def test_other_ray_instances_are_named_with_the_address_that_joins_one(monkeypatch):
    import infra.ray_compat
    from infra.ray_local import local_init_kwargs

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(infra.ray_compat, "find_gcs_addresses", lambda: ["10.0.0.7:6380", "10.0.0.5:6379"])
    said = []
    assert local_init_kwargs({"address": "local"}, said.append)["address"] == "local"
    assert len(said) == 1, said
    assert "RAY_ADDRESS=10.0.0.5:6379" in said[0] and "10.0.0.7:6380" in said[0], said
    assert "ray stop" not in said[0], said
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")  # named: joins it, nothing to say
    said.clear()
    local_init_kwargs({}, said.append)
    assert said == []


def test_no_advice_in_the_code_runs_ray_stop_against_every_cluster():
    from infra.ray_local import other_instances_message

    assert "ray stop" not in other_instances_message(["127.0.0.1:6379"])
    for path in ("train/ray_env.py", "infra/ray_local.py"):  # the advice each gave before (issue 39)
        source = (REPO / path).read_text()
        assert "stop them (`ray stop`)" not in source and "`ray stop` (or deleting the file)" not in source, path


def test_a_quiet_stream_strips_ansi_and_the_raylet_worker_count_line():
    from infra.logs import CleanStream

    raw = io.StringIO()
    stream = CleanStream(raw)
    stream.write("\x1b[36m(RayTrainWorker pid=12)\x1b[0m [train] step 2/4 loss 1.0\n")
    stream.write("\x1b[33m(raylet)\x1b[0m WARNING: 6 PYTHON worker processes have been started on node: abc with "
                 "address: 127.0.0.1. This could be a result of using a large number of actors\n")
    stream.write("(ListFiles pid=7) Exception in thread pool-3/completion-signaler:\n(ListFiles pid=7) Traceback (most "
                 "recent call last):\n(ListFiles pid=7)   File \"x.py\", line 1, in put\n(ListFiles pid=7)     raise "
                 "InterruptedError()\n(ListFiles pid=7) InterruptedError\n")
    stream.write("partial")
    assert raw.getvalue() == "(RayTrainWorker pid=12) [train] step 2/4 loss 1.0\n"
    stream.flush()
    assert raw.getvalue().endswith("partial") and not stream.isatty()


@pytest.mark.parametrize("verbose", [False, True])
def test_setup_logging_quiet_outside_a_terminal_and_loud_when_asked(verbose, monkeypatch):
    """In a child process (it changes the environment and sys.stdout): quiet settings when stdout is a
    pipe; none of them with --verbose, which the child's Ray processes inherit as STRUCTCSE_LOG=debug."""
    code = ("import os, sys; from infra.logs import setup_logging_from_argv as s; "
            f"q = s({['--verbose'] if verbose else []!r}); "
            "print(q, os.environ.get('STRUCTCSE_LOG'), os.environ.get('RAY_DATA_LOG_LEVEL'), "
            "os.environ.get('RAY_COLOR_PREFIX'), type(sys.stdout).__name__)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRUCTCSE_", "RAY_DATA_LOG", "RAY_COLOR"))}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    if verbose:
        assert out == ["False", "debug", "None", "None", "TextIOWrapper"], out
    else:
        assert out == ["True", "None", "WARNING", "0", "CleanStream"], out
