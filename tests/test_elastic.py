"""Elastic training (``num_workers: [min, max]``): the rows of a global step are a function of (seed, epoch,
step) only, each worker takes its share of them, config errors come before Ray starts,
and a checkpoint of another world size is a resize said in the
log, the run folder, the summary and the card. The lost node, the shrink, the growth back and the
weights against a one-worker run on a two-node Ray cluster are ``bench/elastic.py``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from setformat.io import read_table


def test_the_rows_of_a_global_step_are_the_same_at_every_world_size():
    from train.global_order import GlobalOrder

    order = GlobalOrder(num_rows=100, batch_size=12, seed=3)
    assert order.steps_per_epoch == 8
    for step in (0, 7, 8, 20):
        batch = order.batch(step)
        assert len(batch) == 12 and len(set(batch.tolist())) == 12
        for world in (1, 2, 3, 4, 6):
            assert np.concatenate([order.share(step, rank, world) for rank in range(world)]).tolist() == batch.tolist()
    epoch0 = np.concatenate([order.batch(s) for s in range(8)])
    assert len(set(epoch0.tolist())) == 96  # an epoch draws without replacement
    assert order.batch(8).tolist() != order.batch(0).tolist()  # each epoch its own permutation
    again = GlobalOrder(num_rows=100, batch_size=12, seed=3)
    assert again.batch(20).tolist() == order.batch(20).tolist()  # a restarted worker asks for the same rows
    assert GlobalOrder(100, 12, 3, shuffle=False).batch(1).tolist() == list(range(12, 24))
    with pytest.raises(ValueError, match="does not split evenly over 5"):
        order.share(0, 0, 5)


@pytest.mark.parametrize(("values", "message"), [
    ({"num_workers": [3, 2]}, "min 3 is more than max 2"),
    ({"num_workers": [0, 2]}, "needs at least 1 Ray Train worker"),
    ({"num_workers": [2, 4], "batch_size": 64}, "does not split evenly over 3 worker(s)"),
    ({"num_workers": [1, 2], "max_failures": 0}, "set max_failures"),
    ({"num_workers": [1, 2], "length_bucketing": 4}, "set length_bucketing=0"),
    ({"num_workers": [1, 2, 4]}, "a number or [min, max]"),
])
def test_elastic_config_errors_are_named_before_ray_starts(values, message, tmp_path):
    from train.config import ConfigError, TrainConfig

    cfg = TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": str(tmp_path), "batch_size": 24,
                                 "max_failures": 3, **values})
    with pytest.raises(ConfigError) as caught:
        cfg.validate()
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_each_worker_takes_its_share_of_the_global_batch_from_the_set(demo_sets):
    """``GlobalFeed`` on 1, 2 and 4 workers: the shares of every step, in rank order, are the global batch's
    rows as the set holds them, from any resume point, and no batch past the run's last step."""
    from train.config import TrainConfig
    from train.feeds import GlobalFeed

    sentences = read_table(demo_sets[0] / "sentences", ["sentence"])["sentence"].to_pylist()
    cfg = TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": "d", "batch_size": 8, "seed": 5,
                                 "num_workers": [1, 4], "max_failures": 3})
    feeds = {w: [GlobalFeed(cfg, str(demo_sets[0] / "sentences"), ["sentence"], len(sentences), r, w)
                 for r in range(w)] for w in (1, 2, 4)}
    steps_per_epoch = feeds[1][0].steps_per_epoch
    assert steps_per_epoch == len(sentences) // 8
    for epoch, skip in ((0, 0), (0, steps_per_epoch - 3), (1, 2)):
        expected = [[sentences[i] for i in feeds[1][0].order.batch(epoch * steps_per_epoch + s)]
                    for s in range(skip, steps_per_epoch)]
        for world, ranks in feeds.items():
            shares = [list(r.epoch(epoch, skip)) for r in ranks]
            assert [sum((s[k]["sentence"].tolist() for s in shares), []) for k in range(len(expected))] == expected
    feeds[2][0].stop_at = 3
    assert len(list(feeds[2][0].epoch(0, 1))) == 2  # steps 1 and 2


