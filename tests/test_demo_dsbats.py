"""The demo world's BATS folder and WordNet dictionary: formats, determinism, and NLTK reading them back."""

from __future__ import annotations

import os
import random
import re
import warnings

import pytest

from structcse.demo import DemoWorld, generate_demo_world
from structcse.demo.bats import ABSENT, CATEGORIES, EXTRA_ANSWERS, category_path, write_bats
from structcse.demo.wordnet import DISTRACTORS, build_network, write_wordnet
from structcse.demo.world import build_world

FILE_NAME = re.compile(r"[EL]\d\d \[[a-zA-Z_ ]+ - [a-zA-Z_ ]+\]\.txt")
DATA = ("noun", "verb", "adj", "adv")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> DemoWorld:
    return generate_demo_world(tmp_path_factory.mktemp("world"), seed=0)


@pytest.fixture(scope="module")
def wn(world, tmp_path_factory):
    """NLTK 3.10's own reader. Its constructor maps sense keys from the "wordnet" corpus (``index.sense``) to the
    loaded one, so ``corpora/wordnet`` must resolve on ``nltk.data.path``: here, to the demo dictionary itself."""
    nltk = pytest.importorskip("nltk")
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    data = tmp_path_factory.mktemp("nltk_data")
    os.makedirs(data / "corpora")
    os.symlink(world.wordnet_dir, data / "corpora" / "wordnet")
    saved = list(nltk.data.path)
    nltk.data.path += [str(world.wordnet_dir), str(data)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield WordNetCorpusReader(str(world.wordnet_dir), None)
    nltk.data.path[:] = saved


def read_bats(path) -> dict[str, list[str]]:
    raw = path.read_bytes()
    assert not raw.endswith(b"\n") and b"\r" not in raw
    pairs = {}
    for line in raw.decode("utf-8").split("\n"):
        word, answers = line.split("\t")
        assert word == word.lower() and " " not in line and answers
        pairs[word] = answers.split("/")
    assert list(pairs) == sorted(pairs)
    return pairs


def bats(world) -> dict[str, dict[str, list[str]]]:
    return {code: read_bats(category_path(world.bats_dir, code)) for code in CATEGORIES}


def test_bats_folder_has_the_official_layout(world):
    files = sorted(p.relative_to(world.bats_dir).as_posix() for p in world.bats_dir.rglob("*") if p.is_file())
    assert len(files) == len(CATEGORIES) >= 6
    for name in files:
        folder, file = name.split("/")
        assert folder in ("3_Encyclopedic_semantics", "4_Lexicographic_semantics") and FILE_NAME.fullmatch(file)
    assert "3_Encyclopedic_semantics/E01 [country - capital].txt" in files
    for code, pairs in bats(world).items():
        assert 6 <= len(pairs) <= 40, code
    assert any(len(a) > 1 for pairs in bats(world).values() for a in pairs.values())
    assert world.ground_truth()["counts"]["bats_pairs"] == sum(len(p) for p in bats(world).values())


def test_e01_pairs_every_capital_with_its_country(world):
    truth = world.ground_truth()["entities"]
    countries = {e["qid"]: e["title"].lower() for e in truth if e["kind"] == "country"}
    e01 = bats(world)["E01"]
    assert len(e01) == len(countries)
    assert {answers[0] for answers in e01.values()} == set(countries.values())


def test_same_seed_same_bytes(world, tmp_path):
    demo = build_world(random.Random(0), 1)
    for seed, same in ((0, True), (1, False)):
        root = tmp_path / str(seed)
        write_bats(demo, root, random.Random(f"bats-{seed}"))
        write_wordnet(demo, root, random.Random(f"wordnet-{seed}"))
        for folder, written in ((world.bats_dir, root / "BATS_3.0"), (world.wordnet_dir, root / "dict")):
            ours = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
            theirs = {p.relative_to(written): p.read_bytes() for p in written.rglob("*") if p.is_file()}
            assert (ours == theirs) is same or folder == world.wordnet_dir and not same


def test_data_offsets_are_byte_positions_and_header_is_wordnets(world):
    for name in DATA:
        raw = (world.wordnet_dir / f"data.{name}").read_bytes()
        lines = raw.split(b"\n")
        assert lines[-1] == b"" and len(lines) > 30
        assert all(line.startswith(f"  {i} ".encode()) and line.endswith(b"  ") for i, line in enumerate(lines[:29], 1))
        position = 0
        for line in lines[:-1]:
            if not line.startswith(b"  "):
                assert int(line[:8]) == position and line.endswith(b"  ") and b" | " in line
                fields = line.split(b" | ")[0].split()
                assert len(fields[3]) == 2 and int(fields[3], 16) >= 1
            position += len(line) + 1


def test_index_files_are_byte_sorted_and_point_at_synsets(world):
    offsets = {}
    for name in DATA:
        data = (world.wordnet_dir / f"data.{name}").read_text(encoding="utf-8").splitlines()
        offsets[name] = {int(line[:8]) for line in data if not line.startswith("  ")}
        index = [line for line in (world.wordnet_dir / f"index.{name}").read_text(encoding="utf-8").splitlines()
                 if not line.startswith("  ")]
        lemmas = [line.split()[0] for line in index]
        assert lemmas == sorted(lemmas, key=lambda w: w.encode("utf-8")) and len(set(lemmas)) == len(lemmas)
        for line in index:
            fields = line.split()
            count, pointers = int(fields[2]), int(fields[3])
            assert fields[4 + pointers] == str(count) and len(fields) == 6 + pointers + count
            assert {int(o) for o in fields[6 + pointers:]} <= offsets[name]
    for name in ("noun.exc", "verb.exc", "adj.exc", "adv.exc", "lexnames", "index.sense"):
        assert (world.wordnet_dir / name).read_text(encoding="utf-8").endswith("\n")


def test_nltk_reads_every_synset_back(world, wn):
    net, _, _ = build_network(build_world(random.Random(0), 1), random.Random("wordnet-0"))
    assert wn.get_version() == "3.0"
    for written in net.synsets:
        synset = wn.synset_from_pos_and_offset(written.pos, written.offset)
        assert synset.definition() == written.gloss and synset.lemma_names() == written.words
        assert synset in wn.synsets(written.words[0], pos=written.pos)
        targets = {(sym, t.offset) for sym, t, a, _ in written.pointers if a == 0}
        read = {(sym, s.offset()) for sym, s in (
            *(("@", s) for s in synset.hypernyms()), *(("@i", s) for s in synset.instance_hypernyms()),
            *(("%s", s) for s in synset.substance_meronyms()), *(("#p", s) for s in synset.part_holonyms()),
            *(("#m", s) for s in synset.member_holonyms()), *(("%p", s) for s in synset.part_meronyms()))}
        assert read == {t for t in targets if t[0] in ("@", "@i", "%s", "#p", "#m", "%p")}
    assert len(list(wn.all_synsets())) == len(net.synsets) == world.ground_truth()["counts"]["wordnet_synsets"]


def test_nltk_sees_the_relations_the_categories_use(world, wn):
    pairs = bats(world)
    chain = [s.name() for s in wn.synset("dog.n.01").closure(lambda s: s.hypernyms())]
    assert chain[:4] == ["canine.n.01", "carnivore.n.01", "mammal.n.01", "vertebrate.n.01"]
    assert "animal.n.01" in chain
    assert sorted(s.name() for s in wn.synsets("paper")[0].substance_meronyms()) == ["cellulose.n.01", "wood.n.01"]
    assert [lemma.name() for lemma in wn.synsets("hot")[0].lemmas()[0].antonyms()] == ["cold"]
    assert wn.synsets("costly")[0].similar_tos()[0].name() == "expensive.a.01"
    assert "pack.n.01" in {s.name() for s in wn.synsets("wolf")[0].member_holonyms()}
    for capital, (country, *_) in pairs["E01"].items():
        sense = wn.synsets(capital)[0]
        assert sense.definition().startswith(f"the capital of {sense.part_holonyms()[0].lemma_names()[0]}")
        assert sense.part_holonyms()[0].lemma_names()[0].lower() == country
        assert sense.instance_hypernyms()[0].name() == "national_capital.n.01"
    for surname in pairs["E04"]:
        assert wn.synsets(surname)[0].instance_hypernyms()


def test_every_bats_word_has_a_synset_but_the_absent_ones(world, wn):
    for code, pairs in bats(world).items():
        for word, answers in pairs.items():
            absent = word in ABSENT.get(code, {})
            assert bool(wn.synsets(word)) is not absent, (code, word)
            extra = set(EXTRA_ANSWERS.get(code, {}).get(word, []))
            if not absent:
                assert all(wn.synsets(a) for a in answers if a not in extra), (code, word)


def test_distractor_senses_are_there_for_the_filters(wn):
    def degree(synset):  # pointers of the synset and of its lemmas, as NLTK parsed them
        return sum(len(v) for v in synset._pointers.values()) + sum(len(v) for v in synset._lemma_pointers.values())

    main = {word: wn.synsets(word)[0] for word in DISTRACTORS}
    for sense in main.values():
        assert sense.lemma_names()[0].islower() and not sense.instance_hypernyms() and degree(sense) >= 2
    crow = [s for s in wn.synsets("crow") if s.lemma_names()[0] == "Crow"]
    assert len(crow) == 1 and not crow[0].instance_hypernyms() and degree(crow[0]) >= 2
    lion = [s for s in wn.synsets("lion") if s.instance_hypernyms()]
    assert len(lion) == 1 and lion[0].lemma_names() == ["Lion"]
    rare = wn.synsets("duck", pos="n")[-1]
    assert degree(rare) == 1 and rare.lemma_names() == ["duck"] and not rare.instance_hypernyms()
