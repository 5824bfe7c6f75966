"""Where a worker's batches come from, epoch by epoch: ``feed.epoch(epoch, skip)`` yields the numpy batches
of an epoch from its batch ``skip`` on (a resumed run starts mid-epoch), at most ``feed.steps_per_epoch``.

* :class:`GlobalFeed` (``feed: memory``; every elastic run): each worker holds the training set's columns
  (Arrow, in memory) and takes its share of the global batch ``train.global_order`` names for step s: each
  epoch a seeded permutation of the whole set, the same rows at step s whatever the number of workers. A
  resumed epoch starts at its batch ``skip`` without reading the ones before.
* :class:`StreamFeed` (``feed: stream``, for sets too big to hold): the worker's shard of the Ray dataset
  (the whole set in one seeded permutation, :func:`drawn_from_whole_set`), streamed in batches of
  ``batch_size // world`` (``drop_last`` so every all-gather has one shape), reshuffled each epoch in a local
  buffer, optionally regrouped by length; a resumed epoch reads and drops its first ``skip`` batches.

``feed: auto`` (:func:`resolve_feed`) holds sets up to :data:`MEMORY_FEED_MAX_BYTES` of parquet.
"""

from __future__ import annotations

import itertools

from train.batch import length_buckets
from train.global_order import GlobalOrder, SampleLog, SetRows


MEMORY_FEED_MAX_BYTES = 512 * 2**20  # of parquet: a few times that in Arrow, in every worker


def resolve_feed(cfg, train_set) -> tuple[str, str]:
    """``(memory | stream, why)`` for ``cfg.feed`` and the training set as the driver pinned it
    (``setformat.io.PinnedSet``)."""
    if cfg.feed != "auto":
        return cfg.feed, "the config's"
    if cfg.elastic:
        return "memory", "an elastic run's"
    if cfg.pretokenize or cfg.length_bucketing:
        return "stream", "pretokenize / length_bucketing work on Ray Data's stream"
    size = sum(f.size or 0 for f in train_set.files)
    if size <= MEMORY_FEED_MAX_BYTES:
        shown = f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"
        return "memory", f"the set's {shown} of parquet held by each worker"
    return "stream", (f"the set's {size / 2**20:.0f} MiB of parquet are over the {MEMORY_FEED_MAX_BYTES >> 20} MiB "
                      "a worker holds")


def drawn_from_whole_set(ds, cfg):
    """A fixed-size run's rows in one seeded permutation of the whole set (Ray Data's all-to-all
    ``random_shuffle``), then each epoch reshuffled in every worker's local buffer.

    Sets are written in page order (``sentences``, ``entity_pairs``: a page's rows, or a sentence once per link,
    side by side): a local buffer of 10,000 rows alone leaves a batch of 64 with ~7.7 pairs of rows from one page
    and ~9% of EASE batches with a sentence twice; a global permutation 0.15 pairs (bench/batches.py). SimCSE and
    EASE train with a global random sampler; elastic runs draw a global permutation each epoch
    (``train.global_order``). ``shuffle_buffer: 0``: the set's own order."""
    return ds.random_shuffle(seed=cfg.seed) if cfg.shuffle_buffer else ds


class StreamFeed:
    def __init__(self, cfg, shard, num_rows: int, rank: int, world: int, bucketing_column: str | None):
        self.cfg, self.shard, self.rank, self.bucketing_column = cfg, shard, rank, bucketing_column
        self.local_batch = cfg.batch_size // world
        self.steps_per_epoch = (num_rows // world) // self.local_batch

    def epoch(self, epoch: int, skip: int):
        cfg = self.cfg
        batches = self.shard.iter_batches(
            batch_size=self.local_batch,
            drop_last=True,
            batch_format="numpy",
            local_shuffle_buffer_size=cfg.shuffle_buffer or None,
            local_shuffle_seed=(cfg.seed + epoch) if cfg.shuffle_buffer else None,
        )
        if cfg.length_bucketing:
            batches = length_buckets(batches, self.bucketing_column, cfg.length_bucketing,
                                     cfg.seed + 1000 * epoch + self.rank)
        return itertools.islice(batches, skip, self.steps_per_epoch)  # the first `skip` were trained on before


class GlobalFeed:
    def __init__(self, cfg, set_path: str, columns: list[str], num_rows: int, rank: int, world: int):
        self.rows = SetRows(set_path, columns)
        if len(self.rows) != num_rows:
            raise ValueError(f"the set at {getattr(set_path, 'path', set_path)} has {len(self.rows)} rows, the run "
                             f"was planned on {num_rows}")
        self.order = GlobalOrder(num_rows, cfg.batch_size, cfg.seed, shuffle=cfg.shuffle_buffer > 0)
        self.steps_per_epoch = self.order.steps_per_epoch
        self.rank, self.world = rank, world
        self.sample_log: SampleLog | None = None  # the loop's, once it knows the step it resumes at
        self.stop_at: int | None = None  # the run's last step: no batch (nor sample-log line) past it

    def epoch(self, epoch: int, skip: int):
        for i in range(skip, self.steps_per_epoch):
            step = epoch * self.steps_per_epoch + i
            if self.stop_at is not None and step >= self.stop_at:
                return
            ids = self.order.share(step, self.rank, self.world)
            if self.sample_log is not None:
                self.sample_log.add(step, ids)
            yield self.rows.take(ids)
