"""score/: the one reader of each evaluation format and the one scorer behind a dev figure and an eval figure.

A run's ``dev_spearman`` (``score.dev_metrics``, checkpoint selection and Tune) and ``python -m eval --task sts
--split dev`` read the same file through the same reader and score it the same way: on a file with bad rows
they give the same number, and that number is the Spearman computed here without the project (scipy over
numpy cosines of the encoder's own embeddings, on the rows this test knows to be good). No Ray.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

GOOD = [("a man is playing a guitar", "a man plays the guitar", 4.8),
        ("a woman is slicing an onion", "a man is playing a flute", 0.2),
        ("a dog runs in the park", "a dog is running on grass", 3.6),
        ("the stock market fell today", "kids are playing football", 0.0),
        ("a child rides a horse", "a kid is riding a pony", 4.0),
        ("two men are fighting", "two people are cooking", 1.0)]


def _row(genre, s1, s2, score):
    return f"{genre}\tf\t2012\t1\t{score}\t{s1}\t{s2}\n"


@pytest.fixture(scope="module")
def sts_folder(tmp_path_factory):
    """sts-dev.csv: the six good rows with four bad ones between them (lines 2, 4, 6, 8) and a blank line."""
    folder = tmp_path_factory.mktemp("sts")
    lines = [_row("g", *GOOD[0]),
             _row("g", "a score that is not a number", "x", "n/a"),  # line 2
             _row("g", *GOOD[1]),
             "g\tf\t2012\t1\t3.0\tonly one sentence\n",  # line 4: 6 fields
             _row("g", *GOOD[2]),
             _row("g", "a score above the scale", "x", "7.5"),  # line 6
             _row("g", *GOOD[3]),
             _row("g", " ", "an empty first sentence", "2.0"),  # line 8
             _row("g", *GOOD[4]),
             "\n",  # a blank line is not a row
             _row("g", *GOOD[5])]
    (folder / "sts-dev.csv").write_text("".join(lines), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def st_model(tmp_path_factory):
    from train.encoder import Encoder
    from train.tiny_bert import build_tiny_bert
    import torch

    texts = [t for a, b, _ in GOOD for t in (a, b)] * 3
    bert = build_tiny_bert(texts, tmp_path_factory.mktemp("bert"), vocab_size=200, hidden_size=32, num_layers=1,
                           num_heads=2, intermediate_size=64)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("st") / "model"
    Encoder(str(bert), pooling="mean", max_len=32).eval().save_sentence_transformer(folder)
    return folder


def test_the_sts_reader_skips_counts_and_names_bad_rows(sts_folder):
    from score.sts_data import read_dev_file

    pairs = read_dev_file(sts_folder)
    assert list(zip(pairs.sentences1, pairs.sentences2, pairs.scores)) == GOOD
    assert (pairs.skipped_rows, pairs.skipped_lines) == (4, [2, 4, 6, 8])
    assert read_dev_file(sts_folder / "sts-dev.csv").scores == pairs.scores  # the file itself reads the same


def test_dev_spearman_and_eval_sts_dev_are_one_number_on_a_file_with_bad_rows(sts_folder, st_model, capsys):
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer

    from eval.cli import main as eval_main
    from score.dev_metrics import DEV_METRICS
    from train.saved_models import score_model_dir

    metric = DEV_METRICS["sts_spearman"]
    dev_figure = score_model_dir(metric, st_model, metric.read(str(sts_folder)))

    assert eval_main(["--task", "sts", "--split", "dev", "--data", str(sts_folder), "--model", str(st_model)]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (result["n_pairs"], result["skipped_rows"], result["skipped_lines"]) == (6, 4, [2, 4, 6, 8])
    assert result["spearman"] == dev_figure

    encoder = SentenceTransformer(str(st_model), local_files_only=True)  # the oracle: no structcse code
    a = encoder.encode([s1 for s1, _, _ in GOOD], convert_to_numpy=True).astype(np.float64)
    b = encoder.encode([s2 for _, s2, _ in GOOD], convert_to_numpy=True).astype(np.float64)
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert dev_figure == pytest.approx(spearmanr(cosine, [g for _, _, g in GOOD]).statistic, abs=1e-12)


def test_nli_dev_reader_is_evals_reader(tmp_path):
    """The nli_auprc dev metric reads SentEval NLI through score.nli_data: an unlabelled pair ("-") is skipped
    and counted, an unknown label names the file and line."""
    from score.dev_metrics import read_nli_dev

    for name, lines in (("s1", ["p1", "p2", "p3"]), ("s2", ["h1", "h2", "h3"]),
                        ("labels", ["entailment", "-", "contradiction"])):
        (tmp_path / f"{name}.dev").write_text("\n".join(lines) + "\n")
    pairs = read_nli_dev(tmp_path)
    assert (pairs.premises, pairs.is_entailment(), pairs.skipped_rows) == (["p1", "p3"], [True, False], 1)
    (tmp_path / "labels.dev").write_text("entailment\nmaybe\ncontradiction\n")
    with pytest.raises(ValueError, match=r"labels.dev line 2: unknown NLI label 'maybe'"):
        read_nli_dev(tmp_path)


def test_srsd_reader_skips_counts_and_names_malformed_items(tmp_path):
    import pyarrow as pa

    from setformat.schemas import SRSD
    from setformat.io import write_table
    from score.srsd import read_srsd

    def item(i, firsts, seconds, answer):
        return {"item_id": f"i{i}", "cluster": "E01", "kind": "other_cluster", "query_first": "a",
                "query_second": "b", "candidates_first": firsts, "candidates_second": seconds, "answer": answer}

    rows = [item(0, ["a", "c"], ["b", "d"], 0),
            item(1, ["a", "c"], ["b"], 0),  # candidate lists of different lengths
            item(2, ["a", "c"], ["b", "d"], 5),  # answer outside the candidates
            item(3, ["c", "a"], ["d", "b"], 1)]
    write_table(pa.Table.from_pylist(rows, schema=SRSD), str(tmp_path / "part-00000.parquet"))
    items = read_srsd(tmp_path)
    assert [i.item_id for i in items] == ["i0", "i3"] and items.skipped == 2
    assert items.bad_items == ["item 'i1': 2 candidates_first and 1 candidates_second; need two equally long "
                               "lists of at least 2", "item 'i2': answer 5 is not an index into its 2 candidates"]
