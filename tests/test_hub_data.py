"""Public data by name (infra.hub_data): hub-format copies of the shared data read through `datasets` give the
same pairs, and the same Spearman, as the SentEval folders they came from; offline, a missing dataset is one
line naming it and the flag."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, shared_data
from tests.test_eval import minilm_folder

N = 40  # rows of each shared file in the STS tree (the model encodes ~4N pairs twice)


@pytest.fixture(scope="module")
def senteval_tree(tmp_path_factory):
    """A SentEval data/downstream tree from the shared samples: STS-B dev rows as STS-B's test file, the next
    rows as STS12's test (one subset per genre), SICK trial rows as SICK's test file."""
    stsb = (shared_data("stsb", "senteval_processed") / "sts-dev.csv").read_text(encoding="utf-8").splitlines()
    sick = (shared_data("sick", "senteval") / "SICK_trial.txt").read_text(encoding="utf-8").splitlines()
    root = tmp_path_factory.mktemp("downstream")
    (root / "STS" / "STSBenchmark").mkdir(parents=True)
    (root / "STS" / "STSBenchmark" / "sts-test.csv").write_text("\n".join(stsb[:N]) + "\n", encoding="utf-8")
    year = root / "STS" / "STS12-en-test"
    year.mkdir()
    by_genre: dict[str, list[list[str]]] = {}
    for line in stsb[N:3 * N]:
        fields = line.split("\t")
        by_genre.setdefault(fields[0].replace("-", ""), []).append(fields)
    for genre, rows in by_genre.items():
        (year / f"STS.input.{genre}.txt").write_text("".join(f"{r[5]}\t{r[6]}\n" for r in rows), encoding="utf-8")
        (year / f"STS.gs.{genre}.txt").write_text("".join(f"{r[4]}\n" for r in rows), encoding="utf-8")
    (root / "SICK").mkdir()
    (root / "SICK" / "SICK_test_annotated.txt").write_text("\n".join(sick[:N + 1]) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def hub_copies(senteval_tree, tmp_path_factory):
    """The tree's sets as MTEB has them (data/test-00000-of-00001.parquet), written by eval.hub_copies."""
    from eval.hub_copies import write_hub_copies

    out = tmp_path_factory.mktemp("hub")
    written = write_hub_copies(out, stsb=senteval_tree / "STS" / "STSBenchmark", senteval=senteval_tree,
                               sick=senteval_tree / "SICK")
    assert sorted(written) == ["RobZamp/sick", "mteb/sickr-sts", "mteb/sts12-sts", "mteb/stsbenchmark-sts"]
    assert (out / "mteb" / "sts12-sts" / "data" / "test-00000-of-00001.parquet").is_file()
    return out


def test_mteb_format_copies_give_the_senteval_folders_spearman(senteval_tree, hub_copies):
    """The same pairs through `datasets` from the MTEB-format copies: each set's Spearman is the SentEval tree's,
    exactly; STS12 from the hub has no subset column, and its one Spearman over the concatenation is SentEval's
    "all" figure."""
    from eval.models import load_trained
    from eval.sts_all import evaluate_sts_all

    model = load_trained(minilm_folder(), device="cpu")
    senteval = evaluate_sts_all(model, senteval_tree, "test")
    hub = evaluate_sts_all(model, hub_copies, "test")
    assert list(senteval["sets"]) == list(hub["sets"]) == ["STS12", "STSBenchmark", "SICK-R"]
    for name in senteval["sets"]:
        assert hub["sets"][name]["n_pairs"] == senteval["sets"][name]["n_pairs"] >= 20
        assert hub[name] == senteval[name], name
    assert hub["mean"] == senteval["mean"] and 0.5 < hub["mean"] < 1.0
    assert "subsets" in senteval["sets"]["STS12"] and "subsets" not in hub["sets"]["STS12"]
    assert hub["sets"]["STS12"]["files"] == [f"{hub_copies / 'mteb' / 'sts12-sts'}:test"]


