"""A long-lived STS evaluator that Ray Tune trials call to score checkpoints.

``StsEvaluator`` is a plain class (usable in-process); ``start_evaluator``
runs it as a named, detached Ray actor, shared by every trial that asks for
the same name and namespace::

    actor = start_evaluator("data/stsb", "dev", name="sts-dev", namespace="tune")
    ray.get(actor.score.remote("/trial/checkpoint_000/model"))  # {"dev_spearman": 0.84}
    stop_evaluator("sts-dev", "tune")

The split is read once, in ``__init__``; each ``score`` loads the model folder
it is given (see ``eval.models.load_encoder``) and evaluates it.
"""

from __future__ import annotations

from pathlib import Path

from eval.models import load_encoder
from eval.sts import read_sts, score_pairs


class StsEvaluator:
    """Scores model folders on one STS split read once."""

    def __init__(self, folder: str, split: str = "dev", batch_size: int = 64, device: str | None = None):
        self.split = split
        self.batch_size = batch_size
        self.device = device
        self.pairs = read_sts(folder, split)

    def ready(self) -> int:
        """Number of pairs loaded (lets a caller wait for construction)."""
        return len(self.pairs)

    def score(self, model_dir: str) -> dict:
        """``{"<split>_spearman": float}``, e.g. ``{"dev_spearman": 0.8672}``."""
        model = load_encoder(model_dir, device=self.device)
        result = score_pairs(model, self.pairs, batch_size=self.batch_size)
        return {f"{self.split}_spearman": result["spearman"]}


def start_evaluator(folder: str | Path, split: str, name: str, namespace: str, num_cpus: float = 0,
                    num_gpus: float = 0, batch_size: int = 64):
    """Create (or reuse, by name) the detached evaluator actor; waits until it has read the data.

    A local ``folder`` is made absolute, since the actor runs in another
    process; on a cluster it must be a path every node can read.
    """
    import ray

    local = Path(folder).expanduser()
    folder = str(local.resolve()) if local.exists() else str(folder)
    actor = ray.remote(StsEvaluator).options(
        name=name, namespace=namespace, lifetime="detached", get_if_exists=True,
        num_cpus=num_cpus, num_gpus=num_gpus,
    ).remote(folder, split, batch_size)
    ray.get(actor.ready.remote(), timeout=600)  # reading a dev set takes seconds; a hang must not be silent
    return actor


def stop_evaluator(name: str, namespace: str) -> bool:
    """Kill the named evaluator; False when there was none."""
    import ray

    try:
        actor = ray.get_actor(name, namespace=namespace)
    except ValueError:
        return False
    ray.kill(actor)
    return True
