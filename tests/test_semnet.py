"""Tests of ingest.semnet: WordNet 3.0 read from the real Debian ``wordnet-base`` folder
(skipped without it) with facts checked against the database, and BabelNet against a
loopback HTTP server speaking the documented JSON. No Ray, no network."""

from __future__ import annotations

import json
import pickle
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from ingest.semnet import RELATIONS, open_network

WORDNET = Path("/usr/share/wordnet")


# -- WordNet -----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wn():
    if not (WORDNET / "data.noun").is_file():
        pytest.skip(f"WordNet database not installed at {WORDNET} (Debian package wordnet-base)")
    return open_network({"kind": "wordnet", "folder": str(WORDNET)})


def sense(wn, word, synset_id):
    return next(s for s in wn.senses(word) if s.id == synset_id)


def test_wordnet_senses(wn):
    assert wn.name == "wordnet-3.0"
    dog = wn.senses("dog")
    assert dog[0].id == "dog.n.01" and dog[0].group == "noun.animal" and dog[0].pos == "n"
    assert dog[0].definition.startswith("a member of the genus Canis")
    assert "Canis_familiaris" in dog[0].lemmas and [s.rank for s in dog] == list(range(len(dog)))
    # across parts of speech the tag counts decide: cold.a.01 (35) before cold.n.01 (5)
    assert [s.id for s in wn.senses("cold")[:3]] == ["cold.a.01", "cold.a.02", "cold.n.01"]
    assert wn.senses("Living Room")[0].id == "living_room.n.01"  # BATS "_" spelling, lower-cased
    assert wn.senses("geese")[0].id == "goose.n.01"  # morphy's exception list
    assert sense(wn, "hot", "hot.s.01").pos == "a"  # satellites are adjectives
    assert wn.senses("qwzx") == []


def test_wordnet_named_entity_and_capitalised(wn):
    mercury = {s.id: s for s in wn.senses("mercury")}
    assert not mercury["mercury.n.01"].named_entity and not mercury["mercury.n.01"].capitalised  # the metal
    assert mercury["mercury.n.02"].named_entity and mercury["mercury.n.02"].capitalised  # the god
    paris = {s.id: s for s in wn.senses("paris")}
    assert paris["paris.n.01"].named_entity and paris["paris.n.01"].capitalised
    assert paris["paris.n.02"].capitalised and not paris["paris.n.02"].named_entity  # genus Paris: a class
    # WordNet has neither Acrobat the software nor Queen the band: every sense is lower case
    assert not any(s.capitalised or s.named_entity for s in wn.senses("acrobat") + wn.senses("queen"))


def test_wordnet_degree(wn):
    # dog.n.01's data line has p_cnt 23 (hypernyms, hyponyms, member holonyms, part meronym, lemma pointers)
    assert sense(wn, "dog", "dog.n.01").degree == 23
    assert sense(wn, "dog", "andiron.n.01").degree == 1  # a rare sense: one hypernym
    assert sense(wn, "city", "city.n.01").degree > 600  # hyponyms and part meronyms of a hub


