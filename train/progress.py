"""A progress bar with ETA on a terminal; plain ``[train] step …`` lines everywhere else.

Ray forwards a worker's output to the driver line by line, prefixed with the worker's name, so a bar
drawn by the worker (carriage returns) would arrive as a line per redraw. On a terminal the driver
draws it instead: rank 0 writes ``progress.json`` into the local run folder (atomically, at most
``EVERY_S`` apart) and :class:`ProgressBar`, a driver thread, redraws a tqdm bar from it. The worker
then leaves out its plain progress lines (the reports at checkpoints stay). Not a terminal (a job
log, CI, ``| tee``), or a run folder in remote storage: no bar, the plain lines as before.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from infra.storage import is_uri

PROGRESS_FILE = "progress.json"
EVERY_S = 0.5


def wants_bar(stream=None, run_dir: str = "") -> bool:
    stream = stream or sys.stderr
    return not is_uri(run_dir) and bool(getattr(stream, "isatty", lambda: False)())


class ProgressWriter:
    """Rank 0's side: the current step, at most every ``EVERY_S`` (always the last)."""

    def __init__(self, path: str, total: int, start: int):
        self.path, self.total, self.last = Path(path), total, 0.0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.write(start, None, force=True)

    def write(self, step: int, loss=None, force: bool = False) -> None:
        """``loss``: a number, or a callable read only when the file is written (a device sync)."""
        now = time.monotonic()
        if not force and step < self.total and now - self.last < EVERY_S:
            return
        self.last = now
        loss = loss() if callable(loss) else loss
        from infra.publish import write_text_atomic

        write_text_atomic(self.path, json.dumps({"step": step, "total": self.total, "loss": loss, "time": time.time()}))


class ProgressBar:
    """The driver's side: a tqdm bar redrawn from the progress file until ``close``."""

    def __init__(self, path: str, stream=None, poll_s: float = 0.25):
        from tqdm import tqdm

        self.path, self.poll_s, self.stop = Path(path), poll_s, threading.Event()
        self.path.unlink(missing_ok=True)  # a finished run's file is not this run's progress
        self.bar = tqdm(total=None, unit="step", file=stream or sys.stderr, dynamic_ncols=True, desc="train")
        self.thread = threading.Thread(target=self._follow, name="train-progress", daemon=True)
        self.thread.start()

    def _read(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):  # not there yet, or replaced while read
            return None

    def _update(self) -> None:
        state = self._read()
        if state is None:
            return
        if self.bar.total != state["total"]:
            self.bar.total = state["total"]  # the loop knows the steps: the first state says them
        if state["step"] > self.bar.n:  # a resumed run's first state jumps to the step it resumed at
            self.bar.update(state["step"] - self.bar.n)
        if state.get("loss") is not None:
            self.bar.set_postfix(loss=f"{state['loss']:.4g}", refresh=False)

    def _follow(self) -> None:
        while not self.stop.wait(self.poll_s):
            self._update()

    def close(self) -> int:
        """Stop following, draw the last state; returns the last step shown."""
        self.stop.set()
        self.thread.join(timeout=5)
        self._update()
        self.bar.close()
        return self.bar.n
