"""Entry points: ``build_trainer(cfg)`` -> TorchTrainer, ``run(cfg)`` -> TrainOutcome.

Before anything is allocated (no Ray worker, no dataset, no model weights):
the config is validated, every set the method reads is checked against
``ingest.schemas`` (a missing column is a SchemaError naming set and column),
and the model's config is loaded (a bad path/name is a ConfigError).

Layout of a run (``{storage_path}/{run_name}/``)::

    checkpoint_manager_snapshot.json   Ray Train's; same storage+name => resume
    step-0000125/                      one folder per report
        state.pt                       model + heads + optimizer + scheduler + step/epoch
        metrics.json                   the metrics reported with it
        model/                         SentenceTransformer folder (+ method heads)
    model/                             the final model: best (checkpoint_metric) or latest
        modules.json, config.json, model.safetensors, tokenizer..., 1_Pooling/[, 2_Dense/]
        structcse_method.json          method, options, sizes
        structcse_heads.pt             the method's extra parameters (EASE: entity table + projection)
    tensorboard/                       rank 0's event files (train.tracking): tensorboard --logdir
    train_summary.json                 metrics, chosen checkpoint, config
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from ingest.sets import check_set, set_files
from train.config import ConfigError, TrainConfig
from train.methods import get_method


@dataclass
class TrainOutcome:
    model_path: str  # the final SentenceTransformer folder
    metrics: dict = field(default_factory=dict)  # metrics of the chosen checkpoint
    checkpoint_path: str | None = None  # the chosen checkpoint folder


def resolve_sets(cfg: TrainConfig) -> dict[str, Path]:
    """{set kind: folder} for every set the method reads.

    ``cfg.data`` is an ingest output folder (``data/<kind>/``) or a set folder
    itself: then it is the method's training set and its siblings
    (``data/../<kind>``) are the other sets.
    """
    method = get_method(cfg.method)
    data = Path(cfg.data).expanduser()
    out = {}
    for kind in method.sets:
        if (data / kind).is_dir():
            out[kind] = data / kind
        elif kind == method.train_set and data.is_dir() and any(data.glob("*.parquet")) or kind == method.train_set and data.is_file():
            out[kind] = data
        else:
            out[kind] = data.parent / kind if any(data.glob("*.parquet")) else data / kind
    return out


def check_hub_reachable(model: str, timeout_s: float = 3.0) -> None:
    """A model that is neither a local folder nor in the Hugging Face cache comes from the hub: when the
    hub cannot be reached (an offline machine, HF_HUB_OFFLINE=1), a ConfigError at once that says to
    pass a local path, instead of the hub client's retries (25 s) and a long traceback."""
    if Path(model).expanduser().exists():
        return
    from huggingface_hub import constants, try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(model, "config.json")
    except Exception as e:  # an invalid repo id (HFValidationError)
        raise ConfigError(f"model {model!r} is neither a local folder nor a Hugging Face model name ({e})") from None
    if isinstance(cached, str):
        return
    advice = (f"model {model!r} is not a local folder and not in the Hugging Face cache, and ")
    fix = "; pass a local folder with --model /path/to/model (or --set model=...)"
    if constants.HF_HUB_OFFLINE:
        raise ConfigError(advice + "HF_HUB_OFFLINE is set" + fix)
    import socket
    from urllib.parse import urlparse

    url = urlparse(constants.ENDPOINT)
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as e:
        raise ConfigError(advice + f"{host}:{port} cannot be reached ({e})" + fix) from None


