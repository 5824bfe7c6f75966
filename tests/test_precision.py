"""train.precision: the encoder's weights cast once per step (``mixed_precision: bf16_weights``).

The copies, the flushes into the masters' ``.grad`` and GradCache's per-chunk sums are checked exactly
with copies of the masters' own dtype (float64: the same arithmetic as the plain step), then bf16
against autocast over fp32 weights, the reference it replaces: one step's gradients and a loss curve.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.test_train_scale import assert_grads_equal, build, grads_of, numpy_batch, tiny_model  # noqa: F401
from train.precision import Bf16Weights
from train.step import forward_backward


@pytest.mark.parametrize("method", ["simcse_sup", "ease"])
@pytest.mark.parametrize("chunk", [None, 3])
def test_copies_in_the_masters_dtype_give_the_plain_step_exactly(tiny_model, method, chunk):
    trainee = build(tiny_model, method, dropout=0.1)
    batch = trainee.method.collate(numpy_batch(method, 12, seed=2), trainee.encoder)
    torch.manual_seed(5)
    ref_loss, _ = forward_backward(trainee, trainee, batch, chunk_size=chunk)
    reference = grads_of(trainee)
    trainee.zero_grad(set_to_none=True)

    copies = Bf16Weights(trainee.encoder, dtype=torch.float64)
    for _ in range(2):  # the second step reuses the copies and the flat gradient buffers
        torch.manual_seed(5)
        loss, _ = forward_backward(trainee, trainee, batch, chunk_size=chunk, bf16_weights=copies)
        got = grads_of(trainee)
        trainee.zero_grad(set_to_none=True)
        assert float(loss) == pytest.approx(float(ref_loss), rel=1e-12)
        assert_grads_equal(got, reference, 1e-12, (method, chunk))
    assert all(p is m for p, m in zip(trainee.encoder.parameters(), copies.masters))  # the masters are back


@pytest.fixture()
def float32_trainee(tiny_model):
    def make(method: str = "simcse_sup", dropout: float = 0.0):
        trainee = build(tiny_model, method, dropout=dropout).float()
        trainee.method.loss_tile = 0
        return trainee

    return make


def autocast():
    return torch.autocast("cpu", dtype=torch.bfloat16)


def test_bf16_weights_keep_the_loss_curve_of_fp32_master_autocast(float32_trainee):
    """40 AdamW steps on the same batches and dropout masks: the bf16-weight run's losses stay within
    1% of autocast's (both fp32 master weights), and both curves fall. (One step's gradients are no test: the
    untrained tiny BERT embeds all sentences almost alike, and in bf16 even autocast's gradient has a
    cosine near 0 with the fp32 one.)"""

    def curve(bf16: bool) -> list[float]:
        trainee = float32_trainee(dropout=0.1)
        optimizer = torch.optim.AdamW(trainee.parameters(), lr=3e-3)
        copies = Bf16Weights(trainee.encoder) if bf16 else None
        losses = []
        for step in range(40):
            batch = trainee.method.collate(numpy_batch("simcse_sup", 16, seed=step % 2), trainee.encoder)
            torch.manual_seed(1000 + step)
            loss, _ = forward_backward(trainee, trainee, batch, autocast=autocast, bf16_weights=copies)
            torch.nn.utils.clip_grad_norm_(trainee.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(float(loss))
        assert all(p.dtype == torch.float32 for p in trainee.parameters())  # the masters stay fp32
        return losses

    reference, bf16 = np.array(curve(False)), np.array(curve(True))
    assert reference[-8:].mean() < 0.93 * reference[:2].mean()  # it moves: the comparison is not of flat lines
    assert np.abs(bf16 - reference).max() <= 0.01 * reference.max(), np.abs(bf16 - reference).max()


def test_a_half_encoder_runs_without_autocast(float32_trainee):
    """Inside the step the encoder's LayerNorms see bf16, not autocast's float32 upcasts."""
    trainee = float32_trainee()
    batch = trainee.method.collate(numpy_batch("simcse_sup", 4), trainee.encoder)
    seen = []
    hook = torch.nn.modules.module.register_module_forward_hook(
        lambda module, args, out: seen.append(out.dtype) if isinstance(module, torch.nn.LayerNorm) else None)
    try:
        with Bf16Weights(trainee.encoder).step(), autocast():
            trainee.method.embed(trainee.encoder, batch)
    finally:
        hook.remove()
    assert seen and set(seen) == {torch.bfloat16}


def test_bf16_weights_is_a_gpu_setting():
    """On CPU the bf16 LayerNorm and embedding gradients are summed in bf16 (autocast keeps them in float32):
    the config refuses it there, naming the setting to use."""
    from train.config import ConfigError, TrainConfig

    base = {"method": "simcse_unsup", "model": "m", "data": "d", "mixed_precision": "bf16_weights"}
    with pytest.raises(ConfigError, match="mixed_precision=bf16_weights needs use_gpu=true"):
        TrainConfig.from_dict(base).validate()
    assert TrainConfig.from_dict({**base, "use_gpu": True}).validate().mixed_precision == "bf16_weights"


def test_auto_is_bf16_weights_on_a_bf16_gpu_and_none_elsewhere(monkeypatch):
    """What a user gets without flags: ``mixed_precision: auto`` (every config's default)."""
    from train.config import TrainConfig
    from train.precision import resolve_precision

    cfg = TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": "d"}).validate()
    assert cfg.mixed_precision == "auto"
    assert resolve_precision("auto", torch.device("cpu")) == "none"
    assert resolve_precision("bf16", torch.device("cpu")) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert resolve_precision("auto", torch.device("cuda")) == "bf16_weights"
    assert resolve_precision("auto", torch.device("cuda"), dtype="float64") == "none"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    assert resolve_precision("auto", torch.device("cuda")) == "none"  # a V100 or T4: bf16 only emulated
    # float64 exactness runs keep the default
    assert TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": "d",
                                  "dtype": "float64"}).validate().mixed_precision == "auto"


def test_collated_ahead_keeps_order_and_raises_at_the_failing_batch():
    import threading

    from train.batch import collated_ahead

    threads = set()

    def collate(batch):
        threads.add(threading.current_thread().name)
        if batch == 3:
            raise ValueError("row 3 is bad")
        return batch * 10

    got = []
    with pytest.raises(ValueError, match="row 3 is bad"):
        for batch, tensors in collated_ahead(iter(range(6)), collate):
            got.append((batch, tensors))
    assert got == [(0, 0), (1, 10), (2, 20)]
    assert all(name.startswith("collate-ahead") for name in threads)
    assert list(collated_ahead(iter(range(3)), lambda b: -b)) == [(0, 0), (1, -1), (2, -2)]
    # a consumer that stops early (the loop at its last step) leaves no thread behind
    stream = collated_ahead(iter(range(100)), lambda b: b)
    next(stream)
    stream.close()
    assert not any(t.name.startswith("collate-ahead") for t in threading.enumerate())
