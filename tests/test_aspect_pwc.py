"""The PwC aspect folds of Ostendorff et al. (2022) -> aspect_triplets / aspect_docs (ingest/aspects/pwc.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import pytest

from ingest.aspects.pwc import PwcFormatError, build_pwc_sets, read_pwc_fold
from setformat.io import read_manifest, read_table

ROOT = Path(__file__).resolve().parents[1]

DOCS = {f"p{i}": (f"Title {i}", f"Abstract of paper {i}.") for i in range(1, 8)}

# aspect -> fold -> split -> [(from, to, label)]
FOLDS = {
    "task": {
        "1": {
            "train": [("p1", "p2", "y"), ("p1", "p3", "y"), ("p1", "p4", "n"), ("p2", "p3", "y"),
                      ("p5", "p6", "y"), ("p6", "p5", "y"), ("p1", "p1", "y"), ("p1", "zz", "y"),
                      ("p5", "p6", "y")],
            # A~B, B~C but not A~C: connected components would over-approximate
            "test": [("p1", "p2", "y"), ("p2", "p3", "y"), ("p1", "p3", "n"), ("p4", "p7", "n"),
                     ("p5", "p6", "y"), ("p6", "p5", "y")],
        },
        "2": {"train": [("p3", "p4", "y"), ("p3", "p5", "n")], "test": [("p1", "p2", "y")]},
    },
    "method": {
        "1": {"train": [("p4", "p5", "y"), ("p4", "p6", "n"), ("p7", "p1", "y")],
              "test": [("p1", "p7", "y"), ("p7", "p3", "y"), ("p2", "p5", "n")]},
        "2": {"train": [("p1", "p2", "y")], "test": [("p3", "p4", "y")]},
    },
}


def write_folder(root: Path, folds=FOLDS, docs=DOCS) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "docs.jsonl", "w") as f:
        for i, (pid, (title, abstract)) in enumerate(docs.items()):
            key = "paper_id" if i % 2 == 0 else "id"  # both spellings
            f.write(json.dumps({key: pid, "title": title, "abstract": abstract, "paper_url": "x"}) + "\n")
    for aspect, by_fold in folds.items():
        for fold, splits in by_fold.items():
            for split, pairs in splits.items():
                path = root / "folds" / aspect / fold / f"{split}.csv"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("from_paper_id,to_paper_id,label\n" + "".join(f"{a},{b},{y}\n" for a, b, y in pairs))
    return root


def text(pid: str) -> str:
    title, abstract = DOCS[pid]
    return f"{title}: {abstract}"


def undirected(pairs, label):
    return {frozenset((a, b)) for a, b, y in pairs if y == label and a != b}


def test_read_fold_counts_skips(tmp_path):
    root = write_folder(tmp_path / "pwc")
    train, test, docs = read_pwc_fold(root, "task", 1)
    assert set(docs) == set(DOCS) and docs["p3"].text == text("p3")
    assert train.read == 9
    assert dict(train.skipped) == {"self_pair": 1, "unknown_paper_id": 1, "duplicate": 1}
    assert train.examples["unknown_paper_id"] == ["zz"]
    assert len(train) == 6 and len(test) == 6
    with pytest.raises(PwcFormatError, match=r"train\.csv:9: paper id 'zz'"):
        read_pwc_fold(root, "task", 1, unknown="error")


def test_triplets_and_docs(tmp_path):
    root = write_folder(tmp_path / "pwc")
    out = tmp_path / "out"
    manifest = build_pwc_sets(root, str(out), fold=1, seed=7, triplets_per_anchor=None)
    assert sorted(manifest["aspects"]) == ["method", "task"]
    for aspect in ("task", "method"):
        train = FOLDS[aspect]["1"]["train"]
        ys = {(a, b) for a, b, y in train if y == "y"}
        ns = {(a, b) for a, b, y in train if y == "n"}
        y_any = undirected(train, "y")
        path = out / aspect / "aspect_triplets"
        rows = read_table(path, kind="aspect_triplets").to_pylist()
        assert rows
        for r in rows:
            assert (r["anchor_qid"], r["positive_qid"]) in ys  # every positive a y partner (as in the csv)
            assert r["anchor"] == text(r["anchor_qid"]) and r["positive"] == text(r["positive_qid"])
            assert r["negative"] == text(r["negative_qid"])
            assert r["variant"] == "single" and r["aspects"] == [aspect]
            if r["negative_kind"] == "labelled":
                assert (r["anchor_qid"], r["negative_qid"]) in ns
            else:
                assert r["negative_kind"] == "random"
                assert r["negative_qid"] != r["anchor_qid"]
                assert frozenset((r["anchor_qid"], r["negative_qid"])) not in y_any
        # every kept y pair gives one triplet with triplets_per_anchor=None
        kept = {(a, b) for a, b in ys if a != b and a in DOCS and b in DOCS}
        assert {(r["anchor_qid"], r["positive_qid"]) for r in rows} == kept and len(rows) == len(kept)
        m = read_manifest(path)
        assert m["rows"] == len(rows) and m["pairs"]["read"] == len(train)
    task = {(r["anchor_qid"], r["positive_qid"]): r for r in read_table(out / "task" / "aspect_triplets").to_pylist()}
    assert task[("p1", "p2")]["negative_kind"] == "labelled" and task[("p1", "p2")]["negative_qid"] == "p4"
    assert task[("p2", "p3")]["negative_kind"] == "random"

    docs = read_table(out / "aspect_docs", kind="aspect_docs").to_pylist()
    for aspect in ("task", "method"):
        test = FOLDS[aspect]["1"]["test"]
        rows = {r["qid"]: r for r in docs if r["aspect"] == aspect}
        assert set(rows) == {q for a, b, _ in test for q in (a, b)}  # every test doc is a candidate
        y = undirected(test, "y")
        for a, b in combinations(sorted(rows), 2):
            shares = bool(set(rows[a]["labels"]) & set(rows[b]["labels"]))
            assert shares == (frozenset((a, b)) in y), (aspect, a, b)
        assert all(rows[q]["text"] == text(q) and rows[q]["title"] == DOCS[q][0] for q in rows)
    task_docs = {r["qid"]: r["labels"] for r in docs if r["aspect"] == "task"}
    assert task_docs["p4"] == [] and task_docs["p7"] == []  # only n pairs: candidates, never seeds
    assert read_manifest(out / "aspect_docs")["rows"] == len(docs)


def test_docs_work_with_aspect_retrieval(tmp_path):
    import numpy as np

    from score.aspects import read_aspect_docs, retrieval_metrics

    out = tmp_path / "out"
    build_pwc_sets(write_folder(tmp_path / "pwc"), str(out), aspects=["task"])
    docs = read_aspect_docs(out / "aspect_docs")["task"]
    metrics = retrieval_metrics(np.eye(len(docs)), docs.labels, ks=(5,))
    assert metrics["n_docs"] == 7 and metrics["n_seeds"] == 5  # p1 p2 p3 p5 p6; p4 p7 candidates only


def test_default_one_triplet_per_anchor_and_fold2(tmp_path):
    out = tmp_path / "out"
    m = build_pwc_sets(write_folder(tmp_path / "pwc"), str(out), fold=2)
    rows = read_table(out / "task" / "aspect_triplets").to_pylist()
    assert [(r["anchor_qid"], r["positive_qid"], r["negative_qid"], r["negative_kind"]) for r in rows] == \
        [("p3", "p4", "p5", "labelled")]
    assert m["config"]["fold"] == "2"
    out1 = tmp_path / "one"
    m1 = build_pwc_sets(tmp_path / "pwc", str(out1), aspects=["task"])
    rows1 = read_table(out1 / "task" / "aspect_triplets").to_pylist()
    assert len({r["anchor_qid"] for r in rows1}) == len(rows1)  # one triplet per anchor
    assert m1["aspects"]["task"]["y_pairs_beyond_triplets_per_anchor"] == 1  # p1 has two y partners
    again = tmp_path / "again"
    build_pwc_sets(tmp_path / "pwc", str(again), aspects=["task"])
    assert read_table(again / "task" / "aspect_triplets").to_pylist() == rows1  # same seed, same rows


def test_errors_name_file_and_line(tmp_path):
    root = write_folder(tmp_path / "pwc")
    with open(root / "docs.jsonl", "a") as f:
        f.write(json.dumps({"paper_id": "p9", "abstract": "no title"}) + "\n")
    with pytest.raises(PwcFormatError, match=r"docs\.jsonl:8: no title"):
        read_pwc_fold(root, "task", 1)
    root = write_folder(tmp_path / "pwc2")
    with open(root / "docs.jsonl", "a") as f:
        f.write(json.dumps({"pid": "p9", "title": "t", "abstract": "a"}) + "\n")
    with pytest.raises(PwcFormatError, match=r"docs\.jsonl:8: no paper id"):
        read_pwc_fold(root, "task", 1)
    root = write_folder(tmp_path / "pwc3")
    (root / "folds/task/1/test.csv").write_text("a,b,label\np1,p2,y\n")
    with pytest.raises(PwcFormatError, match=r"test\.csv:1: bad header"):
        read_pwc_fold(root, "task", 1)
    (root / "folds/task/1/test.csv").write_text("from_paper_id,to_paper_id,label\np1,p2,y\np1,p3,maybe\n")
    with pytest.raises(PwcFormatError, match=r"test\.csv:3: label 'maybe'"):
        read_pwc_fold(root, "task", 1)
    (root / "folds/task/1/train.csv").unlink()
    with pytest.raises(PwcFormatError, match=r"train\.csv: no such file"):
        read_pwc_fold(root, "task", 1)
    with pytest.raises(PwcFormatError, match=r"no such fold folder .*\['1', '2'\]"):
        read_pwc_fold(root, "task", 3)
    with pytest.raises(PwcFormatError, match=r"no aspect folder \['dataset'\]"):
        build_pwc_sets(root, str(tmp_path / "o"), aspects=["dataset"])


def test_cli(tmp_path):
    root = write_folder(tmp_path / "pwc")
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "ingest.aspects", "--pwc", str(root), "--fold", "1", "--out", str(out)],
                         check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert (out / "task" / "aspect_triplets" / "_manifest.json").exists()
    assert (out / "method" / "aspect_triplets" / "_manifest.json").exists()
    assert read_manifest(out / "aspect_docs")["rows"] > 0
    bad = subprocess.run([sys.executable, "-m", "ingest.aspects", "--pwc", str(root), "--fold", "9", "--out",
                          str(tmp_path / "x")], check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "no such fold folder" in bad.stderr
    from ingest.aspects.__main__ import main

    assert main(["--wikidata-set", str(tmp_path / "w"), "--out", str(tmp_path / "y")]) == 2  # --intros required
