"""What a run prints: Ray's warnings that matter, not every library's progress bars and load reports.

Two places, because a local Ray's workers inherit the driver's environment but a cluster's do not:

* ``quiet_local_ray()``: the driver, before it starts a local Ray. When stdout is not a terminal (a log
  file, CI, ``ray job submit``'s log), Ray Data's and Hugging Face's progress bars are off (each bar
  redraw was a line: a 12 s ingest printed 210). ``transformers`` logs errors only (its load report of
  an unused pooler on every worker start). Each is a ``setdefault``: a variable the user set wins.
* ``quiet_worker()``: every Ray Train worker and evaluation actor, wherever it runs: the same for the
  libraries already imported there, and sentence-transformers' INFO lines (Ray Train sets the root
  logger to INFO on its workers, so each save printed "Saving model to ...").
"""

from __future__ import annotations

import logging
import os
import sys


def quiet_local_ray() -> None:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if not sys.stdout.isatty():
        os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        if "ray.data" in sys.modules and os.environ["RAY_DATA_DISABLE_PROGRESS_BARS"] == "1":
            import ray.data

            ray.data.DataContext.get_current().enable_progress_bars = False  # its default was read at import


def quiet_worker() -> None:
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        if "TRANSFORMERS_VERBOSITY" not in os.environ:
            hf_logging.set_verbosity_error()
        if os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS", "1") == "1":
            hf_logging.disable_progress_bar()  # a worker's bars reach the driver's log as lines
