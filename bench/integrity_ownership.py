"""Never delete what is not ours, never mix two writers, readers see one version: the parts of
``bench/integrity.py`` that drive the commands as a user would, against moto's S3 server and local folders.

    python bench/integrity_ownership.py [--out DIR] [--repeats 20] [--parts foreign_out two_writers reader_during_replace]

* ``foreign_out``: ``structcse demo --out``, ``python -m train --storage`` and ``python -m ingest --out`` into a
  bucket folder (and a local folder) holding the user's objects, and into a bucket root: each must exit 2
  with one line on stderr, and every user object, and the bucket, must still be there (``lost``: 0).
* ``two_writers``: two model publications racing (``repeats`` times, locally and in a bucket: two processes
  released together), two trainings with the same ``--storage/--name`` started together, two demos into one
  ``--out``: the loser refuses in one line, what is left is one writer's whole output (``mixed``, ``lost``: 0).
* ``reader_during_replace``: a reader loading the model (``train.saved_models.load``) in a loop while another
  process republishes it ``repeats`` times, locally and in a bucket: ``errors`` 0, every load equal to one
  published version (``mixed`` 0).

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import (BUCKET, REPO, cli, emit, prepare, refusal, run_parts, shutdown_ray, train_args, work_folder)


ROOT_BUCKET = "structcse-user-bucket"  # a bucket holding only the user's objects: its root is the target
PARTS = ["foreign_out", "two_writers", "reader_during_replace"]


# ---------------------------------------------------------------- the user's objects


def _put_user_objects(where: str) -> dict[str, bytes]:
    from infra.storage import filesystem

    fs, root = filesystem(where)
    fs.makedirs(root, exist_ok=True)
    objects = {f"{where}/model.safetensors": os.urandom(4096), f"{where}/notes.md": b"# my notes\n"}
    for uri, data in objects.items():
        fs.pipe_file(filesystem(uri)[1], data)
    return objects


def _lost(objects: dict[str, bytes]) -> int:
    from infra.storage import filesystem

    lost = 0
    for uri, data in objects.items():
        fs, path = filesystem(uri)
        try:
            lost += fs.cat_file(path) != data
        except FileNotFoundError:
            lost += 1
    return lost


def foreign_out(setting: dict, out: Path) -> dict:
    from infra.storage import filesystem

    bucket = f"s3://{BUCKET}"
    fs, _ = filesystem(bucket)
    if not fs.exists(ROOT_BUCKET):
        fs.mkdir(ROOT_BUCKET)
    objects = {}
    for where in (f"{bucket}/user/out", f"{bucket}/user/st/x/model", f"s3://{ROOT_BUCKET}",
                  str(out / "user" / "out"), str(out / "user" / "st" / "x" / "model")):
        objects.update(_put_user_objects(where))
    world = setting["world"]
    ingest = ["ingest", "--wikipedia", str(world.wikipedia_dump), "--wikidata", str(world.wikidata_dump)]
    commands = {
        "demo_user_folder_s3": ["structcse.cli", "demo", "--out", f"{bucket}/user/out", "--skip-tune"],
        "demo_bucket_root": ["structcse.cli", "demo", "--out", f"s3://{ROOT_BUCKET}", "--skip-tune"],
        "demo_user_folder_local": ["structcse.cli", "demo", "--out", str(out / "user" / "out"), "--skip-tune"],
        "train_user_folder_s3": train_args(setting, f"{bucket}/user/st", "x", 2),
        "train_bucket_root": train_args(setting, f"s3://{ROOT_BUCKET}", "x", 2),
        "train_user_folder_local": train_args(setting, str(out / "user" / "st"), "x", 2),
        "ingest_user_folder_s3": [*ingest, "--out", f"{bucket}/user/out"],
        "ingest_bucket_root": [*ingest, "--out", f"s3://{ROOT_BUCKET}"],
        "ingest_user_folder_local": [*ingest, "--out", str(out / "user" / "out")],
    }
    results = {}
    for name, args in commands.items():
        t0 = time.perf_counter()
        done = cli(args, timeout=600)
        results[name] = refusal(done, time.perf_counter() - t0)
    lost = _lost(objects) + (0 if fs.exists(ROOT_BUCKET) else 1)
    ok = all(r["exit"] == 2 and r["lines"] == 1 for r in results.values()) and lost == 0
    return {"ok": ok, "lost": lost, "user_objects": len(objects), "commands": results}


# ---------------------------------------------------------------- two writers


_PUBLISHER = """
import sys, time
from infra.publish import publish_folder
src, dest, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
time.sleep(max(0.0, start - time.time()))
try:
    publish_folder(src, dest, "model folder", "publisher " + src)
