"""One evaluation, whoever asks for it: ``python -m eval`` (``eval/cli.py``) and ``structcse.evaluate`` both call
:func:`evaluate`, so a script and the command line check the same things in the same order and get the same
figures: the task, split and options; the data (its storage answers, its local copy, its files) before any
model loads; the model (a path or hub name checked before torch, or a model already loaded); what the task
needs of the model's method; the run; the result, redacted.

A request that cannot run raises :class:`UsageError` (a ``ValueError``) with the one line the command line
prints before it exits 2; missing data or model files raise ``FileNotFoundError``, a model whose method lacks
what the task needs ``score.model.MethodMismatchError``, each with its one line.
"""

from __future__ import annotations

import os
import time

from eval.tasks import default_data, get_task


class UsageError(ValueError):
    """The task, split or options asked for cannot run (one line, naming what to change)."""


def _spelled(option: str, cli: bool) -> str:
    return "--" + option.replace("_", "-") if cli else option


def resolve(task: str, data, split: str | None, options: dict, cli: bool = False):
    """``(task spec, data, split, options)`` with the defaults filled in (the task's public datasets by name,
    its default split) and checked; options left at None are dropped. ``cli``: name options as flags."""
    spec = get_task(str(task).replace("-", "_"))
    if data is None:  # the task's public datasets, by name (docs/data.md)
        data = default_data(spec.name)
        if data is None:
            raise UsageError(f"task {spec.name} needs {'--data FOLDER' if cli else 'data='} (it has no public "
                             "dataset by name; see docs/data.md)")
    if split is None:
        split = spec.default_split or ("dev" if "dev" in spec.splits else spec.splits[0])
    if split not in spec.splits:
        raise UsageError(f"task {spec.name} has no split {split!r}; choose from {', '.join(spec.splits)}")
    options = {key: value for key, value in options.items() if value is not None}
    unused = [key for key in options if key not in spec.options]
    if unused:
        takes = ", ".join(_spelled(o, cli) for o in spec.options)
        raise UsageError(f"{', '.join(_spelled(o, cli) for o in unused)} does not apply to task {spec.name} "
                         + (f"(it takes {takes})" if takes else "(it takes no options)"))
    return spec, os.fspath(data), split, options


def _load(model, spec, device: str | None, max_seq_length: int | None):
    """The model the task runs on: a path or hub name loaded as the task needs it (with the method's heads, or
    the encoder alone), or a ``TrainedModel`` already loaded."""
    from score.model import MethodMismatchError, TrainedModel

    if isinstance(model, TrainedModel):
        trained = model
    else:
        from eval.models import check_model, load_encoder, load_trained

        check_model(model)  # before torch: an uncached hub name offline is one line at once, not 75 s of retries
        if spec.model_kind != "trained":
            encoder = load_encoder(model, device=device)
            if max_seq_length is not None:
                encoder.max_seq_length = max_seq_length
            return encoder
        trained = load_trained(model, device=device, max_seq_length=max_seq_length)
    if spec.requires and not trained.has(spec.requires):
        raise MethodMismatchError(
            f"task {spec.name} needs a model whose method has {spec.requires}; {trained.path or 'this model'} is "
            + (f"a {trained.method_name} model" if trained.method_name else "a plain encoder (no heads)"))
    return trained if spec.model_kind == "trained" else trained.encoder


def evaluate(model, task: str = "sts", data=None, split: str | None = None, *, batch_size: int = 64,
             device: str | None = None, max_seq_length: int | None = None, cli: bool = False, **options) -> dict:
    """Run ``task`` on ``model`` (a path, URI or hub name, or a loaded ``TrainedModel``); the result as
    ``python -m eval`` prints it on its last line. ``options``: the task's own (``eval.tasks``)."""
    from infra.secrets import redact
    from infra.storage import check_storage
    from infra.cache import as_local

    spec, data, split, options = resolve(task, data, split, options, cli)
    check_storage(data, "--data" if cli else "data")  # a bucket that is not there, an endpoint that does not answer
    if isinstance(model, (str, os.PathLike)):
        check_storage(os.fspath(model), "--model" if cli else "model")
    data = as_local(data, "data")  # a data folder in a bucket: its local copy, made once
    if options.get("tune_data"):
        options["tune_data"] = as_local(os.fspath(options["tune_data"]), "data")
    spec.check_data(data, split, **options)  # before any model is loaded: a missing file is one line
    started = time.perf_counter()
    runs_on = _load(model, spec, device, max_seq_length)
    outcome = spec.run(runs_on, data, split, batch_size=batch_size, **options)
    shown = os.fspath(model) if isinstance(model, (str, os.PathLike)) else model.path
    return redact({"model": shown, **outcome, "total_seconds": round(time.perf_counter() - started, 2)})
