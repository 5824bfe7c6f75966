"""Pair-corpus ingest (ingest/pairs/): real SNLI files, SimCSE csv, jsonl, the demo world's NLI pairs,
a hub-style dataset folder, bad files, caps, determinism."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from setformat import io as set_io
from ingest.pairs import (
    PairIngestConfig,
    PairSource,
    PairSourceError,
    main,
    parse_source,
    run_pair_ingest,
)
from setformat.io import read_table
from tests.conftest import shared_data

SNLI_DEV, SNLI_TEST = 9842, 9824  # rows of the SentEval files (README)


def read_set(path: Path) -> list[dict]:
    return read_table(path).to_pylist()


def senteval_rows(folder: Path, split: str) -> list[tuple[str, str, str]]:
    s1, s2, labels = ((folder / f"{p}.{split}").read_text(encoding="utf-8").splitlines()
                      for p in ("s1", "s2", "labels"))
    return [(a.strip(), label.strip(), b.strip()) for a, b, label in zip(s1, s2, labels)]


@pytest.fixture(scope="module")
def nli_paths():
    folder = shared_data("nli")
    return {"senteval": folder / "snli_senteval", "csv": folder / "snli_dev_partial_triplets_simcse_format.csv",
            "jsonl": folder / "snli_jsonl_partial" / "snli_1.0_dev.partial.jsonl"}


@pytest.fixture(scope="module")
def main_config(nli_paths, demo_world):
    def make(out):
        return PairIngestConfig(
            sources=[
                PairSource("senteval", str(nli_paths["senteval"]), split="dev+test"),
                PairSource("simcse_csv", str(nli_paths["csv"])),
                PairSource("table", str(nli_paths["jsonl"]),
                           columns={"sentence1": "sentence1", "sentence2": "sentence2", "label": "gold_label"}),
                PairSource("senteval", str(demo_world.nli_dir), tag="demo_world"),
            ],
            out=str(out), seed=7)
    return make


@pytest.fixture(scope="module")
def main_run(main_config, ray_session, tmp_path_factory):
    out = tmp_path_factory.mktemp("pairs_main")
    return out, run_pair_ingest(main_config(out))


@pytest.fixture(scope="module")
def raw_pairs(nli_paths, demo_world) -> set[tuple[str, str, str]]:
    """Every (sentence1, label, sentence2) of the inputs, as written in them."""
    pairs = set()
    for split in ("dev", "test"):
        pairs.update(senteval_rows(nli_paths["senteval"], split))
    for split in ("train", "dev", "test"):
        pairs.update(senteval_rows(demo_world.nli_dir, split))
    with open(nli_paths["csv"], newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            pairs.add((row["sent0"], "entailment", row["sent1"]))
            pairs.add((row["sent0"], "contradiction", row["hard_neg"]))
    for line in nli_paths["jsonl"].read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        pairs.add((record["sentence1"], record["gold_label"], record["sentence2"]))
    return pairs


def test_sets_match_schemas_and_every_pair_is_accounted(main_run):
    out, manifest = main_run
    for kind in ("nli_triplets", "relation_triples"):
        set_io.check_set(out / kind, kind)
        set_manifest = set_io.read_manifest(out / kind)
        assert set_manifest["rows"] == len(read_set(out / kind)) == manifest["sets"][kind]["rows"] > 0
        assert set_manifest["files"] == sorted(p.name for p in (out / kind).glob("*.parquet"))
        for source in set_manifest["sources"]:
            assert source["accounted"], source
            assert source["pairs_in"] == source["written"] + sum(source["dropped"].values())
        pairs = set_manifest["pairs"]
        assert pairs["accounted"] and pairs["in"] == pairs["written"] + sum(pairs["dropped"].values())
    relations = set_io.read_manifest(out / "relation_triples")
    assert sum(relations["hard_negatives"].values()) == relations["rows"]
    assert {r: v["rows"] for r, v in relations["relations"].items()} == dict(
        Counter(r["relation"] for r in read_set(out / "relation_triples")))


def test_real_snli_senteval_counts(main_run, nli_paths):
    out, _ = main_run
    dev, test = senteval_rows(nli_paths["senteval"], "dev"), senteval_rows(nli_paths["senteval"], "test")
    assert (len(dev), len(test)) == (SNLI_DEV, SNLI_TEST)
    assert Counter(label for _, label, _ in dev) == {"entailment": 3329, "neutral": 3235, "contradiction": 3278}
    triplet_manifest = set_io.read_manifest(out / "nli_triplets")
    relation_manifest = set_io.read_manifest(out / "relation_triples")
    snli = next(s for s in relation_manifest["sources"] if s["kind"] == "senteval" and s["name"] != "demo_world")
    assert snli["rows_in"] == snli["pairs_in"] == SNLI_DEV + SNLI_TEST
    distinct = len(set(dev + test))  # the same (premise, label, hypothesis) twice is one pair
    assert snli["written"] == distinct and snli["dropped"] == {"duplicate": SNLI_DEV + SNLI_TEST - distinct}
    snli_triplets = next(s for s in triplet_manifest["sources"] if s["name"] == snli["name"])
    assert snli_triplets["dropped"]["other_relation"] == sum(
        1 for row in set(dev + test) if row[1] == "neutral")
    assert triplet_manifest["inputs"][0]["files"][0]["sha256"]


def test_triplets_come_from_one_premise(main_run, raw_pairs):
    out, _ = main_run
    triplets = read_set(out / "nli_triplets")
    per_premise = Counter(t["premise"] for t in triplets)
    assert max(per_premise.values()) <= 4  # max_triplets_per_premise
    assert len({(t["premise"], t["entailment"], t["contradiction"]) for t in triplets}) == len(triplets)
    for t in triplets:
        assert (t["premise"], "entailment", t["entailment"]) in raw_pairs, t
        assert (t["premise"], "contradiction", t["contradiction"]) in raw_pairs, t
    # the SimCSE csv rows are triplets already: each is in the set (from the csv or from the jsonl it came from)
    with open(shared_data("nli", "snli_dev_partial_triplets_simcse_format.csv"), newline="", encoding="utf-8") as f:
        written = {(t["premise"], t["entailment"], t["contradiction"]) for t in triplets}
        rows = list(csv.DictReader(f))
    assert sum((r["sent0"], r["sent1"], r["hard_neg"]) in written for r in rows) >= 0.95 * len(rows)


def test_demo_world_nli_pairs(main_run, demo_world):
    out, _ = main_run
    labels = Counter()
    for split in ("train", "dev", "test"):
        rows = senteval_rows(demo_world.nli_dir, split)
        assert rows and all(a and b for a, _, b in rows)
        labels.update(label for _, label, _ in rows)
    assert labels["entailment"] == labels["contradiction"] == labels["neutral"] >= 100
    manifest = set_io.read_manifest(out / "nli_triplets")
    demo = next(s for s in manifest["sources"] if s["name"] == "demo_world")
    assert demo["pairs_in"] == sum(labels.values()) and demo["accounted"]
    # every premise has one entailment and one contradiction: one triplet each
    assert manifest["triplets_by_source"]["demo_world"] == labels["entailment"]
    assert {t["source"] for t in read_set(out / "nli_triplets")} >= {"demo_world"}


def test_hard_negatives_follow_rse(main_run, raw_pairs):
    out, _ = main_run
    by_premise: dict[tuple[str, str], set[str]] = {}
    by_relation: dict[str, set[str]] = {}
    for s1, label, s2 in raw_pairs:
        by_premise.setdefault((s1, label), set()).add(s2)
        by_relation.setdefault(label, set()).add(s2)
    rows = read_set(out / "relation_triples")
    assert {r["weight"] for r in rows} == {1.0}
    for r in rows:
        negative = r["hard_negative"]
        assert negative is not None and negative != r["sentence2"], r
        if r["relation"] == "entailment":
            same_premise = by_premise.get((r["sentence1"], "contradiction"), set())
            assert negative in (same_premise or by_relation["contradiction"]), r
        elif r["relation"] == "contradiction":
            same_premise = by_premise.get((r["sentence1"], "entailment"), set())
            assert negative in (same_premise or by_relation["contradiction"]), r
        else:  # another pair's sentence2 of the same relation, not one of this sentence1's
            assert negative in by_relation[r["relation"]], r
            assert negative not in by_premise.get((r["sentence1"], r["relation"]), set()), r


def test_same_input_and_seed_same_bytes(main_run, main_config, tmp_path):
    """A second run, partitioned differently by Ray, writes the same bytes (manifests: all but the config
    field that changed)."""
    out, _ = main_run
    cfg = main_config(tmp_path)
    cfg.memory_per_cpu = 1 << 20  # 64 KiB shuffle buckets: several, where the first run had one each
    run_pair_ingest(cfg)
    for kind in ("nli_triplets", "relation_triples"):
        first = {p.name: p.read_bytes() for p in sorted((out / kind).glob("*.parquet"))}
        again = {p.name: p.read_bytes() for p in sorted((tmp_path / kind).glob("*.parquet"))}
        assert first and first == again
        manifests = [json.loads((folder / kind / "_manifest.json").read_text()) for folder in (out, tmp_path)]
        configs = [m.pop("config") for m in manifests]
        assert all(m.pop("job_id") for m in manifests)  # each run's own: which job wrote the set
        assert manifests[0] == manifests[1]
        assert {k for k in configs[0] if configs[0][k] != configs[1][k]} == {"memory_per_cpu"}


def test_missing_column_or_file_is_a_clear_error_before_ray(tmp_path, nli_paths):
    bad = tmp_path / "pairs.csv"
    bad.write_text("premise,hypothesis,label\na,b,entailment\n")
    cfg = PairIngestConfig(sources=[PairSource("table", str(bad), columns={
        "sentence1": "premise", "sentence2": "hypothesis", "label": "gold_label"})], out=str(tmp_path / "out"))
    with pytest.raises(PairSourceError, match=r"pairs\.csv: missing column 'gold_label' \(mapped to label\)"):
        run_pair_ingest(cfg)
    simcse = tmp_path / "simcse.csv"
    simcse.write_text("sent0,hard_neg\na,b\n")
    with pytest.raises(PairSourceError, match=r"simcse\.csv: missing column 'sent1'"):
        run_pair_ingest(PairIngestConfig(sources=[PairSource("simcse_csv", str(simcse))], out=str(tmp_path / "o")))
    folder = tmp_path / "senteval"
    folder.mkdir()
    for name in ("s1.dev", "s2.dev"):
        (folder / name).write_text("a\n")
    with pytest.raises(PairSourceError, match=r"labels\.dev: missing SentEval file"):
        run_pair_ingest(PairIngestConfig(sources=[PairSource("senteval", str(folder))], out=str(tmp_path / "o")))
    (folder / "labels.dev").write_text("entailment\nneutral\n")
    with pytest.raises(PairSourceError, match="different line counts"):
        run_pair_ingest(PairIngestConfig(sources=[PairSource("senteval", str(folder))], out=str(tmp_path / "o")))
    assert not (tmp_path / "out" / "nli_triplets").exists()


def test_source_syntax():
    s = parse_source("table:/d/snli.jsonl:sentence1=premise,sentence2=hypothesis,label=gold_label,label.-=,tag=x")
    assert (s.kind, s.path, s.tag) == ("table", "/d/snli.jsonl", "x")
    assert s.columns == {"sentence1": "premise", "sentence2": "hypothesis", "label": "gold_label"}
    assert s.label_map == {"-": None}
    s = parse_source("hf:glue:name=qqp,split=train[:1000]")
    assert (s.kind, s.path, s.name, s.split) == ("hf", "glue", "qqp", "train[:1000]")
    assert parse_source("senteval:s3://bucket/SNLI:split=dev+test").path == "s3://bucket/SNLI"
    with pytest.raises(PairSourceError, match="unknown option"):
        parse_source("table:x.csv:colour=red")


def test_label_maps_import_without_ray():
    """eval reads NLI files with ingest's label map: importing it (and the package's
    config types) must not start importing Ray; the job loads it on first use."""
    import subprocess
    import sys

    code = ("import sys, score.nli_data, setformat.labels; from ingest.pairs import PairSource, NLI_TEXT_LABELS; "
            "print('ray' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_bad_rows_are_counted_and_caps_hold(ray_session, tmp_path):
    """Through the CLI: unknown labels, empty texts, too-long texts are counted drops with their lines;
    relation weights select relations; per-relation caps are a seeded sample."""
    lines = ["premise\thypothesis\tgold\tnote"]
    for i in range(40):
        lines += [f"Premise number {i} .\tIt is true {i} .\tentailment\t",
                  f"Premise number {i} .\tIt is false {i} .\tCONTRADICTION\t",
                  f"Premise number {i} .\tIt may be {i} .\tneutral\t"]
    lines += ["A premise .\tA hypothesis .\tmaybe\t",  # line 122: unknown label
              "A premise .\t \tentailment\t",  # line 123: empty text
              "\tA hypothesis .\tneutral\t",  # line 124: empty text
              "A premise .\t" + "long " * 300 + "\tentailment\t",  # line 125: too long
              "A premise .\tA hypothesis .\t-\t"]  # line 126: SNLI's no-gold label
    table = tmp_path / "pairs.tsv"
    table.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    argv = ["--source", f"table:{table}:sentence1=premise,sentence2=hypothesis,label=gold,tag=tsv",
            "--out", str(out), "--relation", "entailment=1.0", "--relation", "neutral=0.5",
            "--max-per-relation", "neutral=7", "--seed", "3"]
    assert main(argv) == 0
    manifest = set_io.read_manifest(out / "relation_triples")
    (source,) = manifest["sources"]
    assert source["rows_in"] == source["pairs_in"] == 125
    assert source["dropped"] == {"unknown_label": 1, "empty_text": 2, "too_long": 1, "excluded_label": 1,
                                 "relation_not_selected": 40, "over_cap": 33}
    assert source["dropped_first_rows"]["unknown_label"] == ["pairs.tsv:122"]
    assert source["dropped_first_rows"]["empty_text"] == ["pairs.tsv:123", "pairs.tsv:124"]
    assert len(source["dropped_first_rows"]["over_cap"]) == 10  # the first few only
    assert source["written"] == 47 and source["accounted"]
    rows = read_set(out / "relation_triples")
    assert Counter(r["relation"] for r in rows) == {"entailment": 40, "neutral": 7}
    assert {r["relation"]: r["weight"] for r in rows} == {"entailment": 1.0, "neutral": 0.5}
    for r in rows:  # 'CONTRADICTION' matched case-insensitively: every entailment has its premise's contradiction
        if r["relation"] == "entailment":
            assert r["hard_negative"] == r["sentence2"].replace("true", "false")
    assert manifest["relations"]["neutral"] == {"rows": 7, "weight": 0.5, "available": 40, "cap": 7}
    triplets = set_io.read_manifest(out / "nli_triplets")
    assert triplets["rows"] == 40 and triplets["sources"][0]["accounted"]
    # the same seed draws the same capped sample; another seed another one
    assert main(argv[:-1] + ["3"] + ["--out", str(tmp_path / "again")]) == 0
    assert read_set(tmp_path / "again" / "relation_triples") == rows
    assert main(argv[:-1] + ["4"] + ["--out", str(tmp_path / "other")]) == 0
    other = {r["sentence2"] for r in read_set(tmp_path / "other" / "relation_triples") if r["relation"] == "neutral"}
    assert other != {r["sentence2"] for r in rows if r["relation"] == "neutral"}


def test_hf_dataset_from_a_local_folder(ray_session, tmp_path, nli_paths):
    """The `hf` kind through datasets.load_dataset on a folder (no hub here): the snli preset's
    columns and integer labels (0 entailment, 1 neutral, 2 contradiction, -1 no gold label)."""
    folder = tmp_path / "snli_hf"
    folder.mkdir()
    codes = {"entailment": 0, "neutral": 1, "contradiction": 2, "-": -1}
    records = [json.loads(line) for line in nli_paths["jsonl"].read_text(encoding="utf-8").splitlines()[:60]]
    with open(folder / "train.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"premise": r["sentence1"], "hypothesis": r["sentence2"],
                                 "label": codes[r["gold_label"]]}) + "\n" for r in records)
    cfg = PairIngestConfig(sources=[PairSource("hf", str(folder), preset="snli",
                                               hf_kwargs={"cache_dir": str(tmp_path / "hf_cache")})],
                           out=str(tmp_path / "out"), hf_chunk_rows=25)
    run_pair_ingest(cfg)
    manifest = set_io.read_manifest(tmp_path / "out" / "relation_triples")
    (source,) = manifest["sources"]
    no_gold = sum(r["gold_label"] == "-" for r in records)
    assert source["rows_in"] == 60 and source["dropped"].get("excluded_label", 0) == no_gold
    assert source["accounted"] and source["written"] == 60 - no_gold
    assert all(row.startswith("train[") for row in source["dropped_first_rows"].get("excluded_label", []))
    labels = Counter(r["gold_label"] for r in records if r["gold_label"] != "-")
    assert {k: v["rows"] for k, v in manifest["relations"].items()} == dict(labels)
    with pytest.raises(PairSourceError, match="missing column 'premise_text'"):
        run_pair_ingest(PairIngestConfig(sources=[PairSource(
            "hf", str(folder), columns={"sentence1": "premise_text", "sentence2": "hypothesis", "label": "label"},
            preset="snli", hf_kwargs={"cache_dir": str(tmp_path / "hf_cache")})], out=str(tmp_path / "o")))


def test_all_nli_triplets_by_name_from_a_local_copy(ray_session, tmp_path, nli_paths, monkeypatch):
    """`hf:sentence-transformers/all-nli` (config triplet: anchor, positive, negative) read from a local copy in
    the hub's layout (STRUCTCSE_HUB_COPIES): SimCSE-sup's (premise, entailment, contradiction) rows, one
    nli_triplets row each, as the same rows from SimCSE's csv give; offline, an uncopied name is one line."""
    import csv

    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(nli_paths["csv"], encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))[:50]
    copy = tmp_path / "hub" / "sentence-transformers" / "all-nli" / "triplet"
    copy.mkdir(parents=True)
    pq.write_table(pa.table({"anchor": [r["sent0"] for r in rows], "positive": [r["sent1"] for r in rows],
                             "negative": [r["hard_neg"] for r in rows]}), copy / "train-00000-of-00001.parquet")
    monkeypatch.setenv("STRUCTCSE_HUB_COPIES", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    run_pair_ingest(PairIngestConfig(sources=[PairSource("hf", "sentence-transformers/all-nli")],
                                     out=str(tmp_path / "out")))
    triplets = read_set(tmp_path / "out" / "nli_triplets")
    assert len(triplets) == 50
    assert sorted(t["premise"] for t in triplets) == sorted(r["sent0"].strip() for r in rows)
    with pytest.raises(PairSourceError, match=r"^hf source stanfordnlp/snli: not in the Hugging Face cache.*"
                                              r"--source hf:FOLDER"):
        run_pair_ingest(PairIngestConfig(sources=[PairSource("hf", "stanfordnlp/snli")], out=str(tmp_path / "o")))
