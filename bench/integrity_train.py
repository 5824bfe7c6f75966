"""Resume and checkpoint selection, the way users run them: real ``python -m train`` processes on the demo
world's sets and a tiny BERT (``bench/harness.py``'s ``prepare``), a local run folder and a bucket one.

    python bench/integrity_train.py [--out DIR]   # moto's S3 server of its own; the setting made in DIR

What it prints last, as one JSON object (``bench/integrity.py`` runs it and puts it in its last line):

* ``local_mode_resume``: ``--num-workers 0 --max-steps 4``, then the same command with ``--max-steps 8``:
  where the first run ended and the second started (``train_summary.json``'s ``last_metrics``), the line the
  second run said it resumed with, the same in a bucket run folder (``in_bucket``), seconds.
* ``selection``: a run whose dev score peaks before its last checkpoint (lr 2e-2, a checkpoint every step:
  the tiny BERT's dev Spearman rises for a step or two, then falls), in local mode with a bucket run folder
  (``local_mode_bucket``), in local mode with a local one (``local_mode_local``) and in Ray Train on one
  worker with a local one (``ray_train_local``): ``"best"`` when the selected checkpoint (the summary's
  ``checkpoint_path``) is the argmax of ``dev_spearman`` over every checkpoint's ``metrics.json`` in the run
  folder and that is not the last one; ``"best, and it is the last"`` when the argmax is the last (nothing
  told apart); otherwise what was selected and what was best. ``scores``: every checkpoint's dev score.
  ``mistyped_metric_exit`` / ``_seconds`` / ``_stderr``: ``--set checkpoint_metric=dev_spearmn``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO, emit, prepare, train_args, train_summary, work_folder  # noqa: E402
PEAKS_EARLY = ("--set", "lr=2e-2", "--set", "checkpoint_every_steps=1", "--set", "keep_checkpoints=100")


def _command(setting: dict, storage: str, name: str, steps: int, workers: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", *train_args(setting, storage, name, steps, *extra, workers=workers)]


def _run(command: list[str], timeout: int = 900) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    t0 = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)
    return done, round(time.perf_counter() - t0, 1)


def _checked(command: list[str]) -> tuple[str, float]:
    """Run a training command that must succeed; (its stdout and stderr, seconds)."""
    done, seconds = _run(command)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"{' '.join(command[2:])} exited {done.returncode}: {tail}")
    return done.stdout + done.stderr, seconds


def _scores(run_folder: str) -> dict[int, float]:
    """{step: dev_spearman} of every step-* folder's metrics.json in the run folder, through the storage client."""
    from infra.publish import resolve
    from infra.storage import filesystem
    from train.checkpoints import step_of

    fs, root = filesystem(run_folder)
    fs.invalidate_cache(root)
    scores = {}
    for name in fs.ls(root, detail=False):
        base = name.rstrip("/").rsplit("/", 1)[-1]
        if base.startswith("step-") and step_of(base) is not None:
            content = filesystem(resolve(f"{run_folder}/{base}"))[1]
            scores[step_of(base)] = json.loads(fs.cat_file(f"{content}/metrics.json")).get("dev_spearman")
    return scores


def resumed(setting: dict, storage: str, name: str) -> dict:
    """``--max-steps 4`` then ``--max-steps 8`` in local mode on the same ``--storage``/``--name``."""
    first, first_s = _checked(_command(setting, storage, name, 4, 0))
    ended = train_summary(f"{storage}/{name}")["last_metrics"].get("step")
    second, second_s = _checked(_command(setting, storage, name, 8, 0))
    said = [line.strip() for line in second.splitlines() if "resumed at" in line or "fresh start" in line]
    return {"first_ended_at": ended, "second_started_at": train_summary(f"{storage}/{name}")["last_metrics"].get("start_step"),
            "said": said[-1] if said else None, "seconds": [first_s, second_s]}


def selected(setting: dict, storage: str, name: str, workers: int) -> dict:
    """A run that peaks early; whether the checkpoint selected is the best over every checkpoint's metrics."""
    from train.checkpoints import step_of

    _, seconds = _checked(_command(setting, storage, name, 4, workers, "--set", f"dev_data={setting['sts']}",
                                   *PEAKS_EARLY))
    folder = f"{storage}/{name}"
    summary, scores = train_summary(folder), _scores(folder)
    ranked = {step: score for step, score in scores.items() if score is not None}
    best = max(ranked, key=lambda step: (ranked[step], step)) if ranked else None
    chosen = step_of(summary["checkpoint_path"])
    if best is not None and chosen == best and summary["selected_by"] == "dev_spearman":
        verdict = "best" if best != max(scores) else "best, and it is the last"
    else:
        verdict = f"selected step {chosen} by {summary['selected_by']!r}; the best is step {best}"
    return {"verdict": verdict, "selected_step": chosen, "selected_by": summary["selected_by"],
            "scores": {step: round(score, 4) if score is not None else None for step, score in sorted(scores.items())},
            "seconds": seconds}


def mistyped(setting: dict, storage: str) -> dict:
    done, seconds = _run(_command(setting, storage, "typo", 2, 0, "--set", f"dev_data={setting['sts']}",
                                  "--set", "checkpoint_metric=dev_spearmn"), timeout=120)
    return {"exit": done.returncode, "seconds": seconds, "stderr": done.stderr.strip()}


def bench_selection_and_resume(workdir: Path, bucket_uri: str) -> dict:
    """``local_mode_resume`` and ``selection`` (the module's docstring), on ``prepare``'s setting in ``workdir``'s
    parent (``bench/integrity.py``'s, when it runs this)."""
    workdir.mkdir(parents=True, exist_ok=True)
    setting = prepare(workdir.parent)
    local, bucket = str(workdir / "runs"), bucket_uri.rstrip("/")
    resume = resumed(setting, local, "resume")
    resume["in_bucket"] = resumed(setting, bucket, "resume")
    runs = {"local_mode_bucket": selected(setting, bucket, "peak-local-mode", 0),
            "local_mode_local": selected(setting, local, "peak-local-mode", 0),
            "ray_train_local": selected(setting, local, "peak-ray-train", 1)}
    typo = mistyped(setting, local)
    selection = {name: run["verdict"] for name, run in runs.items()}
    selection.update({"mistyped_metric_exit": typo["exit"], "mistyped_metric_seconds": typo["seconds"],
                      "mistyped_metric_stderr": typo["stderr"], "runs": runs})
    return {"local_mode_resume": resume, "selection": selection}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="the setting's folder (default: a temporary one)")
    args = ap.parse_args(argv)
    from bench.servers import s3_bucket

    out = work_folder(args.out, "integrity-train-")
    with s3_bucket("structcse-integrity-train", "structcse-it-key", "structcse-it-secret"):
        emit(bench_selection_and_resume(out / "selection", "s3://structcse-integrity-train/selection"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
