"""Nothing half-written, nothing lost, on the storage users really have: every stage against an S3 API that
throttles and resets, drivers SIGKILLed while they publish, a killed ingest's sets fed to the next stage, eight
processes racing for one cached model, ``gs://`` end to end, and storage that is not there.

    python bench/integrity.py [--out DIR] [--rate 0.1] [--parts throttled killed_during_publish ...]

Parts (each a key of the last line's JSON):

* ``throttled``: ``bench/cloud.py``'s stages (ingest, train, a killed-and-resumed run, Tune, eval, README's
  ``ray job submit`` block) with the bucket behind ``tests/fault_proxy.FaultProxy`` answering ``rate`` of
  the requests ``503 SlowDown`` (and a fifth of those faults resetting the connection); the local run of
  each stage is the unthrottled one it must equal (``identical_to_unthrottled``); ``retries``: the faults
  the clients met and got past (all of them, when every stage is ok).
* ``killed_during_publish``: ``python -m train`` in local mode, locally and in a bucket, SIGKILLed while the
  final model and, in another run, while a checkpoint is being published (``STRUCTCSE_PUBLISH_FILE_DELAY_S``
  slows publication so the kill lands inside it; the kill is made when the new copy's first file is
  there), then the same command again: ``"whole"`` when the model there after the kill and after the
  rerun loads and equals the previous or the new model, never a mix; ``reader_refused_partial``: ``python -m
  eval`` of the half-written copy exits 2 in one line.
* ``failed_job_feeds_next``: ``python -m ingest`` and ``python -m ingest.dsbats`` SIGKILLed once they wrote
  a set; train, Tune (on ingest's sets) and eval (on the SRSD set) each exit 2 in one line naming the job to
  rerun (``false`` when all three refuse).
* ``cache_race``: ``bench/cache_race.py``.
* ``local_mode_resume`` and ``selection``: ``bench/integrity_train.py``.
* ``gs``: ``bench/integrity_gs.py`` (fake-gcs-server on 127.0.0.1).
* ``bad_storage``: an endpoint that does not answer, a bucket that does not exist, a model that is not
  there: exit code, lines on stderr, seconds.
* ``foreign_out``, ``two_writers``, ``reader_during_replace``: ``bench/integrity_ownership.py`` (a user's
  folder and a bucket root refused with nothing lost; racing writers leave one writer's whole output; a
  reader during 20 republications sees one version each time).
* ``reingest_during_train``: ``bench/integrity_sets.py``; ``retries_bounded``: ``bench/integrity_retries.py``.

The parts of other benches run as their own processes (``python bench/PART.py --out DIR``, each with its own
servers, on the setting this bench made in DIR); their last JSON line is the part's result.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import (BUCKET, REPO, bench_json, cli, emit, kill_when, prepare, run_parts,  # noqa: E402
                           shutdown_ray, since, timed_cli, train_args, train_summary, work_folder)


PARTS = ["bad_storage", "failed_job_feeds_next", "killed_during_publish", "cache_race", "local_mode_resume",
         "gs", "foreign_out", "two_writers", "reader_during_replace", "reingest_during_train", "retries_bounded",
         "throttled"]


# ---------------------------------------------------------------- bad storage


def bad_storage(setting: dict, bucket: str, endpoint: str) -> dict:
    down = {"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9"}  # discard port: nothing answers
    results = {
        "endpoint_down": timed_cli(train_args({**setting, "sets": f"{bucket}/sets"}, f"{bucket}/runs", "down", 2),
                                   env=down, timeout=300),
        "missing_bucket": timed_cli(["ingest", "--wikipedia", str(setting["world"].wikipedia_dump),
                                     "--out", "s3://no-such-bucket-structcse/sets"], timeout=300),
        "missing_model": timed_cli(train_args({**setting, "model": f"{bucket}/models/absent"}, str(Path(
            setting["sets"]).parent / "runs-bad"), "absent-model", 2), timeout=300),
    }
    from infra.storage import filesystem

    fs, _ = filesystem("s3://no-such-bucket-structcse")
    results["missing_bucket"]["bucket_created"] = bool(fs.exists("no-such-bucket-structcse"))
    return results


def bad_storage_ok(results: dict) -> bool:
    return all(r["exit"] not in (0, None) and r["lines"] == 1 and r["seconds"] < 60 for r in results.values()) \
        and not results["missing_bucket"]["bucket_created"]


# ---------------------------------------------------------------- a failed job feeds the next


def failed_job_feeds_next(setting: dict, out: Path) -> dict:
    world = setting["world"]
    sets = out / "killed-ingest"
    kill_when(["ingest", "--wikipedia", str(world.wikipedia_dump), "--wikidata", str(world.wikidata_dump),
                "--out", str(sets), "--shard-bytes", "1", "--num-cpus", "2"],
               lambda: (sets / "sentences" / "_manifest.json").is_file())
    # the SRSD set of a finished DSBATS job, then the same job again, killed once it started: its sets are
    # being rewritten, so none of them may be read
    from setformat.integrity import read_job

    dsbats = out / "killed-dsbats"
    command = ["-c", "import sys; from ingest.dsbats.bats import category_files; from ingest.dsbats.job import "
               "DsbatsConfig, build_dsbats; bats, wordnet, out = sys.argv[1:]; build_dsbats(bats, {'kind': "
               "'wordnet', 'folder': wordnet}, out, DsbatsConfig(categories=sorted(category_files(bats)[1]), "
               "positives_per_pair=8))", str(world.bats_dir), str(world.wordnet_dir), str(dsbats)]
    done = subprocess.run([sys.executable, *command], cwd=REPO, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"ingest.dsbats exited {done.returncode}: {done.stderr[-500:]}")
    first = read_job(str(dsbats), "dsbats")["job_id"]
    kill_when(command, lambda: (read_job(str(dsbats), "dsbats") or {}).get("job_id") not in (None, first))
    killed = {**setting, "sets": str(sets)}
    refused = {
        "train": timed_cli(train_args(killed, str(out / "runs-killed"), "fed", 2)),
        "tune": timed_cli(["tune", "--config", "configs/simcse_unsup.yaml", "--tune-config",
                           "configs/tune/simcse_unsup.yaml", "--data", str(sets), "--model", setting["model"],
                           "--dev-data", setting["sts"], "--storage", str(out / "tune-killed"), "--name", "fed",
                           "--num-samples", "1"]),
        "eval": timed_cli(["eval", "--task", "srsd", "--data", str(dsbats / "srsd"), "--model", setting["model"]]),
    }
    for r in refused.values():
        r["names_the_job"] = "did not finish" in r["message"] and "rerun" in r["message"]
    return refused


def fed(refused: dict) -> bool:
    return not all(r["exit"] == 2 and r["lines"] == 1 and r["names_the_job"] for r in refused.values())


# ---------------------------------------------------------------- killed while publishing


def _weights(folder: str) -> dict:
    from safetensors.torch import load

    from infra.publish import resolve
    from infra.storage import filesystem

    fs, path = filesystem(f"{resolve(folder)}/model.safetensors")
    return load(fs.cat_file(path))


def _same(a: dict, b: dict) -> bool:
    import torch

    return set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


def _loads(folder: str) -> dict | None:
    """The weights of the model at ``folder`` if structcse's loader takes it whole, else None."""
    from train.saved_models import ModelLoadError, load

    try:
        load(folder)
    except (ModelLoadError, OSError):
        return None
    return _weights(folder)


