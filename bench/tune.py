"""Tune's evaluation pool and ASHA on the demo world (tiny BERT, SimCSE-unsup, 2-core CPU by default).

    python bench/tune.py [--work DIR] [--steps 60] [--parts abcd]    (e: --parts e)

* (a) ``async_eval_throughput_ratio``: one Ray Train run's training examples/s with its checkpoints
  scored asynchronously by the pool (``tune.scorers.PoolValidation`` behind Ray Train's
  ``ValidationConfig``) over the same run with no dev scoring at all; beside it the in-loop
  (blocking) scoring of ``python -m train`` against the same baseline. Examples/s are measured between
  the first and the last training report (``reported_at``), so Ray's start-up is left out.
* (b) ``asha_best`` / ``grid_best`` / ``asha_compute_ratio``: the same grid (5 lr x batch size 16/32,
  10 trials, 2 at a time, 1,536 examples each, a report every 128) run to the end (FIFO) and under
  ASHA (reduction factor 3, rungs at 1/9 and 1/3 of the examples); compute = examples trained summed
  over trials. ``grid_base_config`` / ``asha_base_config``: the base config's trial (lr 3e-4, batch 16)
  as each search reports it: its best score, the examples it trained on and its budget (ASHA never stops
  it early, so its comparison with the best trial is at its full budget).
* (c) ``pool_scaling_2_actors``: scores/s of a pool of 2 scorers over a pool of 1, 24 concurrent
  requests of one checkpoint.
* (d) ``restore``: ``python -m tune`` killed mid-trial and run again: ``ok`` when it continued the
  search, the trial resumed from its last recorded checkpoint (``resumed_from_steps``, never 0) and
  ran to its end, and a third run of the finished search was refused.
* (e) ``asha_equal_data``: the end-to-end check that left the test suite (it was
  ``tests/test_tune.py::test_asha_stops_bad_trials_at_equal_data``): a grid of lr 3e-4 / 10 x batch 16 / 32,
  1,536 examples each, a report every 256 examples, ASHA (reduction factor 2, grace 256). ``ok`` when every
  check holds: each trial reports every 256 examples whatever its batch; every good trial beats every bad
  one; ASHA stopped a bad trial at a rung; a good trial ran to 1,536 examples with its 6 checkpoints
  scored; each score is tagged with its checkpoint's step and starts after it was reported; the report,
  plots and ``best_config.yaml`` (runnable as is) are written; ``best_model`` rescored gives the best
  score; the finished search and another search in its folder are refused; the base config's trial (lr
  3e-4, batch 16) trained to its budget. ``failed`` names the checks that did not hold; ``base_config`` (also
  the last line's ``asha_base_config``): its score, examples trained and budget. Not in the default parts (its own run: ``--parts e``, about 2-4 minutes on 2 cores).

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO, emit, prepare  # noqa: E402


def base_config(work, world, model, steps, **extra):
    from train.config import TrainConfig

    return TrainConfig.from_dict({
        "method": "simcse_unsup", "model": str(model), "data": str(work / "sets"), "pooling": "mean",
        "batch_size": 16, "lr": 3e-4, "max_steps": steps, "epochs": 50, "checkpoint_every_steps": max(1, steps // 6),
        "cpus_per_worker": 0.5, "log_every_steps": 0, "storage_path": str(work / "runs"),
        # every report's metrics.json stays (examples/s is read from them); the same for every mode
        "keep_checkpoints": 10,
        **extra}).validate()


def examples_per_s(run_dir: Path) -> float:
    rows = sorted((json.loads(p.read_text()) for p in run_dir.glob("step-*/metrics.json")), key=lambda m: m["step"])
    if len(rows) < 2:
        return float("nan")
    first, last = rows[0], rows[-1]
    return (last["examples_seen"] - first["examples_seen"]) / (last["reported_at"] - first["reported_at"])


def throughput(work, world, model, steps) -> dict:
    """(a): the same run without scoring, with the pool (asynchronous), with in-loop scoring."""
    from ray.train.v2.api.validation_config import (
        ValidationConfig,
        ValidationTaskConfig,
    )

    from train.run import build_trainer
    from tune.scorers import PoolValidation, start_pool, stop_pool

    out = {}
    pool = start_pool("sts_spearman", str(world.sts_dir), name="bench-pool", namespace="bench-tune", size=1)
    try:
        for name, extra, validation in (
            ("off", {}, None),
            ("async", {"dev_data": str(world.sts_dir)},
             ValidationConfig(fn=PoolValidation("bench-pool", "bench-tune", 600),
                              task_config=ValidationTaskConfig(timeout_s=660), ray_remote_kwargs={"num_cpus": 0})),
            ("in_loop", {"dev_data": str(world.sts_dir)}, None),
        ):
            cfg = base_config(work, world, model, steps, run_name=f"throughput-{name}", **extra)
            started = time.time()
            build_trainer(cfg, validation=validation).fit()
            out[name] = {"examples_per_s": examples_per_s(work / "runs" / cfg.name),
                         "wall_s": round(time.time() - started, 1)}
            print(f"(a) {name}: {out[name]}", flush=True)
    finally:
        stop_pool("bench-pool", "bench-tune")
        del pool
    return out


SEARCH_LRS = [3e-5, 1e-4, 3e-4, 1e-3, 3e-3]


def search(work, world, model, steps, scheduler: str) -> dict:
    from infra.logs import lines_muted
    from tune.search import TuneSettings, run_search

    base = base_config(work, world, model, steps)
    base.dev_data = str(world.sts_dir)
    settings = TuneSettings(search_space={"lr": {"choice": SEARCH_LRS}, "batch_size": {"choice": [16, 32]}},
                            searcher="grid", scheduler=scheduler, reduction_factor=3, max_concurrent_trials=2,
                            report_every_examples=128, name=f"bench-{scheduler}", storage_path=str(work / "runs"))
    started = time.time()
    with lines_muted("tune", "train"):
        outcome = run_search(base, settings)
    result = {"best": outcome.best_metrics.get("dev_spearman"), "examples": sum(r["examples_seen"] for r in outcome.trials),
              "trials": len(outcome.trials), "wall_s": round(time.time() - started, 1),
              "base_config": base_config_line(outcome)}
    print(f"(b) {scheduler}: {result}", flush=True)
    return result


def base_config_line(outcome) -> dict:
    """The base config's trial as the search reports it: its best score, the examples it trained on, its budget."""
    base = outcome.base_config
    return {"score": round(base["score"], 4) if base.get("score") is not None else None,
            "examples_seen": base.get("examples_seen"), "budget": base.get("budget"),
            "full_budget": base.get("full_budget")}


