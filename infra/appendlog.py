"""Append-only logs that work the same in a local folder and in a bucket: a local file is appended to; an object
store has no append, so each addition is one new object beside the log (``{log}.parts/{time}-{random}``), and a
reader joins the file and its pieces in the order written. An elastic run's ``resizes.jsonl`` and its sample-id
logs are written this way, by whichever worker is rank 0 at the time.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from infra.storage import filesystem, is_uri, local_path

PARTS = ".parts"  # beside an appended file in a bucket: its appended pieces, one object each


def append_text(path: str | os.PathLike, text: str) -> None:
    """Add ``text`` to the end of an append-only log: a local file is opened for append (its folder made);
    an object store has no append, so each call writes one new object ``{path}.parts/{time}-{random}`` (the
    bytes written are the new text's, never the log's whole). :func:`read_appended` reads either back."""
    text_path = os.fspath(path)
    if not is_uri(text_path):
        text_path = local_path(text_path)
        Path(text_path).parent.mkdir(parents=True, exist_ok=True)
        with open(text_path, "a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        return
    fs, remote = filesystem(text_path)
    with fs.open(f"{remote}{PARTS}/{time.time_ns():020d}-{uuid.uuid4().hex[:8]}", "wb") as f:
        f.write(text.encode())


def read_appended(path: str | os.PathLike) -> str:
    """The whole text of an append-only log (``append_text``): the file, then its pieces in the order written;
    "" when there is neither."""
    fs, local = filesystem(os.fspath(path))
    text = fs.cat_file(local).decode() if fs.isfile(local) else ""
    try:
        parts = sorted(fs.ls(f"{local}{PARTS}", detail=False))
    except FileNotFoundError:
        parts = []
    return text + "".join(fs.cat_file(p).decode() for p in parts)


def appended_logs(folder: str, suffix: str) -> list[str]:
    """The append-only logs in ``folder`` whose names end in ``suffix`` (each once, as ``append_text``'s path)."""
    fs, root = filesystem(folder)
    try:
        names = [n.rstrip("/").rsplit("/", 1)[-1] for n in fs.ls(root, detail=False)]
    except FileNotFoundError:
        return []
    logs = {n[: -len(PARTS)] if n.endswith(suffix + PARTS) else n for n in names}
    return sorted(f"{folder.rstrip('/')}/{n}" for n in logs if n.endswith(suffix))