def _publishing(storage: str, name: str, what: str):
    """``ready()``: the new copy of ``what`` (``model`` or a ``step-…`` folder) has its first file written."""
    from infra.storage import filesystem

    fs, root = filesystem(f"{storage}/{name}")

    def ready() -> bool:  # a copy being written (still marked _publishing.json) with a file of the content in it
        return any(len(fs.glob(f"{marker.rsplit('/', 1)[0]}/*")) > 1
                   for pattern in (f"{root}/.{what}.new-*/_publishing.json", f"{root}/{what}/.v-*/_publishing.json")
                   for marker in fs.glob(pattern))
    return ready


def _kill_while_publishing(command: list[str], storage: str, name: str, what: str) -> None:
    """Run ``command`` with publication slowed (0.4 s a file) and SIGKILL it once ``what``'s new copy began."""
    os.environ["STRUCTCSE_PUBLISH_FILE_DELAY_S"] = "0.4"
    try:
        kill_when(command, _publishing(storage, name, what))
    finally:
        os.environ.pop("STRUCTCSE_PUBLISH_FILE_DELAY_S")


def killed_during_publish(setting: dict, storage: str, where: str) -> dict:
    """One storage (a local folder or a bucket): the final model, then a checkpoint."""
    result = {}
    # the final model: a finished 2-step run (the old model), then a run to 4 steps killed while it publishes
    name = f"final-{where}"
    first = cli(train_args(setting, storage, name, 2))
    if first.returncode != 0:
        raise RuntimeError(f"train exited {first.returncode}: {first.stderr[-600:]}")
    old = _weights(f"{storage}/{name}/model")
    _kill_while_publishing(train_args(setting, storage, name, 4), storage, name, "model")
    after_kill = _loads(f"{storage}/{name}/model")
    partial = _partial_copy(storage, name, "model")
    refused = timed_cli(["eval", "--task", "sts", "--data", setting["sts"], "--split", "dev", "--model", partial]) \
        if partial else None
    rerun = cli(train_args(setting, storage, name, 4))
    new = _loads(f"{storage}/{name}/model")
    result["final_model"] = "whole" if (after_kill is not None and _same(after_kill, old) and rerun.returncode == 0
                                        and new is not None and not _same(new, old)) else \
        f"not whole (after the kill: {'loads' if after_kill is not None else 'refused'}, " \
        f"equal to the old: {after_kill is not None and _same(after_kill, old)}; rerun exit {rerun.returncode})"
    result["reader_refused_partial"] = bool(refused and refused["exit"] == 2 and refused["lines"] == 1)
    result["refusal"] = refused
    # a checkpoint: killed while step 4 is published, the rerun resumes from step 2's and ends at 6
    name = f"ckpt-{where}"
    _kill_while_publishing(train_args(setting, storage, name, 6), storage, name, "step-0000004")
    rerun = cli(train_args(setting, storage, name, 6))
    summary = train_summary(f"{storage}/{name}", required=False)
    start = (summary.get("last_metrics") or {}).get("start_step") if summary else None
    model = _loads(f"{storage}/{name}/model")
    result["checkpoint"] = "whole" if rerun.returncode == 0 and start in (2, 4) and model is not None else \
        f"not whole (rerun exit {rerun.returncode}: {rerun.stderr.strip().splitlines()[-1:] }; resumed at {start})"
    result["checkpoint_resumed_at"] = start
    return result


