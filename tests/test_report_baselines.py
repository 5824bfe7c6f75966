"""Every table of results carries the untrained base, the difference to it and a mark on a model that is not
above it; each table says its split and similarity (issue 39). Built from given rows: no model, no Ray."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest


# ---------------------------------------------------------------- eval.report: the base row, Δ and ≤ base

def test_a_table_from_given_rows_has_the_base_row_a_delta_column_and_marks_a_model_below_it():
    from eval.report import below_base_line, compare_with_base, format_markdown

    rows = [{"model": "base", "sts_dev": 0.6238, "srsd": 0.30},
            {"model": "simcse best trial", "sts_dev": 0.5693, "srsd": 0.35},
            {"model": "ease", "sts_dev": 0.70, "srsd": 0.25},
            {"model": "dsbats", "sts_dev": 0.50, "srsd": 0.60}]
    metrics = [("sts_dev", "STS dev"), ("srsd", "SRSD acc")]
    shown, columns, below = compare_with_base(rows, "base", metrics, own={"dsbats": ["srsd"]},
                                              base_label="base")
    md = format_markdown(shown, [("model", "model"), *metrics, *columns]).splitlines()
    assert md[0] == "| model | STS dev | SRSD acc | Δ STS dev | Δ SRSD acc | vs base |"
    assert md[2] == "| base | 0.6238 | 0.3000 | - | - | base |"
    assert md[3] == "| simcse best trial | 0.5693 | 0.3500 | -0.0545 | +0.0500 | ≤ base: STS dev |"
    assert md[4] == "| ease | 0.7000 | 0.2500 | +0.0762 | -0.0500 | ≤ base: SRSD acc |"
    assert md[5] == "| dsbats | 0.5000 | 0.6000 | -0.1238 | +0.3000 | above base |"  # judged on its own metric
    assert [(b["model"], b["metric"]) for b in below] == [("simcse best trial", "STS dev"), ("ease", "SRSD acc")]
    line = below_base_line(below, "base")
    assert line.startswith("not above the untrained base (base): simcse best trial (STS dev 0.5693 vs 0.6238)")
    assert below_base_line([], "base").startswith("every one of the models is above the untrained base")
    # no base row: the table as it was
    same, columns, below = compare_with_base(rows, "absent", metrics)
    assert (same, columns, below) == (rows, [], [])


# ---------------------------------------------------------------- python -m eval report

def _report_args(tmp_path: Path, split: str = "dev"):
    from eval.scoreboard import build_parser

    return build_parser().parse_args(["m", "--sts", str(tmp_path), "--split", split, "--nli", str(tmp_path),
                                      "--aspects", str(tmp_path), "--out", str(tmp_path / "eval_report")])


def _entry(label: str, **extra) -> dict:
    return {"label": label, "model": f"/models/{label}", "run": None, "config": None, **extra}


def test_eval_report_has_a_base_row_deltas_and_names_its_split_similarity_and_json(tmp_path):
    from eval.scoreboard import write

    args = _report_args(tmp_path)
    entries = [_entry("base encoder", base=True), _entry("simcse best trial"), _entry("rse"), _entry("aspectcse")]
    rows = [{"model": "base encoder", "method": "-", "STSBenchmark": 0.6238, "sts_avg": 0.6238, "similarity": "cosine"},
            {"model": "simcse best trial", "method": "simcse_unsup", "STSBenchmark": 0.5693, "sts_avg": 0.5693,
             "similarity": "cosine"},
            {"model": "rse", "method": "rse", "STSBenchmark": 0.6771, "sts_avg": 0.6771,
             "similarity": "rse_relational"},
            {"model": "aspectcse", "method": "aspectcse", "STSBenchmark": 0.40, "sts_avg": 0.40,
             "similarity": "cosine"}]
    results = [{}, {},
               {"link_prediction": {"MRR": 0.45, "Hits@1": 0.3, "Hits@10": 0.8, "relations": ["entailment"]}},
               {"aspect_retrieval": {"P@10": 0.30, "MRR@10": 0.5}}]
    base_results = {"link_prediction": {"MRR": 0.40, "Hits@1": 0.25, "Hits@10": 0.7},
                    "aspect_retrieval": {"P@10": 0.30, "MRR@10": 0.45}}
    md_path, json_path, charts, below = write(args, entries, rows, results, base_results)
    lines = md_path.read_text(encoding="utf-8").splitlines()

    # the main table: split and similarity on the line under the heading, naming the file with the field
    assert lines[2].startswith("Split: STS dev split") and "similarity: each model's own" in lines[2]
    assert "`similarity` of each row in eval_report.json" in lines[2] and " in report.json" not in lines[2]
    header = next(i for i, line in enumerate(lines) if line.startswith("| model | method |"))
    assert lines[header] == ("| model | method | STSBenchmark | STS avg | STS similarity | Δ STS avg | vs base |")
    assert lines[header + 2] == "| base encoder | - | 0.6238 | 0.6238 | cosine | - | base |"
    assert "| simcse best trial | simcse_unsup | 0.5693 | 0.5693 | cosine | -0.0545 | ≤ base: STS avg |" in lines
    assert "| rse | rse | 0.6771 | 0.6771 | rse_relational | +0.0533 | above base |" in lines

    # published test-split figures beside dev-split scores: said so
    published = lines.index("## Published figures (reference rows: the papers' numbers, not measured here)")
    assert lines[published + 2].startswith("Split: the papers' test splits")
    assert "on the dev split: not comparable" in lines[published + 2]

    # each method's table: the base first, Δ of its first metric, ≤ base on a model that only matches it
    rse = lines.index("## rse: its own tasks")
    assert "cos(h_1, h_j)" in lines[rse + 2] and "Split: test" in lines[rse + 2]
    assert lines[rse + 4] == "| model | MRR | Hits@1 | Hits@10 | Δ MRR | vs base |"
    assert lines[rse + 6] == "| base encoder (untrained base) | 0.4000 | 0.2500 | 0.7000 | - | base |"
    assert lines[rse + 7] == "| rse | 0.4500 | 0.3000 | 0.8000 | +0.0500 | above base |"
    aspect = lines.index("## aspectcse: its own tasks")
    assert "cosine" in lines[aspect + 2] and "test" in lines[aspect + 2]
    assert lines[aspect + 6] == "| base encoder (untrained base) | 0.3000 | 0.4500 | - | base |"
    assert lines[aspect + 7] == "| aspectcse | 0.3000 | 0.5000 | +0.0000 | ≤ base: P@10 |"

    # not above the base: on STS avg for a model without tasks of its own, on its own task for one with
    assert sorted((b["model"], b["metric"]) for b in below) == [("aspectcse", "P@10"),
                                                                 ("simcse best trial", "STS avg")]
    saved = json.loads(json_path.read_text())
    assert saved["base"] == "base encoder" and len(saved["below_base"]) == 2
    assert saved["rows"][0]["similarity"] == "cosine"

    # one STS set: no average chart repeating it
    assert not any(p.name.endswith("_sts_avg.png") for p in charts)
    assert any(p.name.endswith("_STSBenchmark.png") for p in charts)
    assert any(line.startswith("No STS avg chart: the average is over one set (STSBenchmark)") for line in lines)


def test_gausscse_table_has_the_base_and_the_papers_length_baseline(tmp_path):
    from eval.scoreboard import method_tables

    rows = [{"model": "base", "method": "-"}, {"model": "gausscse", "method": "gausscse"}]
    results = [{}, {"nli": {"auprc": 0.55, "accuracy": 0.6},
                    "direction": {"sim_acc": 0.7, "det_acc": 0.65, "length_baseline_acc": 0.9}}]
    (title, table, columns, notes, below), = method_tables(rows, results, "base",
                                                          {"nli": {"auprc": 0.58, "accuracy": 0.61}})
    assert [r["model"] for r in table] == ["base (untrained base)",
                                           "length baseline (GaussCSE paper: the longer sentence is the premise)",
                                           "gausscse"]
    assert table[1]["direction (sim)"] == 0.9 and table[1]["vs_base"] == "paper's baseline"
    assert table[2]["delta_NLI AUPRC"] == pytest.approx(-0.03) and table[2]["vs_base"] == "≤ base: NLI AUPRC"
    assert any("the base: cosine" in n for n in notes) and [b["model"] for b in below] == ["gausscse"]


def test_a_base_named_by_the_run_folders_is_found(tmp_path):
    from eval.scoreboard import base_entry, build_parser, resolve

    base_model = tmp_path / "base"
    base_model.mkdir()
    runs = []
    for name in ("a", "b"):
        run = tmp_path / name
        run.mkdir()
        (run / "train_summary.json").write_text(json.dumps({"run_name": name, "model_path": str(run / "model"),
                                                            "config": {"model": str(base_model)}}))
        runs.append(str(run))
    entries = [resolve(r) for r in runs]
    base = base_entry(build_parser().parse_args([*runs, "--sts", "x"]), entries)
    assert base["base"] and base["model"] == str(base_model) and base["label"] == "base (untrained base)"
    assert base_entry(build_parser().parse_args([*runs, "--sts", "x", "--no-base"]), entries) is None
    named = base_entry(build_parser().parse_args([*runs, "--sts", "x", "--base", f"mine={base_model}"]), entries)
    assert named["label"] == "mine"


# ---------------------------------------------------------------- tune: search_report.md and the curves

def _result(trial_id: str, config: dict, curve: list[tuple[int, float]], path: Path):
    frame = pd.DataFrame({"examples_seen": [e for e, _ in curve], "dev_spearman": [v for _, v in curve],
                          "validated_step": [e // 32 for e, _ in curve]})
    return SimpleNamespace(config=config, metrics_dataframe=frame, metrics={"trial_id": trial_id},
                           path=str(path / f"train-{trial_id}"), error=None)


def _search(tmp_path: Path):
    from train.config import TrainConfig
    from tune.search import TuneSettings

    (tmp_path / "dev").mkdir()
    (tmp_path / "tune").mkdir()  # Tune's experiment folder
    (tmp_path / "dev" / "sts-dev.csv").write_text("g\tf\t2012\t1\t5.0\ta\tb\n")
    base = TrainConfig.from_dict({"method": "simcse_unsup", "model": "tiny", "data": "x", "pooling": "mean",
                                  "dev_data": str(tmp_path / "dev"), "batch_size": 32, "lr": 5e-4,
                                  "max_steps": 45, "checkpoint_every_steps": 15}).validate()
    settings = TuneSettings(search_space={"lr": {"loguniform": [1e-4, 2e-3]}, "batch_size": {"choice": [16, 32]}},
                            name="tune", storage_path=str(tmp_path))
    private = {"base": base.to_dict(), "storage_path": str(tmp_path / "trials"), "report_every_examples": 480,
               "max_examples": 1440, "max_failures": None}
    results = [_result("base0", {"lr": 5e-4, "batch_size": 32}, [(480, 0.52), (960, 0.55), (1440, 0.5501)], tmp_path),
               _result("other1", {"lr": 1.2e-3, "batch_size": 16}, [(480, 0.56), (960, 0.5693)], tmp_path)]
    return base, settings, private, results


def test_search_report_shows_the_untrained_encoder_and_the_base_config(tmp_path, monkeypatch):
    from tune import report

    base, settings, private, results = _search(tmp_path)
    drawn = {}
    real = report._plot_curves

    def plot(rows, metric, path, untrained=None, base_row=None):
        drawn.update(untrained=untrained, base=base_row["best"] if base_row else None)
        return real(rows, metric, path, untrained=untrained, base_row=base_row)

    monkeypatch.setattr(report, "_plot_curves", plot)
    outcome = report.write_search_report(results, base, settings, "dev_spearman", str(tmp_path / "tune"), private,
                                         max_t=1440,
                                         untrained={"score": 0.6238, "model": "tiny", "pooling": "mean"})
    text = (tmp_path / "tune" / "search_report.md").read_text()
    assert f"Split: dev (`{tmp_path / 'dev'}`)" in text
    assert "Untrained encoder (`tiny`, mean pooling, no training: every trial's step 0): dev_spearman **0.6238**." \
        in text
    assert "Base config (lr=0.0005, batch_size=32, trial `base0`): dev_spearman **0.5501**." in text
    assert ("The best trial is +0.0192 over the base config (0.5501); -0.0545 over the untrained encoder (0.6238): "
            "**≤ untrained") in text
    assert ("| trial | lr | batch_size | best dev_spearman | Δ vs untrained | Δ vs base config | vs untrained "
            "| at examples | examples seen | ended |") in text
    assert "| untrained encoder (no training) | - | - | 0.6238 | - | +0.0737 | untrained | 0 | 0 | - |" in text
    assert "| `other1` | 0.0012 | 16 | 0.5693 | -0.0545 | +0.0192 | ≤ untrained | 960 |" in text
    assert "| `base0` (base config) | 0.0005 | 32 | 0.5501 | -0.0737 | base | ≤ untrained | 1440 |" in text
    assert drawn == {"untrained": 0.6238, "base": 0.5501}
    assert (tmp_path / "tune" / "learning_curves.png").stat().st_size > 1000
    assert outcome.untrained["score"] == 0.6238 and outcome.base_config_score == pytest.approx(0.5501)
    assert outcome.baseline_line == ("best dev_spearman 0.5693: the best trial is +0.0192 over the base config "
                                     "(0.5501); -0.0545 over the untrained encoder (0.6238): ≤ untrained: the best "
                                     "trial's dev_spearman is not above the encoder it started from")


def test_search_report_says_when_the_untrained_encoder_was_not_scored(tmp_path):
    from tune.report import write_search_report

    base, settings, private, results = _search(tmp_path)
    outcome = write_search_report(results, base, settings, "dev_spearman", str(tmp_path / "tune"), private,
                                  max_t=1440,
                                  untrained={"score": None, "error": "RuntimeError: no pool"})
    text = (tmp_path / "tune" / "search_report.md").read_text()
    assert "Untrained encoder: not scored (RuntimeError: no pool)." in text
    assert "The best trial is +0.0192 over the base config (0.5501)." in text
    assert "| untrained encoder (no training) |" not in text
    assert outcome.baseline_line == "best dev_spearman 0.5693: the best trial is +0.0192 over the base config (0.5501)"


class _LocalPool:
    """The evaluation pool's ``score`` with its own scorer class (``tune.scorers.DevScorer``), in this process."""

    def __init__(self, metric_name: str, dev_data: str):
        from tune.scorers import DevScorer

        scorer = DevScorer(metric_name, dev_data)
        self.calls = 0

        def remote(target):
            self.calls += 1
            return scorer.score(target)

        self.score = SimpleNamespace(remote=remote)


