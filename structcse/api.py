"""The Python API: load a trained model, encode, score pairs, read a set, run an evaluation.

Everything here wraps what the command lines use (``eval.models``, ``setformat.io``, ``eval.tasks``), so a
script gets the same model, the same checks and the same figures as ``python -m eval``. Heavy imports
(torch, sentence-transformers, pyarrow) happen on the first call, not on ``import structcse``.

    import structcse

    model = structcse.load("demo_out/runs/gausscse/model")
    model.encode(["A man plays a guitar."])                 # numpy (1, d)
    model.similarity("A man plays.", "Someone plays.")      # the method's own pair score
    structcse.read_set("demo_out/sets", "sentences")        # pyarrow.Table
    structcse.evaluate(model, "sts", data="demo_out/world/sts", split="test")["spearman"]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from infra.storage import is_uri

if TYPE_CHECKING:  # for the signatures only: importing them costs torch
    import pyarrow as pa

    from score.model import TrainedModel


def load(path: str | os.PathLike, device: str | None = None, max_seq_length: int | None = None) -> TrainedModel:
    """Load a model with its method's heads, in eval mode.

    ``path``: a folder ``python -m train`` wrote (``runs/<name>/model``), a run folder or checkpoint folder
    (its ``model/`` is used), any SentenceTransformer or Hugging Face model folder (mean pooling), a
    ``s3://`` / ``gs://`` URI of one, or a Hugging Face hub name. ``device``: ``"cpu"``, ``"cuda"``, ...
    (default: what sentence-transformers picks). ``max_seq_length``: read at most this many tokens (default: the
    folder's own limit; folders saved before 0.14 say their training ``max_len`` there, 32 for most methods).

    Returns a :class:`score.model.TrainedModel`: ``encode(texts)`` gives the (N, d) float32 embeddings,
    ``similarity(a, b)`` the method's own pair score (``similarity_name`` says which), ``cosine(a, b)``
    cosine; GaussCSE models add ``gaussian``, ``asymmetric_similarity``, ``log_det``; RSE models
    ``relation_scores`` and ``relational_similarity``. A folder without ``structcse_method.json`` loads
    without heads (``method_name`` is None; ``similarity`` is cosine).

    Raises ``FileNotFoundError`` with one line naming the folder and what is missing (a partial copy, no
    ``modules.json``, a heads file without its description, a hub name not cached while offline).
    """
    from eval.models import check_model, load_trained

    check_model(path)  # before torch: a missing folder or an unreachable hub name is one line at once
    return load_trained(path, device=device, max_seq_length=max_seq_length)


def read_set(path: str | os.PathLike, name: str | None = None, columns: list[str] | None = None) -> pa.Table:
    """Read a set written by ``python -m ingest`` (or its ``pairs``, ``aspects``, ``dsbats`` jobs).

    ``path``: the set's folder (``demo_out/sets/sentences``), or the job's output folder with ``name``
    the set (``read_set("demo_out/sets", "sentences")``); a URI works too. ``columns``: the columns to
    read (default: all).

    The set is checked as train and eval check it before reading: the job that wrote it finished, every
    file its manifest lists is there with its size, and (for the kinds ``setformat/schemas.py`` declares)
    the columns have their declared types. Only the files the manifest lists are read.

    Returns a ``pyarrow.Table`` (``.to_pandas()`` gives a DataFrame). Raises ``FileNotFoundError`` for a
    missing folder and ``setformat.schemas.SchemaError`` (a ``ValueError``) in one line naming the set and
    what is wrong: an unfinished job (and the command to rerun), a missing file, a missing column.
    """
    from setformat.integrity import verify_set
    from setformat.io import read_table

    folder = _set_folder(path, name)
    kind = _set_kind(folder)
    if kind is not None:
        return read_table(folder, columns, kind=kind)
    verify_set(folder, os.path.basename(folder.rstrip("/")))  # a set whose schema is not declared: whole, then read
    return read_table(folder, columns)


def read_manifest(path: str | os.PathLike, name: str | None = None) -> dict:
    """The manifest (``_manifest.json``) of a set: its name, row count, the job and inputs that made it,
    ``code_version``, the rows dropped and why. ``path`` and ``name`` as for :func:`read_set`."""
    from setformat.io import read_manifest as _read_manifest

    return _read_manifest(_set_folder(path, name))


def tasks() -> dict[str, str]:
    """``{task name: what it measures}`` for every task :func:`evaluate` (and ``python -m eval --task``) runs."""
    from eval.tasks import TASKS

    return {name: task.description for name, task in TASKS.items()}


def evaluate(model, task: str = "sts", data: str | os.PathLike | None = None, split: str | None = None,
             batch_size: int = 64, device: str | None = None, **options) -> dict:
    """Run one evaluation task, as ``python -m eval --task TASK`` does, and return its result.

    ``model``: what :func:`load` returned, or anything :func:`load` takes. ``task``: a name of
    :func:`tasks` (``sts``, ``sts_all``, ``nli``, ``direction``, ``relational_sts``, ``link_prediction``,
    ``aspect_retrieval``, ``srsd``, ``mrpc``, ``stc``; ``-`` reads as ``_``). ``data``: what
    ``python -m eval --data`` takes (a SentEval-layout folder, a folder of a hub dataset's files, a hub name,
    a URI); None reads the task's public datasets by name (``docs/data.md``; ``aspect_retrieval``, ``srsd``
    and ``stc`` have none). ``split``: the CLI's default, the task's ``default_split`` in ``eval/tasks.py``
    (``test`` for ``sts_all`` and ``mrpc``), else ``dev`` where the task has it, else its only split
    (``test`` for ``aspect_retrieval``, ``srsd``, ``stc``). ``options``: the task's own options, named as the
    flags without ``--`` (``plots``, ``limit``, ``weights``, ``tune_data``, ``tune_split``, ``representation``,
    ``actors``, ``sick_protocol``, ``mrpc_classifier``).

    Returns the dict ``python -m eval`` prints as its last line: ``model``, ``task``, ``split``, ``data``,
    ``total_seconds`` and the task's figures (``sts``: ``spearman``, ``pearson``, ``n_pairs``; ``nli``:
    ``accuracy``, ``auprc``; ...), correlations as fractions. Tasks scored with the method's own similarity (``sts_all``, ``nli``,
    ``relational_sts``, ...) use the model's heads; ``sts`` is cosine, as the papers' STS-B dev.

    It is ``eval.run.evaluate``, the function ``python -m eval`` runs: the same checks in the same order.
    Raises, with the line the command line would print: ``eval.run.UsageError`` (a ``ValueError``) for an
    unknown task or split or an option the task does not take; ``FileNotFoundError`` for missing data or
    model files; ``score.model.MethodMismatchError`` (a ``TypeError``) for a model whose method lacks what the
    task needs (e.g. ``relational_sts`` of a model without RSE heads).
    """
    from eval.run import evaluate as run_evaluation

    return run_evaluation(model, task, data, split, batch_size=batch_size, device=device, **options)


def _set_folder(path: str | os.PathLike, name: str | None) -> str:
    """The set's folder; a missing one, or a folder of sets with no ``name``, is one line saying so."""
    from infra.preflight import missing_path, subfolders_holding
    from setformat.io import SET_LAYOUT, is_set_folder

    text = os.fspath(path).rstrip("/") or "/"
    folder = f"{text}/{name}" if name else text
    if is_uri(folder):
        return folder
    local = Path(folder).expanduser()
    if not local.exists():
        raise FileNotFoundError(missing_path(local, "set folder", SET_LAYOUT))
    if local.is_dir() and not any(local.glob("*.parquet")):
        inside = [p.name for p in subfolders_holding(local, is_set_folder, depth=1)]
        if inside:
            raise FileNotFoundError(f"{local} is a folder of sets, not one set: name one, e.g. "
                                    f"read_set({text!r}, {inside[0]!r}) (sets there: {', '.join(inside)})")
    return str(local)


def _set_kind(folder: str) -> str | None:
    """The schema the set is checked against: its folder's name, else its manifest's ``set``, when declared."""
    from setformat import schemas
    from setformat.io import manifest_path, read_json

    base = os.path.basename(folder.rstrip("/"))
    if base in schemas.SCHEMAS:
        return base
    manifest = read_json(manifest_path(folder)) or {}
    return manifest.get("set") if manifest.get("set") in schemas.SCHEMAS else None