def _partial_copy(storage: str, name: str, what: str) -> str | None:
    """The half-written copy a kill left (a hidden local folder, a version prefix in a bucket), for a reader."""
    from infra.storage import filesystem

    fs, root = filesystem(f"{storage}/{name}")
    for pattern in (f"{root}/.{what}.new-*", f"{root}/{what}/.v-*"):
        found = [f for f in fs.glob(pattern) if not fs.isfile(f"{f}/_files.json")]  # not a whole version
        if found:
            return found[0] if "://" not in storage else f"{storage.split('://')[0]}://{found[0]}"
    return None


# ---------------------------------------------------------------- main


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--rate", type=float, default=0.1, help="the throttled part's share of faulty requests")
    ap.add_argument("--parts", nargs="+", default=PARTS, choices=PARTS)
    ap.add_argument("--repeats", type=int, default=20, help="two_writers' and reader_during_replace's repeats")
    return ap


def _throttled(out: Path, rate: float) -> dict:
    shutdown_ray()  # the setting's ingest started one; bench/cloud.py starts its own
    cloud = bench_json("cloud", "--out", str(out / "cloud"), "--fault-rate", str(rate))
    faults = cloud["faults"]
    return {"rate": rate, "stages": cloud["stages"], "identical_to_unthrottled": cloud["identical_to_local"],
            "retries": sum(faults.get(k, 0) for k in ("slowdown", "reset", "reset_after_apply", "truncated")),
            "requests": faults["requests"], "faults": faults, "seconds": cloud["seconds"]}