except Exception as e:
    print(f"{type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(2)
"""


def _content(folder: Path, tag: str) -> dict[str, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {f"part-{i}.bin": f"{tag}-{i}-".encode() * 2000 for i in range(6)}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return files


def _published(dest: str) -> dict[str, bytes] | None:
    from infra.publish import IncompleteError, check_complete, published_names
    from infra.storage import filesystem

    try:
        folder = check_complete(dest, "model folder", require_manifest=True)
    except (IncompleteError, FileNotFoundError):
        return None
    fs, root = filesystem(folder)
    return {name: fs.cat_file(f"{root}/{name}") for name in published_names(folder)}


def publication_race(base: str, out: Path, repeats: int) -> dict:
    a, b = _content(out / "race-src" / "a", "a"), _content(out / "race-src" / "b", "b")
    env = {**os.environ, "PYTHONPATH": str(REPO), "STRUCTCSE_PUBLISH_FILE_DELAY_S": "0.05"}
    mixed = lost = refused_one_line = both_won = 0
    messages = set()
    for i in range(repeats):
        dest = f"{base}/race-{i}/model"
        start = time.time() + 1.5  # both processes imported and connected: released together
        procs = [subprocess.Popen([sys.executable, "-c", _PUBLISHER, str(out / "race-src" / tag), dest, str(start)],
                                  cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for tag in ("a", "b")]
        answers = [(p.wait(120), p.stderr.read()) for p in procs]
        codes = [code for code, _ in answers]
        for code, err in answers:
            lines = [line for line in err.splitlines() if line.strip()]
            if code == 2:
                refused_one_line += len(lines) == 1
                messages.add(lines[-1].split(" (host")[0][:160] if lines else "")
        both_won += codes == [0, 0]
        final = _published(dest)
        if final is None:
            lost += 1
        elif final not in (a, b):
            mixed += 1
    return {"repeats": repeats, "mixed": mixed, "lost": lost, "loser_refused_in_one_line": refused_one_line,
            "both_published_in_turn": both_won, "messages": sorted(messages)[:3]}


def two_trainings(setting: dict, storage: str, name: str) -> dict:
    env = {**os.environ, "RAY_ADDRESS": ""}
    procs = [subprocess.Popen([sys.executable, "-m", *train_args(setting, storage, name, 6)], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    answers = [(p.wait(900), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in answers)
    refused = [err for code, err in answers if code == 2]
    lines = [line for line in (refused[0].splitlines() if refused else []) if line.strip()]
    from train.saved_models import ModelLoadError, load

    try:
        load(f"{storage}/{name}/model")
        whole = True
    except (ModelLoadError, OSError):
        whole = False
    return {"exits": codes, "loser_lines": len(lines), "message": lines[-1][:200] if lines else "",
            "model_whole": whole, "mixed": 0 if whole else 1}


def two_demos(out: Path) -> dict:
    target = out / "two-demos"
    env = {**os.environ, "RAY_ADDRESS": ""}
    first = subprocess.Popen([sys.executable, "-m", "structcse.cli", "demo", "--out", str(target), "--skip-tune"],
                             cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (target / "_lease-demo.json").is_file() and time.time() < deadline:
        time.sleep(0.2)
    t0 = time.perf_counter()
    second = cli(["structcse.cli", "demo", "--out", str(target), "--skip-tune"], timeout=600)
    second_result = refusal(second, time.perf_counter() - t0)
    code = first.wait(1200)
    report = target / "eval_report.md"
    return {"first_exit": code, "second": second_result, "report_written": report.is_file(),
            "mixed": 0 if code == 0 and report.is_file() and second_result["exit"] == 2 else 1}


def two_writers(setting: dict, out: Path, repeats: int) -> dict:
    bucket = f"s3://{BUCKET}"
    result = {"publication_local": publication_race(str(out / "race"), out, repeats),
              "publication_s3": publication_race(f"{bucket}/race", out, repeats),
              "trainings_local": two_trainings(setting, str(out / "runs-two"), "same"),
              "trainings_s3": two_trainings(setting, f"{bucket}/runs-two", "same"),
              "demos_local": two_demos(out)}
    result["mixed"] = sum(r.get("mixed", 0) for r in result.values())
    result["lost"] = sum(r.get("lost", 0) for r in result.values() if isinstance(r, dict))
    return result


# ---------------------------------------------------------------- a reader while the model is replaced


_REPUBLISHER = """
import sys, time
from infra.publish import publish_folder
versions, dest, times = sys.argv[1:3] + [int(sys.argv[3])]
versions = versions.split(",")
for i in range(times):
    publish_folder(versions[i % len(versions)], dest, "model folder", "republisher")
    time.sleep(0.2)
"""


def _fingerprint(encoder) -> float:
    import torch

    with torch.no_grad():
        return float(sum(p.double().sum() for p in encoder.parameters()))


def reader_during_replace(setting: dict, base: str, out: Path, repeats: int) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer

    from infra.publish import publish_folder
    from train.saved_models import load

    versions = []
    for i in range(2):  # two versions of one model: the same files, other weights
        folder = out / "reader-src" / f"v{i}"
        if not (folder / "modules.json").is_file():
            model = SentenceTransformer(setting["model"], device="cpu")
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(0.01 * (i + 1))
            model.save(str(folder))
        versions.append(str(folder))
    expected = {round(_fingerprint(SentenceTransformer(v, device="cpu")), 3) for v in versions}
    dest = f"{base}/reader/model"
    publish_folder(versions[0], dest, "model folder")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writer = subprocess.Popen([sys.executable, "-c", _REPUBLISHER, ",".join(versions), dest, str(repeats)],
                              cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    loads = errors = mixed = 0
    first_error = ""
    while writer.poll() is None:
        try:
            model = load(dest)
            loads += 1
            mixed += round(_fingerprint(model.encoder), 3) not in expected
        except Exception as e:  # noqa: BLE001 - counted: the bench reports how many
            errors += 1
            first_error = first_error or f"{type(e).__name__}: {str(e)[:200]}"
    writer_err = writer.stderr.read().strip().splitlines()
    return {"republished": repeats, "writer_exit": writer.returncode, "loads": loads, "errors": errors,
            "mixed": mixed, "first_error": first_error, "writer_error": writer_err[-1][:200] if writer_err else ""}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--parts", nargs="+", default=PARTS, choices=PARTS)
    args = ap.parse_args(argv)
    out = work_folder(args.out, "structcse-ownership-")
    os.environ.setdefault("STRUCTCSE_CACHE", str(out / "cache"))
    from bench.servers import s3_bucket

    with s3_bucket():
        setting = prepare(out)
        shutdown_ray()  # prepare's ingest started one; the commands start their own
        result, seconds = run_parts({
            "foreign_out": lambda: foreign_out(setting, out),
            "two_writers": lambda: two_writers(setting, out, args.repeats),
            "reader_during_replace": lambda: {
                "local": reader_during_replace(setting, str(out / "reader"), out, args.repeats),
                "s3": reader_during_replace(setting, f"s3://{BUCKET}", out, args.repeats)}}, args.parts, shown=800)
    emit({**result, "seconds": seconds})
    return 0


if __name__ == "__main__":
    sys.exit(main())
