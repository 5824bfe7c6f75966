"""Checks every entry point makes on what the user named, before anything heavy is imported or loaded.

* ``check_model_name(model)``: a model that is neither a local path, a URI nor in the Hugging Face cache comes
  from the hub; on an offline machine (``HF_HUB_OFFLINE=1``, or the hub's host not reachable within 3 s, one
  try) that is a :class:`ModelNotAvailable` at once, instead of the hub client's retries (25 to 75 s) and two
  tracebacks. ``train.plan.check_hub_reachable`` (train, tune, structcse) and ``python -m eval`` call it.
* ``missing_path(path, what, accepts)``: the one-line message for a path that does not exist, naming what
  the path should hold and a close name beside it (``sets/smaple``: did you mean ``sets/sample``?).
* ``subfolders_holding(folder, test)``: the subfolders of a folder in the wrong layout that hold the right one
  (``stsb/`` holds ``raw/`` and ``senteval_processed/``: did you mean ``stsb/raw``?).

Standard library only (``huggingface_hub`` is imported when a name must be looked up in its cache).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Callable

from infra.storage import is_uri, local_path


class ModelNotAvailable(FileNotFoundError):
    """A model name that is not a local folder and cannot come from the hub now (or is not a valid name)."""


def check_model_name(model: str, fix: str = "pass a local folder with --model /path/to/model",
                     timeout_s: float = 3.0) -> None:
    """Return when ``model`` can be loaded without waiting on an unreachable hub: a URI, an existing local
    path, or a hub name in the Hugging Face cache, or one whose hub is reachable (one TCP connect to
    ``HF_ENDPOINT``, ``timeout_s`` at most, no retry). Else a :class:`ModelNotAvailable` whose one-line
    message ends with ``fix``."""
    text = os.fspath(model)
    if is_uri(text) or Path(local_path(text)).expanduser().exists():
        return
    from huggingface_hub import constants, try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(text, "config.json")
    except Exception as e:  # an invalid repo id (HFValidationError): a path that does not exist, mostly
        raise ModelNotAvailable(f"model {text!r} is neither an existing local folder nor a Hugging Face model "
                                f"name ({first_line(e)}); {fix}") from None
    if isinstance(cached, str):
        return
    advice = f"model {text!r} is not a local folder and not in the Hugging Face cache, and "
    if constants.HF_HUB_OFFLINE:
        raise ModelNotAvailable(advice + f"HF_HUB_OFFLINE is set; {fix}")
    from infra.hub_data import probe_host

    address, error, reached = probe_host(constants.ENDPOINT, timeout_s)
    if not reached:
        why = first_line(error) if error is not None else f"no answer within {timeout_s:g} s"
        raise ModelNotAvailable(advice + f"{address} cannot be reached ({why}); {fix}")


def first_line(error: BaseException | str) -> str:
    """The first non-empty line of an error's message (or its type's name)."""
    text = str(error).strip()
    line = text.splitlines()[0].strip() if text else ""
    return line or (type(error).__name__ if isinstance(error, BaseException) else "")


def missing_path(path: str | os.PathLike, what: str, accepts: str) -> str:
    """``"{what} does not exist: {path} (expected {accepts})"``, with ``did you mean X?`` when a name
    beside it is close (a typo)."""
    path = Path(path).expanduser()
    message = f"{what} does not exist: {path} (expected {accepts})"
    parent = path.parent
    try:
        names = [p.name for p in parent.iterdir()]
    except OSError:
        return message
    close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.75)
    return message + (f"; did you mean {parent / close[0]}?" if close else "")


def subfolders_holding(folder: str | os.PathLike, test: Callable[[Path], bool], depth: int = 2) -> list[Path]:
    """The subfolders of ``folder`` (``depth`` levels down at most, hidden ones skipped) for which ``test``
    is true, in name order; a folder that passes is not searched further."""
    found = []
    try:
        children = sorted(p for p in Path(folder).expanduser().iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return found
    for child in children:
        if test(child):
            found.append(child)
        elif depth > 1:
            found.extend(subfolders_holding(child, test, depth - 1))
    return found


def did_you_mean(paths: list[Path], limit: int = 3) -> str:
    """``"; did you mean A or B?"`` (empty when there is none)."""
    if not paths:
        return ""
    names = [str(p) for p in paths[:limit]]
    more = f" (and {len(paths) - limit} more)" if len(paths) > limit else ""
    return "; did you mean " + (" or ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " or " + names[-1]) + more + "?"