def test_the_untrained_encoder_is_scored_by_the_search_pool_once(demo_world, tmp_path, monkeypatch):
    """The untrained encoder (the trials' step 0: the base model with the config's pooling) is scored by the
    search's scorer on the same dev data: the figure of that model scored directly; a continued search reads
    the kept score instead of scoring it again. (The pool's scorer in this process: no Ray.)"""
    import ray

    from score.dev_metrics import DEV_METRICS
    from train.config import TrainConfig
    from train.encoder import Encoder
    from train.saved_models import score_model_dir
    from train.tiny_bert import build_tiny_bert
    from tune.scorers import UNTRAINED_DIR, score_untrained_encoder

    lines = (demo_world.sts_dir / "sts-dev.csv").read_text(encoding="utf-8").splitlines()
    bert = build_tiny_bert([c for line in lines for c in line.split("\t")[5:7]], tmp_path / "bert")
    cfg = TrainConfig.from_dict({"method": "simcse_unsup", "model": str(bert), "data": "x",
                                 "dev_data": str(demo_world.sts_dir), "pooling": "mean", "max_len": 32,
                                 "batch_size": 16, "max_steps": 3}).validate()
    pool = _LocalPool("sts_spearman", str(demo_world.sts_dir))
    monkeypatch.setattr(ray, "get", lambda value, timeout=None: value)
    scored = score_untrained_encoder(pool, cfg, {}, str(tmp_path / "tune"), "dev_spearman")
    metric = DEV_METRICS["sts_spearman"]
    Encoder(str(bert), "mean", 32, None).save_sentence_transformer(tmp_path / "direct")
    direct = score_model_dir(metric, tmp_path / "direct", metric.read(str(demo_world.sts_dir)))
    assert scored["score"] == pytest.approx(direct, abs=1e-6) and scored["pooling"] == "mean"
    assert (tmp_path / "tune" / UNTRAINED_DIR / "model" / "modules.json").is_file()
    again = score_untrained_encoder(pool, cfg, {}, str(tmp_path / "tune"), "dev_spearman")
    assert again["score"] == scored["score"] and pool.calls == 1


