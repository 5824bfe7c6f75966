"""The demo world generator: determinism and the real dump formats it writes."""

from __future__ import annotations

import bz2
import html
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ingest import multistream
from ingest.wikipedia import Page, parse_pages
from ingest.wikitext import normalize_title, split_sentences, wikitext_to_text
from structcse.demo import DemoWorld, generate_demo_world, load_demo_world
from tests.conftest import REPO

MEDIAWIKI_NS = "{http://www.mediawiki.org/xml/export-0.11/}"


def world_files(world: DemoWorld) -> dict[str, bytes]:
    return {str(p.relative_to(world.root)): p.read_bytes() for p in sorted(world.root.rglob("*")) if p.is_file()}


def read_index(world: DemoWorld) -> list[tuple[int, int, str]]:
    lines = bz2.decompress(world.wikipedia_index.read_bytes()).decode("utf-8").splitlines()
    rows = []
    for line in lines:
        offset, page_id, title = line.split(":", 2)
        rows.append((int(offset), int(page_id), html.unescape(title)))
    return rows


def stream_ranges(world: DemoWorld, rows) -> list[tuple[int, int]]:
    offsets = sorted({offset for offset, _, _ in rows})
    ends = offsets[1:] + [world.wikipedia_dump.stat().st_size]
    return list(zip(offsets, ends))


def read_stream(data: bytes, start: int, end: int) -> str:
    decompressor = bz2.BZ2Decompressor()
    text = decompressor.decompress(data[start:end]).decode("utf-8")
    assert decompressor.eof
    return text


def wikidata_entities(world: DemoWorld) -> list[dict]:
    lines = bz2.decompress(world.wikidata_dump.read_bytes()).decode("utf-8").split("\n")
    assert lines[0] == "[" and lines[-2] == "]" and lines[-1] == ""
    body = lines[1:-2]
    assert all(line.endswith(",") for line in body[:-1]) and not body[-1].endswith(",")
    return [json.loads(line.rstrip(",")) for line in body]


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> DemoWorld:
    return generate_demo_world(tmp_path_factory.mktemp("world"), seed=0)


def test_same_seed_same_bytes_other_seed_differs(world, tmp_path):
    again = world_files(generate_demo_world(tmp_path / "again", seed=0))
    assert again == world_files(world)
    other = world_files(generate_demo_world(tmp_path / "other", seed=1))
    assert other.keys() == again.keys()
    # the BATS files of the fixed English lexicon and WordNet's fixed files (lexnames, ...) are the same for
    # every seed; everything drawn from the world differs
    drawn = [name for name in again if not name.startswith(("bats/", "wordnet/"))]
    assert all(other[name] != again[name] for name in drawn)
    assert other["bats/BATS_3.0/3_Encyclopedic_semantics/E01 [country - capital].txt"] != \
        again["bats/BATS_3.0/3_Encyclopedic_semantics/E01 [country - capital].txt"]
    assert other["wordnet/dict/data.noun"] != again["wordnet/dict/data.noun"]


def test_load_reads_back_what_generate_wrote(world):
    assert load_demo_world(world.root) == world
    truth = world.ground_truth()
    counts = truth["counts"]
    assert counts["pages"] == world.num_pages
    assert counts["pages"] == counts["articles"] + counts["redirects"] + counts["non_article_pages"]
    assert 250 <= world.num_pages <= 400
    assert len(truth["entities"]) == counts["articles"]


def test_multistream_index_covers_every_page_once(world):
    rows = read_index(world)
    data = world.wikipedia_dump.read_bytes()
    header = read_stream(data, 0, rows[0][0])
    assert header.startswith('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/"')
    siteinfo = ET.fromstring(header + "</mediawiki>").find(MEDIAWIKI_NS + "siteinfo")
    assert siteinfo.findtext(MEDIAWIKI_NS + "dbname") == "enwiki"
    assert world.wikipedia_dump.name.split("-")[0] == world.wikipedia_index.name.split("-")[0] == "enwiki"
    namespaces = {n.get("key"): n.text for n in siteinfo.iter(MEDIAWIKI_NS + "namespace")}
    assert namespaces["14"] == "Category" and namespaces["0"] is None

    ranges = stream_ranges(world, rows)
    seen = []
    for number, (start, end) in enumerate(ranges):
        pages = ET.fromstring("<pages>" + read_stream(data, start, end) + "</pages>").findall("page")
        assert len(pages) == 100 or number == len(ranges) - 1
        for page in pages:
            seen.append((start, int(page.findtext("id")), page.findtext("title")))
            text = page.find("revision/text")
            assert int(text.get("bytes")) == len(text.text.encode("utf-8"))
    assert seen == rows
    assert len({page_id for _, page_id, _ in rows}) == len(rows) == world.num_pages

    footer_start = ranges[-1][1] - len(bz2.compress(b"</mediawiki>\n"))
    assert bz2.decompress(data[footer_start:]) == b"</mediawiki>\n"
    assert bz2.decompress(data).decode("utf-8").endswith("  </page>\n</mediawiki>\n")


