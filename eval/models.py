"""Load any encoder the evaluation tasks score, as a ``SentenceTransformer``.

Three kinds of input are accepted:

* a local SentenceTransformer folder (has ``modules.json``): loaded as is;
  train saves its final model and each checkpoint's ``model/`` this way;
* a local plain Hugging Face model folder (``config.json`` only): wrapped
  with mean pooling, which is logged;
* anything that is not a local path: a Hugging Face hub name, handed to
  ``SentenceTransformer`` (which downloads it, or reads its cache).

A checkpoint folder whose ``model/`` subfolder holds the model is accepted too.
``load_trained`` gives the same encoders as a ``score.model.TrainedModel``,
with the method's heads when the folder has them (the pair tasks use it).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from infra.preflight import check_model_name, missing_path
from infra.cache import as_local
from infra.storage import is_uri, local_path

log = logging.getLogger(__name__)

HF_MARKER = "config.json"
ST_MARKER = "modules.json"  # score.model.ST_MARKER (not imported here: it imports torch; eval's preflight runs without it)


def looks_like_local_path(path_or_name: str) -> bool:
    """True when ``path_or_name`` can only mean a local path, not a hub name.

    Hub names are ``name`` or ``owner/name``; anything absolute, relative
    (``./``, ``../``, ``~``), with a backslash, or with more than one ``/``
    is a path.
    """
    text = str(path_or_name)
    if os.path.isabs(text) or text.startswith((".", "~")) or "\\" in text:
        return True
    return text.count("/") > 1 or text.endswith("/")


def resolve_model_folder(folder: Path) -> Path:
    """The folder that actually holds the model: ``folder`` or its ``model/``."""
    if (folder / ST_MARKER).is_file() or (folder / HF_MARKER).is_file():
        return folder
    nested = folder / "model"
    if (nested / ST_MARKER).is_file() or (nested / HF_MARKER).is_file():
        log.info("using the model saved in %s", nested)
        return nested
    raise FileNotFoundError(
        f"{folder} is not a model folder: it has neither {ST_MARKER} "
        f"(SentenceTransformer) nor {HF_MARKER} (Hugging Face model), nor a model/ subfolder with them"
    )


MODEL_LAYOUTS = ("a SentenceTransformer folder (modules.json), a Hugging Face model folder (config.json), a train "
                 "run's model/ folder, or a Hugging Face hub name")


def check_model(path_or_name: str | os.PathLike) -> None:
    """Before torch is imported: a ``FileNotFoundError`` with a one-line message when ``path_or_name`` is a
    local path that does not exist or holds no model, or a hub name that is not cached while the hub
    cannot be reached (``infra.preflight.check_model_name``: HF_HUB_OFFLINE, or 3 s without a connection).
    A URI is checked when its local copy is made."""
    text = os.fspath(path_or_name)
    if is_uri(text):
        return
    local = Path(local_path(text)).expanduser()
    if local.exists():
        if not local.is_dir():
            raise FileNotFoundError(f"model path {local} is a file, not a model folder (expected {MODEL_LAYOUTS})")
        from infra.publish import check_complete

        for folder in (local, local / "model"):  # a run folder's model/ or the model folder itself
            if folder.is_dir():
                check_complete(folder, "model folder")  # one a killed writer left half-written is refused
        if not any((folder / marker).is_file() for folder in (local, local / "model") for marker in (ST_MARKER, HF_MARKER)):
            resolve_model_folder(local)  # the error naming what is missing
        return
    if looks_like_local_path(text):
        raise FileNotFoundError(missing_path(text, "model folder", MODEL_LAYOUTS))
    check_model_name(text, fix="pass a local folder with --model /path/to/model")


def load_encoder(path_or_name: str | os.PathLike, device: str | None = None):
    """Return a ``SentenceTransformer`` for a local folder or a hub name.

    Raises ``FileNotFoundError`` naming the path when a local path is missing
    or is not a model folder.
    """
    from sentence_transformers import SentenceTransformer

    text = as_local(path_or_name)
    local = Path(text).expanduser()
    if local.exists():
        if not local.is_dir():
            raise FileNotFoundError(f"model path {local} is a file, not a model folder")
        folder = resolve_model_folder(local)
        if (folder / ST_MARKER).is_file():
            return SentenceTransformer(str(folder), device=device, local_files_only=True)
        return mean_pooled_encoder(folder, device=device)
    if looks_like_local_path(text):
        raise FileNotFoundError(f"model path does not exist: {text}")
    log.info("%s is not a local path; loading it as a Hugging Face hub name", text)
    return SentenceTransformer(text, device=device)


def mean_pooled_encoder(folder: Path, device: str | None = None):
    """Wrap a plain Hugging Face model folder with masked mean pooling."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    log.info("%s is a plain Hugging Face model (no %s): using mean pooling", folder, ST_MARKER)
    transformer = Transformer(str(folder))
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    return SentenceTransformer(modules=[transformer, pooling], device=device)


def as_trained(model):
    """``model`` as a :class:`score.model.TrainedModel`: as is, or a plain SentenceTransformer
    wrapped without heads (the tasks that take either call this once)."""
    from score.model import TrainedModel

    return model if isinstance(model, TrainedModel) else TrainedModel(model)


def load_trained(path_or_name: str | os.PathLike, device: str | None = None, max_seq_length: int | None = None):
    """A :class:`score.model.TrainedModel`: a SentenceTransformer folder with its method heads
    (``structcse_method.json``), or any encoder ``load_encoder`` accepts, without heads.

    Raises ``FileNotFoundError`` (``score.model.ModelLoadError``) naming the folder and the file.
    """
    from score.model import TrainedModel
    from train.saved_models import load

    local = Path(as_local(path_or_name)).expanduser()
    model = None
    if local.is_dir():
        folder = resolve_model_folder(local)
        if (folder / ST_MARKER).is_file():
            model = load(folder, device=device)
    if model is None:
        model = TrainedModel(load_encoder(path_or_name, device=device), None, os.fspath(path_or_name))
    if max_seq_length is not None:
        if max_seq_length < 1:
            raise ValueError(f"max_seq_length must be >= 1, got {max_seq_length}")
        model.encoder.max_seq_length = max_seq_length
    return model
