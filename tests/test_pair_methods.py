"""SimCSE-sup, GaussCSE and RSE as Ray Train jobs on the demo world's NLI pairs with a tiny BERT.

(SimCSE-sup's job is the fault-tolerance run in test_train_scale.py.) GaussCSE runs on 2
workers with GradCache, RSE with Ray Data tokenization and length bucketing, so the scale
options run inside real jobs too.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from train.config import TrainConfig


@pytest.fixture(scope="module")
def pair_bert(demo_pair_sets, tmp_path_factory):
    from train.methods.base import read_set
    from train.tiny_bert import build_tiny_bert

    out, _ = demo_pair_sets
    table = read_set(out / "nli_triplets", ["premise", "entailment", "contradiction"])
    texts = [t for c in table.column_names for t in table[c].to_pylist()]
    return str(build_tiny_bert(texts, tmp_path_factory.mktemp("pair_bert"), hidden_size=32, intermediate_size=64))


def _cfg(sets, model, tmp_path, **kw):
    base = dict(
        model=model, data=str(sets), batch_size=16, max_len=32, lr=1e-4, max_steps=4,
        checkpoint_every_steps=0, log_every_steps=0, storage_path=str(tmp_path / "runs"),
    )
    return TrainConfig.from_dict({**base, **kw}, "test")


def test_gausscse_on_two_workers_with_grad_cache(ray_session, demo_pair_sets, pair_bert, tmp_path):
    from train.methods import load_method_heads
    from train.run import run

    sets, _ = demo_pair_sets
    out = run(_cfg(sets, pair_bert, tmp_path, method="gausscse", pooling="cls_raw", num_workers=2,
                   cpus_per_worker=0.5, chunk_size=4, gausscse={"variant": "ent+rev"}))
    assert out.metrics["step"] == 4 and math.isfinite(out.metrics["loss_gausscse"])
    assert 0.0 <= out.metrics["premise_broader"] <= 1.0
    heads = load_method_heads(out.model_path)
    assert heads.name == "gausscse" and heads.options.variant == "ent+rev"
    g = heads.gaussian(torch.randn(3, 32))
    assert g.mu.shape == g.var.shape == (3, 32) and bool((g.var > 0).all())


def test_rse_with_ray_data_tokenization_and_length_buckets(ray_session, demo_pair_sets, pair_bert, tmp_path):
    from train.methods import load_method_heads
    from train.methods.base import read_set
    from train.run import run

    sets, _ = demo_pair_sets
    relations = sorted(set(read_set(sets / "relation_triples", ["relation"])["relation"].to_pylist()))
    cfg = _cfg(sets, pair_bert, tmp_path, method="rse", pooling="cls", pretokenize=True, length_bucketing=2)
    out = run(cfg)
    assert out.metrics["step"] == 4 and math.isfinite(out.metrics["loss_rse"])
    heads = load_method_heads(out.model_path)
    assert heads.relation_names == relations and heads.relations.table.shape == (len(relations), 32)
    torch.manual_seed(0)
    scores = heads.relation_scores(torch.randn(2, 32), torch.randn(2, 32))
    assert scores.shape == (2, len(relations))
    state = torch.load(Path(out.checkpoint_path) / "state.pt", map_location="cpu", weights_only=False)
    groups = state["optimizer"]["param_groups"]  # the relation table has its own group: lr 1e-2, no decay
    assert [g["initial_lr"] for g in groups] == [pytest.approx(1e-2), pytest.approx(1e-4), pytest.approx(1e-4)]
    assert groups[0]["weight_decay"] == 0.0 and len(groups[0]["params"]) == 1