def test_saved_datasets_give_the_same_pairs_as_the_shared_folders(tmp_path):
    """`save_to_disk` copies (and parquet copies) of the shared STS-B, SICK, SNLI and MRPC files: every task's
    reader gets the very pairs the SentEval reader gets."""
    from eval.mrpc import hub_mrpc_source, read_hub_mrpc, read_mrpc
    from eval.hub_copies import write_hub_copies
    from score.nli_data import read_nli
    from score.sts_data import read_sts
    from score.sts_sets import read_sets

    stsb, sick = shared_data("stsb", "senteval_processed"), shared_data("sick")
    snli, mrpc = shared_data("nli", "snli_senteval"), shared_data("mrpc")
    write_hub_copies(tmp_path / "disk", stsb=stsb, fmt="disk")  # datasets' own save_to_disk output
    assert read_sts(tmp_path / "disk" / "mteb" / "stsbenchmark-sts", "dev").scores == read_sts(stsb, "dev").scores
    for fmt in ("parquet",):  # the hub repositories' data/<split>-00000-of-00001.parquet
        out = tmp_path / fmt
        write_hub_copies(out, stsb=stsb, sick=sick, snli=snli, mrpc=mrpc, fmt=fmt)
        for split in ("dev", "train"):
            assert read_sts(out / "mteb" / "stsbenchmark-sts", split).scores == read_sts(stsb, split).scores
        hub, folder = read_sets(out / "mteb", "dev"), read_sets(sick / "senteval", "dev")
        assert hub["SICK-R"].sentences1 == folder["SICK-R"].sentences1 and len(hub["SICK-R"]) == 500
        assert hub["SICK-R"].scores == folder["SICK-R"].scores
        hub_snli, folder_snli = read_nli(out / "stanfordnlp" / "snli", "test"), read_nli(snli, "test")
        assert (hub_snli.premises, hub_snli.labels) == (folder_snli.premises, folder_snli.labels)
        hub_sick, folder_sick = read_nli(out / "RobZamp" / "sick", "trial"), read_nli(sick, "trial")
        assert (hub_sick.hypotheses, hub_sick.labels) == (folder_sick.hypotheses, folder_sick.labels)
        glue = hub_mrpc_source(out / "nyu-mll" / "glue")
        hub_mrpc, folder_mrpc = read_hub_mrpc(glue, "train"), read_mrpc(mrpc / "msr_paraphrase_train.txt")
        assert (hub_mrpc.sentences2, hub_mrpc.labels) == (folder_mrpc.sentences2, folder_mrpc.labels)
        assert len(hub_mrpc) == 4076


def test_hub_names_read_from_local_copies(tmp_path, monkeypatch):
    """STRUCTCSE_HUB_COPIES: a hub name is read from FOLDER/<owner>/<name>; the task defaults name MTEB's sets."""
    from eval.hub_copies import write_hub_copies
    from score.sts_data import read_sts
    from score.sts_sets import hub_sets, read_sets

    stsb = shared_data("stsb", "senteval_processed")
    write_hub_copies(tmp_path, stsb=stsb)
    monkeypatch.setenv("STRUCTCSE_HUB_COPIES", str(tmp_path))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    assert read_sts("mteb/stsbenchmark-sts", "dev").sentences2 == read_sts(stsb, "dev").sentences2
    assert list(hub_sets(None, "test")) == ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R"]
    assert list(hub_sets(None, "dev")) == ["STSBenchmark", "SICK-R"]
    with pytest.raises(FileNotFoundError, match="mteb/sickr-sts"):  # not copied, and this machine is offline
        read_sets(None, "dev")


def test_what_is_a_hub_name(tmp_path, monkeypatch):
    from infra.hub_data import check_available, hub_source, looks_like_hub_name

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sets").mkdir()
    assert looks_like_hub_name("mteb/sts12-sts")
    assert not looks_like_hub_name("sets/smaple")  # a typo in a local path keeps the local path's error
    assert not looks_like_hub_name("s3://bucket/sts") and not looks_like_hub_name("/abs/path")
    assert hub_source(tmp_path / "sets", None) is None  # a folder without a hub dataset's files
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (tmp_path / "hub" / "datasets--mteb--sts12-sts" / "snapshots").mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    check_available([hub_source("mteb/sts12-sts", None)])  # cached: readable offline


def test_offline_missing_data_is_one_line_in_seconds(tmp_path):
    """No --data, no hub, an empty cache: exit 2 and one line naming the datasets and the flag, before any
    model loads."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    env.pop("STRUCTCSE_HUB_COPIES", None)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "eval", "--task", "sts_all", "--model", str(tmp_path)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=60)
    seconds = time.perf_counter() - started
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "mteb/sts12-sts" in lines[0] and "mteb/sickr-sts" in lines[0] and "--data FOLDER" in lines[0]
    assert seconds < 15  # ~1 s on an idle machine; the bound leaves room for a loaded one


def test_report_takes_verbose():
    from eval.scoreboard import build_parser

    args = build_parser().parse_args(["model", "--sts", "--verbose"])
    assert args.verbose and args.sts.startswith("mteb/sts12-sts,")
