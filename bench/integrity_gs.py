"""``gs://`` end to end through the real commands: ``python -m ingest`` writes the demo world's sets into a
bucket of a real GCS JSON API (fake-gcs-server on 127.0.0.1, ``tests/gcs_server.py``), ``python -m train``
(local mode) reads them there with its base model, dev data and run folder in the same bucket, and
``python -m eval`` scores the trained model from there. Every byte goes through gcsfs, the one storage client
(``infra/storage.py``); pyarrow's own GCS client cannot be pointed at an emulator.

    python bench/integrity_gs.py [--out DIR]

``gs_roundtrip(workdir)`` is ``bench/integrity.py``'s ``gs`` part: ``{"ingest": "ok", "train": "ok", "eval": "ok"}``
(or ``"failed: ..."`` / ``"skipped: ..."`` per stage); each stage's seconds go to stderr. The sizes are
tests/test_cloud.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO, emit, last_json  # noqa: E402
from bench.harness import say as harness_say  # noqa: E402

BUCKET = "structcse-integrity-gs"


def say(message: str) -> None:
    harness_say(message, "integrity_gs")


def _cli(args: list[str], cwd: Path, timeout: int = 900) -> str:
    """``python -m ARGS`` in ``cwd`` (a URI taken for a local path would land there as ``gs:/...``); its stdout,
    or a RuntimeError with the last lines of its stderr."""
    done = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get(
                              "PYTHONPATH")]))})
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        raise RuntimeError(f"python -m {args[0]} exited {done.returncode}: {' | '.join(lines[-3:])[:600]}")
    return done.stdout


def _setting(workdir: Path, bucket: str) -> dict:
    """The demo world's dumps (local: what users ingest from) and its STS dev folder, put in the bucket."""
    from infra.storage import filesystem
    from structcse.demo import generate_demo_world

    world = generate_demo_world(workdir / "world", seed=0)
    fs, root = filesystem(bucket)
    fs.put(str(world.sts_dir), f"{root}/sts", recursive=True)
    return {"world": world, "sts": f"{bucket}/sts", "model": f"{bucket}/base"}


def _base_model(workdir: Path, bucket: str) -> None:
    """A tiny BERT whose vocabulary is trained on the sentences set ingest wrote into the bucket, put there
    (``--model gs://...``)."""
    from infra.storage import filesystem
    from setformat.io import read_table
    from train.tiny_bert import build_tiny_bert

    sentences = read_table(f"{bucket}/sets/sentences", ["sentence"])["sentence"].to_pylist()
    shutil.rmtree(workdir / "base", ignore_errors=True)  # a rerun in the same folder builds it again
    model = build_tiny_bert(sentences, workdir / "base")
    fs, root = filesystem(bucket)
    fs.put(str(model), f"{root}/base", recursive=True)


def _ingest(setting: dict, bucket: str, cwd: Path) -> None:
    from structcse.demo import ENTITY_LINK_THRESHOLD

    world = setting["world"]
    _cli(["ingest", "--wikipedia", str(world.wikipedia_dump), "--wikidata", str(world.wikidata_dump),
          "--out", f"{bucket}/sets", "--shard-bytes", "1", "--entity-link-threshold", str(ENTITY_LINK_THRESHOLD),
          "--num-cpus", "2", "--no-dashboard"], cwd)
    from infra.storage import filesystem

    fs, root = filesystem(bucket)
    manifest = json.loads(fs.cat_file(f"{root}/sets/sentences/_manifest.json"))
    if not manifest.get("rows"):
        raise AssertionError(f"the sentences set in {bucket}/sets holds no rows")


def _train(setting: dict, bucket: str, cwd: Path) -> str:
    """Local mode (``--num-workers 0``), everything in the bucket; the final model's URI."""
    out = last_json(_cli(["train", "--config", str(REPO / "configs" / "simcse_unsup.yaml"), "--data", f"{bucket}/sets",
                           "--model", setting["model"], "--storage", f"{bucket}/runs", "--name", "gs",
                           "--num-workers", "0", "--max-steps", "2", "--set", f"dev_data={setting['sts']}",
                           "--set", "pooling=mean", "--set", "batch_size=8", "--set", "max_len=16",
                           "--set", "checkpoint_every_steps=2", "--set", "log_every_steps=0"], cwd))
    model = out.get("model_path")
    if model != f"{bucket}/runs/gs/model":
        raise AssertionError(f"train put its model at {model!r}, not in {bucket}/runs/gs")
    from infra.storage import filesystem

    fs, root = filesystem(bucket)
    summary = json.loads(fs.cat_file(f"{root}/runs/gs/train_summary.json"))
    if summary.get("last_metrics", {}).get("step") != 2 or summary.get("metrics", {}).get("dev_spearman") is None:
        raise AssertionError(f"train_summary.json in the bucket: step {summary.get('last_metrics', {}).get('step')}, "
                             f"metrics {summary.get('metrics')}")
    return model


def _evaluate(setting: dict, model: str, cwd: Path) -> None:
    out = last_json(_cli(["eval", "--task", "sts", "--data", setting["sts"], "--split", "dev", "--model", model], cwd))
    if not isinstance(out.get("spearman"), float):
        raise AssertionError(f"eval printed no spearman: {out}")


def _stages(workdir: Path, bucket: str) -> dict:
    status: dict[str, str] = {}
    state: dict = {}
    steps = [("ingest", lambda: _ingest(state["setting"], bucket, workdir)),
             ("train", lambda: (_base_model(workdir, bucket),
                                state.update(model=_train(state["setting"], bucket, workdir)))),
             ("eval", lambda: _evaluate(state["setting"], state["model"], workdir))]
    state["setting"] = _setting(workdir, bucket)
    for name, step in steps:
        if any(v != "ok" for v in status.values()):
            status[name] = "skipped: an earlier stage failed"
            continue
        t0 = time.perf_counter()
        try:
            step()
            status[name] = "ok"
        except Exception as e:  # noqa: BLE001 - a failed stage is reported, in one line
            status[name] = f"failed: {type(e).__name__}: {str(e)[:600]}"
        say(f"{name}: {status[name]} ({time.perf_counter() - t0:.1f} s)")
    return status


def gs_roundtrip(workdir: str | os.PathLike) -> dict:
    """Ingest → train → eval through ``gs://`` against a fake-gcs-server of its own (started here, stopped on the
    way out, this process's environment put back): ``{"ingest": "ok", "train": "ok", "eval": "ok"}``."""
    from bench.servers import gcs_bucket

    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    with gcs_bucket(BUCKET):
        return _stages(workdir, f"gs://{BUCKET}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="local working folder (default: a temporary one)")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="structcse-gs-"))
    t0 = time.perf_counter()
    result = gs_roundtrip(out)
    emit({**result, "seconds": round(time.perf_counter() - t0, 1)})
    return 0 if all(v == "ok" for v in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
