"""Outside a terminal a run prints the project's own lines and the warnings that are true, quieted by levels
and by Ray's and the libraries' own switches (``infra/logs.py``, docs/logging.md), never by matching text:
``sys.stdout`` is left alone; no ANSI escapes, no Ray Data/Train INFO lines, no bars, no traceback, no ERROR
line; a false warning is fixed where it comes from (the job's runtime environment, ``infra/ray_local.py``;
the reports Ray ranks checkpoints by, ``train/loop.py``), and a mistyped ``checkpoint_metric`` is still an
error the user sees. ``--verbose`` / ``STRUCTCSE_LOG=debug`` bring Ray's lines back."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

RAY_NOISE = ("logging_progress", "streaming_executor", "execution finished", "Reporting training result",
             "Checkpoint successfully created", "Loading weights", "LOAD REPORT", "will hang unless more CPUs",
             "Configuration for experiment", "Result dict has no key", "PlacementGroupCleaner", "PreemptionWatcher",
             "Found multiple active Ray instances")


def cli_env(ray_session, **extra) -> dict:
    """The environment the suite's subprocess CLIs get: the session's own Ray (never another instance on
    this machine, nor a second local Ray beside the session's), offline Hugging Face."""
    from infra.logs import QUIET_ENV_DEFAULTS

    env = {k: v for k, v in os.environ.items() if not k.startswith("STRUCTCSE_") and k not in QUIET_ENV_DEFAULTS}
    env.update(RAY_ADDRESS=ray_session.get_runtime_context().gcs_address, HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", **extra)
    return env


def run_cli(args: list[str], env: dict, timeout: int = 240, expect: int = 0) -> str:
    """stdout and stderr, both pipes (not a terminal), as one text."""
    done = subprocess.run([sys.executable, "-m", *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=timeout)
    said = done.stdout.decode("utf-8", "replace")
    assert done.returncode == expect, said[-4000:]
    return said


def assert_quiet(said: str) -> None:
    assert "\x1b[" not in said, [line for line in said.splitlines() if "\x1b[" in line][:5]
    assert "Traceback" not in said, said[-4000:]
    errors = [line for line in said.splitlines() if " ERROR " in line or line.startswith("ERROR")]
    assert errors == [], errors[:5]
    loud = [line for line in said.splitlines() if any(noise in line for noise in RAY_NOISE)]
    assert loud == [], "\n".join(loud[:10])


@pytest.mark.end_to_end
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


@pytest.mark.end_to_end
def test_train_to_a_pipe_prints_its_own_lines_only(demo_sets, demo_tiny_bert, ray_session, tmp_path):
    """The demo's kind of run (a Ray Train run joining a Ray started elsewhere): no ANSI, no traceback, no
    ERROR line (Ray Train's preemption watcher is off through the job's runtime env), no INFO lines."""
    args = ["train", "--config", "configs/simcse_unsup.yaml", "--data", str(demo_sets[0]), "--model",
            str(demo_tiny_bert), "--storage", str(tmp_path / "runs"), "--name", "quiet", "--max-steps", "4",
            "--set", "batch_size=8", "--set", "max_len=32", "--set", "checkpoint_every_steps=2",
            "--set", "log_every_steps=2", "--set", "cpus_per_worker=0.5", "--set", "pooling=mean"]
    said = run_cli(args, cli_env(ray_session), timeout=300)
    assert_quiet(said)
    assert "[train] plan:" in said and "[train] step " in said, said[-3000:]
    assert '"model_path"' in said


def test_a_mistyped_checkpoint_metric_in_a_search_is_one_line(demo_sets, demo_world, demo_tiny_bert, capsys):
    """Ray's checkpoint ranking is never asked for a key the reports lack, and no record is dropped for its
    text: a mistyped checkpoint_metric is refused before the search starts, naming the key to use."""
    from tune.__main__ import main

    code = main(["--config", "configs/simcse_unsup.yaml", "--data", str(demo_sets[0]), "--model", str(demo_tiny_bert),
                 "--dev-data", str(demo_world.sts_dir), "--set", "checkpoint_metric=dev_spearmn"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "checkpoint_metric 'dev_spearmn'" in err[0] and "checkpoint_metric=dev_spearman" in err[0], err


def test_a_pending_score_is_ranked_without_an_error_and_a_missing_key_still_is_one():
    """Under Tune a checkpoint's report carries its dev score's key at ``UNSCORED`` until the pool's score
    replaces it (Ray Train's asynchronous validation): Ray's ranking (the checkpoint manager Ray Train's
    controller extends) logs nothing and keeps it below every score. A report without the key, as a mistyped
    score attribute would give, is still Ray's ERROR: nothing filters it."""
    from ray.train import Checkpoint, CheckpointConfig
    from ray.train._internal.checkpoint_manager import _CheckpointManager
    from ray.train._internal.session import _TrainingResult

    from train.reporting import UNSCORED

    def result(i, metrics):
        return _TrainingResult(checkpoint=Checkpoint.from_directory(f"/tmp/step-{i}"), metrics=metrics)

    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    ray_logger = logging.getLogger("ray.train._internal.checkpoint_manager")  # Ray's loggers do not propagate
    ray_logger.addHandler(handler)
    try:
        manager = _CheckpointManager(CheckpointConfig(checkpoint_score_attribute="dev_spearman"))
        manager.register_checkpoint(result(1, {"loss": 1.0, "dev_spearman": 0.2}))
        manager.register_checkpoint(result(2, {"loss": 0.9, "dev_spearman": UNSCORED}))
        assert records == [], [r.getMessage() for r in records]
        assert manager.best_checkpoint_result.metrics["dev_spearman"] == 0.2  # the pending one ranks lowest
        typo = _CheckpointManager(CheckpointConfig(checkpoint_score_attribute="dev_spearmn"))
        typo.register_checkpoint(result(3, {"dev_spearman": 0.1}))
        typo.register_checkpoint(result(4, {"dev_spearmn": 0.3}))
    finally:
        ray_logger.removeHandler(handler)
    assert any(r.levelno == logging.ERROR and "dev_spearmn" in r.getMessage() for r in records), records


def test_the_jobs_processes_are_told_which_ray_is_theirs_through_its_runtime_env(monkeypatch, project_log):
    """Another Ray on the machine, before or after ours: the job's runtime env names ours (the state API's
    address for a local Ray, RAY_ADDRESS for a joined one), the preemption watcher is off there, and this
    process's environment is not changed; other instances running now are named, with the RAY_ADDRESS that
    joins one, never `ray stop`."""
    import infra.ray_compat
    from infra.ray_local import local_init_kwargs

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", raising=False)
    monkeypatch.setattr(infra.ray_compat, "find_gcs_addresses", lambda: ["10.0.0.7:6380", "10.0.0.5:6379"])
    before = dict(os.environ)
    kwargs = local_init_kwargs({"address": "local", "runtime_env": {"env_vars": {"MINE": "1"}}})
    assert dict(os.environ) == before
    said = project_log.lines
    env_vars = kwargs["runtime_env"]["env_vars"]
    assert env_vars["RAY_API_SERVER_ADDRESS"] == f"http://127.0.0.1:{kwargs['dashboard_port']}", kwargs
    assert env_vars["RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"] == "0" and env_vars["MINE"] == "1", env_vars
    assert len(said) == 1, said
    assert "RAY_ADDRESS=10.0.0.5:6379" in said[0] and "10.0.0.7:6380" in said[0], said
    assert "ray stop" not in said[0], said
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")  # named: joins it, nothing to say; its workers get it too
    monkeypatch.setenv("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", "1")  # the user's: Ray Train passes it on
    project_log.clear()
    env_vars = local_init_kwargs({})["runtime_env"]["env_vars"]
    said = project_log.lines
    assert said == [] and env_vars == {"RAY_ADDRESS": "10.0.0.5:6379"}, (said, env_vars)


def test_no_advice_in_the_code_runs_ray_stop_against_every_cluster():
    from infra.ray_local import other_instances_message

    assert "ray stop" not in other_instances_message(["127.0.0.1:6379"])
    for path in ("train/ray_env.py", "infra/ray_local.py"):  # the advice each gave before (issue 39)
        source = (REPO / path).read_text()
        assert "stop them (`ray stop`)" not in source and "`ray stop` (or deleting the file)" not in source, path


@pytest.mark.parametrize("verbose", [False, True])
def test_setup_logging_quiet_outside_a_terminal_and_loud_when_asked(verbose):
    """In a child process (it changes the environment): quiet settings when stdout is a pipe, sys.stdout and
    sys.stderr left as they are; none of them with --verbose, which the child's Ray processes inherit as
    STRUCTCSE_LOG=debug."""
    code = ("import os, sys; from infra.logs import setup_logging_from_argv as s, tune_verbosity; "
            f"q = s({['--verbose'] if verbose else []!r}); "
            "print(q, os.environ.get('STRUCTCSE_LOG'), os.environ.get('RAY_DATA_LOG_LEVEL'), "
            "os.environ.get('RAY_COLOR_PREFIX'), os.environ.get('RAY_AIR_NEW_OUTPUT'), tune_verbosity(), "
            "sys.stdout is sys.__stdout__ and sys.stderr is sys.__stderr__)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRUCTCSE_", "RAY_DATA_LOG", "RAY_COLOR",
                                                                     "RAY_AIR"))}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    if verbose:
        assert out == ["False", "debug", "None", "None", "None", "None", "True"], out
    else:
        assert out == ["True", "None", "WARNING", "0", "0", "0", "True"], out


def test_no_stream_is_replaced_and_no_record_is_filtered_by_its_text():
    source = (REPO / "infra" / "logs.py").read_text()
    for gone in ("sys.stdout =", "setattr(sys", "re.compile", "getMessage", "addFilter"):
        assert gone not in source, gone
