"""Where a run's batches come from (``train.feeds``): a set a worker can hold is held (``feed: memory``), a bigger
one, or one that ``pretokenize`` / ``length_bucketing`` reshape, is streamed through Ray Data; the plan says which
and why, and a config asking for what its other keys rule out is refused in one line before Ray starts."""

from __future__ import annotations

import pytest

from setformat.io import PinnedFile, PinnedSet
from train.config import ConfigError, TrainConfig
from train.feeds import MEMORY_FEED_MAX_BYTES, resolve_feed


def _config(**values) -> TrainConfig:
    return TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": "d", "batch_size": 8, **values})


def _set(*sizes: int) -> PinnedSet:
    return PinnedSet(path="s3://b/sets/sentences", kind="sentences",
                     files=tuple(PinnedFile(f"s3://b/sets/sentences/part-{i}.parquet", size, f"ETag={i}")
                                 for i, size in enumerate(sizes)))


@pytest.mark.parametrize(("values", "sizes", "feed", "why"), [
    ({}, (MEMORY_FEED_MAX_BYTES // 2, MEMORY_FEED_MAX_BYTES // 2), "memory", "512.0 MiB of parquet held"),
    ({}, (MEMORY_FEED_MAX_BYTES // 2, MEMORY_FEED_MAX_BYTES // 2 + 1), "stream", "over the 512 MiB"),
    ({"pretokenize": True}, (10,), "stream", "pretokenize / length_bucketing"),
    ({"length_bucketing": 4}, (10,), "stream", "pretokenize / length_bucketing"),
    ({"num_workers": [1, 2], "max_failures": 3}, (2 * MEMORY_FEED_MAX_BYTES,), "memory", "an elastic run's"),
    ({"feed": "stream"}, (10,), "stream", "the config's"),
    ({"feed": "memory"}, (2 * MEMORY_FEED_MAX_BYTES,), "memory", "the config's"),
])
def test_auto_holds_what_fits_and_streams_the_rest(values, sizes, feed, why):
    cfg = _config(**values)
    cfg.validate()
    chosen, reason = resolve_feed(cfg, _set(*sizes))
    assert chosen == feed and why in reason


@pytest.mark.parametrize(("values", "message"), [
    ({"feed": "disk"}, "feed must be one of auto, memory, stream, got 'disk'"),
    ({"feed": "memory", "pretokenize": True}, "pretokenize and length_bucketing work on Ray Data's stream"),
    ({"feed": "memory", "length_bucketing": 2}, "pretokenize and length_bucketing work on Ray Data's stream"),
    ({"feed": "stream", "num_workers": [1, 2], "max_failures": 3}, "an elastic run takes every global batch"),
])
def test_a_feed_the_config_rules_out_is_refused_in_one_line(values, message):
    with pytest.raises(ConfigError) as caught:
        _config(**values).validate()
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_plan_says_the_feed_and_why(demo_sets, demo_tiny_bert, tmp_path):
    """The demo's sentences are held: the plan's lines and ``run_plan.json`` say so, with the size."""
    from train.plan import make_plan

    cfg = _config(data=str(demo_sets[0]), model=str(demo_tiny_bert), storage_path=str(tmp_path), run_name="feed")
    plan = make_plan(cfg)
    assert plan.config.feed == plan.worker_config.feed == "memory"
    line = next(line for line in plan.lines() if "feed:" in line)
    assert line.startswith("[train]   feed: memory, the set's ") and " KiB of parquet held by each worker" in line
    assert plan.record()["feed"]["used"] == "memory"
    streamed = make_plan(_config(data=str(demo_sets[0]), model=str(demo_tiny_bert), storage_path=str(tmp_path),
                                run_name="feed", feed="stream"))
    assert streamed.worker_config.feed == "stream" and streamed.record()["feed"] == {"used": "stream",
                                                                                     "why": "the config's"}
