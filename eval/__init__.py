"""Evaluation stage: load encoders, run evaluation tasks, write reports.

``python -m eval --model PATH_OR_NAME --task sts --data DIR --split dev``; tasks
``sts``, ``nli``, ``direction``, ``relational_sts``, ``link_prediction`` (``eval.tasks``).
Importing this package is cheap; torch and sentence-transformers load on use.
"""

import infra.logs  # noqa: F401  (its import gives the project's loggers their handler: infra.logs.project_lines)
from eval.models import load_encoder
from eval.sts import StsPairs, evaluate_sts, read_sts

__all__ = ["StsPairs", "evaluate_sts", "load_encoder", "read_sts"]