def _on_moto(args, out: Path, setting: dict) -> tuple[dict, dict]:
    """The parts run against this bench's moto server (every part but ``throttled``); the parts of other
    benches run as their own processes (each with its servers, on this bench's setting in ``out``)."""
    from infra.storage import filesystem

    bucket, folder = f"s3://{BUCKET}", str(out)
    fs, _ = filesystem(bucket)
    fs.put(setting["sets"], f"{BUCKET}/sets", recursive=True)
    jobs = {"bad_storage": lambda: bad_storage(setting, bucket, os.environ["AWS_ENDPOINT_URL_S3"]),
            "failed_job_feeds_next": lambda: (lambda r: {"fed": fed(r), "refusals": r})(
                failed_job_feeds_next(setting, out)),
            "killed_during_publish": lambda: {
                "local": killed_during_publish(setting, str(out / "runs-publish"), "local"),
                "s3": killed_during_publish(setting, f"{bucket}/runs-publish", "s3")},
            "cache_race": lambda: bench_json("cache_race"),
            "local_mode_resume": lambda: bench_json("integrity_train", "--out", folder),
            "gs": lambda: bench_json("integrity_gs", "--out", str(out / "gs"), drop=("seconds",))}
    result, seconds = run_parts(jobs, args.parts)
    ownership = [p for p in ("foreign_out", "two_writers", "reader_during_replace") if p in args.parts]
    if ownership:
        shutdown_ray()  # the setting's ingest started one; the commands start their own
        found, took = _ownership(folder, ownership, args.repeats)
        result.update(found)
        seconds.update(took)
    more, took = run_parts({"reingest_during_train": lambda: bench_json(
                                "integrity_sets", "--out", folder, drop=("seconds", "cpus")),
                            "retries_bounded": lambda: bench_json("integrity_retries", "--out", folder)}, args.parts)
    return {**result, **more}, {**seconds, **took}


def _ownership(folder: str, parts: list[str], repeats: int) -> tuple[dict, dict]:
    """``bench/integrity_ownership.py``'s parts: (results, seconds); each ``"failed: ..."`` when it did not run."""
    t0 = time.perf_counter()
    try:
        found = bench_json("integrity_ownership", "--out", folder, "--repeats", str(repeats), "--parts", *parts)
    except Exception as e:  # noqa: BLE001 - a failed part is reported, the others still run
        return dict.fromkeys(parts, f"failed: {type(e).__name__}: {str(e)[:500]}"), dict.fromkeys(parts, since(t0))
    took = found.pop("seconds")
    return found, took


def _summary_of(result: dict, seconds: dict) -> dict:
    summary = dict(result)
    if isinstance(result.get("failed_job_feeds_next"), dict):
        summary["failed_job_feeds_next"] = result["failed_job_feeds_next"]["fed"]
        summary["failed_job_refusals"] = result["failed_job_feeds_next"]["refusals"]
    if isinstance(result.get("local_mode_resume"), dict) and "selection" in result["local_mode_resume"]:
        summary["selection"] = result["local_mode_resume"].pop("selection")
        summary["local_mode_resume"] = result["local_mode_resume"].get("local_mode_resume", result["local_mode_resume"])
    if isinstance(result.get("bad_storage"), dict):
        summary["bad_storage_ok"] = bad_storage_ok(result["bad_storage"])
    summary["seconds"] = seconds
    return summary


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    out = work_folder(args.out, "structcse-integrity-")
    os.chdir(out)
    from bench.servers import s3_bucket

    with s3_bucket():
        setting = prepare(out)
        result, seconds = _on_moto(args, out, setting)
    if "throttled" in args.parts:
        found, took = run_parts({"throttled": lambda: _throttled(out, args.rate)})
        result.update(found)
        seconds.update(took)
    emit(_summary_of(result, seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
