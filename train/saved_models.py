"""A model folder that ``python -m train`` saves (:func:`save_model`) and reads back (:func:`load` ->
``score.model.TrainedModel``).

The folder is a SentenceTransformer folder whose ``encode`` is the method's sentence embedding (the
encoder's pooled vector, then the method's ``embedding_modules()``: GaussCSE's μ), with
``structcse_method.json`` and ``structcse_heads.pt`` beside it when the method has heads. :func:`load`
drops those trailing modules again (the heads take the pooled vector) and rebuilds the heads with the
method's own class (``train.methods.load_method_heads``), in eval mode. Also :func:`score_model_dir`: a
dev metric of a model folder (checkpoint selection and Tune's evaluation actors).
"""

from __future__ import annotations

import json
from pathlib import Path

from infra.cache import as_local
from score.model import (
    HEADS_FILE, METHOD_FILE, ST_MARKER, ModelLoadError, TrainedModel, embedding_dimension,
)
from train.methods import get_method, load_method_heads


def save_model(encoder, method, model_dir: str | Path) -> Path:
    """Write ``encoder`` (a ``train.encoder.Encoder``) and ``method``'s heads as one model folder."""
    modules = method.embedding_modules()
    encoder.save_sentence_transformer(model_dir, modules)
    method.save_heads(model_dir, embedding_modules=len(modules))
    return Path(model_dir)


def _read_method_file(folder: Path) -> dict:
    path = folder / METHOD_FILE
    try:
        info = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ModelLoadError(f"{path}: not valid JSON ({e})") from None
    for key in ("method", "options", "hidden_size", "temperature"):
        if key not in info:
            raise ModelLoadError(f"{path}: field {key!r} is missing")
    if info.get("heads_file") and not (folder / info["heads_file"]).is_file():
        raise ModelLoadError(f"{folder}: {info['heads_file']} is missing ({METHOD_FILE} says the "
                             f"{info['method']} heads are saved there)")
    return info


def load(model_dir: str | Path, device: str | None = None) -> TrainedModel:
    """Load a structcse model folder (or a plain SentenceTransformer folder) in eval mode.

    Raises :class:`ModelLoadError` naming the folder and the file when the
    folder, ``modules.json``, the heads file or a method field is missing, and
    when the heads do not fit the encoder's embedding size. A URI (``s3://...``)
    is read from a local copy made once per content (``infra.cache.local_copy``).
    """
    from infra.publish import IncompleteError, read_pinned

    try:
        folder = Path(as_local(model_dir)).expanduser()  # a URI: a local copy of one published version
    except (FileNotFoundError, IncompleteError) as e:  # a URI with no folder there, a partial copy
        raise ModelLoadError(str(e)) from None
    try:  # a local folder republished while it is read: read again, so every file comes from one version
        return read_pinned(str(folder), lambda path: _load(path, device), "model folder")
    except IncompleteError as e:
        raise ModelLoadError(str(e)) from None


def _load(model_dir: str, device: str | None) -> TrainedModel:
    from sentence_transformers import SentenceTransformer

    from infra.publish import IncompleteError, check_complete

    try:
        folder = Path(model_dir)
        if folder.is_dir():
            check_complete(folder, "model folder")  # one a killed writer left half-written is refused
    except (FileNotFoundError, IncompleteError) as e:  # a URI with no folder there, a partial copy
        raise ModelLoadError(str(e)) from None
    if not folder.is_dir():
        raise ModelLoadError(f"model folder does not exist: {folder}")
    if not (folder / ST_MARKER).is_file():
        raise ModelLoadError(f"{folder} is not a SentenceTransformer folder: {ST_MARKER} is missing")
    method, embedding_modules = None, 0
    if (folder / METHOD_FILE).is_file():
        info = _read_method_file(folder)
        embedding_modules = info.get("embedding_modules", 0)
        try:
            get_method(info["method"])
        except KeyError as e:
            raise ModelLoadError(f"{folder / METHOD_FILE}: {e.args[0]}") from None
        try:
            method = load_method_heads(folder, info=info)
        except (RuntimeError, TypeError) as e:
            raise ModelLoadError(f"{folder}: cannot rebuild the {info['method']} heads from "
                                 f"{HEADS_FILE} and {METHOD_FILE}: {e}") from None
    elif (folder / HEADS_FILE).is_file():
        raise ModelLoadError(f"{folder}: {HEADS_FILE} is there but {METHOD_FILE} is missing")
    encoder = SentenceTransformer(str(folder), device=device, local_files_only=True)
    if not isinstance(embedding_modules, int) or not 0 <= embedding_modules < len(encoder):
        raise ModelLoadError(f"{folder / METHOD_FILE}: embedding_modules {embedding_modules!r} is not a count of "
                             f"the {len(encoder)} modules in {ST_MARKER}")
    for _ in range(embedding_modules):  # the method's embedding (GaussCSE's μ): the heads compute it from the pooled vector
        del encoder[len(encoder) - 1]
    if method is not None:
        dim = embedding_dimension(encoder)
        if dim is not None and method.hidden_size != dim:
            raise ModelLoadError(f"{folder}: the {method.name} heads expect {method.hidden_size}-d embeddings, "
                                 f"the encoder gives {dim}-d")
        method = method.to(encoder.device).eval()
    return TrainedModel(encoder, method, folder)


def score_model_dir(metric, model_dir: str | Path, data, device: str | None = None) -> float:
    """``metric`` (a ``score.dev_metrics.DevMetric``) of the model folder ``model_dir`` on data already read by
    ``metric.read``."""
    return metric.score(load(model_dir, device=device), data)
