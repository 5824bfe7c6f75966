"""Tiled losses (``train.methods.tiled``) equal the dense ones, for every method and option.

Each loss is computed three ways in float32 — the dense oracle (``tests/dense_losses.py``: every logit
materialised, then cross-entropy), this project's dense path (``tile=0``) and its tiles (4 rows x 4
columns over 11 anchors and 11 or 22 candidates: no multiple of the tile) — and the loss and the
gradient of every input must agree to 1e-5. Then every method's whole step (encoder, heads, relation
table, entity table) is compared tiled against dense, in float64: an untrained tiny BERT embeds every
sentence almost alike, so its encoder gradients are differences of near-equal terms, which float32
rounding alone moves by ~1e-3 (``tests/test_train_scale.py`` says the same).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests import dense_losses as dense
from train.config import TrainConfig
from train.methods.dsbats import dsbats_loss
from train.methods.ease import entity_loss
from train.methods.pair_losses import Gaussian, gausscse_loss, rse_loss, simcse_supervised_loss
from train.methods.simcse_unsup import simcse_loss

N, D, TILE, TAU = 11, 16, 4, 0.05
ROWS = torch.tensor([0, 3, 4, 7, 10])  # a worker's anchors among the global rows


def _inputs(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g).requires_grad_() for s in shapes]


def _gaussians(count, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        mu = torch.randn(N, D, generator=g).requires_grad_()
        logvar = (0.5 * torch.randn(N, D, generator=g)).requires_grad_()
        out.append((mu, logvar))
    return out


def assert_same(fn_tiled, fn_dense, inputs, what):
    """Loss and every input's gradient of ``fn_tiled(tile)`` for tile in (TILE, 0) equal ``fn_dense()``'s."""
    want = fn_dense()
    want_grads = torch.autograd.grad(want, inputs)
    scale = max(float(g.abs().max()) for g in want_grads)
    for tile in (TILE, 0):
        got = fn_tiled(tile)
        assert torch.isfinite(got), (what, tile)
        assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-5, abs=1e-6), (what, tile)
        for i, (g, w) in enumerate(zip(torch.autograd.grad(got, inputs), want_grads)):
            err = float((g - w).abs().max())
            assert err <= 1e-5 * scale, (what, tile, i, err / scale)


def test_info_nce_unsupervised_simcse():
    z1, z2 = _inputs((N, D), (N, D))
    assert_same(lambda t: simcse_loss(z1, z2, TAU, t), lambda: dense.info_nce(z1, z2, torch.arange(N), TAU),
                [z1, z2], "simcse_unsup")


@pytest.mark.parametrize("negatives,weight,rows", [(False, 0.0, None), (True, 0.0, None), (True, 1.5, None),
                                                  (True, 0.7, ROWS), (False, 0.0, ROWS)])
def test_simcse_supervised_and_mnrl(negatives, weight, rows):
    a, p, n = _inputs((N, D), (N, D), (N, D), seed=1)
    neg = n if negatives else None
    inputs = [a, p, n] if negatives else [a, p]
    assert_same(lambda t: simcse_supervised_loss(a, p, neg, TAU, weight, rows=rows, tile=t),
                lambda: dense.simcse_supervised_loss(a, p, neg, TAU, weight, rows=rows), inputs,
                ("simcse_sup", negatives, weight))


@pytest.mark.parametrize("negatives,valid,weighted,rows", [(False, False, False, None), (True, False, False, None),
                                                          (True, True, False, None), (True, True, True, ROWS),
                                                          (False, False, True, None)])
def test_rse(negatives, valid, weighted, rows):
    h_i, r_k, h_j, h_n = _inputs((N, D), (N, D), (N, D), (N, D), seed=2)
    mask = torch.tensor([i % 3 != 0 for i in range(N)]) if valid else None
    weights = torch.linspace(0.2, 2.0, N) if weighted else None
    neg = h_n if negatives else None
    inputs = [h_i, r_k, h_j] + ([h_n] if negatives else [])
    kw = dict(hard_negative_valid=mask, weights=weights, rows=rows)
    assert_same(lambda t: rse_loss(h_i, r_k, h_j, neg, TAU, tile=t, **kw),
                lambda: dense.rse_loss(h_i, r_k, h_j, neg, TAU, **kw), inputs, ("rse", negatives, valid, weighted))


@pytest.mark.parametrize("form", ["kl_sum", "kl_mean", "per_dim"])
@pytest.mark.parametrize("variant", ["ent", "ent+con", "ent+rev", "ent+con+rev"])
def test_gausscse(variant, form):
    params = _gaussians(3, seed=3)
    inputs = [t for pair in params for t in pair]
    rows = ROWS if variant == "ent+con+rev" else None
    kw = dict(temperature=TAU, variant=variant, form=form, rows=rows)

    def gaussians():  # a fresh graph from the parameters for every call
        return [Gaussian(mu, torch.exp(lv)) for mu, lv in params]

    assert_same(lambda t: gausscse_loss(*gaussians(), tile=t, **kw), lambda: dense.gausscse_loss(*gaussians(), **kw),
                inputs if "con" in variant else inputs[:4], ("gausscse", variant, form))


@pytest.mark.parametrize("mask", [True, False])
@pytest.mark.parametrize("weight", [0.0, 1.0])
def test_ease_entity_loss(mask, weight):
    z, pos, neg = _inputs((N, D), (N, D), (N, D), seed=4)
    pos_ids = torch.tensor([1, 2, 1, 3, 4, 2, 5, 6, 1, 7, 8])  # duplicates of positives ...
    neg_ids = torch.tensor([9, 1, 10, 2, 11, 12, 3, 13, 14, 15, 1])  # ... and positives among hard negatives
    kw = dict(temperature=0.1, hard_negative_weight=weight, mask_duplicates=mask)
    assert_same(lambda t: entity_loss(z, pos, neg, pos_ids, neg_ids, tile=t, **kw),
                lambda: dense.entity_loss(z, pos, neg, pos_ids, neg_ids, **kw), [z, pos, neg], ("ease", mask, weight))


@pytest.mark.parametrize("in_denominator", [False, True])
@pytest.mark.parametrize("clusters", [None, "mixed", "one"])
def test_dsbats(in_denominator, clusters):
    a, p, n = _inputs((N, D), (N, D), (N, D), seed=5)
    ids = None if clusters is None else (torch.arange(N) % 4 if clusters == "mixed" else torch.zeros(N, dtype=torch.long))
    other = p if clusters else None
    mask = None if ids is None else ids[:, None] == ids[None, :]
    inputs = [a, p, n]
    assert_same(lambda t: dsbats_loss(a, p, n, TAU, in_denominator, other, ids, ids, tile=t),
                lambda: dense.dsbats_loss(a, p, n, TAU, in_denominator, other, mask), inputs,
                ("dsbats", in_denominator, clusters))


def test_tiles_under_bf16_autocast_agree_with_the_dense_loss():
    """Under autocast with bf16 embeddings (what the encoder gives), the tiles' products run in bf16 as the
    dense path's do: the two agree to bf16 rounding, and the gradients come back in the inputs' dtype."""
    z1, z2 = _inputs((N, D), (N, D), seed=6)
    views = [z.detach().bfloat16().requires_grad_() for z in (z1, z2)]
    results = {}
    for tile in (0, TILE):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = simcse_loss(*views, TAU, tile)
        results[tile] = (float(loss.detach()), torch.autograd.grad(loss, views))
    (dense_loss, dense_grads), (tiled_loss, tiled_grads) = results[0], results[TILE]
    assert tiled_loss == pytest.approx(dense_loss, rel=2e-2)
    scale = max(float(g.abs().max()) for g in dense_grads)
    for got, want in zip(tiled_grads, dense_grads):
        assert got.dtype == torch.bfloat16 and float((got.float() - want.float()).abs().max()) <= 3e-2 * scale


# ------------------------------------------------------------------ whole steps: encoder and heads

# (method, its option section): every method, and the options that change which blocks a loss has
STEPS = [
    ("simcse_unsup", {}),
    ("simcse_sup", {}), ("simcse_sup", {"hard_negatives": False}), ("simcse_sup", {"hard_negative_weight": 1.0}),
    ("aspectcse", {}),
    ("ease", {}), ("ease", {"mask_duplicate_entities": False}),
    ("rse", {}), ("rse", {"weighted_loss": True}), ("rse", {"hard_negatives": False}),
    ("gausscse", {}), ("gausscse", {"similarity": "per_dim", "variant": "ent+con"}),
    ("gausscse", {"similarity": "kl_mean", "variant": "ent+rev"}),
    ("dsbats", {}), ("dsbats", {"negatives": "reversed+other_clusters", "pair_representation": "concat_mlp"}),
    ("dsbats", {"positive_in_denominator": True}),
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    from tests.test_train_scale import _texts
    from train.tiny_bert import build_tiny_bert

    folder = build_tiny_bert(
        _texts(np.random.default_rng(0), 200), tmp_path_factory.mktemp("tiled_bert"), vocab_size=200, hidden_size=32,
        num_layers=2, num_heads=2, intermediate_size=64, max_position_embeddings=32,
    )
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "attn_implementation": "eager"}))
    return str(folder)


@pytest.mark.parametrize("method,options", STEPS, ids=[f"{m}-{'-'.join(f'{k}={v}' for k, v in o.items())}"
                                                       for m, o in STEPS])
def test_every_method_step_tiled_equals_dense(tiny_model, method, options, monkeypatch):
    from tests.test_train_scale import NUM_ENTITIES, RELATIONS, grads_of, numpy_batch
    from train.loop import build_trainee
    from train.methods import tiled

    tiled_calls = []
    apply = tiled._TiledLogSumExp.apply
    monkeypatch.setattr(tiled._TiledLogSumExp, "apply", lambda *a: tiled_calls.append(1) or apply(*a))

    cfg = TrainConfig.from_dict({"method": method, "model": tiny_model, "data": "unused", "pooling": "cls",
                                 "dropout": 0.0, "max_len": 16, method: options})
    torch.manual_seed(0)
    trainee = build_trainee(cfg, {"num_entities": NUM_ENTITIES, "relations": RELATIONS}).double()
    numpy_rows = numpy_batch(method, N, seed=2)
    if method == "dsbats":
        numpy_rows["cluster"] = np.array([f"c{i % 3}" for i in range(N)], dtype=object)
    batch = trainee.method.collate(numpy_rows, trainee.encoder)
    results = {}
    for tile in (0, TILE):
        trainee.method.loss_tile = tile
        tiled_calls.clear()
        trainee.zero_grad(set_to_none=True)
        loss, _ = trainee(batch)
        loss.backward()
        results[tile] = (float(loss.detach()), grads_of(trainee))
        assert bool(tiled_calls) == (tile > 0)  # the tiles really ran (and the dense path did not tile)
    (dense_loss, dense_grads), (tiled_loss, tiled_grads) = results[0], results[TILE]
    assert tiled_loss == pytest.approx(dense_loss, rel=1e-12)
    assert set(tiled_grads) == set(dense_grads)
    heads = [name for name in dense_grads if name.startswith("method.")]
    assert bool(heads) == (method in ("ease", "rse", "gausscse") or options.get("pair_representation") == "concat_mlp")
    scale = max(float(g.abs().max()) for g in dense_grads.values())
    for name, want in dense_grads.items():
        err = float((tiled_grads[name] - want).abs().max())
        assert err <= 1e-9 * scale, (name, err / scale)