def restore(work, world, model) -> dict:
    """(d): ``python -m tune`` killed mid-trial (SIGKILL of the search driver, once Ray Train has recorded a
    checkpoint of the trial), then the same command again: it must continue the search
    (``Tuner.restore``), the interrupted trial resuming its Train run from that checkpoint."""
    import subprocess

    import ray

    command = _restore_command(work, world, model)
    # the search joins this script's own Ray (by its address), never another instance on the machine
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    folder = work / "runs" / "killed"
    started = time.time()
    _kill_after_a_checkpoint(command, env, folder, work / "restore-first.log")
    time.sleep(10)  # the job's actors die: nothing trains on
    killed_at = max(m["step"] for m in _reports(folder))
    again = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    (work / "restore-second.log").write_text(again.stdout + again.stderr)
    resumed_from = sorted({m["start_step"] for m in _reports(folder) if m["step"] > killed_at})
    finished = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    result = {"killed_at_step": killed_at, "resumed_from_steps": resumed_from,
              "final_step": max(m["step"] for m in _reports(folder)), "rerun_exit": again.returncode,
              "continued": "continuing the interrupted search" in again.stdout + again.stderr,
              "finished_search_refused": finished.returncode == 2 and "has finished" in finished.stderr,
              "wall_s": round(time.time() - started, 1)}
    result["ok"] = bool(result["continued"] and again.returncode == 0 and resumed_from and 0 not in resumed_from
                        and result["final_step"] == 96 and result["finished_search_refused"])
    print(f"(d) restore: {result}", flush=True)
    return result


