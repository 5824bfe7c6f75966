"""structcse dsbats: the demo world's BATS folder and WordNet dictionary to the slides' table, in one command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from structcse import dsbats


def test_table_has_the_slides_rows_and_columns():
    rows = [{"model": "m", "trained": False, "srsd": 0.5818, "srsd_reversed": 0.5, "sts_avg": 0.1863, "mrpc": 0.6881},
            {"model": "m + DSBATS4CL", "trained": True, "srsd": 0.6427, "srsd_reversed": None, "sts_avg": None,
             "mrpc": 0.7014}]
    table = dsbats.table_markdown(rows).splitlines()
    assert table[0] == "| model | DSBATS4CL | SRSD | SRSD (reversed) | STS avg. | MRPC | Δ SRSD vs base | vs base |"
    assert table[2] == "| m | w/o | 58.18 | 50.00 | 18.63 | 68.81 | – | base |"
    assert table[3] == "| m + DSBATS4CL | w/ | 64.27 | – | – | 70.14 | +6.09 | above base |"


def _srsd_accuracy(model_folder, items: list[dict]) -> dict[str, float]:
    """{kind: accuracy} computed here: sentence-transformers' embeddings, r(p) = e(second) − e(first) (the
    representation of a plain encoder and of configs/dsbats.yaml), right when the answer's cosine to the
    query is strictly the highest."""
    from sentence_transformers import SentenceTransformer

    sentences = sorted({s for r in items for s in [r["query_first"], r["query_second"], *r["candidates_first"],
                                                   *r["candidates_second"]]})
    e = dict(zip(sentences, SentenceTransformer(str(model_folder), device="cpu").encode(sentences).astype(np.float64)))
    right: dict[str, list[bool]] = {}
    for r in items:
        query = e[r["query_second"]] - e[r["query_first"]]
        cosines = [float(query @ c / np.linalg.norm(query) / np.linalg.norm(c))
                   for c in (e[b] - e[a] for a, b in zip(r["candidates_first"], r["candidates_second"]))]
        right.setdefault(r["kind"], []).append(
            all(cosines[r["answer"]] > c for i, c in enumerate(cosines) if i != r["answer"]))
    return {kind: sum(v) / len(v) for kind, v in right.items()}


@pytest.mark.end_to_end
def test_one_command_from_bats_and_wordnet_to_the_table(demo_world, demo_tiny_bert, ray_session, tmp_path, capsys):
    """The sets it built are on disk as its JSON counts them, it trained the model it names, and each row's
    SRSD and STS figures equal those computed here from the written srsd set and the two model folders."""
    from collections import Counter

    from ingest.dsbats.bats import category_files
    from setformat.io import read_table
    from structcse.cli import main
    from tests.test_eval import direct_sts_figures

    codes = sorted(category_files(demo_world.bats_dir)[1])
    out = tmp_path / "out"
    argv = ["dsbats", "--bats", str(demo_world.bats_dir), "--wordnet", str(demo_world.wordnet_dir),
            "--categories", *codes, "--positives-per-pair", "2", "--model", str(demo_tiny_bert), "--out", str(out),
            "--sts", str(demo_world.sts_dir), "--sts-split", "dev"]
    for override in ("max_steps=3", "batch_size=8", "pooling=mean", "num_workers=0", "max_len=32"):
        argv += ["--set", override]
    assert main(argv) == 0
    result = json.loads((out / "dsbats.json").read_text())

    sets = {name: read_table(out / "sets" / name).to_pylist() for name in ("bats_definitions", "dsbats4cl", "srsd")}
    assert result["set_rows"] == {name: len(rows) for name, rows in sets.items()} and all(sets.values())
    written = Counter(r["category"] for r in sets["bats_definitions"])
    assert result["sizes"] == {code: written.get(code, 0) for code in result["sizes"]}  # pairs per category
    assert set(written) <= set(result["sizes"]) <= set(codes)
    trained = Path(result["model"])
    assert json.loads((trained / "structcse_method.json").read_text())["method"] == "dsbats"
    summary = json.loads((out / "runs" / "dsbats" / "train_summary.json").read_text())
    assert summary["last_metrics"]["step"] == 3 and Path(summary["model_path"]) == trained  # max_steps=3

    rows = result["rows"]
    assert [(r["path"], r["trained"], r["mrpc"]) for r in rows] == [(str(demo_tiny_bert), False, None),
                                                                    (str(trained), True, None)]
    table = (out / "dsbats.md").read_text()
    for row in rows:
        srsd = _srsd_accuracy(row["path"], sets["srsd"])
        sts = direct_sts_figures(SentenceTransformer(row["path"], device="cpu"), demo_world.sts_dir / "sts-dev.csv")
        assert (row["srsd"], row["srsd_reversed"]) == pytest.approx((srsd["other_cluster"], srsd["reversed"]),
                                                                    abs=1e-12)
        assert row["sts_avg"] == pytest.approx(sts["spearman"], abs=1e-6)
        assert (f"| {row['model']} | {'w/' if row['trained'] else 'w/o'} | {100 * srsd['other_cluster']:.2f} | "
                f"{100 * srsd['reversed']:.2f} | {100 * sts['spearman']:.2f} | – |") in table
    capsys.readouterr()
    assert main(["dsbats", "--bats", str(demo_world.bats_dir), "--wordnet", str(tmp_path), "--out", str(tmp_path / "x"),
                 "--model", str(demo_tiny_bert)]) == 2
    assert str(tmp_path) in capsys.readouterr().err