def test_pages_cover_the_edge_cases(world):
    data = bz2.decompress(world.wikipedia_dump.read_bytes()).decode("utf-8")
    root = ET.fromstring(data)
    pages = {p.findtext(MEDIAWIKI_NS + "title"): p for p in root.iter(MEDIAWIKI_NS + "page")}
    truth = world.ground_truth()
    titles = set(pages)
    assert any(":" in t and pages[t].findtext(MEDIAWIKI_NS + "ns") == "0" for t in titles)
    assert any("&" in t for t in titles)
    assert {pages[t].findtext(MEDIAWIKI_NS + "ns") for t in truth["special_pages"]["non_article"]} == {"4", "10", "14"}
    for source, target in truth["redirects"].items():
        assert pages[source].find(MEDIAWIKI_NS + "redirect").get("title") == target
        assert target in titles
    texts = {t: p.findtext(f"{MEDIAWIKI_NS}revision/{MEDIAWIKI_NS}text") for t, p in pages.items()}
    assert all(entity["title"] in texts for entity in truth["entities"])
    company = next(e["title"] for e in truth["entities"] if e["kind"] == "company")
    for markup in ("{{Infobox company", "'''" + company + "'''", "<ref", "== History ==", "[[Category:"):
        assert markup in texts[company]
    every_text = "\n".join(texts.values())
    for markup in ('{| class="wikitable"', "[[File:", "<!--", "&nbsp;", "''The", '<ref name="profile" />'):
        assert markup in every_text
    assert any(source in every_text for source in truth["redirects"]), "some links go through redirects"


def test_wikidata_dump_matches_the_articles(world):
    entities = wikidata_entities(world)
    truth = world.ground_truth()
    assert len(entities) == truth["counts"]["entities"]
    by_id = {e["id"]: e for e in entities}
    assert len(by_id) == len(entities)
    titles = {e["title"] for e in truth["entities"]}
    for record in truth["entities"]:
        entity = by_id[record["qid"]]
        assert entity["type"] == "item"
        assert entity["sitelinks"]["enwiki"]["title"] == record["title"]
        p31 = [s["mainsnak"]["datavalue"]["value"]["id"] for s in entity["claims"]["P31"] if s["rank"] != "deprecated"]
        assert p31 == [record["type"]]
    enwiki = [e["sitelinks"]["enwiki"]["title"] for e in entities if "enwiki" in e.get("sitelinks", {})]
    assert sorted(enwiki) == sorted(titles)
    statements = [s for e in entities for claims in e["claims"].values() for s in claims]
    assert any(s["mainsnak"]["snaktype"] == "novalue" and "datavalue" not in s["mainsnak"] for s in statements)
    assert any(s["rank"] == "deprecated" and s["mainsnak"]["property"] == "P31" for s in statements)
    assert any(e["type"] == "property" and e["id"] == "P31" for e in entities)
    assert any(e["type"] == "item" and "enwiki" not in e["sitelinks"] for e in entities)
    company = by_id[next(r["qid"] for r in truth["entities"] if r["kind"] == "company")]
    assert {"P17", "P452", "P112"} <= set(company["claims"])


def dewiki_pages(world: DemoWorld) -> tuple[str, list[tuple[int, int, str]], list[tuple[int, Page]]]:
    """The German dump read the way ingest reads it: (header, index rows, (stream offset, page) per page)."""
    rows = multistream.read_index(str(world.dewiki_index))
    ranges = multistream.stream_ranges(rows, world.dewiki_dump.stat().st_size)
    pages = []
    with open(world.dewiki_dump, "rb") as f:
        header = bz2.BZ2Decompressor().decompress(f.read(ranges[0].start)).decode("utf-8")
        for stream in ranges:
            parsed = list(parse_pages(multistream.read_stream(f, stream).decode("utf-8")))
            assert all(isinstance(page, Page) for page in parsed)
            assert tuple(page.page_id for page in parsed) == stream.page_ids
            pages += [(stream.start, page) for page in parsed]
    return header, rows, pages