def preflight(cfg: TrainConfig) -> tuple[dict[str, Path], dict, int]:
    """Validate config, sets and model before any allocation. Returns (set_paths, data_info, num_rows)."""
    import pyarrow.parquet as pq

    cfg.validate()
    method = get_method(cfg.method)
    set_paths = resolve_sets(cfg)
    for kind, columns in method.sets.items():
        check_set(set_paths[kind], kind, required=columns)
    check_hub_reachable(cfg.model)
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(cfg.model)
    except Exception as e:
        raise ConfigError(f"model {cfg.model!r}: cannot load its config ({type(e).__name__}: {e})") from e
    use_base_pooling(cfg)
    num_rows = sum(pq.read_metadata(f).num_rows for f in set_files(set_paths[method.train_set]))
    world = max(cfg.num_workers, 1)
    if (num_rows // world) // (cfg.batch_size // world) < 1:
        raise ConfigError(
            f"set {method.train_set!r} at {set_paths[method.train_set]} has {num_rows} rows: "
            f"not one full global batch of {cfg.batch_size}"
        )
    return set_paths, method.data_info(cfg, set_paths), num_rows


def use_base_pooling(cfg: TrainConfig, log=None) -> None:
    """A sentence-transformers base (all-MiniLM-L6-v2: mean) trains with its own pooling unless
    ``base_pooling`` is false or ``pooling`` was set by name: the config's pooling is the method paper's for
    BERT, and swapping a tuned model's pooling costs quality (measured: SimCSE-sup's cls on
    all-MiniLM-L6-v2, 4.2 STS-B points below mean over the same 200 steps)."""
    from train.encoder import base_pooling

    if not cfg.base_pooling:
        return
    try:
        own = base_pooling(cfg.model)
    except ValueError as e:
        raise ConfigError(f"model {cfg.model!r}: {e}") from e
    if own and own != cfg.pooling:
        (log or partial(print, flush=True))(
            f"[train] pooling: {own}, {Path(cfg.model).name or cfg.model}'s own (the config's {cfg.pooling} is the "
            f"paper's for a plain encoder: --set pooling={cfg.pooling} to train with it)")
        cfg.pooling = own


def ensure_ray(log=None, **init_kwargs) -> bool:
    """``ray.init(**init_kwargs)`` unless Ray is up: a laptop starts a local Ray (after
    `warn_if_other_ray_instances`); under `ray job submit` this connects to the cluster.
    Returns whether this call started (or joined) a local Ray: one machine, no autoscaler."""
    import ray

    if ray.is_initialized():
        return False
    warn_if_other_ray_instances(log)
    from ingest.ray_local import local_init_kwargs

    init_kwargs = local_init_kwargs(init_kwargs, log)
    local = not os.environ.get("RAY_ADDRESS") and init_kwargs.get("address") in (None, "local")
    if local:
        from train.logs import quiet_local_ray

        quiet_local_ray()
        _quiet_preemption_watcher()
    ray.init(**init_kwargs)
    return local


def check_worker_cpus(cfg: TrainConfig, machine_cpus: float) -> None:
    """On one machine without an autoscaler, the workers must leave a CPU to Ray Data's read tasks,
    else the run waits for one forever: a ConfigError with the setting that fits."""
    if cfg.num_workers < 1:
        return
    per_worker = cfg.cpus_per_worker if cfg.cpus_per_worker is not None else 1.0
    if cfg.num_workers * per_worker > machine_cpus - 1:
        fits = (machine_cpus - 1) / cfg.num_workers
        fix = (f"--set cpus_per_worker={fits:g}" if fits > 0 else f"--num-workers {max(int(machine_cpus) - 1, 0)}")
        raise ConfigError(
            f"{cfg.num_workers} worker(s) x {per_worker:g} CPU take {cfg.num_workers * per_worker:g} of this machine's "
            f"{machine_cpus:g} CPUs, leaving Ray Data less than the 1 CPU its read tasks need (the run would wait "
            f"forever): use {fix}, fewer workers, or a cluster")


def _quiet_preemption_watcher() -> None:
    """Ray Train's spot-preemption watcher logs a red core_worker error on every run; a local Ray has no
    spot node to watch, so it is off there unless the user sets RAY_TRAIN_ENABLE_PREEMPTION_WATCHER."""
    os.environ.setdefault("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", "0")


def warn_if_other_ray_instances(log=None) -> list[str]:
    """Warn, before ``ray.init()`` starts a local Ray, when other Ray instances run on this
    machine and ``RAY_ADDRESS`` does not name one; returns their GCS addresses.

    Ray's state API resolves "the" local instance by listing GCS processes, and with two it
    fails ("Found multiple active Ray instances"). Ray Train's placement-group cleaner polls
    it, so its actors die; a trial Tune stops early then keeps its placement group, and the
    next trials wait for CPUs that never come (the demo beside a second instance stalled
    this way for 5+ minutes in its Tune step)."""
    if os.environ.get("RAY_ADDRESS"):
        return []
    try:
        from ray._private.services import find_gcs_addresses

        running = sorted(find_gcs_addresses())
    except Exception:  # a private helper: never let the check itself stop a run
        return []
    if running:
        message = (f"[structcse] warning: other Ray instance(s) run on this machine ({', '.join(running)}). A second "
                   "local Ray beside them breaks Ray's state API (Ray Train's placement-group cleaner dies) and "
                   "runs can stall: stop them (`ray stop`), or set RAY_ADDRESS to run on one of them.")
        (log or partial(print, flush=True))(message)
    return running


def _storage(cfg: TrainConfig) -> str:
    s = cfg.storage_path
    return s if "://" in s else str(Path(s).expanduser().resolve())


def build_trainer(cfg: TrainConfig, callbacks=(), run_config=None, validation=None, progress_file: str | None = None,
                  preflighted: tuple | None = None):
    """A ``TorchTrainer`` for ``cfg`` (validated and preflighted first).

    ``callbacks`` are Ray Train ``UserCallback``s (e.g. tune's
    ``TuneReportCallback``); ``run_config`` replaces the one built from ``cfg``;
    ``validation``: a ``ValidationConfig`` that scores the reported checkpoints
    asynchronously (tune's evaluation pool) instead of rank 0 in the loop;
    ``preflighted``: what ``preflight(cfg)`` returned, when the caller has run it.
    """
    set_paths, data_info, num_rows = preflighted or preflight(cfg)
    if "://" not in _storage(cfg):  # remote run folders are checked by the workers as they load
        from train.loop import STATE_FILE
        from train.state_files import check_local_checkpoints

        check_local_checkpoints(Path(_storage(cfg)) / cfg.name, STATE_FILE)
    if ensure_ray():
        import ray

        check_worker_cpus(cfg, ray.cluster_resources().get("CPU", 0.0))
    import ray.data
    from ray.train import (
        CheckpointConfig,
        DataConfig,
        FailureConfig,
        RunConfig,
        ScalingConfig,
    )
    from ray.train.torch import TorchConfig, TorchTrainer

    from train.loop import train_loop_per_worker

    method = get_method(cfg.method)
    ds = ray.data.read_parquet(str(set_paths[method.train_set].resolve())).select_columns(method.sets[method.train_set])
    resolved = absolute_paths(cfg)
    if cfg.pretokenize:
        from train.batch import pretokenize

        ds = pretokenize(ds, resolved.model, cfg.max_len, list(method.tokenized_columns(cfg.options)))
    # blocks in file order, not in the order their read tasks finish: a one-worker run (and local
    # mode, which iterates ds itself) sees the same rows in the same order every time; with several
    # workers the streaming split hands blocks to whichever worker asks first
    ds.context.execution_options.preserve_order = True
    loop_config = resolved.to_dict()
    loop_config.update(
        _num_rows=num_rows,
        _data_info=data_info,
        _set_paths={k: str(v.resolve()) for k, v in set_paths.items()},
    )
    loop_config["_run_folder"] = f"{_storage(cfg).rstrip('/')}/{cfg.name}"  # TensorBoard events (train.tracking)
    if progress_file:
        loop_config["_progress_file"] = progress_file  # rank 0 feeds the driver's progress bar
    if cfg.num_workers == 0 and "://" not in _storage(cfg):  # local mode: Ray leaves checkpoints where written
        loop_config["_local_checkpoint_root"] = f"{_storage(cfg).rstrip('/')}/{cfg.name}"
    if cfg.num_workers == 0:
        validation = None  # local mode runs no validation tasks: rank 0 scores in the loop
    loop_config["_async_validation"] = validation is not None
    metric = checkpoint_metric(cfg)
    if run_config is None:
        run_config = RunConfig(
            name=cfg.name,
            storage_path=_storage(cfg),
            checkpoint_config=CheckpointConfig(
                num_to_keep=cfg.keep_checkpoints,
                checkpoint_score_attribute=metric,
                checkpoint_score_order="max",
            ),
            failure_config=FailureConfig(max_failures=cfg.max_failures),
            callbacks=list(callbacks) or None,
        )
    scaling = {"num_workers": cfg.num_workers, "use_gpu": cfg.use_gpu}
    if cfg.cpus_per_worker is not None and cfg.num_workers > 0:
        scaling["resources_per_worker"] = {"CPU": cfg.cpus_per_worker, **({"GPU": 1} if cfg.use_gpu else {})}
    return TorchTrainer(
        train_loop_per_worker,
        train_loop_config=loop_config,
        scaling_config=ScalingConfig(**scaling),
        torch_config=TorchConfig(backend=None if cfg.use_gpu else "gloo"),
        run_config=run_config,
        datasets={"train": ds},
        dataset_config=DataConfig(execution_options=ds.context.execution_options),  # Train copies them per shard
        validation_config=validation,
    )


def absolute_paths(cfg: TrainConfig) -> TrainConfig:
    """A copy of ``cfg`` whose local paths (model folder, data, dev_data, method options that name
    existing files) are absolute: Ray workers do not share the driver's working directory."""
    import dataclasses

    def fix(value):
        if isinstance(value, str) and value and "://" not in value and Path(value).expanduser().exists():
            return str(Path(value).expanduser().resolve())
        return value

    data = cfg.to_dict()
    for key in ("model", "data", "dev_data"):
        data[key] = fix(data[key])
    for name, opts in cfg.method_options.items():
        data[name] = {f.name: fix(getattr(opts, f.name)) for f in dataclasses.fields(opts)}
    return TrainConfig.from_dict(data, "resolved config")


def checkpoint_metric(cfg: TrainConfig) -> str | None:
    if cfg.checkpoint_metric or not cfg.dev_data:
        return cfg.checkpoint_metric
    from train.dev_metrics import metric_for

    return metric_for(cfg).key


def run(cfg: TrainConfig, callbacks=(), *, resume: bool = False, overwrite: bool = False) -> TrainOutcome:
    """Train (or resume) ``cfg``; write ``{storage}/{name}/model`` and ``train_summary.json``.

    A run folder with checkpoints is resumed only if it trained the same config, sets and base model
    (``train.run_key``); ``overwrite`` removes it first, ``resume`` fails when there is nothing to resume."""
    from train.run_key import check_run_key

    t0 = time.time()
    preflighted = preflight(cfg)
    run_folder = f"{_storage(cfg).rstrip('/')}/{cfg.name}"
    check_run_key(cfg, run_folder, preflighted[0], resume=resume, overwrite=overwrite, log=partial(print, flush=True))
    from train.progress import PROGRESS_FILE, ProgressBar, wants_bar

    progress_file = f"{run_folder}/{PROGRESS_FILE}" if wants_bar(run_dir=run_folder) else None
    trainer = build_trainer(cfg, callbacks=callbacks, progress_file=progress_file, preflighted=preflighted)
    bar = ProgressBar(progress_file) if progress_file else None
    try:
        result = trainer.fit()
    finally:
        if bar is not None:
            bar.close()
    metric = checkpoint_metric(cfg)
    run_dir = _run_dir(cfg, result)
    chosen, metrics = result.checkpoint, dict(result.metrics or {})
    candidates = list(result.best_checkpoints or [])
    if cfg.num_workers == 0 and "://" not in run_dir:  # local mode: Ray keeps no checkpoint history
        candidates = _local_checkpoints(run_dir)
    if metric:
        scored = [(c, m) for c, m in candidates if m.get(metric) is not None]
        if scored:
            chosen, metrics = max(scored, key=lambda cm: cm[1][metric])
            metrics = dict(metrics)
    if chosen is None:
        raise RuntimeError(f"run {cfg.name!r} finished without a checkpoint")
    final = f"{run_dir}/model"
    with chosen.as_directory() as d:
        _copy_dir(Path(d) / "model", final)
        if not metrics and (Path(d) / "metrics.json").is_file():  # e.g. a re-run with nothing left to do
            metrics = json.loads((Path(d) / "metrics.json").read_text())
    summary = {
        "run_name": cfg.name,
        "method": cfg.method,
        "model_path": final,
        "checkpoint_path": chosen.path,
        "selected_by": metric or "latest",
        "metrics": metrics,
        "last_metrics": dict(result.metrics or {}),
        "wall_s": round(time.time() - t0, 2),
        "config": cfg.to_dict(),
    }
    from ingest.secrets import redact

    _write_text(f"{run_dir}/train_summary.json", json.dumps(redact(summary), indent=2, sort_keys=True, default=str))
    _write_model_card(cfg, final, metric or "latest", metrics)
    return TrainOutcome(model_path=final, metrics=metrics, checkpoint_path=chosen.path)


def _write_model_card(cfg: TrainConfig, final: str, selected_by: str, metrics: dict) -> None:
    """Append what the model is to the README.md sentence-transformers wrote (a local model folder)."""
    if "://" in final:
        return
    from ingest.secrets import redact_text
    from train.model_card import card_section, set_facts

    method = get_method(cfg.method)
    set_paths = resolve_sets(cfg)
    sets = [set_facts(kind, set_paths[kind]) for kind in method.sets]
    readme = Path(final) / "README.md"
    text = readme.read_text() if readme.is_file() else "# SentenceTransformer\n"
    readme.write_text(text.rstrip("\n") + "\n" + redact_text(card_section(cfg, sets, selected_by, metrics)))


def _local_checkpoints(run_dir: str) -> list:
    from ray.train import Checkpoint

    out = []
    for d in sorted(Path(run_dir).glob("step-*")):
        if (d / "metrics.json").is_file():
            out.append((Checkpoint.from_directory(str(d)), json.loads((d / "metrics.json").read_text())))
    return out


def _run_dir(cfg: TrainConfig, result) -> str:
    if result.path:
        return str(result.path).rstrip("/")
    return f"{_storage(cfg).rstrip('/')}/{cfg.name}"  # local mode (num_workers=0) has no Result.path


def _copy_dir(src: Path, dst: str) -> None:
    if "://" in dst:
        import pyarrow.fs

        pyarrow.fs.copy_files(str(src), dst)
        return
    dst_path = Path(dst)
    if dst_path.exists():
        shutil.rmtree(dst_path)
    shutil.copytree(src, dst_path)


def _write_text(path: str, text: str) -> None:
    if "://" in path:
        import pyarrow.fs

        fs, p = pyarrow.fs.FileSystem.from_uri(path)
        with fs.open_output_stream(p) as f:
            f.write(text.encode())
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)
