"""After ``trainer.fit()``: the checkpoint the run is selected by, the final model copied out of it, its
model card, and ``train_summary.json``."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from infra.publish import publish_folder, write_text_atomic
from infra.storage import is_uri
from infra.version import code_version
from train.plan import RunPlan


@dataclass
class TrainOutcome:
    model_path: str  # the final SentenceTransformer folder
    metrics: dict = field(default_factory=dict)  # metrics of the chosen checkpoint
    checkpoint_path: str | None = None  # the chosen checkpoint folder


def finish(plan: RunPlan, result, started: float) -> TrainOutcome:
    """Copy the selected checkpoint's model to ``{run folder}/model``; write its card and the run's summary.

    ``result``: what ``trainer.fit()`` returned; ``started``: when the run began (``time.time()``)."""
    run_dir = _run_dir(plan, result)
    chosen, metrics, selected_by = select_checkpoint(plan, result, run_dir)
    final = f"{run_dir}/model"
    elastic = _elastic_facts(plan, run_dir)
    with chosen.as_directory() as d, tempfile.TemporaryDirectory(prefix="structcse-model-") as staging:
        if not metrics and (Path(d) / "metrics.json").is_file():  # e.g. a re-run with nothing left to do
            metrics = json.loads((Path(d) / "metrics.json").read_text())
        model = Path(staging) / "model"
        shutil.copytree(Path(d) / "model", model)
        _write_model_card(plan, model, selected_by, metrics, elastic)
        publish_folder(model, final)  # whole or not at all; the previous model stays readable until then
    summary = {
        "run_name": plan.config.name,
        "method": plan.config.method,
        "model_path": final,
        "checkpoint_path": _as_uri(plan, chosen.path),
        "selected_by": selected_by,
        "metrics": metrics,
        "last_metrics": _last_metrics(result, metrics),
        "wall_s": round(time.time() - started, 2),
        "code_version": code_version(),  # the release and, in a checkout, the git commit (infra.version)
        "config": plan.config.to_dict(),
        **({"elastic": elastic} if elastic is not None else {}),
    }
    from infra.secrets import redact

    write_text_atomic(f"{run_dir}/train_summary.json", json.dumps(redact(summary), indent=2, sort_keys=True, default=str))
    return TrainOutcome(model_path=final, metrics=metrics, checkpoint_path=_as_uri(plan, chosen.path))


def _last_metrics(result, chosen_metrics: dict) -> dict:
    """What the run's last step reported. A rerun that resumed at its last step reports nothing, and Ray then
    returns the metrics of the last checkpoint *it* recorded, older than the one the run resumed from."""
    reported = dict(result.metrics or {})
    if (chosen_metrics.get("step") or 0) > (reported.get("step") or 0):
        return dict(chosen_metrics)
    return reported


def select_checkpoint(plan: RunPlan, result, run_dir: str) -> tuple:
    """(checkpoint, its metrics, selected_by): among this run's whole checkpoints in ``run_dir``, each one's
    ``metrics.json`` read through the storage client (``train.checkpoints``: local mode and Ray Train, a local
    folder and a bucket, select alike), the best by ``plan.checkpoint_metric``, else the latest;
    ``selected_by`` is the metric, or ``"latest: <why>"``. Ray Train's last checkpoint only when the folder
    holds none of this run's (a run folder from before checkpoints carried the run's fingerprint)."""
    from train.checkpoints import as_ray_checkpoint, run_checkpoints, select
    from train.run_key import run_fingerprint

    best, selected_by = select(run_checkpoints(run_dir, run_fingerprint(run_dir)), plan.checkpoint_metric)
    if best is not None:
        return as_ray_checkpoint(best.path), dict(best.metrics), selected_by
    if result.checkpoint is None:
        raise RuntimeError(f"run {plan.config.name!r} finished without a checkpoint")
    return (result.checkpoint, dict(result.metrics or {}),
            f"latest: Ray Train's last checkpoint ({run_dir} holds no whole checkpoint carrying this run's fingerprint)")


def _elastic_facts(plan: RunPlan, run_dir: str) -> dict | None:
    """An elastic run's worker range and its resizes (``resizes.jsonl``, written by rank 0 as they happen)."""
    if not plan.elastic:
        return None
    from infra.appendlog import read_appended
    from train.reporting import RESIZES_FILE

    lines = read_appended(f"{run_dir}/{RESIZES_FILE}").splitlines()
    return {"num_workers": [plan.config.min_workers, plan.config.max_workers],
            "resizes": [json.loads(line) for line in lines if line.strip()]}


def _write_model_card(plan: RunPlan, model: Path, selected_by: str, metrics: dict, elastic: dict | None = None) -> None:
    """Append what the model is to the README.md sentence-transformers wrote in the local folder ``model``
    (before it is published)."""
    from infra.secrets import redact_text
    from train.model_card import card_section, set_facts

    sets = [set_facts(kind, plan.set_paths[kind]) for kind in plan.method.sets]
    readme = model / "README.md"
    text = readme.read_text() if readme.is_file() else "# SentenceTransformer\n"
    readme.write_text(text.rstrip("\n") + "\n" + redact_text(card_section(plan.config, sets, selected_by, metrics, elastic)))


def _run_dir(plan: RunPlan, result) -> str:
    if result.path and not is_uri(plan.storage_path):
        return str(result.path).rstrip("/")
    return plan.run_folder  # local mode (num_workers=0) has no Result.path; a URI's Result.path lacks its scheme


def _as_uri(plan: RunPlan, path: str | None) -> str | None:
    """A checkpoint path as Ray gives it (without the scheme under URI storage: ``bucket/runs/...``) as a URI."""
    if path is None or is_uri(path) or not is_uri(plan.storage_path):
        return path
    return f"{plan.storage_path.split('://', 1)[0]}://{path.lstrip('/')}"