# An elastic run through Ray Train (every worker's sample log is its share of GlobalOrder's batch at every
# step, the summary says the run was elastic) is bench/elastic.py's (a): a two-node Ray, a node lost, the
# shrink and the growth back, the same rows as a 1-worker run at all 400 steps. It left the suite to keep
# the suite under 10 minutes on 2 cores; the pieces it wires are tested above and below.


def test_a_checkpoint_of_another_world_size_is_a_resize_said_in_the_log_the_run_folder_and_the_card(tmp_path, capsys):
    from train.finish import _elastic_facts
    from train.loop import elastic_resize
    from train.model_card import card_section
    from train.reporting import record_resize
    from train.config import TrainConfig

    class Points:
        def __init__(self):
            self.logged = []

        def log(self, step, values):
            self.logged.append((step, values))

    assert elastic_resize(None, 2, 0) is None  # a fresh start
    assert elastic_resize({"world_size": 2, "reported_at": 1.0}, 2, 40) is None  # a restart at the same size
    # a 1-worker group replaced before its first checkpoint: the 2-worker group after it resumes from a checkpoint
    # written at 2, and is still a resize from 1 (the groups' own log, train.reporting.record_group)
    from train.reporting import record_group

    groups = tmp_path / "groups"
    assert [record_group(str(groups), world, step) for world, step in ((2, 0), (1, 40), (2, 40))] == [None, 2, 1]
    grown = elastic_resize({"world_size": 2, "reported_at": 1.0}, 2, 40, last_group=1)
    assert (grown["from"], grown["to"]) == (1, 2) and "capacity returned" in grown["why"]
    assert elastic_resize({"world_size": 1, "reported_at": 1.0}, 2, 40, last_group=2) is None
    shrink = elastic_resize({"world_size": 2, "reported_at": 100.0}, 1, 40)
    assert shrink["from"] == 2 and shrink["to"] == 1 and "lost" in shrink["why"]
    points = Points()
    record_resize(str(tmp_path), shrink, points)
    record_resize(str(tmp_path), elastic_resize({"world_size": 1, "reported_at": 200.0}, 2, 60), points)
    assert "[train] resized: 2 -> 1 worker(s) at step 40" in capsys.readouterr().out
    assert points.logged == [(40, {"world_size": 1}), (60, {"world_size": 2})]
    lines = [json.loads(line) for line in (tmp_path / "resizes.jsonl").read_text().splitlines()]
    assert [(r["step"], r["from"], r["to"]) for r in lines] == [(40, 2, 1), (60, 1, 2)]
    assert lines[0]["seconds_lost"] > 0

    cfg = TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": "d", "num_workers": [1, 2],
                                 "max_failures": 3})

    class Plan:
        elastic, config = True, cfg

    facts = _elastic_facts(Plan, str(tmp_path))
    assert facts["num_workers"] == [1, 2] and len(facts["resizes"]) == 2
    card = card_section(cfg, [], "latest", {"step": 80}, facts)
    assert "**Elastic:** 1 to 2 workers" in card and "2→1 at step 40, 1→2 at step 60" in card


def test_dtype_is_float32_or_float64_without_mixed_precision():
    """``dtype: float64`` is for exactness checks (bench/elastic.py); it runs without mixed precision."""
    from train.config import ConfigError, TrainConfig

    base = {"method": "simcse_unsup", "model": "m", "data": "d"}
    assert TrainConfig.from_dict({**base, "dtype": "float64"}).validate().dtype == "float64"
    with pytest.raises(ConfigError, match="dtype 'float16' is not one of"):
        TrainConfig.from_dict({**base, "dtype": "float16"}).validate()
    with pytest.raises(ConfigError, match="dtype=float64 runs without mixed precision"):
        TrainConfig.from_dict({**base, "dtype": "float64", "mixed_precision": "bf16"}).validate()