def _restore_command(work, world, model) -> list[str]:
    """``python -m tune``: one trial (lr 3e-4, grid, FIFO) of 96 steps, a checkpoint every 16."""
    import yaml

    tune_yaml = work / "restore-search.yaml"
    tune_yaml.write_text(yaml.safe_dump({"search_space": {"lr": {"choice": [3e-4]}}, "searcher": "grid",
                                         "scheduler": "fifo", "max_concurrent_trials": 1}))
    return [sys.executable, "-m", "tune", "--config", str(REPO / "configs" / "simcse_unsup.yaml"),
            "--tune-config", str(tune_yaml), "--data", str(work / "sets"), "--model", str(model),
            "--dev-data", str(world.sts_dir), "--storage", str(work / "runs"), "--name", "killed",
            "--set", "pooling=mean", "--set", "batch_size=16", "--set", "max_steps=96",
            "--set", "checkpoint_every_steps=16", "--set", "cpus_per_worker=0.5", "--set", "log_every_steps=0",
            "--set", "max_len=32"]


def _reports(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in folder.glob("trials/train-*/step-*/metrics.json")]


def _recorded(folder: Path) -> list[int]:
    """Checkpoints Ray Train has recorded: what a restarted run resumes from."""
    import contextlib

    steps = []
    for snapshot in folder.glob("trials/train-*/checkpoint_manager_snapshot.json"):
        with contextlib.suppress(ValueError):  # being written
            steps += [r["metrics"]["step"] for r in json.loads(snapshot.read_text())["checkpoint_results"]]
    return steps


def _kill_after_a_checkpoint(command: list[str], env: dict, folder: Path, log_path: Path) -> None:
    """Run the search; SIGKILL it once it has saved its state and Ray Train recorded a checkpoint."""
    import signal
    import subprocess

    with log_path.open("w") as log:
        first = subprocess.Popen(command, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline and first.poll() is None and not (
                _recorded(folder) and list(folder.glob("experiment_state-*.json"))):
            time.sleep(0.5)
        if first.poll() is not None or not _recorded(folder):
            raise RuntimeError(f"the first search ended or recorded no checkpoint: {log_path}")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)


def asha_equal_data(work, world, model) -> dict:
    """(e): one search on the demo world, then every check of the former test, by name."""
    from infra.logs import lines_muted
    from train.config import TrainConfig
    from tune.search import TuneSettings, run_search

    base = TrainConfig.from_dict({
        "method": "simcse_unsup", "model": str(model), "data": str(work / "sets"), "dev_data": str(world.sts_dir),
        "pooling": "mean", "batch_size": 16, "lr": 3e-4, "max_steps": 96, "checkpoint_every_steps": 16,
        "cpus_per_worker": 0.5, "log_every_steps": 0, "max_len": 32}).validate()
    settings = TuneSettings(search_space={"lr": {"choice": [3e-4, 10.0]}, "batch_size": {"choice": [16, 32]}},
                            searcher="grid", max_concurrent_trials=2, reduction_factor=2, grace_period=256,
                            name="asha-equal-data", storage_path=str(work / "runs"))
    started = time.time()
    with lines_muted("tune", "train"):
        outcome = run_search(base, settings)
    wall_s = round(time.time() - started, 1)
    checks = {**_trial_checks(outcome), **_written_checks(work / "runs" / settings.name, outcome, world),
              **_refusal_checks(base, settings),
              "base_config_trained_to_its_budget": bool(outcome.base_config.get("full_budget"))}
    result = {"ok": all(checks.values()), "failed": [k for k, v in checks.items() if not v], "wall_s": wall_s,
              "base_config": base_config_line(outcome),
              "trials": [{"values": r["values"], "best": r["best"], "examples_seen": r["examples_seen"],
                          "ended": r["ended"]} for r in outcome.trials]}
    print(f"(e) asha at equal data: {result}", flush=True)
    return result


