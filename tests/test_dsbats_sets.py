"""DSBATS-sn sets: the BATS reader, the filters and sense choice, and the Ray Data job on real BATS + WordNet."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ingest.semnet import Sense
from ingest.dsbats.senses import SenseConfig, choose, group_tally, surviving
from tests.conftest import shared_data

WORDNET = Path("/usr/share/wordnet")
CATEGORIES = ["E01", "E07", "L04", "L09"]


def sense(id, definition, *, rank=0, group="noun.thing", ne=False, cap=False, degree=5, word="w"):
    return Sense(id=id, word=word, pos="n", definition=definition, lemmas=(word,), rank=rank, group=group,
                 named_entity=ne, capitalised=cap, degree=degree)


def test_filters_drop_names_capitals_and_low_degree_but_keep_a_word_made_only_of_names():
    cfg = SenseConfig(min_degree=2)
    queen = [sense("queen.n.01", "female ruler"), sense("queen.n.09", "a band", ne=True),
             sense("queen.n.10", "a rare sense", degree=1), sense("Queen.n.11", "a proper noun", cap=True)]
    kept, reason, names = surviving(queen, cfg)
    assert [s.id for s in kept] == ["queen.n.01"] and reason is None and not names
    paris = [sense("paris.n.01", "capital of France", ne=True, cap=True), sense("paris.n.03", "a prince", ne=True, degree=1)]
    kept, reason, names = surviving(paris, cfg)
    assert [s.id for s in kept] == ["paris.n.01"] and names
    assert surviving(paris, SenseConfig(names_when_only_sense=False)) == ([], "only_names", False)
    assert surviving([sense("x", "d", degree=1)], cfg) == ([], "low_degree", False)
    assert surviving([], cfg) == ([], "no_synset", False)


def test_sense_choice_prefers_the_relation_then_the_gloss_then_the_clusters_class():
    dog = [sense("dog.n.01", "a domesticated canine", group="noun.animal", word="dog")]
    bark = [sense("bark.n.01", "covering of a tree", rank=0, group="noun.plant", word="bark"),
            sense("bark.n.04", "the sound made by a dog", rank=3, group="noun.event", word="bark")]
    no_relation = lambda a, b, rel: False  # noqa: E731
    tally = group_tally([bark])
    assert choose(dog, bark, None, no_relation, group_tally([dog]), tally)[0][1].id == "bark.n.04"  # gloss
    assert choose(dog, bark, None, no_relation, group_tally([dog]), tally)[0][2] == "gloss"
    related = lambda a, b, rel: b.id == "bark.n.01" and rel == "hypernym"  # noqa: E731
    assert choose(dog, bark, "hypernym", related, group_tally([dog]), tally)[0][1:] == (bark[0], "relation")
    # no relation, no gloss: the side's class most common across the cluster wins over frequency
    howl = [sense("howl.n.01", "a long loud cry", rank=0, group="noun.communication", word="howl"),
            sense("howl.n.02", "a structure", rank=1, group="noun.artifact", word="howl")]
    cluster = group_tally([howl[1:], howl[1:], howl])
    assert choose(dog, howl, None, no_relation, group_tally([dog]), cluster)[0][1:] == (howl[1], "cluster_group")
    # one definition on both sides carries no relationship
    same = [sense("big.a.01", "large", word="big")]
    assert choose(same, [sense("big.a.01", "large", word="large")], None, no_relation, tally, tally) == []


@pytest.mark.skipif(not WORDNET.is_dir(), reason="WordNet (Debian wordnet-base) is not installed")
def test_synonyms_in_one_synset_are_dropped_not_given_unrelated_senses_and_no_gloss_names_its_own_word():
    """The review's cases on the real WordNet: L08 airplane:plane share airplane.n.01 (the synonym reading):
    ``same_synset``, never "cut or remove with a plane"; father's own definition naming *father* is not a
    gloss of *beget* (whose lemmas include father); a synset reached through two base forms is one sense."""
    from ingest.dsbats.definitions import category_definitions
    from ingest.dsbats.senses import glosses
    from ingest.semnet import open_network

    network = open_network({"kind": "wordnet", "folder": str(WORDNET)})
    rows = category_definitions(network, SenseConfig(), "L08", "synonyms - exact",
                                [{"line": 1, "word": "airplane", "answers": ["plane"]}])
    assert [r["outcome"] for r in rows] == ["same_synset"]
    father = next(s for s in network.senses("father") if s.id == "father.n.01")
    beget = next(s for s in network.senses("mother") if s.id == "beget.v.01")
    assert not glosses(father, beget) and not glosses(beget, father)
    ids = [s.id for s in network.senses("bases")]
    assert len(ids) == len(set(ids)) and [s.rank for s in network.senses("bases")] == list(range(len(ids)))


def test_bats_reader_counts_malformed_lines_and_names_bad_categories(tmp_path):
    from ingest.dsbats.bats import read_bats

    root = tmp_path / "BATS_3.0" / "3_Encyclopedic_semantics"
    root.mkdir(parents=True)
    (root / "E07 [animal - sound].txt").write_text("dog\tbark/growl\ncat meow\n\tbark\nduck\t/\n\nbee\tbuzz")
    bats = read_bats(tmp_path, ["E07"])
    assert [(ln.word, ln.answers) for ln in bats.lines] == [("dog", ("bark", "growl")), ("bee", ("buzz",))]
    assert [(s["line"], s["reason"]) for s in bats.skipped] == [(2, "no tab between word and answers"),
                                                                  (3, "empty word"), (4, "no answer")]
    with pytest.raises(FileNotFoundError, match="L09"):
        read_bats(tmp_path, ["E07", "L09"])
    with pytest.raises(ValueError, match="E7"):
        read_bats(tmp_path, ["E7"])


@pytest.fixture(scope="module")
def wordnet_folder():
    if not (WORDNET / "data.noun").is_file():
        pytest.skip("WordNet 3.0 database files absent (Debian: apt-get install wordnet-base)")
    return WORDNET


@pytest.fixture(scope="module")
def dsbats_sets(ray_session, wordnet_folder, tmp_path_factory):
    from ingest.dsbats.job import DsbatsConfig, build_dsbats

    bats = shared_data("bats")
    out = tmp_path_factory.mktemp("dsbats")
    cfg = DsbatsConfig(categories=CATEGORIES, positives_per_pair=4, workers=1)
    result = build_dsbats(str(bats), {"kind": "wordnet", "folder": str(wordnet_folder)}, str(out), cfg)
    return out, result, bats


def test_every_bats_pair_is_written_or_dropped_with_a_reason(dsbats_sets):
    from setformat.io import check_set, read_manifest, read_table

    out, result, bats = dsbats_sets
    for kind in ("bats_definitions", "dsbats4cl", "srsd"):
        check_set(out / kind, kind)
    pairs = read_manifest(out / "bats_definitions")["pairs"]
    listed = sum(1 for code in CATEGORIES for f in bats.glob(f"BATS_3.0/*/{code} *.txt")
                 for line in f.read_text().splitlines() for a in line.split("\t")[1].split("/") if a.strip())
    assert pairs["accounted"] and pairs["in_input"] == listed == 1220
    assert pairs["written"] + sum(pairs["dropped"].values()) == pairs["in_input"]
    assert set(pairs["dropped"]) <= {"duplicate_answer", "same_word", "same_definition", "same_synset", "no_synset_first", "no_synset_second",
                                     "low_degree_first", "low_degree_second"}
    table = read_table(out / "bats_definitions").to_pylist()
    assert len(table) == pairs["written"] and sorted(r["pair_id"] for r in table) == [r["pair_id"] for r in table]
    by_id = {r["pair_id"]: r for r in table}
    # the network's own relations decide where they can: L04 substance meronyms, L09 antonyms, E01 part holonyms
    assert by_id["L04:003:sand"]["sense_rule"] == "relation" and by_id["L04:003:sand"]["first_synset"] == "beach.n.01"
    assert all(r["first_definition"] != r["second_definition"] for r in table)
    # E01's capitals and countries are names only: kept (names_when_only_sense) and related as part holonyms
    e01 = [r for r in table if r["category"] == "E01"]
    assert len(e01) >= 45 and sum(r["sense_rule"] == "relation" for r in e01) >= 40


def test_split_keeps_test_lines_out_of_training(dsbats_sets):
    from setformat.io import read_table

    out, result, _ = dsbats_sets
    table = read_table(out / "bats_definitions").to_pylist()
    line = lambda r: tuple(r["pair_id"].split(":")[:2])  # noqa: E731  (category, BATS line)
    test_lines = {line(r) for r in table if r["split"] == "test"}
    train_ids = {r["pair_id"] for r in table if r["split"] == "train"}
    assert test_lines and train_ids and not test_lines & {line(r) for r in table if r["split"] == "train"}
    assert "held_out" not in result["manifests"]["bats_definitions"]["split"]  # holdout: lines, the default
    rows = read_table(out / "dsbats4cl").to_pylist()
    assert {r["anchor_id"] for r in rows} <= train_ids and {r["positive_id"] for r in rows} <= train_ids
    for r in rows:  # p+ is another BATS line of p's cluster
        assert r["anchor_id"].split(":")[:2] != r["positive_id"].split(":")[:2]
        assert r["anchor_id"].split(":")[0] == r["positive_id"].split(":")[0] == r["cluster"]
    assert max(sum(1 for r in rows if r["anchor_id"] == a) for a in {r["anchor_id"] for r in rows}) == 4


def test_words_holdout_keeps_every_test_word_out_of_training(dsbats_sets):
    from ingest.dsbats.contrastive import split_rows
    from setformat.io import read_table

    out, _, _ = dsbats_sets
    table = read_table(out / "bats_definitions").to_pylist()
    lines_split = {r["pair_id"]: r["split"] for r in table}
    counts = split_rows(table, seed=42, test_share=0.2, holdout="words")
    assert counts["held_out"] > 0 and {r["pair_id"] for r in table if r["split"] == "test"} == {
        i for i, s in lines_split.items() if s == "test"}
    test_words = {w for r in table if r["split"] == "test" for w in (r["first_word"], r["second_word"])}
    train_words = {w for r in table if r["split"] == "train" for w in (r["first_word"], r["second_word"])}
    assert test_words and train_words and not test_words & train_words


def test_srsd_items_hold_one_same_cluster_answer(dsbats_sets):
    from setformat.io import read_table

    out, _, _ = dsbats_sets
    defs = {}
    for r in read_table(out / "bats_definitions").to_pylist():
        if r["split"] == "test":
            defs.setdefault((r["first_definition"], r["second_definition"]), r)
    items = read_table(out / "srsd").to_pylist()
    assert {i["kind"] for i in items} == {"other_cluster", "reversed"}
    for item in items:
        candidates = list(zip(item["candidates_first"], item["candidates_second"]))
        answer = defs[candidates[item["answer"]]]  # a test pair
        assert answer["cluster"] == item["cluster"]
        if item["kind"] == "reversed":
            assert candidates[1 - item["answer"]] == candidates[item["answer"]][::-1]
        else:
            assert all(defs[c]["cluster"] != item["cluster"] for i, c in enumerate(candidates) if i != item["answer"])
    assert 0.3 < sum(i["answer"] == 0 for i in items) / len(items) < 0.7  # candidates in a seeded order
    # no query or candidate is a training pair's two definitions (toad : croak told as frog : croak)
    trained = {(r["first_definition"], r["second_definition"])
               for r in read_table(out / "bats_definitions").to_pylist() if r["split"] == "train"}
    assert not {(i["query_first"], i["query_second"]) for i in items} & trained
    assert not {c for i in items for c in zip(i["candidates_first"], i["candidates_second"])} & trained


def test_srsd_leaves_out_test_pairs_equal_to_a_training_pair():
    from ingest.dsbats.contrastive import srsd_rows

    def pair(pid, category, line, first, second, split):
        return {"pair_id": pid, "category": category, "line": line, "cluster": category, "split": split,
                "first_definition": first, "second_definition": second}

    rows = [pair("E07:1:croak", "E07", 1, "tailless amphibian", "a harsh sound", "train"),
            pair("E07:2:croak", "E07", 2, "tailless amphibian", "a harsh sound", "test"),  # frog = toad's synset
            pair("E07:3:moo", "E07", 3, "bovine", "a low sound", "test"),
            pair("E07:4:hiss", "E07", 4, "a reptile", "a sibilant sound", "test"),
            pair("L01:5:animal", "L01", 5, "a dog", "a living thing", "test")]
    table, info = srsd_rows(rows, seed=0, distractors=1)
    assert info["test_pairs_equal_to_training"] == 1
    assert "tailless amphibian" not in set(table.column("query_first").to_pylist())
    assert {q.split("/")[0] for q in table.column("item_id").to_pylist()} == {"E07:3:moo", "E07:4:hiss"}


def test_cli_errors_name_the_option_before_ray_starts(tmp_path, capsys):
    from ingest.dsbats.__main__ import main

    bats = shared_data("bats")
    assert main(["--bats", str(bats), "--wordnet", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert str(tmp_path) in capsys.readouterr().err
    assert main(["--bats", str(bats), "--categories", "X01", "--out", str(tmp_path / "o")]) == 2
    assert "X01" in capsys.readouterr().err
    copy = tmp_path / "bats"
    shutil.copytree(bats, copy)
    assert main(["--bats", str(copy), "--min-degree", "-1", "--out", str(tmp_path / "o")]) == 2
    assert "min_degree" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
