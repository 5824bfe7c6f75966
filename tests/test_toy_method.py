"""Adding a method is one file and one config: a toy method registered HERE, in the test, runs through
``python -m train``'s run (one real Ray Train worker), ``python -m eval`` and ``python -m eval report``
without any other module knowing its name.

The toy method's facts live in its class only: its citation (the model card cites it), its pair score
(a negative Euclidean distance: ``python -m eval --task sts_all`` scores with it and names it), its dev
metric (``sts_spearman``: the run selects checkpoints by it) and its own evaluation task (``nli``: the
report's method table). The figures are checked against values computed here from the saved encoder's
embeddings with numpy and scipy.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from train.distributed import gather_with_grad, local_labels
from train.methods import register
from train.methods.base import Method
from train.methods.contrastive import cos_logits

pytestmark = pytest.mark.end_to_end  # bench/end_to_end.py runs it; the default run leaves it out

CITATION = "Toy pairs (this test, 2026)"


@register("toy_pairs")
class ToyPairs(Method):
    """(premise, entailment) pairs, InfoNCE over the global batch; pairs scored by −‖h_a − h_b‖."""

    citation = CITATION
    dev_metric = "sts_spearman"
    pair_score_name = "toy_negative_l2"
    eval_tasks = (("nli", "nli", {"auprc": "toy NLI AUPRC"}),)
    train_set = "nli_triplets"
    sets = {"nli_triplets": ["premise", "entailment"]}
    text_columns = ("premise", "entailment")

    @dataclasses.dataclass
    class Options:
        scale: float = 1.0

    def loss_from_embeddings(self, emb, batch):
        rows = local_labels(emb["premise"].shape[0], emb["premise"].device)
        logits = cos_logits(emb["premise"], gather_with_grad(emb["entailment"]), self.temperature)
        loss = self.options.scale * torch.nn.functional.cross_entropy(logits, rows)
        return loss, {"loss_toy": loss.detach()}

    def pair_score(self, h_a, h_b):
        return -(h_a.float() - h_b.float()).norm(dim=-1)


@pytest.fixture(scope="module")
def toy_run(ray_session, demo_world, demo_pair_sets, demo_tiny_bert, tmp_path_factory):
    from train.config import load_config
    from train.run import run

    folder = tmp_path_factory.mktemp("toy")
    config = folder / "toy_pairs.yaml"  # the method's one config
    config.write_text("method: toy_pairs\npooling: mean\nbatch_size: 16\nmax_len: 32\nlr: 1.0e-4\n"
                      "toy_pairs:\n  scale: 1.0  # the toy paper's value\n")
    sets, _ = demo_pair_sets
    cfg = load_config(config, [f"model={demo_tiny_bert}", f"data={sets}", f"dev_data={demo_world.sts_dir}",
                               "max_steps=4", "checkpoint_every_steps=2", "log_every_steps=0", "num_workers=1",
                               "cpus_per_worker=0.5", f"storage_path={folder / 'runs'}", "run_name=toy"])
    return run(cfg), folder


def _embed(model_path, texts):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_path), local_files_only=True).encode(texts, convert_to_numpy=True)


def test_a_method_in_one_file_trains_evaluates_and_reports(toy_run, demo_world, capsys):
    from scipy.stats import spearmanr
    from sklearn.metrics import average_precision_score

    from eval.cli import main as eval_main

    outcome, folder = toy_run
    assert outcome.metrics["step"] in (2, 4) and np.isfinite(outcome.metrics["loss_toy"])
    rows = [line.split("\t") for line in (demo_world.sts_dir / "sts-dev.csv").read_text(encoding="utf-8").splitlines()]
    s1, s2, gold = [r[5] for r in rows], [r[6] for r in rows], [float(r[4]) for r in rows]
    a, b = _embed(outcome.model_path, s1).astype(np.float64), _embed(outcome.model_path, s2).astype(np.float64)
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    # the selected checkpoint's dev figure is the cosine Spearman of the model it saved
    assert outcome.metrics["dev_spearman"] == pytest.approx(spearmanr(cos, gold).statistic, abs=1e-9)
    method_file = json.loads(open(f"{outcome.model_path}/structcse_method.json", encoding="utf-8").read())
    assert method_file["method"] == "toy_pairs" and method_file["options"] == {"scale": 1.0}
    card = open(f"{outcome.model_path}/README.md", encoding="utf-8").read()
    assert f"`toy_pairs` — {CITATION}" in card and "**Selected by:** `dev_spearman`" in card

    # eval: the STS table scores with the toy's own pair score, −‖h_a − h_b‖, and names it
    assert eval_main(["--task", "sts_all", "--split", "dev", "--data", str(demo_world.sts_dir),
                      "--model", outcome.model_path]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["similarity"] == "toy_negative_l2" and result["method"] == "toy_pairs"
    by_hand = spearmanr(-np.linalg.norm(a - b, axis=1), gold).statistic
    assert result["STSBenchmark"] == pytest.approx(by_hand, abs=1e-6)
    assert result["sets"]["STSBenchmark"]["cosine"] == pytest.approx(spearmanr(cos, gold).statistic, abs=1e-9)

    # the report: the toy's row, and its own task in a table of its own
    run_dir = outcome.model_path.rsplit("/", 1)[0]
    assert eval_main(["report", f"toy={run_dir}", "--sts", str(demo_world.sts_dir), "--split", "dev",
                      "--nli", str(demo_world.nli_dir), "--no-published", "--out", str(folder / "report")]) == 0
    report = (folder / "report.md").read_text(encoding="utf-8")
    assert "toy_pairs: its own tasks" in report and "toy NLI AUPRC" in report
    scored = json.loads((folder / "report.json").read_text())["results"]["toy"]
    assert scored["sts_all"]["similarity"] == "toy_negative_l2"
    premises, hypotheses, labels = ((demo_world.nli_dir / f"{part}.test").read_text(encoding="utf-8").splitlines()
                                    for part in ("s1", "s2", "labels"))
    p, h = _embed(outcome.model_path, premises), _embed(outcome.model_path, hypotheses)
    cos = (p * h).sum(1) / np.linalg.norm(p, axis=1) / np.linalg.norm(h, axis=1)
    y = [label.strip() == "entailment" for label in labels]
    assert scored["nli"]["auprc"] == pytest.approx(average_precision_score(y, cos), abs=1e-6)


def test_an_own_pair_score_needs_its_own_name():
    """TrainedModel.similarity uses the method's pair_score only when pair_score_name is not "cosine": a
    method that overrides pair_score without naming it is refused when its class is defined."""
    with pytest.raises(TypeError, match="Unnamed overrides pair_score: give it a pair_score_name"):
        class Unnamed(Method):
            def pair_score(self, h_a, h_b):
                return -(h_a - h_b).norm(dim=-1)
