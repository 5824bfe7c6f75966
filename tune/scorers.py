"""Tune's dev scorers: a pool of Ray actors that score every trial's checkpoints with their method's dev metric
while training goes on.

Pieces:

* :class:`DevScorer` — one Ray actor holding the dev data (read once, by ``score.dev_metrics``) that
  scores a checkpoint's ``model/`` folder; its CPU/GPU share is the pool's setting (fractional GPUs
  on a GPU cluster, so several scorers share one).
* :class:`EvalPool` — a named async actor (no resources) in front of the scorers: it sends each
  request to the least busy scorer; when a scorer dies it starts a replacement, which reads the dev
  data again, and scores the pending checkpoint on it (``max_attempts`` tries in all).
* :class:`PoolValidation` — the ``fn`` of Ray Train's asynchronous validation
  (``ray.train.v2.api.validation_config.ValidationConfig``): Ray Train calls it in a task of its own
  for every checkpoint reported with ``validation=...``, the score is merged into that checkpoint's
  metrics (checkpoint selection, ``Result.best_checkpoints``), and, under Tune, it is also put on the
  trial's result queue tagged with the step and examples seen it belongs to, so the scheduler sees it.

::

    pool = start_pool("sts_spearman", "data/stsb", name="dev-pool", namespace="tune-x", size=2)
    ray.get(pool.score.remote(checkpoint))   # {"dev_spearman": 0.81, "scorer": 1, ...}
    stop_pool("dev-pool", "tune-x")
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from infra.uris import as_local, is_uri

RESULT_KEYS = ("scorer", "score_started_at", "score_finished_at", "score_s")


class DevScorer:
    """One scoring actor: a dev set read once; ``score`` scores a checkpoint with its method's dev metric."""

    def __init__(self, metric_name: str, dev_data: str, device: str | None = None):
        from score.dev_metrics import DEV_METRICS

        self.metric = DEV_METRICS[metric_name]
        self.device = device
        self.data = self.metric.read(as_local(dev_data, "data"))
        self.scored = 0
        import score.model  # noqa: F401 - transformers' import (seconds) is paid here, not by the first score
        from train.logs import quiet_worker

        quiet_worker()

    def ready(self) -> int:
        return os.getpid()

    def score(self, checkpoint) -> dict:
        """``{<metric key>: value, score_started_at, score_finished_at, score_s}`` of ``checkpoint``'s
        ``model/`` (a ``ray.train.Checkpoint``, local or remote, or a local folder path)."""
        from train.saved_models import score_model_dir

        started = time.time()
        if isinstance(checkpoint, (str, Path)):
            value = score_model_dir(self.metric, Path(checkpoint) / "model", self.data, self.device)
        else:
            with checkpoint.as_directory() as folder:
                value = score_model_dir(self.metric, Path(folder) / "model", self.data, self.device)
        self.scored += 1
        finished = time.time()
        return {self.metric.key: value, "score_started_at": started, "score_finished_at": finished,
                "score_s": finished - started}


class EvalPool:
    """Least-busy dispatch over ``size`` :class:`DevScorer` actors; a dead one is replaced."""

    def __init__(self, metric_name: str, dev_data: str, size: int, scorer_options: dict, max_attempts: int = 3):
        self.args = (metric_name, dev_data)
        self.scorer_options = scorer_options
        self.max_attempts = max_attempts
        self.scorers = [self._start() for _ in range(size)]
        self.busy = [0] * size
        self.scored = [0] * size
        self.replaced = 0

    def _start(self):
        import ray

        return ray.remote(DevScorer).options(**self.scorer_options).remote(*self.args)

    async def ready(self) -> list[int]:
        return [await s.ready.remote() for s in self.scorers]

    async def score(self, checkpoint) -> dict:
        from ray.exceptions import RayActorError

        error = None
        for _ in range(self.max_attempts):
            i = min(range(len(self.scorers)), key=lambda k: self.busy[k])
            scorer = self.scorers[i]
            self.busy[i] += 1
            try:
                result = await scorer.score.remote(checkpoint)
            except RayActorError as e:  # the scorer died (node lost, OOM): replace it, score again
                error = e
                if self.scorers[i] is scorer:
                    self.scorers[i] = self._start()
                    self.replaced += 1
                continue
            finally:
                self.busy[i] -= 1
            self.scored[i] += 1
            return {**result, "scorer": i}
        raise RuntimeError(f"evaluation pool: {self.max_attempts} scorers died scoring {checkpoint}: {error}")

    def stats(self) -> dict:
        return {"size": len(self.scorers), "scored": list(self.scored), "busy": list(self.busy),
                "replaced": self.replaced}

    def kill_scorer(self, i: int) -> None:
        """Kill scorer ``i`` (tests: a scorer that dies is replaced and its checkpoint rescored)."""
        import ray

        ray.kill(self.scorers[i])


