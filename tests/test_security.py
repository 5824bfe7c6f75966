"""Safe on shared clusters and buckets (docs/security.md): nothing executable read back from data or run
folders, Ray's token auth on every node of cluster.yaml, secrets never written down, inputs that reach a
query or a path validated."""

from __future__ import annotations

import bz2
import json
import os
import pickle
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


class _Planted:
    """Unpickling this creates ``marker``: what an attacker with write access to one shared file would plant."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps({"block_offsets": _Planted(marker), "model": _Planted(marker)}))


# ---------------------------------------------------------------- nothing executable read back

def test_planted_bz2_index_is_refused_and_never_run(tmp_path):
    from ingest.wikidata_ranges import DumpError, iter_range_lines, plan_ranges

    dump = tmp_path / "wikidata.json.bz2"
    dump.write_bytes(bz2.compress(b'[\n{"id": "Q1", "type": "item"},\n{"id": "Q2", "type": "item"}\n]\n'))
    index_dir = tmp_path / "index"
    ranges = plan_ranges([str(dump)], 1 << 20, str(index_dir))
    index_path = Path(ranges[0].index_path)
    assert index_path.suffix == ".npz" and index_path.parent == index_dir
    marker = tmp_path / "pwned"
    _plant(index_path, marker)
    with pytest.raises(DumpError, match="not a bz2 block index written by structcse"):
        plan_ranges([str(dump)], 1 << 20, str(index_dir))
    with pytest.raises(DumpError, match=re.escape(str(index_path))):
        list(iter_range_lines(ranges[0]))
    assert not marker.exists()


def test_a_dump_replaced_under_its_index_is_an_error(tmp_path):
    from ingest.wikidata_ranges import DumpError, iter_range_lines, plan_ranges

    dump = tmp_path / "wikidata.json.bz2"
    dump.write_bytes(bz2.compress(b'[\n{"id": "Q1", "type": "item"}\n]\n'))
    ranges = plan_ranges([str(dump)], 1 << 20, str(tmp_path / "index"))
    stat = dump.stat()
    dump.write_bytes(bz2.compress(b'[\n{"id": "Q9", "type": "item"}\n]\n'))  # same size, same mtime
    os.utime(dump, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(DumpError, match="changed since its bz2 index"):
        list(iter_range_lines(ranges[0]))


def test_planted_checkpoint_state_and_heads_are_refused(tmp_path):
    from train.state_files import (
        UnsafeStateError,
        check_local_checkpoints,
        load_tensors,
    )

    marker = tmp_path / "pwned"
    state = tmp_path / "run" / "step-0000003" / "state.pt"
    _plant(state, marker)
    with pytest.raises(UnsafeStateError, match="refused: it holds objects other than tensors"):
        load_tensors(state)
    from infra.publish import seal

    assert check_local_checkpoints(tmp_path / "run", "state.pt") == 0  # an unsealed copy is never a candidate: unread
    seal(state.parent)  # a planted checkpoint that passes for a whole one is read safely, and refused
    with pytest.raises(UnsafeStateError, match="step-0000003"):
        check_local_checkpoints(tmp_path / "run", "state.pt")
    assert not marker.exists()

    import torch

    from train.methods import load_method_heads

    heads = tmp_path / "model"
    heads.mkdir()
    (heads / "structcse_method.json").write_text(json.dumps(
        {"method": "simcse_unsup", "options": {}, "hidden_size": 8, "temperature": 0.05,
         "heads_file": "structcse_heads.pt"}))
    _plant(heads / "structcse_heads.pt", marker)
    with pytest.raises(UnsafeStateError, match="structcse_heads.pt"):
        load_method_heads(heads)
    assert not marker.exists()
    # what training itself writes still loads
    torch.save({"model": {"w": torch.ones(2)}, "step": 3, "config": {"lr": 1e-5, "dev_data": None}}, state)
    assert load_tensors(state)["step"] == 3


def test_a_resume_from_a_planted_state_stops_before_ray_starts(demo_sets, demo_tiny_bert, tmp_path):
    from train.config import TrainConfig
    from train.run import build_trainer
    from train.state_files import UnsafeStateError

    out, _ = demo_sets
    cfg = TrainConfig.from_dict({"method": "simcse_unsup", "model": str(demo_tiny_bert), "data": str(out),
                                 "batch_size": 8, "max_steps": 2, "storage_path": str(tmp_path / "runs"),
                                 "run_name": "victim"})
    marker = tmp_path / "pwned"
    _plant(tmp_path / "runs" / "victim" / "step-0000001" / "state.pt", marker)
    from infra.publish import seal

    seal(tmp_path / "runs" / "victim" / "step-0000001")  # passes for a whole checkpoint
    with pytest.raises(UnsafeStateError, match="victim/step-0000001/state.pt"):
        build_trainer(cfg)
    assert not marker.exists()


def test_no_unsafe_loads_left_in_the_code():
    pattern = re.compile(r"pickle\.loads?\(|weights_only\s*=\s*False|trust_remote_code\s*=\s*True|allow_pickle\s*=\s*True")
    hits = [f"{path.relative_to(REPO)}:{n}" for stage in ("ingest", "train", "eval", "tune", "structcse")
            for path in sorted((REPO / stage).rglob("*.py"))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert hits == []


# ---------------------------------------------------------------- inputs that reach a query or a path

def test_config_values_that_would_enter_a_query_or_path_are_refused():
    from ingest.aspects.validate import (
        check_pid,
        check_properties,
        check_qid,
        check_wiki,
    )
    from train.config import ConfigError, TrainConfig

    with pytest.raises(ValueError, match=r"aspects.properties: 'P17 } ; DROP' is not a Wikidata property id"):
        check_properties(["P17 } ; DROP"])
    for bad, check in (("Q5> ?x", check_qid), ("P31\n", check_pid), ("en}wiki", check_wiki)):
        with pytest.raises(ValueError):
            check(bad)
    for name in ("../../etc", "a/b", ".."):
        with pytest.raises(ConfigError, match="run_name"):
            TrainConfig.from_dict({"method": "simcse_unsup", "data": "d", "run_name": name}).validate()


def test_a_dump_with_a_doctype_is_refused(tmp_path):
    from ingest.multistream import DumpFormatError, plan_shards

    dump = tmp_path / "enwiki-latest-pages-articles.xml"
    dump.write_text('<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>\n'
                    '<mediawiki><page><title>A</title><ns>0</ns><id>1</id><revision><id>2</id>'
                    '<text>&lol2;</text></revision></page></mediawiki>\n')
    with pytest.raises(DumpFormatError, match="declares <!DOCTYPE at byte 22.*refused rather than expanded"):
        plan_shards([str(dump)])
    compressed = tmp_path / "enwiki-latest-pages-articles.xml.bz2"
    compressed.write_bytes(bz2.compress(dump.read_bytes()))
    with pytest.raises(DumpFormatError, match="<!DOCTYPE"):
        plan_shards([str(compressed)])


def test_a_link_out_of_a_set_folder_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from setformat import schemas
    from setformat.io import set_files

    elsewhere = tmp_path / "private.parquet"
    pq.write_table(pa.table({"x": [1]}), elsewhere)
    folder = tmp_path / "sentences"
    folder.mkdir()
    (folder / "part-0.parquet").symlink_to(elsewhere)
    for path in (folder, f"file://{folder}"):  # a file:// URI is a local path: the same guard
        with pytest.raises(schemas.SchemaError, match="outside the set folder"):
            set_files(path)


# ---------------------------------------------------------------- cluster.yaml

def test_cluster_yaml_runs_token_auth_on_every_node():
    cluster = yaml.safe_load((REPO / "cluster.yaml").read_text())
    starts = {"head": cluster["head_start_ray_commands"], "workers": cluster["worker_start_ray_commands"]}
    for who, commands in starts.items():
        ray_starts = [c for c in commands if "ray start" in c]
        assert ray_starts, who
        for command in ray_starts:
            assert re.search(r"(^|[;\s])RAY_AUTH_MODE=token ray start\b", command), (who, command)
            assert "0.0.0.0" not in command, (who, command)
    assert len(cluster["available_node_types"]) >= 2  # every node type starts with one of the two lists
    token_mounts = {dst: src for dst, src in cluster["file_mounts"].items() if "auth_token" in dst}
    assert token_mounts == {"~/.ray/auth_token": "~/.ray/auth_token"}  # from the user's home, not the repo
    tracked = os.popen(f"git -C {REPO} ls-files").read().split()
    assert not [f for f in tracked if "auth_token" in f]
    group = cluster["provider"]["security_group"]
    open_to_world = [p for p in group["IpPermissions"]
                     if any(r.get("CidrIp") == "0.0.0.0/0" for r in p.get("IpRanges", []))]
    assert [(p["FromPort"], p["ToPort"]) for p in open_to_world] == [(22, 22)]


# ---------------------------------------------------------------- secrets never written down

SECRETS = {var: f"sk-structcse-{var.lower()}-7f3a9c" for var in (
    "BABELNET_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD",
    "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_CONNECTION_STRING", "GOOGLE_API_KEY")}


def test_every_secret_variable_is_known():
    from infra.secrets import SECRET_ENV_VARS

    assert set(SECRETS) <= set(SECRET_ENV_VARS)


def files_holding(root: Path, values) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}: {v}" for v in values if v.encode() in data]
    return found


def test_ingest_train_and_eval_write_no_secret(ray_session, demo_world, demo_tiny_bert, tmp_path, monkeypatch,
                                                capfd):
    """Every secret variable set (and Ray's auth token): ingest of the demo world, a 2-step training run in
    local mode (checkpoint, dev metric, TensorBoard events, model card, summary) and ``python -m eval --output``;
    then every file under the work folder, the Ray session's logs and what was printed hold none of the values.
    (The session's Ray workers started before the values were set, so what they alone write is checked by the
    full sweep, which also runs a Tune search with a Ray of its own: ``python bench/security.py``.)"""
    from eval.cli import main as eval_main
    from ingest.pipeline import IngestConfig, run_ingest
    from structcse.demo import ENTITY_LINK_THRESHOLD
    from train.config import TrainConfig
    from train.run import run

    secrets = {**SECRETS, "RAY_AUTH_TOKEN": "sk-structcse-ray_auth_token-7f3a9c"}
    for var, value in secrets.items():
        monkeypatch.setenv(var, value)
    sets = tmp_path / "sets"
    run_ingest(IngestConfig(wikipedia=[str(demo_world.wikipedia_dump)], wikidata=[str(demo_world.wikidata_dump)],
                            out=str(sets), shard_bytes=1, entity_link_threshold=ENTITY_LINK_THRESHOLD))
    outcome = run(TrainConfig.from_dict({
        "method": "simcse_unsup", "model": str(demo_tiny_bert), "data": str(sets), "pooling": "mean",
        "batch_size": 16, "max_len": 32, "max_steps": 2, "checkpoint_every_steps": 2, "log_every_steps": 1,
        "num_workers": 0, "storage_path": str(tmp_path / "runs"), "run_name": "secrets",
        "dev_data": str(demo_world.sts_dir)}))
    assert eval_main(["--task", "sts", "--model", outcome.model_path, "--data", str(demo_world.sts_dir),
                      "--split", "dev", "--output", str(tmp_path / "eval" / "sts.json")]) == 0
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {"_manifest.json", "train_summary.json", "README.md", "sts.json"} <= {p.name for p in written}
    assert any(p.name.startswith("events.out.tfevents") for p in written)
    import ray

    session_logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    assert files_holding(tmp_path, secrets.values()) == []
    assert files_holding(session_logs, secrets.values()) == []
    printed = capfd.readouterr()
    assert [var for var, value in secrets.items() if value in printed.out + printed.err] == []


# The full sweep (ingest, a training run on Ray Train workers, an evaluation and a Tune search, with a Ray
# started with every secret variable set; its session logs searched too): python bench/security.py ("ok").


def test_a_manifest_field_holding_a_secret_is_redacted(tmp_path, monkeypatch):
    from setformat.io import write_manifest

    for var, value in SECRETS.items():
        monkeypatch.setenv(var, value)
    write_manifest(str(tmp_path / "extra"), "extra", 0, note=f"token {SECRETS['HF_TOKEN']}",
                   config={"url": f"https://x/?key={SECRETS['GOOGLE_API_KEY']}"})
    assert files_holding(tmp_path, SECRETS.values()) == []
    text = (tmp_path / "extra" / "_manifest.json").read_text()
    assert "token ***HF_TOKEN***" in text and "***GOOGLE_API_KEY***" in text


def test_configs_and_urls_holding_a_secret_are_refused_without_echoing_it(tmp_path, monkeypatch):
    from train.config import ConfigError, TrainConfig
    from tune.search import load_tune_settings

    for var, value in SECRETS.items():
        monkeypatch.setenv(var, value)
    base = {"method": "simcse_unsup", "model": "m", "data": str(tmp_path)}
    hf = SECRETS["HF_TOKEN"]
    with pytest.raises(ConfigError, match=r"model holds the value of \$HF_TOKEN") as caught:
        TrainConfig.from_dict({**base, "model": f"https://hf.co/x?{hf}"}).validate()
    assert hf not in str(caught.value)
    with pytest.raises(ConfigError, match="storage_path is a URL with a password or key"):
        TrainConfig.from_dict({**base, "storage_path": "s3://AKIAXX:abcdefgh@bucket/runs"}).validate()
    bad = tmp_path / "tune.yaml"
    bad.write_text(yaml.safe_dump({"storage_path": f"s3://bucket/{SECRETS['AWS_SECRET_ACCESS_KEY']}"}))
    with pytest.raises(ConfigError, match=r"storage_path holds the value of \$AWS_SECRET_ACCESS_KEY") as caught:
        load_tune_settings(bad)
    assert SECRETS["AWS_SECRET_ACCESS_KEY"] not in str(caught.value)


def test_tune_withholds_cloud_credentials_from_its_trials_and_puts_them_back(monkeypatch, project_log):
    """Ray Tune copies AWS_* into every trial's runtime env, which Ray logs in clear: with local storage
    they are out of the environment while the search runs and back after; with remote storage (the driver
    needs them) they stay, and the user is told once."""
    from tune.search import (
        TUNE_PROPAGATED_CREDENTIALS,
        _credentials_withheld_from_trials,
    )

    for var in TUNE_PROPAGATED_CREDENTIALS:
        monkeypatch.setenv(var, f"value-of-{var}")
    with _credentials_withheld_from_trials("/tmp/runs"):
        assert [v for v in TUNE_PROPAGATED_CREDENTIALS if v in os.environ] == []
    assert {v: os.environ[v] for v in TUNE_PROPAGATED_CREDENTIALS} == {
        v: f"value-of-{v}" for v in TUNE_PROPAGATED_CREDENTIALS} and project_log.lines == []
    with _credentials_withheld_from_trials("s3://bucket/runs"):
        assert all(os.environ[v] == f"value-of-{v}" for v in TUNE_PROPAGATED_CREDENTIALS)
    said = project_log.lines
    assert len(said) == 1 and "runtime_env_agent.log" in said[0]
    assert not [v for v in TUNE_PROPAGATED_CREDENTIALS if f"value-of-{v}" in said[0]]