@pytest.mark.parametrize("first, second, relation, expected", [
    (("dog", "dog.n.01"), ("animal", "animal.n.01"), "hypernym", True),  # L01, transitive
    (("paris", "paris.n.01"), ("city", "city.n.01"), "hypernym", True),  # through an instance hypernym
    (("animal", "animal.n.01"), ("dog", "dog.n.01"), "hypernym", False),
    (("animal", "animal.n.01"), ("dog", "dog.n.01"), "hyponym", True),  # L03
    (("beach", "beach.n.01"), ("sand", "sand.n.01"), "substance_meronym", True),  # L04
    (("sand", "sand.n.01"), ("beach", "beach.n.01"), "substance_holonym", True),
    (("beach", "beach.n.01"), ("sand", "sand.n.01"), "substance_holonym", False),
    (("bird", "bird.n.01"), ("flock", "flock.n.02"), "member_holonym", True),  # L05 bird : flock
    (("flock", "flock.n.02"), ("bird", "bird.n.01"), "member_meronym", True),
    (("acrobat", "acrobat.n.01"), ("troupe", "company.n.04"), "member_holonym", False),  # not in WordNet 3.0
    (("paris", "paris.n.01"), ("france", "france.n.01"), "part_holonym", True),  # E01 direction
    (("france", "france.n.01"), ("paris", "paris.n.01"), "part_meronym", True),
    (("paris", "paris.n.01"), ("france", "france.n.01"), "part_meronym", False),
    (("hot", "hot.a.01"), ("cold", "cold.a.01"), "antonym", True),  # L09
    (("good", "good.a.01"), ("bad", "bad.a.01"), "antonym", True),
    (("arid", "arid.s.01"), ("wet", "wet.a.01"), "antonym", True),  # indirect: arid -> dry <-> wet
    (("hot", "hot.a.01"), ("warm", "warm.a.01"), "antonym", False),
    (("happy", "happy.a.01"), ("glad", "glad.a.01"), "similar", True),  # also-see
    (("fast", "fast.a.01"), ("quick", "quick.s.01"), "similar", True),  # similar-to
    (("big", "large.a.01"), ("large", "large.a.01"), "similar", False),  # one synset, not two senses
    (("dog", "dog.n.01"), ("cat", "cat.n.01"), "similar", False),
])
def test_wordnet_related(wn, first, second, relation, expected):
    assert wn.related(sense(wn, *first), sense(wn, *second), relation) is expected


def test_wordnet_relation_names_and_pickle(wn):
    dog = sense(wn, "dog", "dog.n.01")
    for relation in RELATIONS:
        assert isinstance(wn.related(dog, dog, relation), bool)
    with pytest.raises(ValueError, match="relation"):
        wn.related(dog, dog, "cousin")
    assert large_shared(wn)  # BATS L08 big : large share a synset; DSBATS handles that case itself
    clone = pickle.loads(pickle.dumps(wn))  # a Ray worker gets the folder and builds its own reader
    assert clone.folder == wn.folder and clone.senses("dog")[0] == wn.senses("dog")[0]


def large_shared(wn):
    return {s.id for s in wn.senses("big")} & {s.id for s in wn.senses("large")} >= {"large.a.01", "big.s.04"}


def test_wordnet_lexnames_shim_and_own_lexnames(wn, tmp_path):
    from ingest.semnet.wordnet import REQUIRED, WordNet

    assert not (WORDNET / "lexnames").exists()  # Debian's layout: the shim is what the fixture used
    assert sense(wn, "acrobat", "acrobat.n.01").group == "noun.person"
    folder = tmp_path / "dict"
    folder.mkdir()
    for name in REQUIRED:
        shutil.copyfile(WORDNET / name, folder / name)
    from ingest.semnet.wordnet import LEXNAMES_TABLE

    (folder / "lexnames").write_text(LEXNAMES_TABLE.replace("noun.animal", "noun.beast"))
    own = WordNet(folder)
    assert own.senses("dog")[0].group == "noun.beast"  # the folder's own lexnames wins
    # no cntlist.rev here: across parts of speech the order is n, v, a, r
    assert [s.pos for s in own.senses("cold")][:4] == ["n", "n", "n", "a"]
    assert sorted(p.name for p in folder.iterdir()) == sorted([*REQUIRED, "lexnames"])  # nothing written


def test_lexnames_table():
    import gzip
    import re

    from ingest.semnet.wordnet import LEXNAMES, LEXNAMES_TABLE

    assert len(LEXNAMES) == 45 and LEXNAMES[3] == "noun.Tops" and LEXNAMES[44] == "adj.ppl"
    assert LEXNAMES_TABLE.splitlines()[5] == "05\tnoun.animal\t1"
    man = Path("/usr/share/man/man5/lexnames.5WN.gz")  # the table's source, when docs are installed
    if man.is_file():
        assert re.findall(r"^(\d\d)\s+(\S+)", gzip.decompress(man.read_bytes()).decode(), re.MULTILINE) == [
            (f"{i:02d}", name) for i, name in enumerate(LEXNAMES)]


