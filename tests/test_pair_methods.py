"""GaussCSE and SimCSE-sup as Ray Train jobs (local mode) on the demo world's NLI triplets.

RSE's job (Ray Data tokenization, length buckets, its relation table's own lr) is the
fault-tolerance run in test_train_scale.py; GradCache on 2 real workers is the EASE run in
test_train.py.
"""

from __future__ import annotations

import math

import pytest
import torch

from train.config import TrainConfig


@pytest.fixture(scope="module")
def pair_bert(demo_pair_sets, tmp_path_factory):
    from setformat.io import read_table
    from train.tiny_bert import build_tiny_bert

    out, _ = demo_pair_sets
    table = read_table(out / "nli_triplets", ["premise", "entailment", "contradiction"])
    texts = [t for c in table.column_names for t in table[c].to_pylist()]
    return str(build_tiny_bert(texts, tmp_path_factory.mktemp("pair_bert"), hidden_size=32, intermediate_size=64))


def _cfg(sets, model, tmp_path, **kw):
    base = dict(
        model=model, data=str(sets), batch_size=16, max_len=32, lr=1e-4, max_steps=4,
        checkpoint_every_steps=0, log_every_steps=0, storage_path=str(tmp_path / "runs"),
    )
    return TrainConfig.from_dict({**base, **kw}, "test")


def test_gausscse_job_with_grad_cache_in_bf16(ray_session, demo_pair_sets, pair_bert, tmp_path):
    from train.methods import load_method_heads
    from train.run import run

    sets, _ = demo_pair_sets
    out = run(_cfg(sets, pair_bert, tmp_path, method="gausscse", pooling="cls_raw", num_workers=0,
                   chunk_size=4, mixed_precision="bf16", gausscse={"variant": "ent+rev"}))
    assert out.metrics["step"] == 4 and math.isfinite(out.metrics["loss_gausscse"])
    assert 0.0 <= out.metrics["premise_broader"] <= 1.0
    heads = load_method_heads(out.model_path)
    assert heads.name == "gausscse" and heads.options.variant == "ent+rev"
    g = heads.gaussian(torch.randn(3, 32))
    assert g.mu.shape == g.var.shape == (3, 32) and bool((g.var > 0).all())


def test_simcse_sup_job_with_hard_negatives(ray_session, demo_pair_sets, pair_bert, tmp_path):
    from sentence_transformers import SentenceTransformer

    from train.saved_models import load
    from train.run import run

    sets, _ = demo_pair_sets
    out = run(_cfg(sets, pair_bert, tmp_path, method="simcse_sup", pooling="cls", num_workers=0,
                   simcse_sup={"hard_negatives": True, "hard_negative_weight": 0.5}))
    assert out.metrics["step"] == 4 and math.isfinite(out.metrics["loss"])
    model = load(out.model_path)
    texts = ["a man plays a guitar", "a woman reads a book"]
    ours = model.encode(texts)
    st = SentenceTransformer(out.model_path, device="cpu").encode(texts, convert_to_tensor=True)
    assert torch.allclose(torch.as_tensor(ours), st, atol=1e-5)  # the saved folder is a plain SentenceTransformer
