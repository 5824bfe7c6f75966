"""Registry of evaluation tasks the CLI can run.

A task is a name, the splits it knows, a cheap ``check_data`` that raises a
clear ``FileNotFoundError``/``ValueError`` before any model is loaded, and
``run(model, data, split, batch_size) -> dict``. Adding a task (nli,
retrieval, srsd, ...) is one module plus one ``register`` call here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from eval import sts


@dataclass(frozen=True)
class EvalTask:
    name: str
    description: str
    splits: tuple[str, ...]
    check_data: Callable[[str, str], object]
    run: Callable[..., dict]


TASKS: dict[str, EvalTask] = {}


def register(task: EvalTask) -> EvalTask:
    TASKS[task.name] = task
    return task


def get_task(name: str) -> EvalTask:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; available: {', '.join(sorted(TASKS))}")
    return TASKS[name]


register(EvalTask(
    name="sts",
    description="STS Benchmark (SentEval layout): Spearman of cosine similarity vs gold scores",
    splits=("dev", "test", "train"),
    check_data=sts.sts_split_path,
    run=lambda model, data, split, batch_size=64: sts.evaluate_sts(model, data, split, batch_size=batch_size),
))
