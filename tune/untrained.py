"""The untrained encoders of a search: every trial's step 0, scored by the search's own evaluation pool, once per
distinct encoder shape (a searched ``pooling``, ``max_len``, ``model`` or ``seed`` makes another one), so each
trial is compared with the encoder it started from."""

from __future__ import annotations

import logging
from pathlib import Path

from infra.storage import is_uri
from tune.state import _digest, content_fingerprint

log = logging.getLogger(__name__)
UNTRAINED_DIR = "untrained_encoder"  # {storage}/{name}/untrained_encoder/model: the base config's trials' step 0
UNTRAINED_SCORE = "score.json"
# what build_trainee and the pool's scorers read from the config: a change to any of them changes the score
UNTRAINED_CONFIG_KEYS = ("method", "model", "pooling", "base_pooling", "max_len", "dropout", "unpad", "temperature",
                         "seed", "dev_data", "dev_metric")


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


def _kept_untrained_score(where: str) -> dict | None:
    """The ``score.json`` a previous scoring left in ``where`` (local or URI), or None."""
    import json

    from infra.storage import filesystem

    fs, path = filesystem(f"{where}/{UNTRAINED_SCORE}")
    try:
        return json.loads(fs.cat_file(path))
    except (FileNotFoundError, ValueError):
        return None


def score_untrained_encoder(pool, cfg, data_info: dict, folder: str, metric_key: str,
                            where: str | None = None) -> dict:
    """The dev score of the untrained encoder (what every trial of ``cfg``'s shape starts from: ``cfg``'s base
    model and pooling, the method's heads freshly made with ``cfg.seed``, as ``train.loop.build_trainee`` makes
    them), scored by the search's own evaluation pool (``pool``), so it is the same scorer, data and metric as
    the trials'.

    The model is published (``infra.publish.publish_folder``: whole or not at all) as a checkpoint-shaped folder
    ``where`` (default ``{folder}/untrained_encoder``; a local folder or a URI: the pool's scorers read it as they
    read the trials' checkpoints); its score is kept in ``score.json`` beside it with the :func:`untrained_key`
    it was scored under, so a continued search does not score it again, and a changed dev set, model, seed,
    pooling, option or ``max_len`` is scored anew. Returns ``{"score", "model", "metric", "key", ...}``, or
    ``{"score": None, "error"}`` when it could not be scored (said in a warning line)."""
    import json

    from infra.publish import write_text_atomic

    where = where or f"{folder.rstrip('/')}/{UNTRAINED_DIR}"
    try:
        parts = untrained_key_parts(cfg, data_info, metric_key)
        key = _digest(parts)
        kept = _kept_untrained_score(where)
        if kept is not None and kept.get("key") == key and kept.get("score") is not None:
            return kept
        if kept is not None:
            log.info(f"[tune] the untrained encoder's score in {where} was for another dev set, model or config: "
                     "scoring it again")
        result = _score_fresh_encoder(pool, cfg, data_info, where)
        out = {"score": float(result[metric_key]), "metric": metric_key, "model": cfg.model,
               "pooling": cfg.pooling, "folder": where, "key": key,
               "keyed_on": parts}
        write_text_atomic(f"{where}/{UNTRAINED_SCORE}", json.dumps(out, indent=2, default=str))
        return out
    except Exception as e:  # noqa: BLE001 - the search's results stand; the report says it has no such row
        log.warning(f"[tune] warning: the untrained encoder ({cfg.model}) was not scored: {type(e).__name__}: {e}")
        return {"score": None, "metric": metric_key, "model": cfg.model, "error": f"{type(e).__name__}: {e}"}


def _score_fresh_encoder(pool, cfg, data_info: dict, where: str) -> dict:
    """``cfg``'s encoder and heads as training starts them, published at ``where`` and scored by ``pool`` (within
    ``cfg.validation_timeout_s``): the pool's result."""
    import tempfile

    import ray
    import torch
    from ray.exceptions import GetTimeoutError

    from infra.publish import publish_folder, resolve
    from train.loop import build_trainee
    from train.saved_models import save_model

    torch.manual_seed(cfg.seed)
    trainee = build_trainee(cfg, data_info)
    with tempfile.TemporaryDirectory(prefix="structcse-untrained-") as staging:
        save_model(trainee.encoder, trainee.method, Path(staging) / "model")
        publish_folder(staging, where)
    published = resolve(where)  # a bucket folder published again lives under a version prefix
    if is_uri(published):
        from ray.train import Checkpoint

        target = Checkpoint(path=published)
    else:
        target = published
    request = pool.score.remote(target)
    try:
        return ray.get(request, timeout=cfg.validation_timeout_s)
    except GetTimeoutError:
        ray.cancel(request)  # the pool drops it, or stops the scorer it hangs on
        raise TimeoutError(f"no score within {cfg.validation_timeout_s:.0f} s (validation_timeout_s)") from None


def encoder_shape(cfg, base) -> dict:
    """The keys of ``cfg`` that make its untrained encoder another than ``base``'s, with ``cfg``'s values."""
    import dataclasses

    shape = {k: getattr(cfg, k) for k in UNTRAINED_CONFIG_KEYS if getattr(cfg, k) != getattr(base, k)}
    if dataclasses.asdict(cfg.options) != dataclasses.asdict(base.options):
        shape["options"] = dataclasses.asdict(cfg.options)
    return shape


def score_untrained_encoders(pool, base, trial_configs: dict, data_info: dict, folder: str, metric_key: str) -> dict:
    """The untrained encoder of ``base`` and of every other encoder shape among ``trial_configs`` (``{trial id:
    its TrainConfig}``), each scored once (:func:`score_untrained_encoder`; a shape other than the base's in
    ``untrained_encoder-<key>/``). Returns ``{"base": the base's result, "by_trial": {trial id: its shape's
    result}, "shapes": [every result, the base's first]}``; each result carries ``shape`` (what differs from the
    base config: ``{}`` for the base's own)."""
    import dataclasses

    base_key = untrained_key(base, data_info, metric_key)
    scored = {base_key: {**score_untrained_encoder(pool, base, data_info, folder, metric_key), "shape": {}}}
    by_trial = {}
    for trial_id, cfg in trial_configs.items():
        # a trial's base_pooling is false when pooling is searched; its encoder is built from pooling alone
        cfg = dataclasses.replace(cfg, base_pooling=base.base_pooling)
        key = untrained_key(cfg, data_info, metric_key)
        if key not in scored:
            where = f"{folder.rstrip('/')}/{UNTRAINED_DIR}-{key[:12]}"
            scored[key] = {**score_untrained_encoder(pool, cfg, data_info, folder, metric_key, where=where),
                           "shape": encoder_shape(cfg, base)}
        by_trial[trial_id] = scored[key]
    return {"base": scored[base_key], "by_trial": by_trial, "shapes": list(scored.values())}
