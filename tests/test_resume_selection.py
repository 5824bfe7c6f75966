"""Resume and checkpoint selection do what they say (issue 44): local mode resumes from its newest whole
checkpoint as Ray Train does; a leftover ``step-*`` of another run is never resumed from nor selected; the best
checkpoint by the dev metric is selected when it is not the last, with a local run folder and a bucket one; a
mistyped ``checkpoint_metric`` is refused in one line before Ray starts; an elastic minimum the machine cannot
place is refused instead of waited for. Tiny local-mode runs on the tiny BERT of ``tests/test_train.py``; the
same in Ray Train, and its timings, are ``bench/integrity_train.py``'s."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_train import _cfg, world  # noqa: F401  (the tiny BERT and sets fixture)

REPO = Path(__file__).resolve().parents[1]
# lr 2e-2 on the tiny BERT: the dev score peaks at step 1 and falls by ~0.1 by step 3, every run (seeded, one
# worker, rows in file order), so the best checkpoint is not the last
PEAKS_EARLY = {"method": "simcse_unsup", "lr": 2e-2, "max_steps": 3, "checkpoint_every_steps": 1, "num_workers": 0}


def _metrics(run_dir: str) -> dict[int, dict]:
    """{step: metrics.json} of every step-* folder in ``run_dir`` (a path or a URI), through the storage client."""
    from infra.publish import resolve
    from infra.storage import filesystem
    from train.checkpoints import step_of

    fs, root = filesystem(run_dir)
    fs.invalidate_cache(root)
    out = {}
    for name in fs.ls(root, detail=False):
        step = step_of(name)
        if step is not None and name.rstrip("/").rsplit("/", 1)[-1].startswith("step-"):
            content = filesystem(resolve(f"{run_dir}/{name.rstrip('/').rsplit('/', 1)[-1]}"))[1]
            out[step] = json.loads(fs.cat_file(f"{content}/metrics.json"))
    return out


def _summary(run_dir: str) -> dict:
    from infra.storage import read_text

    return json.loads(read_text(f"{run_dir}/train_summary.json"))


def test_local_mode_resumes_from_its_newest_whole_checkpoint(ray_session, world, tmp_path, capsys):  # noqa: F811
    """--max-steps 4 then 8 in local mode: the second run starts at step 4 and says where from; a newer
    checkpoint folder its writer never finished (no _files.json) is passed over."""
    from train.run import run

    cfg = _cfg(world, tmp_path, method="simcse_unsup", run_name="again", num_workers=0, max_steps=4)
    run(cfg)
    run_dir = tmp_path / "runs" / "again"
    partial = run_dir / "step-0000006"
    shutil.copytree(run_dir / "step-0000004", partial)
    (partial / "_files.json").unlink()
    capsys.readouterr()
    second = run(cfg.with_overrides(["max_steps=8"]))
    said = capsys.readouterr().out
    assert f"resumed at step 4 (epoch 0, skipping 4 batches) from {run_dir / 'step-0000004'}" in said
    last = _summary(str(run_dir))["last_metrics"]
    assert last["start_step"] == 4 and last["step"] == 8
    assert Path(second.checkpoint_path).name == "step-0000008"


def test_a_leftover_checkpoint_of_another_run_is_never_resumed_from_nor_selected(ray_session, world,  # noqa: F811
                                                                                 tmp_path):
    """Another run's step-* in this run's folder, newer and with a perfect dev score: not a candidate. The other
    run is an older run of the same config (the same key, another ``run_id``: what a removed folder's leftovers
    are), its checkpoint a copy of this run's step-2 that carries that run's fingerprint."""
    from infra.publish import seal
    from train.checkpoints import FINGERPRINT, run_checkpoints
    from train.run import run
    from train.run_key import RUN_ID, RUN_KEY, run_fingerprint

    dev = str(world["dev"])
    mine = _cfg(world, tmp_path, method="simcse_unsup", run_name="mine", num_workers=0, max_steps=2, dev_data=dev)
    run(mine)
    run_dir = tmp_path / "runs" / "mine"
    other = tmp_path / "runs" / "other"  # the older run's record: its key and its own run_id
    other.mkdir()
    record = json.loads((run_dir / RUN_KEY).read_text())
    (other / RUN_KEY).write_text(json.dumps({**record, RUN_ID: "an-older-run"}))
    others = run_fingerprint(str(other))
    assert others and others != run_fingerprint(str(run_dir))
    leftover = run_dir / "step-0000006"
    shutil.copytree(run_dir / "step-0000002", leftover)
    metrics = json.loads((leftover / "metrics.json").read_text())
    (leftover / "metrics.json").write_text(json.dumps({**metrics, FINGERPRINT: others, "dev_spearman": 1.0,
                                                       "step": 6}))
    seal(leftover)  # whole: only its fingerprint tells it apart

    out = run(mine.with_overrides(["max_steps=4"]))
    last = _summary(str(run_dir))["last_metrics"]
    assert last["start_step"] == 2 and last["step"] == 4  # not "resumed at step 6" (nothing left to do)
    assert Path(out.checkpoint_path).name in ("step-0000002", "step-0000004") and out.metrics["dev_spearman"] < 1.0
    assert [c.step for c in run_checkpoints(str(run_dir), run_fingerprint(str(run_dir)))] == [2, 4]


def _check_best_not_last(run_dir: str, out) -> None:
    from train.checkpoints import step_of

    scores = {step: m["dev_spearman"] for step, m in _metrics(run_dir).items()}
    best = max(scores, key=scores.get)
    assert best != max(scores), f"the fixture's run no longer peaks early: {scores}"
    assert step_of(out.checkpoint_path) == best and out.metrics["dev_spearman"] == scores[best]
    summary = _summary(run_dir)
    assert summary["selected_by"] == "dev_spearman" and step_of(summary["checkpoint_path"]) == best


def test_local_mode_selects_the_best_checkpoint_when_it_is_not_the_last(ray_session, world, tmp_path):  # noqa: F811
    from train.run import run

    out = run(_cfg(world, tmp_path, run_name="peak", dev_data=str(world["dev"]), **PEAKS_EARLY))
    _check_best_not_last(str(tmp_path / "runs" / "peak"), out)
    card = (Path(out.model_path) / "README.md").read_text()
    assert f"**Selected by:** `dev_spearman` = {out.metrics['dev_spearman']:.4f}" in card


def test_local_mode_with_a_bucket_run_folder_selects_the_same_way(ray_session, s3_server, world,  # noqa: F811
                                                                  tmp_path, monkeypatch):
    from train.run import run

    monkeypatch.chdir(tmp_path)
    storage = f"{s3_server}/resume-selection/{tmp_path.name}"
    out = run(_cfg(world, tmp_path, run_name="peak", dev_data=str(world["dev"]), storage_path=storage, **PEAKS_EARLY))
    _check_best_not_last(f"{storage}/peak", out)
    assert not (tmp_path / "s3:").exists()


def test_a_mistyped_checkpoint_metric_exits_2_in_one_line_before_ray_starts(world, tmp_path):  # noqa: F811
    args = [sys.executable, "-m", "train", "--config", "configs/simcse_unsup.yaml", "--data", str(world["data"]),
            "--model", world["model"], "--storage", str(tmp_path / "runs"), "--name", "typo",
            "--set", f"dev_data={world['dev']}", "--set", "checkpoint_metric=dev_spearmn"]
    # a Ray address nothing answers at: a command that reached Ray would fail there, not with the config's line
    env = {**os.environ, "RAY_ADDRESS": f"127.0.0.1:{_closed_port()}"}
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "checkpoint_metric 'dev_spearmn'" in done.stderr
    assert "set checkpoint_metric=dev_spearman" in done.stderr
    assert not (tmp_path / "runs").exists()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_elastic_minimum_the_machine_cannot_place_is_refused_and_an_autoscaler_is_waited_for(ray_session,
                                                                                                tmp_path,
                                                                                                project_log):
    from train.config import ConfigError, TrainConfig
    from train.ray_env import check_cluster_resources, check_resources

    cpus = ray_session.cluster_resources()["CPU"]
    cfg = TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": str(tmp_path), "batch_size": 840,
                                 "num_workers": [4, 8], "max_failures": 3})
    with pytest.raises(ConfigError) as caught:
        check_cluster_resources(cfg, started_here=True)
    message = str(caught.value)
    assert "\n" not in message and "num_workers=4-8 (elastic)" in message and "wait forever" in message
    assert f"this machine has {cpus:g} CPUs" in message and f"--num-workers {int(cpus)}-8" in message
    project_log.clear()
    check_resources(cfg, {"CPU": cpus}, where="the cluster", autoscaled=True)
    assert project_log.lines == [f"[train] waiting for 4-8 worker(s) x 1 CPU: the autoscaler adds nodes (the cluster "
                                 f"has {cpus:g} CPUs now)"]
    check_cluster_resources(cfg.with_overrides([f"num_workers=[{int(cpus)},8]"]), started_here=True)  # placeable
