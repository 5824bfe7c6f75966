"""After ``trainer.fit()``: the checkpoint the run is selected by, the final model copied out of it, its
model card, and ``train_summary.json``."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from infra.uris import is_uri, upload_folder, write_text
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
    chosen, metrics = select_checkpoint(plan, result, run_dir)
    final = f"{run_dir}/model"
    with chosen.as_directory() as d:
        _copy_dir(Path(d) / "model", final)
        if not metrics and (Path(d) / "metrics.json").is_file():  # e.g. a re-run with nothing left to do
            metrics = json.loads((Path(d) / "metrics.json").read_text())
    selected_by = plan.checkpoint_metric or "latest"
    elastic = _elastic_facts(plan, run_dir)
    summary = {
        "run_name": plan.config.name,
        "method": plan.config.method,
        "model_path": final,
        "checkpoint_path": _as_uri(plan, chosen.path),
        "selected_by": selected_by,
        "metrics": metrics,
        "last_metrics": dict(result.metrics or {}),
        "wall_s": round(time.time() - started, 2),
        "config": plan.config.to_dict(),
        **({"elastic": elastic} if elastic is not None else {}),
    }
    from infra.secrets import redact

    write_text(f"{run_dir}/train_summary.json", json.dumps(redact(summary), indent=2, sort_keys=True, default=str))
    _write_model_card(plan, final, selected_by, metrics, elastic)
    return TrainOutcome(model_path=final, metrics=metrics, checkpoint_path=_as_uri(plan, chosen.path))


def select_checkpoint(plan: RunPlan, result, run_dir: str) -> tuple:
    """(checkpoint, its metrics): the best by ``plan.checkpoint_metric`` among those kept, else the latest."""
    chosen, metrics = result.checkpoint, dict(result.metrics or {})
    candidates = list(result.best_checkpoints or [])
    if plan.num_workers == 0 and not is_uri(run_dir):  # local mode: Ray keeps no checkpoint history
        candidates = _local_checkpoints(run_dir)
    metric = plan.checkpoint_metric
    if metric:
        scored = [(c, m) for c, m in candidates if m.get(metric) is not None]
        if scored:
            chosen, metrics = max(scored, key=lambda cm: cm[1][metric])
            metrics = dict(metrics)
    if chosen is None:
        raise RuntimeError(f"run {plan.config.name!r} finished without a checkpoint")
    return chosen, metrics


def _elastic_facts(plan: RunPlan, run_dir: str) -> dict | None:
    """An elastic run's worker range and its resizes (``resizes.jsonl``, written by rank 0 as they happen)."""
    if not plan.elastic:
        return None
    import fsspec

    from train.loop import RESIZES_FILE

    fs, path = fsspec.core.url_to_fs(f"{run_dir}/{RESIZES_FILE}")
    lines = fs.cat_file(path).decode().splitlines() if fs.exists(path) else []
    return {"num_workers": [plan.config.min_workers, plan.config.max_workers],
            "resizes": [json.loads(line) for line in lines if line.strip()]}


def _write_model_card(plan: RunPlan, final: str, selected_by: str, metrics: dict, elastic: dict | None = None) -> None:
    """Append what the model is to the README.md sentence-transformers wrote (a local folder or a URI)."""
    import fsspec

    from infra.secrets import redact_text
    from train.model_card import card_section, set_facts

    sets = [set_facts(kind, plan.set_paths[kind]) for kind in plan.method.sets]
    fs, readme = fsspec.core.url_to_fs(f"{final}/README.md")
    text = fs.cat_file(readme).decode() if fs.isfile(readme) else "# SentenceTransformer\n"
    with fs.open(readme, "w") as f:
        f.write(text.rstrip("\n") + "\n" + redact_text(card_section(plan.config, sets, selected_by, metrics, elastic)))


def _local_checkpoints(run_dir: str) -> list:
    from ray.train import Checkpoint

    out = []
    for d in sorted(Path(run_dir).glob("step-*")):
        if (d / "metrics.json").is_file():
            out.append((Checkpoint.from_directory(str(d)), json.loads((d / "metrics.json").read_text())))
    return out


def _run_dir(plan: RunPlan, result) -> str:
    if result.path and not is_uri(plan.storage_path):
        return str(result.path).rstrip("/")
    return plan.run_folder  # local mode (num_workers=0) has no Result.path; a URI's Result.path lacks its scheme


def _as_uri(plan: RunPlan, path: str | None) -> str | None:
    """A checkpoint path as Ray gives it (without the scheme under URI storage: ``bucket/runs/...``) as a URI."""
    if path is None or is_uri(path) or not is_uri(plan.storage_path):
        return path
    return f"{plan.storage_path.split('://', 1)[0]}://{path.lstrip('/')}"


def _copy_dir(src: Path, dst: str) -> None:
    if is_uri(dst):
        upload_folder(src, dst)
        return
    dst_path = Path(dst)
    if dst_path.exists():
        shutil.rmtree(dst_path)
    shutil.copytree(src, dst_path)
