"""Issue 39 (part 3): the failures ``python -m eval`` answered slowly or raw, which train and tune answer at once in
one line: a hub name on an offline machine (75 s of retries and two tracebacks), a data folder that is missing or
in the wrong layout (said as "no parquet files found" / "splits present: none"), and default run names that said
``bert-base`` whatever the model.

The CLI cases run ``python -m eval`` in a subprocess with a Hugging Face home of their own (nothing cached) and
check: a non-zero exit, exactly one non-empty line on stderr, no traceback, and for the model checks the time.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED_DATA

ALLOWED_SECONDS = 5.0  # the model check's budget: HF_HUB_OFFLINE is read, or one 3 s connect, never a retry


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "HF_ENDPOINT", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_HOME=str(tmp_path / "hf_home"), HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO), **extra)
    return env


def _run(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float, float]:
    """(the finished process, its wall seconds, its CPU seconds: user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    out = subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _startup_seconds(env: dict[str, str]) -> float:
    """The wall time of a bare interpreter start on this machine now (seconds under load, ~0.02 s when idle):
    what a wall-clock budget for a subprocess must allow on top."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True, timeout=120)
    return time.monotonic() - started


def _one_line_error(out: subprocess.CompletedProcess) -> str:
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode != 0, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and len(lines) == 1, out.stderr
    assert out.stdout.strip() == "", out.stdout
    return lines[0]


def _sts_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = "".join(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{i % 5}.0\ta man plays {i}\ta man plays {i + 1}\n"
                   for i in range(4))
    for split in ("train", "dev", "test"):
        (folder / f"sts-{split}.csv").write_text(rows, encoding="utf-8")
    return folder


def test_importing_the_eval_cli_does_not_import_torch(tmp_path):
    """The model check runs before torch: ``import eval.cli`` (and ``eval``) leave torch unloaded."""
    out, _, _ = _run(["-c", "import sys, eval.cli; print(sorted(m for m in ('torch', 'transformers', "
                      "'sentence_transformers') if m in sys.modules))"], _env(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_an_uncached_hub_name_offline_is_one_line_at_once(tmp_path):
    data = _sts_folder(tmp_path / "sts")
    env = _env(tmp_path)
    startup = _startup_seconds(env)
    out, wall, cpu = _run(["-m", "eval", "--model", "some-org/not-here", "--task", "sts", "--data", str(data)], env)
    line = _one_line_error(out)
    assert out.returncode == 2
    assert line.startswith("python -m eval: error: model 'some-org/not-here' is not a local folder and not in the "
                           "Hugging Face cache, and HF_HUB_OFFLINE is set; pass a local folder with --model"), line
    assert cpu < ALLOWED_SECONDS, f"{cpu:.1f} s of CPU"
    assert wall < ALLOWED_SECONDS + startup, f"{wall:.1f} s (a bare interpreter start: {startup:.1f} s)"


def test_an_unreachable_hub_is_one_probe_no_retries(tmp_path):
    """Online mode against an endpoint where nothing listens: one refused connect, one line."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = _sts_folder(tmp_path / "sts")
    env = _env(tmp_path, HF_ENDPOINT=f"http://127.0.0.1:{port}")
    env.pop("HF_HUB_OFFLINE")
    startup = _startup_seconds(env)
    out, wall, cpu = _run(["-m", "eval", "--model", "some-org/not-here", "--data", str(data)], env)
    line = _one_line_error(out)
    assert f"127.0.0.1:{port} cannot be reached" in line and "--model /path/to/model" in line, line
    assert cpu < ALLOWED_SECONDS, f"{cpu:.1f} s of CPU"
    assert wall < ALLOWED_SECONDS + startup, f"{wall:.1f} s (a bare interpreter start: {startup:.1f} s)"


def test_a_missing_model_folder_is_named_with_what_it_should_hold(tmp_path):
    data = _sts_folder(tmp_path / "sts")
    out, _, _ = _run(["-m", "eval", "--model", str(tmp_path / "runs" / "nope" / "model"), "--data", str(data)],
                     _env(tmp_path))
    line = _one_line_error(out)
    assert f"model folder does not exist: {tmp_path / 'runs' / 'nope' / 'model'}" in line, line
    assert "modules.json" in line and "config.json" in line, line


def test_a_missing_data_folder_says_so_and_names_the_layout(tmp_path):
    _sts_folder(tmp_path / "sets" / "sample")
    out, _, _ = _run(["-m", "eval", "--model", "some-org/not-here", "--data", str(tmp_path / "sets" / "smaple")],
                     _env(tmp_path))
    line = _one_line_error(out)
    assert f"STS data folder does not exist: {tmp_path / 'sets' / 'smaple'}" in line, line
    assert "SentEval STS-B layout: sts-train.csv, sts-dev.csv, sts-test.csv" in line, line
    assert line.endswith(f"did you mean {tmp_path / 'sets' / 'sample'}?"), line


def test_a_dataset_folder_points_at_the_subfolder_in_the_sts_layout(tmp_path):
    top = tmp_path / "stsb"
    _sts_folder(top / "raw")
    (top / "README.md").write_text("STS-B\n")
    out, _, _ = _run(["-m", "eval", "--model", "some-org/not-here", "--data", str(top)], _env(tmp_path))
    line = _one_line_error(out)
    assert f"{top} is not an STS data folder" in line and "splits present" not in line, line
    assert line.endswith(f"did you mean {top / 'raw'}?"), line


def test_the_shared_stsb_folder_points_at_raw_and_senteval_processed(tmp_path):
    stsb = SHARED_DATA / "stsb"
    if not (stsb / "raw" / "sts-dev.csv").is_file():
        pytest.skip(f"shared data not present: {stsb}/raw/sts-dev.csv")
    out, _, _ = _run(["-m", "eval", "--model", "some-org/not-here", "--data", str(stsb)], _env(tmp_path))
    line = _one_line_error(out)
    assert f"{stsb} is not an STS data folder: it holds none of sts-train.csv, sts-dev.csv, sts-test.csv" in line, line
    assert f"did you mean {stsb / 'raw'}" in line and str(stsb / "senteval_processed") in line, line


def test_set_folders_missing_or_holding_the_set_one_level_down(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    sets = tmp_path / "sets"
    docs = sets / "aspect_docs"
    docs.mkdir(parents=True)
    pq.write_table(pa.table({"qid": ["Q1"]}), docs / "part-00000.parquet")
    (docs / "_manifest.json").write_text("{}")
    env = _env(tmp_path)
    out, _, _ = _run(["-m", "eval", "--task", "aspect-retrieval", "--model", "some-org/not-here", "--data",
                      str(tmp_path / "nowhere")], env)
    line = _one_line_error(out)
    assert f"aspect_docs set folder does not exist: {tmp_path / 'nowhere'}" in line, line
    assert "*.parquet files and _manifest.json" in line, line
    out, _, _ = _run(["-m", "eval", "--task", "aspect-retrieval", "--model", "some-org/not-here", "--data",
                      str(sets)], env)
    line = _one_line_error(out)
    assert f"{sets} is not an aspect_docs set: it holds no parquet files" in line, line
    assert line.endswith(f"did you mean {docs}?"), line


def test_train_names_a_missing_data_folder(tmp_path):
    from train.config import ConfigError, load_config
    from train.plan import make_plan

    (tmp_path / "sample").mkdir()
    cfg = load_config(str(REPO / "configs" / "simcse_unsup.yaml"),
                      [f"data={tmp_path / 'smaple'}", f"storage_path={tmp_path / 'runs'}", "num_workers=0"])
    with pytest.raises(ConfigError, match=r"data folder does not exist: .*smaple \(expected an ingest output folder "
                                          r"holding sentences/.*; did you mean .*sample\?"):
        make_plan(cfg)


@pytest.mark.parametrize(("config", "model", "run_name", "name"), [
    ("simcse_unsup.yaml", "sentence-transformers/all-MiniLM-L6-v2", None, "simcse-unsup-all-MiniLM-L6-v2"),
    ("simcse_unsup.yaml", "bert-base-uncased", None, "simcse-unsup-bert-base-uncased"),
    ("aspectcse_mnrl.yaml", "runs/simcse-big/model", None, "aspectcse-mnrl-simcse-big"),
    ("ease.yaml", "s3://bucket/models/tiny bert/", "x-{model}", "x-tiny-bert"),
])
def test_default_run_names_are_made_from_the_model(config, model, run_name, name):
    from train.config import RUN_NAME, load_config

    overrides = [f"model={model}"] + ([f"run_name={run_name}"] if run_name else [])
    cfg = load_config(str(REPO / "configs" / config), overrides)
    assert cfg.name == name and RUN_NAME.fullmatch(cfg.name)


def test_a_config_without_a_run_name_is_named_method_and_model():
    from train.config import TrainConfig

    cfg = TrainConfig.from_dict({"method": "simcse_unsup", "data": "d",
                                 "model": "sentence-transformers/all-MiniLM-L6-v2"})
    assert cfg.name == "simcse_unsup-all-MiniLM-L6-v2"
    assert cfg.with_overrides(["run_name=mine"]).name == "mine"  # a name given is kept as is
    for path in sorted((REPO / "configs").glob("*.yaml")):
        run_name = path.read_text().split("\nrun_name:", 1)[-1].splitlines()[0].split("#")[0]
        assert "bert-base" not in run_name, path


def test_config_values_are_read_as_their_declared_types_or_refused_by_key():
    import numpy as np

    from train.config import ConfigError, TrainConfig

    base = {"method": "simcse_unsup", "data": "d", "model": "m"}
    cfg = TrainConfig.from_dict({**base, "lr": "3e-5", "max_steps": 8.0, "batch_size": np.int64(16),
                                 "dropout": None})
    assert (cfg.lr, cfg.max_steps, cfg.batch_size, cfg.dropout) == (3e-5, 8, 16, None)
    assert type(cfg.max_steps) is int and type(cfg.batch_size) is int
    for key, value, expects in (("batch_size", True, "int"), ("max_steps", 8.5, "int"), ("lr", "nan", "float"),
                                ("lr", "fast", "float"), ("pooling", 3, "str"), ("pretokenize", 1, "bool")):
        with pytest.raises(ConfigError, match=f"key '{key}' expects {expects}"):
            TrainConfig.from_dict({**base, key: value}, source="run.yaml")
