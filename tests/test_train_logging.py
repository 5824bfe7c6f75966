"""What a run says about itself: the loss it logs is every worker's mean, each learning rate is named by its
group, and an elastic run refuses the settings under which a resized run would train another model."""

from __future__ import annotations

import math

import pytest
import torch


def _mean_on_two_ranks(rank: int, store_path: str, out_path: str) -> None:
    import torch.distributed as dist

    from train.reporting import Meter

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=2)
    try:
        meter = Meter(examples_per_step=8)
        for step in range(3):  # rank 0's losses 1, 2, 3; rank 1's 11, 12, 13
            meter.add(torch.tensor(1.0 + step + 10 * rank), {})
        mean = meter.global_mean()
        summary = meter.summary()["loss"]
        with open(f"{out_path}.{rank}", "w") as f:
            f.write(f"{mean} {summary} {meter.peek()}")
    finally:
        dist.destroy_process_group()


def test_the_logged_loss_is_the_mean_over_every_worker(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_mean_on_two_ranks, args=(str(tmp_path / "store"), str(tmp_path / "out")), nprocs=2, join=True)
    for rank in (0, 1):
        mean, summary, local = map(float, (tmp_path / f"out.{rank}").read_text().split())
        assert mean == pytest.approx(7.0) and summary == pytest.approx(7.0)  # (1+2+3+11+12+13) / 6
        assert local == pytest.approx(2.0 + 10 * rank)  # what rank 0 alone logged before


def test_each_learning_rate_is_logged_under_its_group(tmp_path):
    from transformers import get_linear_schedule_with_warmup

    from train.config import TrainConfig
    from train.loop import build_trainee, param_groups
    from train.reporting import learning_rates
    from train.tiny_bert import build_tiny_bert

    model = build_tiny_bert(["a premise here", "an entailment there", "a contradiction"] * 5, tmp_path / "bert")
    cfg = TrainConfig.from_dict({"method": "gausscse", "model": str(model), "data": "-", "pooling": "cls",
                                 "lr": 3e-5, "gausscse": {"head_lr": 1e-3}})
    trainee = build_trainee(cfg, {})
    optimizer = torch.optim.AdamW(param_groups(trainee, 0.0, cfg.lr), lr=cfg.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, 0, 10)
    rates = learning_rates(optimizer, scheduler)
    assert rates == {"lr_gausscse": pytest.approx(1e-3), "lr": pytest.approx(3e-5)}
    assert not math.isclose(rates["lr"], scheduler.get_last_lr()[0])  # the first group is the heads'


@pytest.mark.parametrize("setting", [{"compile": True}, {"unpad": False}])
def test_an_elastic_run_refuses_a_forward_without_keyed_dropout(setting):
    from train.config import ConfigError, TrainConfig

    cfg = TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": "d", "num_workers": [1, 2],
                                 "max_failures": 3, "batch_size": 8, **setting})
    with pytest.raises(ConfigError, match="a resized run would train another model"):
        cfg.validate()
    TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": "d", "num_workers": 2,
                           **setting}).validate()  # a fixed-size run keeps them