def test_dewiki_dump_parses_and_its_index_matches_its_pages(world):
    header, rows, pages = dewiki_pages(world)
    assert world.dewiki_dump.name.split("-")[0] == world.dewiki_index.name.split("-")[0] == "dewiki"
    siteinfo = ET.fromstring(header + "</mediawiki>").find(MEDIAWIKI_NS + "siteinfo")
    assert siteinfo.findtext(MEDIAWIKI_NS + "dbname") == "dewiki"
    namespaces = {n.get("key"): n.text for n in siteinfo.iter(MEDIAWIKI_NS + "namespace")}
    assert namespaces["14"] == "Kategorie" and namespaces["10"] == "Vorlage" and namespaces["0"] is None
    assert [(offset, page.page_id, page.title) for offset, page in pages] == rows
    assert len({offset for offset, _, _ in rows}) >= 2, "several page streams"
    assert len({page.page_id for _, page in pages}) == len(pages) == world.dewiki_num_pages
    counts = world.ground_truth()["counts"]
    assert counts["dewiki_pages"] == counts["dewiki_articles"] + counts["dewiki_redirects"] == len(pages)
    assert 30 <= counts["dewiki_articles"] <= 60
    assert all(page.ns == 0 for _, page in pages)
    data = world.dewiki_dump.read_bytes()
    assert bz2.decompress(data).decode("utf-8").endswith("  </page>\n</mediawiki>\n")


def test_dewiki_sitelinks_name_german_articles(world):
    _, _, pages = dewiki_pages(world)
    articles = {page.title for _, page in pages if page.redirect is None}
    truth = world.ground_truth()
    entities = wikidata_entities(world)
    sitelinks = {e["id"]: e["sitelinks"]["dewiki"]["title"] for e in entities
                 if "dewiki" in e.get("sitelinks", {})}
    assert sitelinks == truth["dewiki_titles"]
    assert set(sitelinks.values()) == articles
    by_id = {e["id"]: e for e in entities}
    enwiki = {qid: e["sitelinks"]["enwiki"]["title"] for qid, e in by_id.items()
              if "enwiki" in e.get("sitelinks", {})}
    renamed = {qid for qid, title in sitelinks.items() if qid in enwiki and enwiki[qid] != title}
    assert renamed, "some German titles differ from the English ones"
    assert any(title.endswith(" (Unternehmen)") for title in sitelinks.values())
    assert any(qid not in enwiki for qid in sitelinks), "some items have only a German article"
    kinds = {record["kind"] for record in truth["entities"] if record["qid"] in sitelinks}
    assert kinds == {"country", "city", "industry", "company", "person"}
    for qid, title in sitelinks.items():
        label = by_id[qid]["labels"]["de"]["value"]
        assert title == label or title.startswith(label + " (")


def test_dewiki_redirects_and_links_resolve(world):
    _, _, pages = dewiki_pages(world)
    articles = {page.title: page for _, page in pages if page.redirect is None}
    redirects = {page.title: page.redirect for _, page in pages if page.redirect is not None}
    assert redirects and redirects == world.ground_truth()["dewiki_redirects"]
    assert all(target in articles for target in redirects.values())
    through_redirects = 0
    for page in articles.values():
        text, links = wikitext_to_text(page.wikitext)
        sentences = split_sentences(text, links, min_chars=0)
        assert sentences, page.title
        for sentence, sentence_links in sentences:
            assert len(sentence) >= 30 and sentence_links, (page.title, sentence)
        for link in links:
            target = normalize_title(link.target)
            assert target in articles or target in redirects, (page.title, link)
            through_redirects += target in redirects
    assert through_redirects > 0


def test_sts_files_follow_the_stsbenchmark_layout(world):
    splits = {}
    for split in ("dev", "test"):
        lines = (world.sts_dir / f"sts-{split}.csv").read_text(encoding="utf-8").splitlines()
        assert 100 <= len(lines) <= 200
        rows = [line.split("\t") for line in lines]
        assert all(len(row) == 7 for row in rows)
        scores = [float(row[4]) for row in rows]
        assert all(0.0 <= s <= 5.0 for s in scores)
        assert min(scores) < 1.0 and max(scores) > 4.5
        assert all(row[5] and row[6] and row[5] != row[6] for row in rows)
        splits[split] = {(row[5], row[6]) for row in rows}
    assert not splits["dev"] & splits["test"]


def test_cli_writes_the_world(tmp_path):
    result = subprocess.run([sys.executable, "-m", "structcse.demo", "--out", str(tmp_path), "--seed", "2"],
                            cwd=REPO, capture_output=True, text=True, check=True, timeout=120)
    assert "wikipedia_dump" in result.stdout
    assert Path(tmp_path, "world.json").exists()
    assert load_demo_world(tmp_path).num_pages > 0