def test_wordnet_not_a_database(tmp_path):
    from ingest.semnet.wordnet import WordNet

    (tmp_path / "index.noun").write_text("")
    with pytest.raises(FileNotFoundError, match=r"not a WordNet database folder.*missing index\.verb, .*data\.noun") as err:
        WordNet(tmp_path)
    assert str(tmp_path) in str(err.value) and "index.noun," not in str(err.value)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        WordNet(tmp_path / "absent")


# -- BabelNet over loopback ---------------------------------------------------------------------------------------
KEY = "s3cret-KEY-4242"
DOG, ANIMAL, CANINE, BARK, HOT, COLD, TORRID, ACROBAT_SW = (
    "bn:00015267n", "bn:00004222n", "bn:00015266n", "bn:00008199n", "bn:00104361a", "bn:00099663a",
    "bn:00099999a", "bn:03324124n")


def _edge(target, symbol, name, group):
    return {"language": "EN", "target": target, "weight": 0.0, "normalizedWeight": 0.0,
            "pointer": {"fSymbol": symbol, "name": name, "shortName": name.lower(), "relationGroup": group,
                        "isAutomatic": False}}


def _synset(lemmas, gloss, kind="CONCEPT", categories=(), domains=None):
    return {"senses": [{"type": "BabelSense", "properties": {"fullLemma": lemma, "simpleLemma": lemma,
                                                             "language": "EN", "source": "WN"}} for lemma in lemmas],
            "glosses": [{"source": "WIKI", "language": "EN", "gloss": "wiki " + gloss},
                        {"source": "WN", "language": "EN", "gloss": gloss}],
            "synsetType": kind, "categories": [{"category": c, "language": "EN"} for c in categories],
            "domains": domains or {}}


API = {
    "getSynsetIds": {"dog": [{"id": DOG, "pos": "NOUN", "source": "BABELNET"}],
                     "acrobat": [{"id": ACROBAT_SW, "pos": "NOUN", "source": "BABELNET"}]},
    "getSynset": {DOG: _synset(["dog", "domestic_dog"], "a domesticated carnivore", categories=["Dogs"]),
                  ACROBAT_SW: _synset(["Acrobat", "Adobe_Acrobat"], "a family of software", "NAMED_ENTITY",
                                      domains={"COMPUTING": 0.9, "ART": 0.1})},
    "getOutgoingEdges": {
        DOG: [_edge(CANINE, "@", "Hypernym", "HYPERNYM"), _edge(BARK, "r", "Semantically_related_form", "OTHER"),
              _edge("bn:00001n", "%p", "Part meronym", "MERONYM")],
        CANINE: [_edge(ANIMAL, "@", "Hypernym", "HYPERNYM")],
        HOT: [_edge(COLD, "!", "Antonym", "OTHER"), _edge(TORRID, "&", "Similar_to", "OTHER")],
        TORRID: [_edge(HOT, "&", "Similar_to", "OTHER")],
        ACROBAT_SW: [],
    },
}
PARAM = {"getSynsetIds": "lemma", "getSynset": "id", "getOutgoingEdges": "id"}