def test_the_demo_table_has_the_base_first_deltas_its_split_and_similarity_and_the_best_per_column(tmp_path):
    from structcse.demo_pipeline import BASE_NAME, summary_line, write_demo_report

    rows = [{"model": BASE_NAME, "sts_dev": 0.6238, "sts_test": 0.60, "country_p10": 0.30, "industry_p10": 0.20,
             "srsd": 0.25},
            {"model": "aspectcse (multi-aspect union)", "sts_dev": 0.50, "sts_test": 0.48, "country_p10": 0.30,
             "industry_p10": 0.40, "srsd": 0.20},
            {"model": "dsbats (DSBATS4CL)", "sts_dev": 0.55, "sts_test": 0.52, "country_p10": 0.35,
             "industry_p10": 0.25, "srsd": 0.60},
            {"model": "simcse_unsup best trial", "sts_dev": 0.5693, "sts_test": 0.58, "country_p10": 0.31,
             "industry_p10": 0.21, "srsd": 0.26}]
    own = {"aspectcse (multi-aspect union)": ["country_p10", "industry_p10"], "dsbats (DSBATS4CL)": ["srsd"],
           "simcse_unsup best trial": ["sts_dev"]}
    shown, columns, below = write_demo_report(tmp_path / "report", rows, own)
    lines = (tmp_path / "report.md").read_text(encoding="utf-8").splitlines()
    assert lines[2].startswith("Split: the demo world's STS-B dev and test") and "Similarity: cosine" in lines[2]
    assert lines[4] == ("| model | STS dev Spearman | STS test Spearman | country P@10 | industry P@10 | SRSD acc "
                        "| Δ STS dev Spearman | Δ STS test Spearman | Δ country P@10 | Δ industry P@10 | Δ SRSD acc "
                        "| vs base |")
    assert lines[6] == f"| {BASE_NAME} | 0.6238 | 0.6000 | 0.3000 | 0.2000 | 0.2500 | - | - | - | - | - | base |"
    assert lines[7].endswith("| +0.0000 | +0.2000 | -0.0500 | ≤ base: country P@10 |")  # equal to the base
    assert lines[8].endswith("| above base |")
    assert lines[9].endswith("| ≤ base: STS dev Spearman |")
    assert "country P@10: dsbats (DSBATS4CL) (0.3500)" in lines[-1]
    line = summary_line(below, [{"model": "gausscse", "metric": "NLI AUPRC", "value": 0.5, "base": 0.55}])
    assert line == (f"not above the untrained base ({BASE_NAME}): aspectcse (multi-aspect union) (country P@10 "
                    "0.3000 vs 0.3000); simcse_unsup best trial (STS dev Spearman 0.5693 vs 0.6238); in "
                    "eval_report.md: gausscse (NLI AUPRC 0.5000 vs 0.5500)")