def _trial_checks(outcome) -> dict:
    """What the trials reported: equal data whatever the batch, scores tagged and after their report, good
    trials beating bad ones, ASHA's stops."""
    checks = {}
    rows = {(r["values"]["lr"], r["values"]["batch_size"]): r for r in outcome.trials}
    checks["four_trials_no_error"] = len(rows) == 4 and not outcome.results.errors
    good, bad = [rows.get((3e-4, 16)), rows.get((3e-4, 32))], [rows.get((10.0, 16)), rows.get((10.0, 32))]
    equal_data = tagged = after_report = True
    for result in outcome.results:
        frame, batch = result.metrics_dataframe, result.config["batch_size"]
        trained = frame[frame["loss"].notna()]
        equal_data &= bool((trained["examples_trained"] == trained["step"] * batch).all()
                           and set(trained["examples_trained"]) <= set(range(256, 1537, 256)))
        scored = frame[frame["dev_spearman"].notna()]
        tagged &= bool((scored["validated_step"] * batch == scored["examples_seen"]).all())
        reported = trained.set_index("step")["reported_at"]
        after_report &= bool((scored["score_started_at"].to_numpy()
                              >= reported.loc[scored["validated_step"]].to_numpy()).all())
    checks["reports_every_256_examples_whatever_the_batch"] = equal_data
    checks["scores_tagged_with_their_checkpoint"] = tagged
    checks["scores_start_after_their_checkpoint_is_reported"] = after_report
    if None not in good + bad and all(r["best"] is not None for r in good + bad):
        checks["every_good_trial_beats_every_bad_one"] = min(r["best"] for r in good) > max(r["best"] for r in bad)
        checks["asha_stopped_a_bad_trial_at_a_rung"] = any(
            r["examples_seen"] < 1536 and r["ended"].startswith("stopped") for r in bad)
        checks["a_good_trial_ran_to_the_end"] = max(r["examples_seen"] for r in good) == 1536
        checks["its_six_checkpoints_scored"] = max(len(r["curve"]) for r in good) == 6
    else:
        checks["every_trial_scored"] = False
    return checks


def _written_checks(folder: Path, outcome, world) -> dict:
    """What the search wrote: its report, plots, a best_config.yaml that runs as is, a best_model that rescores
    to the best score."""
    import math

    import yaml

    from score.dev_metrics import DEV_METRICS
    from train.config import ConfigError, TrainConfig
    from train.saved_models import score_model_dir

    checks = {}
    report = (folder / "search_report.md").read_text() if (folder / "search_report.md").is_file() else ""
    checks["report_written"] = "| trial | lr | batch_size | best dev_spearman |" in report and "stopped at" in report
    checks["plots_written"] = ((folder / "learning_curves.png").is_file()
                               and (folder / "learning_curves.png").stat().st_size > 1000
                               and (folder / "search_space.png").is_file())
    best_cfg = yaml.safe_load((folder / "best_config.yaml").read_text())
    checks["best_config_is_the_best_trial_for_1536_examples"] = (
        math.isclose(best_cfg["lr"], 3e-4) and best_cfg["batch_size"] == outcome.best_config["batch_size"]
        and best_cfg["max_steps"] * best_cfg["batch_size"] == 1536)
    try:
        TrainConfig.from_dict(best_cfg).validate()
        checks["best_config_runs_as_is"] = True
    except ConfigError:
        checks["best_config_runs_as_is"] = False
    metric = DEV_METRICS["sts_spearman"]
    rescored = score_model_dir(metric, folder / "best_model", metric.read(str(world.sts_dir)))
    checks["best_model_rescores_to_the_best_score"] = math.isclose(
        rescored, outcome.best_metrics["dev_spearman"], abs_tol=1e-6)
    return checks