class FakeBabelNet(ThreadingHTTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.hits: list[tuple[str, dict]] = []
        self.script: list[tuple[int, dict, object]] = []  # forced answers, served first


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        url = urlparse(self.path)
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        endpoint = url.path.rsplit("/", 1)[-1]
        self.server.hits.append((endpoint, params))
        if self.server.script:
            status, headers, body = self.server.script.pop(0)
        elif params.get("key") != KEY:
            status, headers, body = 403, {}, {"message": "Invalid key"}
        else:
            status, headers, body = 200, {}, API[endpoint].get(params[PARAM[endpoint]], [])
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = FakeBabelNet()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def bn(server, tmp_path, monkeypatch):
    from ingest.semnet.babelnet import BabelNet

    monkeypatch.setenv("BABELNET_KEY", KEY)
    return BabelNet(url=f"http://127.0.0.1:{server.server_port}/v9", cache=str(tmp_path / "cache"),
                    backoff=0.01, max_retries=2, timeout=5)


def test_babelnet_senses(bn, server):
    (dog,) = bn.senses("dog")
    assert dog.id == DOG and dog.pos == "n" and dog.rank == 0 and dog.group == "Dogs"
    assert dog.definition == "a domesticated carnivore"  # the WordNet gloss before the first one
    assert dog.lemmas == ("dog", "domestic_dog") and dog.degree == 3
    assert not dog.named_entity and not dog.capitalised
    (acrobat,) = bn.senses("acrobat")
    assert acrobat.named_entity and acrobat.capitalised and acrobat.group == "COMPUTING"
    assert server.hits[0] == ("getSynsetIds", {"lemma": "dog", "searchLang": "EN", "key": KEY})
    assert bn.name == "babelnet-v9"


def test_babelnet_cache(bn, server, tmp_path, monkeypatch):
    from ingest.semnet.babelnet import BabelNet

    first = bn.senses("dog")
    hits = len(server.hits)
    assert bn.senses("dog") == first and len(server.hits) == hits  # memory
    again = BabelNet(url=bn.url, cache=str(tmp_path / "cache"))
    assert again.senses("dog") == first and len(server.hits) == hits  # disk: no request
    files = list((tmp_path / "cache").iterdir())
    assert len(files) == hits and all(p.suffix == ".json" for p in files)
    for path in files:
        text = path.read_text()
        assert KEY not in text and '"key"' not in text
        json.loads(text)
    assert KEY not in str(pickle.dumps(bn))


def test_babelnet_backoff(bn, server):
    from ingest.semnet.babelnet import BabelNetError

    server.script = [(429, {}, {}), (503, {"Retry-After": "0"}, {})]
    start = time.monotonic()
    assert bn.get("getSynsetIds", lemma="dog", searchLang="EN")[0]["id"] == DOG
    assert len(server.hits) == 3 and time.monotonic() - start >= 0.01
    server.script = [(500, {}, {})] * 3
    with pytest.raises(BabelNetError, match=r"gave up after 3 tries \(HTTP 500\)") as err:
        bn.get("getSynsetIds", lemma="cat", searchLang="EN")
    assert KEY not in str(err.value) and "&key=***" in str(err.value)


def test_babelnet_errors(bn, server, monkeypatch):
    from ingest.semnet.babelnet import BabelNet, BabelNetError, BabelNetLimit

    server.script = [(200, {}, {"message": "Your key is not valid or the daily requests limit has been reached."})]
    with pytest.raises(BabelNetLimit, match="daily requests limit"):
        bn.senses("cat")
    assert not list(Path(bn.cache).glob("*.json"))  # an error is never cached
    monkeypatch.setenv("BABELNET_KEY", "wrong")
    with pytest.raises(BabelNetError, match="Invalid key") as err:
        bn.senses("cat")
    assert "wrong" not in str(err.value)
    monkeypatch.delenv("BABELNET_KEY")
    with pytest.raises(BabelNetError, match="environment variable BABELNET_KEY"):
        BabelNet()
    monkeypatch.setenv("MY_BN", KEY)
    for url in ("ftp://babelnet.io/v9", "file:///etc/passwd", "babelnet.io/v9"):
        with pytest.raises(ValueError, match="http"):
            BabelNet(url=url, key_env="MY_BN")


def test_babelnet_related(bn):
    from ingest.semnet import Sense

    def s(synset_id):
        return Sense(synset_id, "w", "n", "", (), 0, "", False, False, 0)

    assert bn.related(s(DOG), s(CANINE), "hypernym") and bn.related(s(DOG), s(ANIMAL), "hypernym")
    assert not bn.related(s(ANIMAL), s(DOG), "hypernym") and bn.related(s(ANIMAL), s(DOG), "hyponym")
    assert bn.related(s(DOG), s("bn:00001n"), "part_meronym")
    assert not bn.related(s(DOG), s("bn:00001n"), "part_holonym")
    assert not bn.related(s(DOG), s(BARK), "similar")
    assert bn.related(s(HOT), s(COLD), "antonym") and bn.related(s(TORRID), s(COLD), "antonym")
    assert bn.related(s(HOT), s(TORRID), "similar")
