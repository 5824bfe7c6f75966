"""Encoding a large evaluation set on a pool of Ray actors (Ray Data ``map_batches``), in input order.

A task that scores many sentences (STS 'all' over every year, STC's 20k
StackOverflow titles, a retrieval corpus) can hand the encoding to ``actors``
Ray actors, each holding the model once: the distinct sentences are sorted by
length (so a batch pads little), cut into blocks, encoded by whichever actor is
free, and put back in input order (:class:`EncodingActor`, each holding the model).
The vectors are the ones the model's own ``encode`` gives (``TrainedModel.encode``: the pooled vectors the method heads
take), so every task scores them exactly as it does in one process; they
fill the model's cache, and the task then runs unchanged.

Resources: one CPU per actor by default, never all of the cluster's CPUs (Ray
Data's own read tasks need one: a pool that takes them all hangs), and a
fraction of a GPU per actor where the cluster has GPUs (``gpus_per_actor``,
default: the cluster's GPUs shared evenly).
"""

from __future__ import annotations

import numpy as np

ROWS_PER_BLOCK = 1024


class EncodingActor:
    """Ray Data ``map_batches`` actor: the model at ``model_path`` loaded once; a block of texts in, its vectors out."""

    def __init__(self, model_path: str, batch_size: int = 64, device: str | None = None):
        from eval.models import load_trained
        from infra.logs import quiet_worker

        quiet_worker()
        self.batch_size = batch_size
        self.model = load_trained(model_path, device=device)

    def __call__(self, batch: dict) -> dict:
        """``{"index", "text"}`` -> ``{"index", "embedding"}`` (the model's pooled vectors: its cache's contents)."""
        texts = [str(t) for t in batch["text"]]
        return {"index": batch["index"], "embedding": self.model.pooled(texts, self.batch_size)}


def pool_resources(actors: int, gpus_per_actor: float | None = None) -> dict:
    """``{"num_cpus", "num_gpus", "size"}`` for ``actors`` actors on the connected cluster (a clear error if it cannot host them)."""
    import ray

    if actors < 1:
        raise ValueError(f"actors must be >= 1, got {actors}")
    total = ray.cluster_resources()
    cpus, gpus = float(total.get("CPU", 0)), float(total.get("GPU", 0))
    if gpus_per_actor is None:
        gpus_per_actor = min(1.0, gpus / actors) if gpus else 0.0
    num_cpus = 1.0 if gpus_per_actor == 0 else 0.5
    if actors * num_cpus > max(cpus - 1, 0.5):
        raise ValueError(f"{actors} encoding actors of {num_cpus:g} CPU each do not fit beside Ray Data's read "
                         f"tasks on a cluster of {cpus:g} CPUs (leave one free): use at most "
                         f"{max(int((cpus - 1) // num_cpus), 1)}")
    return {"num_cpus": num_cpus, "num_gpus": gpus_per_actor, "size": actors}


def encode_on_actors(model_path: str, texts: list[str], *, actors: int = 1, batch_size: int = 64,
                     device: str | None = None, gpus_per_actor: float | None = None) -> np.ndarray:
    """(N, d) float32 ``encode`` of ``texts`` (in their order) by a pool of ``actors`` Ray actors."""
    import ray

    from infra.ray_local import ensure_ray

    ensure_ray()
    if not texts:
        raise ValueError("no texts to encode")
    resources = pool_resources(actors, gpus_per_actor)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    items = [{"index": i, "text": texts[i]} for i in order]
    ds = ray.data.from_items(items, override_num_blocks=max(1, -(-len(items) // ROWS_PER_BLOCK)))
    out = ds.map_batches(EncodingActor, batch_size=ROWS_PER_BLOCK, batch_format="numpy",
                         compute=ray.data.ActorPoolStrategy(size=resources["size"]),
                         num_cpus=resources["num_cpus"], num_gpus=resources["num_gpus"] or None,
                         fn_constructor_kwargs={"model_path": model_path, "batch_size": batch_size, "device": device})
    embeddings: np.ndarray | None = None
    for batch in out.iter_batches(batch_size=None, batch_format="numpy"):
        vectors = np.asarray(batch["embedding"], dtype=np.float32)
        if embeddings is None:
            embeddings = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        embeddings[np.asarray(batch["index"])] = vectors
    return embeddings


def fill_cache(model, texts: list[str], *, actors: int, batch_size: int = 64) -> None:
    """Encode ``texts`` not yet in ``model``'s cache on ``actors`` actors and add them (``model.enable_cache()`` first)."""
    if model.path is None:
        raise ValueError("encoding on actors needs a model loaded from a folder or hub name (each actor loads it)")
    model.enable_cache()
    todo = [t for t in dict.fromkeys(texts) if t not in model.cache]
    if todo:
        model.cache.update(zip(todo, encode_on_actors(model.path, todo, actors=actors, batch_size=batch_size)))