def _refusal_checks(base, settings) -> dict:
    """The finished search, and another base config in its folder, refused."""
    from infra.logs import lines_muted
    from train.config import ConfigError
    from tune.search import run_search

    checks = {}
    for name, config, message in (("finished_search_refused", base, "has finished"),
                                  ("another_search_in_its_folder_refused", base.with_overrides(["seed=7"]),
                                   "another base config")):
        try:
            with lines_muted("tune", "train"):
                run_search(config, settings)
            checks[name] = False
        except ConfigError as e:
            checks[name] = message in str(e)
    return checks


REQUESTS = 24


def pool_scaling(work, world, model) -> dict:
    import ray

    from train.encoder import Encoder
    from tune.scorers import start_pool, stop_pool

    checkpoint = work / "scoring" / "step-0000001"
    Encoder(str(model), "mean", 32, None).save_sentence_transformer(checkpoint / "model")
    out = {}
    for size in (1, 2):
        pool = start_pool("sts_spearman", str(world.sts_dir), name=f"scale-{size}", namespace="bench-tune", size=size,
                          num_cpus=1)  # a core each (torch threads follow it), nothing else runs meanwhile
        ray.get([pool.score.remote(str(checkpoint)) for _ in range(2 * size)], timeout=300)  # every scorer warm
        started = time.time()
        ray.get([pool.score.remote(str(checkpoint)) for _ in range(REQUESTS)], timeout=600)
        out[size] = REQUESTS / (time.time() - started)
        stop_pool(f"scale-{size}", "bench-tune")
        print(f"(c) {size} scorer(s): {out[size]:.2f} scores/s", flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--work", default=None)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--search-steps", type=int, default=96, help="of the base config (batch 16)")
    p.add_argument("--parts", default="abcd", help="which of (a)-(e) to run (default a-d; b is the slowest; "
                   "e: the ASHA end-to-end check)")
    args = p.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="structcse-bench-tune-"))
    import ray

    ray.init(num_cpus=2, configure_logging=False)
    from infra.logs import lines_muted

    with lines_muted("ingest"):
        setting = prepare(work)
    world, model = setting["world"], setting["model"]
    summary = {}
    if "a" in args.parts:
        a = throughput(work, world, model, args.steps)
        summary.update(
            async_eval_throughput_ratio=round(a["async"]["examples_per_s"] / a["off"]["examples_per_s"], 3),
            in_loop_eval_throughput_ratio=round(a["in_loop"]["examples_per_s"] / a["off"]["examples_per_s"], 3),
            examples_per_s={k: round(v["examples_per_s"], 1) for k, v in a.items()})
    if "c" in args.parts:
        c = pool_scaling(work, world, model)
        summary.update(pool_scores_per_s={str(k): round(v, 2) for k, v in c.items()},
                       pool_scaling_2_actors=round(c[2] / c[1], 3))
    if "b" in args.parts:
        grid = search(work, world, model, args.search_steps, "fifo")
        asha = search(work, world, model, args.search_steps, "asha")
        summary.update(grid_best=round(grid["best"], 4), asha_best=round(asha["best"], 4),
                       asha_compute_ratio=round(asha["examples"] / grid["examples"], 3),
                       grid_examples=grid["examples"], asha_examples=asha["examples"],
                       grid_wall_s=grid["wall_s"], asha_wall_s=asha["wall_s"],
                       grid_base_config=grid["base_config"], asha_base_config=asha["base_config"])
    if "d" in args.parts:
        summary["restore"] = restore(work, world, model)
    if "e" in args.parts:
        summary["asha_equal_data"] = asha_equal_data(work, world, model)
        summary["asha_base_config"] = summary["asha_equal_data"]["base_config"]
    summary["cpus"] = os.cpu_count()
    emit(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
