"""structcse: knowledge-structured contrastive sentence embeddings on Ray.

The Python API (``docs/api.md``; ``structcse/api.py``)::

    import structcse

    model = structcse.load("demo_out/runs/gausscse/model")      # a trained model with its method's heads
    model.encode(["A man plays a guitar."])                     # numpy (1, d) float32
    model.similarity("A man plays.", "Someone plays.")          # the method's own pair score
    table = structcse.read_set("demo_out/sets", "sentences")    # pyarrow.Table, checked whole
    structcse.evaluate(model, "sts", data="demo_out/world/sts", split="test")   # {"spearman": ..., ...}

``import structcse`` is cheap: torch, sentence-transformers and pyarrow are imported by the first call
that needs them.
"""

from __future__ import annotations

import infra.logs  # noqa: F401  (its import gives the project's loggers their handler: infra.logs.project_lines)
from structcse.api import (  # light: each imports what it needs when called
    evaluate,
    load,
    read_manifest,
    read_set,
    tasks,
)
from structcse.version import __version__

__all__ = ["TrainedModel", "__version__", "evaluate", "load", "read_manifest", "read_set", "tasks"]


def __getattr__(name):  # structcse.TrainedModel, imported (with torch) only when asked for
    if name == "TrainedModel":
        from score.model import TrainedModel

        return TrainedModel
    raise AttributeError(f"module 'structcse' has no attribute {name!r}")