def default_pool_size_and_resources(resources: dict) -> tuple[int, dict]:
    """(pool size, ``ray.remote`` options of each scorer) from ``ray.cluster_resources()``.

    GPU cluster: one scorer per 4 GPUs (at least 1), each a quarter GPU and 1 CPU, so scoring never
    takes a training GPU whole. CPU cluster of 8+ CPUs: 2 scorers of 1 CPU. Smaller (a laptop): 1
    scorer that reserves no CPU, so it never keeps a Train worker or Ray Data's read tasks from their
    cores (it shares them, as any process would)."""
    gpus, cpus = resources.get("GPU", 0), resources.get("CPU", 0)
    if gpus:
        return max(1, int(gpus // 4)), {"num_cpus": 1, "num_gpus": 0.25}
    if cpus >= 8:
        return 2, {"num_cpus": 1}
    return 1, {"num_cpus": 0}


def start_pool(metric_name: str, dev_data: str | Path, name: str, namespace: str, size: int | None = None,
               num_cpus: float | None = None, num_gpus: float | None = None, timeout_s: float = 600):
    """Start (or reuse, by name) the pool and its scorers; waits until every scorer has read the data.

    ``size``/``num_cpus``/``num_gpus`` default to :func:`default_pool_size_and_resources`. A local
    ``dev_data`` is made absolute (the actors run elsewhere); on a cluster it must be a path every
    node can read.
    """
    import ray

    local = Path(dev_data).expanduser()
    dev_data = str(local.resolve()) if not is_uri(dev_data) and local.exists() else str(dev_data)
    default_size, options = default_pool_size_and_resources(ray.cluster_resources())
    if num_cpus is not None:
        options["num_cpus"] = num_cpus
    if num_gpus is not None:
        options["num_gpus"] = num_gpus
    if not options.get("num_gpus"):
        options.pop("num_gpus", None)
    pool = ray.remote(EvalPool).options(
        name=name, namespace=namespace, get_if_exists=True, num_cpus=0, max_concurrency=1000,
    ).remote(metric_name, dev_data, size or default_size, options)
    ray.get(pool.ready.remote(), timeout=timeout_s)  # reading a dev set takes seconds; a hang must not be silent
    return pool


def stop_pool(name: str, namespace: str, timeout_s: float = 60.0) -> bool:
    """Kill the pool and its scorers and wait until its name is free; False when there was none."""
    import ray

    try:
        pool = ray.get_actor(name, namespace=namespace)
    except ValueError:
        return False
    ray.kill(pool)  # its scorers are owned by it and die with it
    # ray.kill returns before the actor is gone; until then its name still resolves, and a
    # start_pool of the same name (get_if_exists) would hand back the dying pool.
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name, namespace=namespace)
        except ValueError:
            return True
        time.sleep(0.1)
    raise TimeoutError(f"the evaluation pool {namespace}/{name} was killed but still had its name after {timeout_s:.0f} s")


class PoolValidation:
    """Ray Train's validation ``fn``: score a reported checkpoint on the pool, bounded by ``timeout_s``.

    ``forward``: a ``ray.util.queue.Queue`` (Tune's per-trial result queue, the one
    ``TuneReportCallback`` uses) that also gets the score, tagged with ``step`` and ``examples_seen``
    (the reporting step's, passed by the training loop as ``ValidationTaskConfig.fn_kwargs``).
    """

    def __init__(self, pool_name: str, namespace: str, timeout_s: float, forward=None):
        self.pool_name, self.namespace, self.timeout_s, self.forward = pool_name, namespace, timeout_s, forward

    def __call__(self, checkpoint, step: int | None = None, examples_seen: int | None = None) -> dict:
        import ray
        from ray.exceptions import GetTimeoutError

        pool = ray.get_actor(self.pool_name, namespace=self.namespace)
        try:
            result = ray.get(pool.score.remote(checkpoint), timeout=self.timeout_s)
        except GetTimeoutError:
            raise TimeoutError(f"evaluation pool {self.pool_name!r} gave no score for checkpoint {checkpoint.path} "
                               f"within {self.timeout_s:.0f} s (validation_timeout_s)") from None
        scores = {"validated_step": step, **result}
        if self.forward is not None:
            try:  # the queue holds one item; the trial's driver takes it within a second
                self.forward.put({**scores, "step": step, "examples_seen": examples_seen}, timeout=self.timeout_s)
            except Exception as e:  # noqa: BLE001 - the trial was stopped (its queue is gone): the score still counts
                print(f"[eval-pool] score of step {step} not forwarded to Tune: {type(e).__name__}: {e}", flush=True)
        return scores


UNTRAINED_DIR = "untrained_encoder"  # {storage}/{name}/untrained_encoder/model: the trials' step 0
UNTRAINED_SCORE = "score.json"
HASHED_FILE_BYTES = 64 * 1024**2  # dev files up to this size are keyed by their bytes; larger ones by size+mtime
# what build_trainee and the pool's scorers read from the config: a change to any of them changes the score
UNTRAINED_CONFIG_KEYS = ("method", "model", "pooling", "base_pooling", "max_len", "dropout", "unpad", "temperature",
                         "seed", "dev_data", "dev_metric")


def content_fingerprint(path: str | None, hash_bytes: bool = True) -> str | None:
    """A hash of what the file or folder at ``path`` (local or URI, through ``infra.storage``) holds: each
    file's relative name, size and content tag. The tag is the store's checksum (S3's ETag, GCS's md5Hash or
    crc32c); without one, a hash of the bytes when ``hash_bytes`` (files up to ``HASHED_FILE_BYTES``), else
    the modification time. None when nothing is there (a Hugging Face model name)."""
    import hashlib
    import json

    from infra.storage import filesystem

    if not path:
        return None
    fs, root = filesystem(path)
    root = root.rstrip("/")
    if fs.isfile(root):
        listing = {root: fs.info(root)}
    elif fs.isdir(root):
        listing = fs.find(root, detail=True)
    else:
        return None
    entries = []
    for name, info in sorted(listing.items()):
        if info.get("type") == "directory":
            continue
        size = info.get("size")
        tag = info.get("ETag") or info.get("md5Hash") or info.get("crc32c")
        if tag is None and hash_bytes and (size or 0) <= HASHED_FILE_BYTES:
            tag = hashlib.sha256(fs.cat_file(name)).hexdigest()
        elif tag is None:
            tag = info.get("mtime") or info.get("LastModified") or info.get("updated")
        entries.append([name[len(root):].lstrip("/"), size, str(tag)])
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()


def untrained_key_parts(cfg, data_info: dict, metric_key: str) -> dict:
    """Everything the untrained encoder's dev score depends on: the metric, the config keys that build the
    encoder and heads (``UNTRAINED_CONFIG_KEYS``, the method's options, ``data_info``), the dev data's content
    and the base model's files (their names, sizes and tags: a model rewritten at the same path is new)."""
    import dataclasses

    return {"metric": metric_key, **{k: getattr(cfg, k) for k in UNTRAINED_CONFIG_KEYS},
            "options": dataclasses.asdict(cfg.options), "data_info": data_info,
            "dev_data_content": content_fingerprint(cfg.dev_data),
            "model_content": content_fingerprint(cfg.model, hash_bytes=False)}


def untrained_key(cfg, data_info: dict, metric_key: str) -> str:
    """The key the untrained encoder's kept score is valid for (a hash of :func:`untrained_key_parts`)."""
    return _digest(untrained_key_parts(cfg, data_info, metric_key))


def _digest(parts: dict) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _kept_untrained_score(where: str) -> dict | None:
    """The ``score.json`` a previous scoring left in ``where`` (local or URI), or None."""
    import json

    from infra.storage import filesystem

    fs, path = filesystem(f"{where}/{UNTRAINED_SCORE}")
    try:
        return json.loads(fs.cat_file(path))
    except (FileNotFoundError, ValueError):
        return None


def score_untrained_encoder(pool, cfg, data_info: dict, folder: str, metric_key: str, log=print) -> dict:
    """The dev score of the untrained encoder (what every trial starts from: ``cfg``'s base model and pooling,
    the method's heads freshly made with ``cfg.seed``, as ``train.loop.build_trainee`` makes them), scored by
    the search's own evaluation pool (``pool``), so it is the same scorer, data and metric as the trials'.

    The model is published (``infra.uris.upload_folder``: whole or not at all) as a checkpoint-shaped folder
    ``{folder}/untrained_encoder/model`` (a local folder or a URI: the pool's scorers read it as they read the
    trials' checkpoints); its score is kept in ``score.json`` beside it with the :func:`untrained_key` it was
    scored under, so a continued search does not score it again, and a changed dev set, model, seed, pooling,
    option or ``max_len`` is scored anew. Returns ``{"score", "model", "metric", "key", ...}``, or
    ``{"score": None, "error"}`` when it could not be scored (said in a warning line)."""
    import json
    import tempfile

    import torch

    from infra.publish import resolve, write_text_atomic
    from infra.uris import upload_folder
    from train.loop import build_trainee

    where = f"{folder.rstrip('/')}/{UNTRAINED_DIR}"
    try:
        parts = untrained_key_parts(cfg, data_info, metric_key)
        key = _digest(parts)
        kept = _kept_untrained_score(where)
        if kept is not None and kept.get("key") == key and kept.get("score") is not None:
            return kept
        if kept is not None:
            log(f"[tune] the untrained encoder's score in {where} was for another dev set, model or config: "
                "scoring it again")
        import ray

        torch.manual_seed(cfg.seed)
        trainee = build_trainee(cfg, data_info)
        with tempfile.TemporaryDirectory(prefix="structcse-untrained-") as staging:
            trainee.encoder.save_sentence_transformer(Path(staging) / "model")
            trainee.method.save_heads(Path(staging) / "model")
            upload_folder(staging, where)
        published = resolve(where)  # a bucket folder published again lives under a version prefix
        if is_uri(published):
            from ray.train import Checkpoint

            target = Checkpoint(path=published)
        else:
            target = published
        result = ray.get(pool.score.remote(target), timeout=cfg.validation_timeout_s)
        out = {"score": float(result[metric_key]), "metric": metric_key, "model": cfg.model,
               "pooling": cfg.pooling, "folder": where, "key": key,
               "keyed_on": parts}
        write_text_atomic(f"{where}/{UNTRAINED_SCORE}", json.dumps(out, indent=2, default=str))
        return out
    except Exception as e:  # noqa: BLE001 - the search's results stand; the report says it has no such row
        log(f"[tune] warning: the untrained encoder ({cfg.model}) was not scored: {type(e).__name__}: {e}")
        return {"score": None, "metric": metric_key, "model": cfg.model, "error": f"{type(e).__name__}: {e}"}
