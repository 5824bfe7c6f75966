"""The intros set (ingest pass 1 + 2) and AspectCSE's aspect_triplets / aspect_docs sets on the demo world."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pytest

from setformat import schemas
from setformat.io import read_manifest, read_table

COMPANY = "Q4830453"


def _labels(wikidata_path) -> pa.Table:
    """The aspect label table built directly from the wikidata set (independent of the label routes)."""
    rows = []
    for item in read_table(wikidata_path, kind="wikidata").to_pylist():
        claims = item["claims"] or []
        title = next((s["title"] for s in item["sitelinks"] or [] if s["wiki"] == "enwiki"), None)
        if title is None or not any(c["property"] == "P31" and c["value"] == COMPANY for c in claims):
            continue
        for prop in ("P17", "P452"):
            values = sorted({c["value"] for c in claims if c["property"] == prop})
            if values:
                rows.append({"qid": item["qid"], "wiki": "enwiki", "title": title, "property": prop,
                             "label_qids": values, "labels": values})
    return pa.Table.from_pylist(rows, schema=schemas.ASPECT_LABELS)


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*.parquet"))}


def test_intros_are_the_lead_sections_with_the_true_qids(demo_world, demo_sets):
    out, manifest = demo_sets
    truth = demo_world.ground_truth()
    intros = read_table(out / "intros", kind="intros")
    m = read_manifest(out / "intros")
    assert m["rows"] == intros.num_rows == manifest["sets"]["intros"]["rows"]
    pages = m["pages"]
    assert pages["accounted"] and pages["in_input"] == truth["counts"]["pages"]
    not_articles = pages["dropped"].get("redirect", 0) + pages["dropped"].get("non_article_namespace", 0)
    assert pages["written"] + pages["dropped"].get("no_intro", 0) + pages["dropped"].get("parse_error", 0) \
        == truth["counts"]["articles"] == pages["in_input"] - not_articles
    qid_of = {e["title"]: e["qid"] for e in truth["entities"]}
    rows = intros.to_pylist()
    assert len({r["page_id"] for r in rows}) == len(rows)
    assert all(r["text"].strip() and "==" not in r["text"] and "{{" not in r["text"] for r in rows)
    assert {r["title"]: r["qid"] for r in rows} == {t: qid_of[t] for t in (r["title"] for r in rows)}
    # a lead section, not the whole article: shorter than the page's sentences together
    sentences = read_table(out / "sentences", ["page_id", "sentence"]).to_pylist()
    by_page: dict[int, int] = {}
    for s in sentences:
        by_page[s["page_id"]] = by_page.get(s["page_id"], 0) + len(s["sentence"])
    assert sum(len(r["text"]) < by_page.get(r["page_id"], 1 << 30) for r in rows) > 0.9 * len(rows)


@pytest.fixture(scope="module")
def aspect_sets(demo_sets, tmp_path_factory):
    from ingest.aspects.triplets import AspectSetConfig, build_aspect_sets

    out, _ = demo_sets
    labels = _labels(out / "wikidata")
    built = []
    for run in range(2):
        folder = tmp_path_factory.mktemp(f"aspects{run}")
        manifest = build_aspect_sets(labels, str(out / "intros"), str(folder), AspectSetConfig())
        built.append((folder, manifest))
    return labels, built


def test_aspect_sets_split_rules_and_accounting(aspect_sets):
    labels, [(folder, manifest), (again, _)] = aspect_sets
    assert _digests(folder) == _digests(again) and _digests(folder)  # same seed, same bytes
    label_sets: dict[str, dict[str, set]] = {}
    for r in labels.to_pylist():
        label_sets.setdefault(r["qid"], {"P17": set(), "P452": set()})[r["property"]] = set(r["label_qids"])

    accounting = manifest["entity_accounting"]
    assert accounting["accounted"] and accounting["entities"] == len(label_sets)
    assert sum(accounting["status"].values()) == len(label_sets)

    docs = read_table(folder / "aspect_docs", kind="aspect_docs").to_pylist()
    test = {d["qid"] for d in docs}
    assert len(test) == manifest["test_entities"] and manifest["aspect_docs"]["rows"] == len(docs)
    assert 0.1 < len(test) / (len(test) + manifest["train_entities"]) < 0.3
    for d in docs:
        assert set(d["labels"]) <= label_sets[d["qid"]][d["aspect"]]

    for name, stats in manifest["variants"].items():
        rows = read_table(folder / name / "aspect_triplets", kind="aspect_triplets").to_pylist()
        assert len(rows) == stats["rows"] == read_manifest(folder / name / "aspect_triplets")["rows"] > 0
        aspects = ["P17", "P452"] if name in ("intersection", "union") else [name.split("-")[1]]
        assert stats["anchors"] == stats["triplets"] + stats.get("anchors_without_positive", 0) \
            + stats.get("anchors_without_negative", 0)
        kinds = {r["negative_kind"] for r in rows}
        assert "labelled" in kinds and kinds <= {"labelled", "random"}
        for r in rows:
            a, p = label_sets[r["anchor_qid"]], label_sets[r["positive_qid"]]
            assert r["anchor_qid"] != r["positive_qid"] and r["aspects"] == aspects
            assert not {r["anchor_qid"], r["positive_qid"], r["negative_qid"]} & test  # no test entity in training
            shared = [bool(a[x] & p[x]) for x in aspects]
            assert all(shared) if name != "union" else any(shared)
            if r["negative_kind"] == "random":
                assert r["negative_qid"] is None and r["negative"]
            else:
                n = label_sets[r["negative_qid"]]
                assert all(n[x] and not (n[x] & a[x]) for x in aspects)


def test_triplets_per_anchor_gives_that_many_distinct_positives(aspect_sets, demo_sets, tmp_path):
    """--triplets-per-anchor 3 draws up to 3 distinct positives per anchor from its label groups (it was capped
    at one per label: 119 rows for 119 anchors); the first is the one a single positive takes."""
    from collections import defaultdict

    from ingest.aspects.triplets import AspectSetConfig, build_aspect_sets

    labels, [(one_folder, _)] = aspect_sets[0], aspect_sets[1][:1]
    build_aspect_sets(labels, str(demo_sets[0] / "intros"), str(tmp_path), AspectSetConfig(triplets_per_anchor=3))
    one = read_table(one_folder / "single-P17" / "aspect_triplets", kind="aspect_triplets").to_pylist()
    three = read_table(tmp_path / "single-P17" / "aspect_triplets", kind="aspect_triplets").to_pylist()
    by_anchor = defaultdict(list)
    for r in three:
        by_anchor[r["anchor_qid"]].append(r["positive_qid"])
    assert len(three) > 2 * len(one) and max(len(p) for p in by_anchor.values()) == 3
    assert all(len(set(p)) == len(p) for p in by_anchor.values())
    assert all(r["positive_qid"] in by_anchor[r["anchor_qid"]] for r in one)


def test_cli_rejects_bad_options_in_one_line(demo_sets, capsys):
    from ingest.aspects.__main__ import main

    out, _ = demo_sets
    base = ["--intros", str(out / "intros"), "--wikidata-set", str(out / "wikidata"), "--out", str(out / "_x")]
    assert main(base + ["--aspects", "P17", "country"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--aspects" in err
    assert main(base + ["--test-share", "1.5"]) == 2
    assert "--test-share" in capsys.readouterr().err
    assert main(base + ["--class", "company"]) == 2
    assert "--class" in capsys.readouterr().err


def test_intros_join_finds_the_qid_by_hash_and_falls_back_on_a_shared_hash(monkeypatch):
    """``ingest.intros._join`` looks each title up on a 64-bit hash of (wiki, title) without copying the texts;
    when two keys of a bucket share a hash it joins them instead, with the same result."""
    import numpy as np
    import pyarrow as pa

    import ingest.intros as intros_step

    intros = pa.Table.from_pylist([{"wiki": "enwiki", "title": t, "page_id": i, "text": t * 3}
                                   for i, t in enumerate(["A", "B", "C"])], schema=intros_step.INTRO_SIDE)
    links = pa.Table.from_pylist([{"wiki": "enwiki", "title": "A", "qid": "Q2"},
                                  {"wiki": "enwiki", "title": "A", "qid": "Q1"},
                                  {"wiki": "dewiki", "title": "B", "qid": "Q3"}], schema=intros_step.SITELINK_SIDE)
    want = {0: "Q1", 1: None, 2: None}  # the smallest QID; dewiki's B is not enwiki's
    got = intros_step._join(intros, links, files=4)
    assert {r["page_id"]: r["qid"] for r in got.to_pylist()} == want and got["text"].to_pylist() == ["AAA", "BBB", "CCC"]
    import setformat.io

    monkeypatch.setattr(setformat.io, "row_hashes", lambda table, keys: np.zeros(len(table), np.uint64))
    assert setformat.io.find_rows(intros, links, ["wiki", "title"]) is None  # every key shares the hash 0
    assert {r["page_id"]: r["qid"] for r in intros_step._join(intros, links, files=4).to_pylist()} == want
